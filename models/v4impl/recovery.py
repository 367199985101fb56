"""Topic load and transaction-buffer recovery as the implementation does them, with a stored
``maxReadPosition`` that events move.

apache/pulsar ``TopicTransactionBuffer``: the buffer is created with the topic, its
``maxReadPosition`` set to the managed ledger's last confirmed entry; its recovery then runs
asynchronously (state Initializing) and ends in Ready, where ``maxReadPosition`` is the position
before the first ongoing transaction's entry, or the last confirmed entry if none is ongoing
(PR #14192). A non-transactional publish moves ``maxReadPosition`` to the new entry only when the
buffer is Ready with no ongoing transaction (``syncMaxReadPositionForNormalPublish``, PR #12386);
during recovery it is appended and the position stays. A commit or abort marker moves it past the
ended transaction. The topic serves publishes and ``getLastMessageId`` while its buffer recovers. A
recovery that finds no snapshot ends in NoSnapshot without reading the log (``first_snapshot``).
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import buffer
from pulsar_verify.values import put, replace

from . import consumers
from .first_snapshot import FIRST_SNAPSHOTTING, NO_SNAPSHOT, READY
from .state import ImplState


def lac(s: ImplState, topic: int) -> int:
    """The managed ledger's last confirmed entry (-1: empty)."""
    return len(s.logs[topic]) - 1


def moved(s: ImplState, topic: int) -> ImplState:
    """The buffer's own ``updateMaxReadPosition``: before its first ongoing txn, else the last entry."""
    return replace(s, max_read=put(s.max_read, topic, buffer.max_read_position(s, topic)))


def actions(m, s: ImplState):
    for topic in range(m.config.topics):
        if s.loaded[topic] and not s.buffers[topic].ready and s.nontxn < m.config.nontxn:
            yield act("send_nontxn", topic=topic)  # during recovery (Ready topics: the v4 dispatcher module)


def topic_load(m, s: ImplState, a):
    """A broker loads the topic: the TB is created (Initializing), ``maxReadPosition`` = LAC."""
    topic = a.param("topic")
    return replace(s, loaded=put(s.loaded, topic, True), max_read=put(s.max_read, topic, lac(s, topic)))


def tb_recover(m, s: ImplState, a):
    """The recovery ends: the buffer rebuilt from its snapshot and the log (v4), Ready; or, with no snapshot
    (``noNeedToRecover``), NoSnapshot with the log unread and ``maxReadPosition`` = LAC. With consumers, the
    subscription's pending-ack handle recovers from its store too (merged, argued in GRANULARITY.md)."""
    topic = a.param("topic")
    if s.snapshots[topic] is None:
        t = replace(s, buffers=put(s.buffers, topic, replace(s.buffers[topic], ready=True)),
                    tb_phase=put(s.tb_phase, topic, NO_SNAPSHOT), max_read=put(s.max_read, topic, lac(s, topic)))
    else:
        t = moved(buffer.recover(m, s, a), topic)
    return replace(t, pending=put(t.pending, topic, consumers.replayed(t, topic))) if s.consumers else t


def send_nontxn(m, s: ImplState, a):
    """A plain publish moves ``maxReadPosition`` to it on a Ready buffer with no ongoing txn, and in
    NoSnapshot; not while the buffer recovers, nor in FirstSnapshotting."""
    topic = a.param("topic")
    t = buffer.send_nontxn(m, s, a)
    b = s.buffers[topic]
    moves = b.ready and not b.ongoing and s.tb_phase[topic] != FIRST_SNAPSHOTTING
    return replace(t, max_read=put(t.max_read, topic, lac(t, topic))) if moves else t


def append(m, s: ImplState, a):
    """A transactional send lands (``handleTransactionMessage``): a txn the buffer has neither seen nor
    aborted becomes ongoing, ``maxReadPosition`` just before its first entry. An entry of a txn the buffer
    has aborted (a send that landed after the abort: v4's late write) is appended and nothing else."""
    t, topic = a.param("txn"), a.param("topic")
    b = s.buffers[topic]
    if t in b.aborted:
        return replace(buffer.append(m, s, a), buffers=s.buffers)
    n = buffer.append(m, s, a)
    return n if t in b.ongoing else moved(n, topic)


def end_on_partition(m, s: ImplState, a):
    """The marker moves ``maxReadPosition`` past the ended txn."""
    return moved(buffer.end_on_partition(m, s, a), a.param("topic"))


def crash(m, s: ImplState, a):
    """The v4 crash, and the topic unloaded: ``maxReadPosition`` (memory) lost; the reader's consumer
    reconnects from the message after the last one it read, its receiver queue cleared."""
    topic = a.param("topic")
    t = buffer.crash(m, s, a)
    if s.consumers:
        t = consumers.crashed(s, t, topic)
        return _unloaded(t, topic)
    r = s.reader
    subs = t.subs if topic else put(t.subs, 0, replace(t.subs[0], read=r.pos + 1))
    return replace(_unloaded(t, topic), subs=subs, reader=r if topic else replace(r, queue=()))


def _unloaded(s: ImplState, topic: int) -> ImplState:
    return replace(s, loaded=put(s.loaded, topic, False), max_read=put(s.max_read, topic, -1),
                   tb_phase=put(s.tb_phase, topic, READY), low_water=put(s.low_water, topic, 0))


APPLY = {"topic_load": topic_load, "tb_recover": tb_recover, "send_nontxn": send_nontxn, "append": append,
         "end_on_partition": end_on_partition, "crash": crash}
