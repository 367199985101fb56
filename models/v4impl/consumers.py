"""Each topic's subscription and its consumers, as the implementation has them (used when the bound
set has ``consumers``; without, the reader reads topic 0).

- Dispatch (``PersistentDispatcherSingleActiveConsumer`` for one consumer, Exclusive;
  ``PersistentDispatcherMultipleConsumers`` for two, Shared): an entry goes to a consumer with a permit
  (room in its receiver queue). Shared: positions to redeliver (the replay set) are read before the
  dispatcher reads on. The cursor skips positions already acknowledged.
- The application's ``receive`` takes the head of the receiver queue, which returns a permit.
- ``redeliverUnacknowledgedMessages`` (the client's ack timeout or negative ack): Shared puts the
  consumer's messages in the replay set; Exclusive rewinds the cursor to the mark-delete position
  ("We cannot redeliver single messages to single consumers to preserve ordering").
- A transactional ack (``ConsumerImpl.doAcknowledgeWithTxn``): ADD_SUBSCRIPTION_TO_TXN at the TC, which
  refuses a transaction that is no longer open; then the ack, with the txn id, to the broker. The
  broker (``PendingAckHandleImpl.internalIndividualAcknowledgeMessage``) appends the ack to the
  pending-ack store, then checks it: a position the cursor has deleted ("already acked before") or
  pending for a transaction ("in pending ack status") is a ``TransactionConflictException``; else it is
  pending for the transaction. The client's transaction then has a failed op and can only abort.
- END_TXN_ON_SUBSCRIPTION: commit acknowledges the transaction's pending positions on the cursor; abort
  drops them and redelivers them (``PersistentSubscription.endTxn``: to the active consumer, which
  rewinds, on Exclusive; to the replay set on Shared).
- The dispatcher acknowledges markers and aborted entries as it skips them, so the mark-delete
  position moves past them; a broker restart rewinds the subscription to it.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import buffer
from pulsar_verify.models.v4txn.state import ABORT_MARKER, COMMIT_MARKER, COMMITTED, DATA, OPEN, SUBSCRIPTION
from pulsar_verify.values import FrozenMap, put, replace

from .state import Consumer, ImplState, with_client

FIX_ENDED = "ack-after-end-rejected"


def acked(s: ImplState, topic: int, pos: int) -> bool:
    """The cursor holds ``pos`` as deleted: a committed txn's ack, or an aborted entry the dispatcher skipped."""
    return (topic, pos) in s.cursors or pos in s.subs[topic].filtered


def mark_delete(s: ImplState, topic: int) -> int:
    """The cursor's mark-delete position: the end of its acknowledged prefix (markers count once read)."""
    log, read = s.logs[topic], s.subs[topic].read
    pos = -1
    while pos + 1 < len(log) and (acked(s, topic, pos + 1) or (log[pos + 1][0] != DATA and pos + 1 < read)):
        pos += 1
    return pos


def rewound(s: ImplState, topic: int) -> ImplState:
    return replace(s, subs=put(s.subs, topic, replace(s.subs[topic], read=mark_delete(s, topic) + 1)))


def shared(s: ImplState) -> bool:
    return len(s.consumers[0]) > 1


def with_consumer(s: ImplState, topic: int, c: int, consumer: Consumer) -> ImplState:
    return replace(s, consumers=put(s.consumers, topic, put(s.consumers[topic], c, consumer)))


def dispatch(m, s: ImplState, topic: int):
    """Shared: the replay set first; then the cursor's next position not already acknowledged."""
    if s.replay[topic]:
        pos = min(s.replay[topic])
        for c in free(m, s, topic):
            yield act("deliver_replay", topic=topic, pos=pos, consumer=c)
        return
    read = s.subs[topic].read
    skipped = (lambda r: r in s.subs[topic].filtered) if m.config.variant == "mutant:read-acked" else (
        lambda r: acked(s, topic, r))
    while read < len(s.logs[topic]) and skipped(read):
        read += 1
    yield from buffer.dispatch(m, s, topic, read)


def free(m, s: ImplState, topic: int):
    return [c for c, x in enumerate(s.consumers[topic]) if len(x.queue) < m.config.permits]


def actions(m, s: ImplState):
    cfg = m.config
    if not s.consumers:
        return
    for topic, consumers in enumerate(s.consumers):
        for c, x in enumerate(consumers):
            if x.queue:
                yield act("receive", topic=topic, consumer=c)
            if (x.queue or x.unacked) and s.redeliveries < cfg.redeliveries:
                yield act("redeliver", topic=topic, consumer=c)
    for t in range(1, cfg.txns + 1):
        cl = s.clients[t]
        if cl.phase == "open" and cl.acks < cfg.acks:
            for topic, consumers in enumerate(s.consumers):
                for c, x in enumerate(consumers):
                    for pos in sorted(x.unacked):
                        yield act("txn_ack" if s.tc[t] == OPEN else "ack_refused", txn=t, topic=topic, pos=pos,
                                  consumer=c)
    for t, topic, pos, c in sorted(s.acking):
        if s.buffers[topic].ready:
            if FIX_ENDED in m.fixes and any(k != "ack" and x == t for k, x, _ in s.pending_logs[topic]):
                yield act("ack_rejected", txn=t, topic=topic, pos=pos, consumer=c)
            elif (acked(s, topic, pos) and m.config.variant != "mutant:ack-acked-position") or pos in s.pending[topic]:
                yield act("ack_conflict", txn=t, topic=topic, pos=pos, consumer=c)
            else:
                yield act("ack_pending", txn=t, topic=topic, pos=pos, consumer=c)
    for (t, kind, topic), status in s.rpcs:
        if status == "sent" and kind == SUBSCRIPTION and s.buffers[topic].ready:
            yield act("end_on_subscription", txn=t, topic=topic)


def deliver(m, s: ImplState, a):
    """The dispatcher's read delivers the entry into the consumer's receiver queue."""
    topic, c = a.param("topic"), a.param("consumer")
    t = buffer.deliver(m, s, a)
    x = t.consumers[topic][c]
    return with_consumer(t, topic, c, replace(x, queue=x.queue + (a.param("pos"),)))


def deliveries(m, s: ImplState, topic: int, pos: int):
    for c in free(m, s, topic):
        yield act("deliver", topic=topic, pos=pos, consumer=c)


def deliver_replay(m, s: ImplState, a):
    """Shared: a position of the replay set is read again and delivered."""
    topic, pos, c = a.param("topic"), a.param("pos"), a.param("consumer")
    x = s.consumers[topic][c]
    sub = s.subs[topic]
    t = replace(s, replay=put(s.replay, topic, s.replay[topic] - {pos}),
                subs=put(s.subs, topic, replace(sub, received=sub.received | {pos})))
    return with_consumer(t, topic, c, replace(x, queue=x.queue + (pos,)))


def receive(m, s: ImplState, a):
    topic, c = a.param("topic"), a.param("consumer")
    x = s.consumers[topic][c]
    return with_consumer(s, topic, c, Consumer(queue=x.queue[1:], unacked=x.unacked | {x.queue[0]}))


def redeliver(m, s: ImplState, a):
    """``redeliverUnacknowledgedMessages``: the client clears its queue; Shared replays the consumer's
    messages, Exclusive rewinds the cursor."""
    topic, c = a.param("topic"), a.param("consumer")
    x = s.consumers[topic][c]
    t = with_consumer(replace(s, redeliveries=s.redeliveries + 1), topic, c, Consumer())
    if shared(s):
        return replace(t, replay=put(t.replay, topic, t.replay[topic] | set(x.queue) | x.unacked))
    return rewound(t, topic)


def txn_ack(m, s: ImplState, a):
    """ADD_SUBSCRIPTION_TO_TXN (the TC logs the subscription), then the ack leaves for the broker."""
    t, topic, pos, c = (a.param(k) for k in ("txn", "topic", "pos", "consumer"))
    x = s.consumers[topic][c]
    s = with_consumer(s, topic, c, replace(x, unacked=x.unacked - {pos}))
    s = with_client(s, t, acks=s.clients[t].acks + 1)
    return replace(s, subs_of=s.subs_of.set(t, s.subs_of.get(t, frozenset()) | {topic}),
                   acking=s.acking | {(t, topic, pos, c)})


def ack_refused(m, s: ImplState, a):
    """The TC refuses ADD_SUBSCRIPTION_TO_TXN: the transaction is no longer open (it timed out)."""
    t = a.param("txn")
    return with_client(s, t, acks=s.clients[t].acks + 1, failed=True)


def _landed(s: ImplState, a, record: bool, **client) -> ImplState:
    t, topic, pos, c = (a.param(k) for k in ("txn", "topic", "pos", "consumer"))
    logs = put(s.pending_logs, topic, s.pending_logs[topic] + (("ack", t, pos),)) if record else s.pending_logs
    s = replace(s, acking=s.acking - {(t, topic, pos, c)}, pending_logs=logs)
    return with_client(s, t, **client) if client else s


def ack_pending(m, s: ImplState, a):
    """The ack is appended to the pending-ack store and is pending for the transaction."""
    t, topic, pos = a.param("txn"), a.param("topic"), a.param("pos")
    s = _landed(s, a, True)
    return replace(s, pending=put(s.pending, topic, s.pending[topic].set(pos, t)), acks_ok=s.acks_ok | {(t, topic, pos)})


def ack_conflict(m, s: ImplState, a):
    """The ack is appended to the pending-ack store, then fails its check: TransactionConflictException."""
    return _landed(s, a, True, failed=True)


def ack_rejected(m, s: ImplState, a):
    """Fix ``ack-after-end-rejected``: the subscription has already ended this transaction; the ack is
    refused before it is stored."""
    return _landed(s, a, False, failed=True)


def end_on_subscription(m, s: ImplState, a):
    """END_TXN_ON_SUBSCRIPTION: the marker is appended to the pending-ack store; commit acknowledges the
    transaction's pending positions on the cursor, abort drops them and redelivers them."""
    t, topic = a.param("txn"), a.param("topic")
    commit = s.decided[t] == COMMITTED
    mine = {pos for pos, x in s.pending[topic] if x == t}
    pending = s.pending[topic]
    for pos in mine:
        pending = pending.remove(pos)
    cursors = s.cursors
    if (commit and m.config.variant != "mutant:commit-skips-cursor") or m.config.variant == "mutant:apply-aborted-acks":
        for pos in mine:
            cursors = cursors.set((topic, pos), t)
    marker = (COMMIT_MARKER if commit else ABORT_MARKER, t, -1)
    s = replace(s, cursors=cursors, pending=put(s.pending, topic, pending),
                pending_logs=put(s.pending_logs, topic, s.pending_logs[topic] + (marker,)),
                rpcs=s.rpcs.set((t, SUBSCRIPTION, topic), "done"))
    if commit or not mine:
        return s
    if shared(s):
        return replace(s, replay=put(s.replay, topic, s.replay[topic] | mine))
    return rewound(s, topic)


def replayed(s: ImplState, topic: int) -> FrozenMap:
    """The pending-ack handle's recovery (``handleIndividualAckRecover``): the store replayed in order,
    each ack checked against the cursor as it is now and against the acks replayed before it."""
    pending: dict[int, int] = {}
    for kind, t, pos in s.pending_logs[topic]:
        if kind == "ack":
            if not acked(s, topic, pos) and pos not in pending:
                pending[pos] = t
        else:
            pending = {p: x for p, x in pending.items() if x != t}
    return FrozenMap(pending)


def crashed(s: ImplState, t: ImplState, topic: int) -> ImplState:
    """A broker crash (``t``: the v4 crash of ``s``), for the subscription: its consumers reconnect with
    empty queues (the client forgets what it had not acknowledged), the replay set and pending acks
    (memory) are lost, acks on their way fail with the connection, and the cursor rewinds to the
    mark-delete position it had."""
    read = mark_delete(s, topic) + 1
    s = t
    lost = {k for k in s.acking if k[1] == topic}
    clients = s.clients
    for t, *_ in lost:
        clients = clients.set(t, replace(clients[t], failed=True))
    s = replace(s, consumers=put(s.consumers, topic, (Consumer(),) * len(s.consumers[topic])),
                replay=put(s.replay, topic, frozenset()), pending=put(s.pending, topic, FrozenMap()),
                acking=s.acking - lost, clients=clients)
    return replace(s, subs=put(s.subs, topic, replace(s.subs[topic], read=read)))


APPLY = {"deliver_replay": deliver_replay, "receive": receive, "redeliver": redeliver, "txn_ack": txn_ack,
         "ack_refused": ack_refused, "ack_pending": ack_pending, "ack_conflict": ack_conflict,
         "ack_rejected": ack_rejected, "end_on_subscription": end_on_subscription}
