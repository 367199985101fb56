"""The v4 TopicTransactionBuffer, its snapshot and rebuild, and the dispatcher.

PIP-473 "Background" and the primer: the TB "buffers transactional writes in the
topic's data stream, tracks aborted transaction IDs, and gates the dispatcher's read
horizon (maxReadPosition)" ("just before the first entry of the oldest open txn"); on
END_TXN_ON_PARTITION it "writes a commit or abort marker as a regular entry in the
topic's managed ledger"; it "persists its state in ... __transaction_buffer_snapshot"
and "rebuilds it on topic load by reading the log" from the snapshot on. The
dispatcher reads up to maxReadPosition and skips markers and aborted entries.

A sealed (terminated) topic rejects every append, markers included: "the now-sealed
segment rejects it". Variant ``off-segment-markers`` is PIP-473's rejected
"Alternative B": markers go to a separate stream that sealing does not close.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, put, replace

from .state import ABORT_MARKER, COMMIT_MARKER, COMMITTED, DATA, PARTITION, Buffer, State


def max_read_position(s: State, topic: int) -> int:
    b = s.buffers[topic]
    if b.ongoing:
        return min(pos for _, pos in b.ongoing) - 1
    return len(s.logs[topic]) - 1


def rebuild(s: State, topic: int) -> Buffer:
    """The TB's recovery: the snapshot, then every entry after it (markers of the
    off-segment stream included)."""
    snap = s.snapshots[topic]
    start, aborted = (snap[0] + 1, set(snap[1])) if snap else (0, set())
    ended = set(aborted)
    for kind, t in s.side[topic]:
        ended.add(t)
        if kind == ABORT_MARKER:
            aborted.add(t)
    ongoing: dict[int, int] = {}
    for pos in range(start, len(s.logs[topic])):
        kind, t = s.logs[topic][pos]
        if kind == DATA:
            if t and t not in ended and t not in ongoing:
                ongoing[t] = pos
        else:
            ended.add(t)
            ongoing.pop(t, None)
            if kind == ABORT_MARKER:
                aborted.add(t)
    return Buffer(ready=True, ongoing=FrozenMap(ongoing), aborted=frozenset(aborted))


def actions(m, s: State):
    cfg = m.config
    for t, topic in sorted(s.publishes):
        if s.buffers[topic].ready:
            rejected = s.sealed[topic] and m.config.variant != "mutant:append-to-sealed"
            yield act("append_rejected" if rejected else "append", txn=t, topic=topic)
    for (t, kind, topic), status in s.rpcs:
        if status == "sent" and kind == PARTITION and s.buffers[topic].ready:
            blocked = s.sealed[topic] and "off-segment-markers" not in m.fixes
            yield act("marker_rejected" if blocked else "end_on_partition", txn=t, topic=topic)
    for topic in range(cfg.topics):
        b = s.buffers[topic]
        if not b.ready:
            yield from m.loads(s, topic)
            continue
        if s.nontxn < cfg.nontxn and not s.sealed[topic]:
            yield act("send_nontxn", topic=topic)
        if s.snapshots_taken < cfg.snapshots:
            yield act("take_snapshot", topic=topic)
        if s.seals < cfg.seals and not s.sealed[topic]:
            yield act("seal", topic=topic)
        if s.crashes < cfg.crashes:
            yield act("crash", topic=topic)
        yield from m.dispatch(s, topic)


def dispatch(m, s: State, topic: int, read: int):
    """The dispatcher's next read, at ``read``: a marker or an aborted entry is skipped, anything
    else delivered (``m.deliveries``: to whom)."""
    if read <= m.read_limit(s, topic):
        kind, t = s.logs[topic][read]
        if kind != DATA:
            yield act("skip_marker", topic=topic, pos=read)
        elif t in s.buffers[topic].aborted and m.config.variant != "mutant:deliver-aborted":
            yield act("skip_aborted", topic=topic, pos=read)
        else:
            yield from m.deliveries(s, topic, read)


def append(m, s: State, a):
    t, topic = a.param("txn"), a.param("topic")
    b = s.buffers[topic]
    pos = len(s.logs[topic])
    ongoing = b.ongoing if t in b.ongoing else b.ongoing.set(t, pos)
    return replace(s, logs=put(s.logs, topic, s.logs[topic] + ((DATA, t),)),
                   buffers=put(s.buffers, topic, m.on_txn_append(s, topic, replace(b, ongoing=ongoing))),
                   publishes=s.publishes - {(t, topic)})


def append_rejected(m, s: State, a):
    """TopicTerminated: the send fails and the client can only abort."""
    t, topic = a.param("txn"), a.param("topic")
    return replace(s, publishes=s.publishes - {(t, topic)},
                   clients=s.clients.set(t, replace(s.clients[t], failed=True)))


def end_on_partition(m, s: State, a):
    """END_TXN_ON_PARTITION: append the marker, then commit frees maxReadPosition, abort
    adds the txn to the aborted set. The reply to the TC is a step of its own
    (``partition_reply``): a crash before it loses the reply, and the TC retries."""
    t, topic = a.param("txn"), a.param("topic")
    commit = s.decided[t] == COMMITTED
    if m.config.variant == "mutant:commit-marks-aborted":
        commit = False
    marker = (COMMIT_MARKER if commit else ABORT_MARKER, t)
    b = s.buffers[topic]
    b = replace(b, ongoing=b.ongoing.remove(t), aborted=b.aborted if commit else b.aborted | {t})
    logs, side = s.logs, s.side
    if "off-segment-markers" in m.fixes:
        side = put(side, topic, side[topic] + (marker,))
    else:
        logs = put(logs, topic, logs[topic] + (marker,))
    return replace(s, logs=logs, side=side, buffers=put(s.buffers, topic, b),
                   rpcs=s.rpcs.set((t, PARTITION, topic), "written"))


def marker_rejected(m, s: State, a):
    """The sealed topic rejects the marker append: the RPC fails (the TC will retry)."""
    return replace(s, rpcs=s.rpcs.set((a.param("txn"), PARTITION, a.param("topic")), "failed"))


def send_nontxn(m, s: State, a):
    topic = a.param("topic")
    return replace(s, logs=put(s.logs, topic, s.logs[topic] + ((DATA, 0),)), nontxn=s.nontxn + 1)


def take_snapshot(m, s: State, a):
    topic = a.param("topic")
    snap = (max_read_position(s, topic), s.buffers[topic].aborted)
    return replace(s, snapshots=put(s.snapshots, topic, snap), snapshots_taken=s.snapshots_taken + 1)


def seal(m, s: State, a):
    """Split or merge terminates the topic's managed ledger: no more appends."""
    return replace(s, sealed=put(s.sealed, a.param("topic"), True), seals=s.seals + 1)


def crash(m, s: State, a):
    """The topic's broker crashes: TB memory and the dispatcher's position are lost, RPCs
    in flight to it fail (a marker written but not yet answered too), sends in flight to it fail."""
    topic = a.param("topic")
    lost = ("sent",) if m.config.variant == "mutant:reply-survives-crash" else ("sent", "written")
    rpcs = s.rpcs
    for key, status in s.rpcs:
        if key[2] == topic and status in lost:
            rpcs = rpcs.set(key, "failed")
    clients = s.clients
    for t, tp in s.publishes:
        if tp == topic:
            clients = clients.set(t, replace(clients[t], failed=True))
    return replace(s, buffers=put(s.buffers, topic, Buffer()), rpcs=rpcs, clients=clients,
                   publishes=frozenset(p for p in s.publishes if p[1] != topic),
                   subs=put(s.subs, topic, replace(s.subs[topic], read=0)), crashes=s.crashes + 1)


def recover(m, s: State, a):
    """Topic load: the TB rebuilds from its snapshot and the log."""
    topic = a.param("topic")
    return replace(s, buffers=put(s.buffers, topic, rebuild(s, topic)))


def deliver(m, s: State, a):
    topic, pos = a.param("topic"), a.param("pos")
    sub = s.subs[topic]
    return replace(s, subs=put(s.subs, topic, replace(sub, read=pos + 1, received=sub.received | {pos})))


def skip_aborted(m, s: State, a):
    topic, pos = a.param("topic"), a.param("pos")
    sub = s.subs[topic]
    return replace(s, subs=put(s.subs, topic, replace(sub, read=pos + 1, filtered=sub.filtered | {pos})))


def skip_marker(m, s: State, a):
    topic = a.param("topic")
    return replace(s, subs=put(s.subs, topic, replace(s.subs[topic], read=a.param("pos") + 1)))


APPLY = {"append": append, "append_rejected": append_rejected, "end_on_partition": end_on_partition,
         "marker_rejected": marker_rejected, "send_nontxn": send_nontxn, "take_snapshot": take_snapshot,
         "seal": seal, "crash": crash, "tb_recover": recover, "deliver": deliver, "skip_aborted": skip_aborted,
         "skip_marker": skip_marker}
