"""The transaction buffer's low water mark: a later transaction's end aborts an earlier one left ongoing.

apache/pulsar: the TC sends each END_TXN_ON_PARTITION with its low water mark
(``MLTransactionMetadataStore.getLowWaterMark``: the oldest transaction it has not yet finished, minus one;
the last id it issued if it has none). When a commit or abort marker is written, ``TopicTransactionBuffer``
keeps the highest mark (``handleLowWaterMark``, memory only) and, if its oldest ongoing transaction is at or
below it, aborts that transaction (``abortTxn``: an abort marker). A transactional send at or below the mark
is refused (``internalAppendBufferToTxn``: NotAllowedException, "Transaction has been ended").

The mark rides on the RPC, computed when the RPC is sent (``marks``). The buffer's abort is a step of its
own (``lwm_abort``), enabled while the oldest ongoing transaction is at or below the kept mark: upstream
it is started only when a marker is written, and the buffer's ongoing set and mark change only then, so
the two agree; with two transactions at most, one abort clears every transaction a mark can name. The
pending-ack handle's low water mark is left out.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn.state import ABORT_MARKER, ABORTED, COMMITTED, PARTITION
from pulsar_verify.values import put, replace

from . import recovery
from .state import ImplState


def tc_mark(s: ImplState) -> int:
    """The TC's low water mark now."""
    unfinished = [t for t, st in s.tc if st not in (COMMITTED, ABORTED)]
    return min(unfinished) - 1 if unfinished else max((t for t, _ in s.tc), default=0)


def stamp(before: ImplState, after: ImplState) -> ImplState:
    """Each END_TXN_ON_PARTITION the step sent carries the TC's mark as it is after the step."""
    sent = [(t, topic) for (t, kind, topic), status in after.rpcs
            if kind == PARTITION and status == "sent" and before.rpcs.get((t, kind, topic)) != "sent"]
    if not sent:
        return after
    mark = tc_mark(after)
    marks = after.marks
    for key in sent:
        marks = marks.set(key, mark)
    return replace(after, marks=marks)


def end_on_partition(m, s: ImplState, a):
    """A marker of the txn is written (``recovery.end_on_partition``): the buffer keeps the highest mark it
    has seen, the one this RPC carries included."""
    t, topic = a.param("txn"), a.param("topic")
    n = recovery.end_on_partition(m, s, a)
    return replace(n, low_water=put(n.low_water, topic, max(n.low_water[topic], n.marks.get((t, topic), 0))))


def actions(m, s: ImplState):
    for topic, mark in enumerate(s.low_water):
        b = s.buffers[topic]
        if b.ready and b.ongoing:
            first = min(b.ongoing.keys())
            if first <= mark:
                yield act("lwm_abort", txn=first, topic=topic)


def route(m, s: ImplState, a):
    """The TC issues transaction ids in order, as the mark compares them; a transactional send at or below
    the buffer's mark is refused."""
    if a is None:
        return a
    if a.name == "new_txn" and a.param("txn") - 1 not in s.tc and a.param("txn") > 1:
        return None
    mark = s.low_water[a.param("topic")] if a.name == "append" else 0
    if m.config.variant == "mutant:refuse-above-mark":
        mark += 1
    if a.name == "append" and a.param("txn") <= mark:
        return act("append_not_allowed", **dict(a.params))
    return a


def lwm_abort(m, s: ImplState, a):
    """The buffer aborts its oldest ongoing transaction, at or below the mark: abort marker, aborted set,
    ``maxReadPosition`` moved past it."""
    t, topic = a.param("txn"), a.param("topic")
    b = s.buffers[topic]
    b = replace(b, ongoing=b.ongoing.remove(t), aborted=b.aborted | {t})
    n = replace(s, logs=put(s.logs, topic, s.logs[topic] + ((ABORT_MARKER, t),)), buffers=put(s.buffers, topic, b))
    return recovery.moved(n, topic)


def append_not_allowed(m, s: ImplState, a):
    """NotAllowedException: the send fails; the client can only abort."""
    t, topic = a.param("txn"), a.param("topic")
    return replace(s, publishes=s.publishes - {(t, topic)},
                   clients=s.clients.set(t, replace(s.clients[t], failed=True)))


APPLY = {"end_on_partition": end_on_partition, "lwm_abort": lwm_abort, "append_not_allowed": append_not_allowed}
