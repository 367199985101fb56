"""The v4 pending-ack store: a sibling persistent topic per (topic, subscription).

PIP-473 "Background": "PendingAckStore — a per-(topic, subscription) component that
records transactional acknowledgments in a sibling persistent topic
(<topic>-<sub>__transaction_pending_ack), applying them to the cursor only when the
transaction commits." The sibling topic is a plain persistent topic (the #25631
workaround), so sealing the segment does not close it. Its in-memory state is
exactly a replay of that topic, so a crash loses nothing the model needs to show.

A position is open to a txn's ack unless another txn's ack of it is pending (no marker yet) or
it is already in the cursor. PIP-473 "Notification mechanism", for the store that keeps v4's
contract: "Abort — ... PendingAckStore drops the buffered acks", so an aborted txn's acks free
their positions for a later txn; v4 refuses an ack of a position the cursor holds (a conflict).
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from .state import ABORT_MARKER, COMMIT_MARKER, COMMITTED, SUBSCRIPTION, State


def actions(m, s: State):
    cfg = m.config
    for t in range(1, cfg.txns + 1):
        c = s.clients[t]
        if c.phase != "open" or c.acks >= cfg.acks:
            continue
        for topic in range(cfg.topics):
            if not s.buffers[topic].ready:
                continue
            log = s.pending_logs[topic]
            ended = {x for kind, x, _ in log if kind != "ack"}
            pending = {pos for kind, x, pos in log if kind == "ack" and x not in ended}
            for pos in sorted(s.subs[topic].received - pending):
                if (topic, pos) not in s.cursors or m.config.variant == "mutant:ack-acked-position":
                    yield act("txn_ack", txn=t, topic=topic, pos=pos)
    for (t, kind, topic), status in s.rpcs:
        if status == "sent" and kind == SUBSCRIPTION and s.buffers[topic].ready:
            yield act("end_on_subscription", txn=t, topic=topic)


def txn_ack(m, s: State, a):
    """ADD_SUBSCRIPTION_TO_TXN, then the ack is appended to the pending-ack topic."""
    t, topic, pos = a.param("txn"), a.param("topic"), a.param("pos")
    c = s.clients[t]
    return replace(s, subs_of=s.subs_of.set(t, s.subs_of.get(t, frozenset()) | {topic}),
                   pending_logs=put(s.pending_logs, topic, s.pending_logs[topic] + (("ack", t, pos),)),
                   clients=s.clients.set(t, replace(c, acks=c.acks + 1)))


def end_on_subscription(m, s: State, a):
    """END_TXN_ON_SUBSCRIPTION: commit applies the txn's acks to the cursor; both append
    a marker to the pending-ack topic."""
    t, topic = a.param("txn"), a.param("topic")
    commit = s.decided[t] == COMMITTED
    cursors = s.cursors
    if (commit and m.config.variant != "mutant:commit-skips-cursor") or m.config.variant == "mutant:apply-aborted-acks":
        for kind, x, pos in s.pending_logs[topic]:
            if kind == "ack" and x == t:
                cursors = cursors.set((topic, pos), t)
    marker = (COMMIT_MARKER if commit else ABORT_MARKER, t, -1)
    return replace(s, cursors=cursors, pending_logs=put(s.pending_logs, topic, s.pending_logs[topic] + (marker,)),
                   rpcs=s.rpcs.set((t, SUBSCRIPTION, topic), "done"))


APPLY = {"txn_ack": txn_ack, "end_on_subscription": end_on_subscription}
