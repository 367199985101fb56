"""The MetadataPendingAckStore of one (segment, subscription).

PIP-473 "MetadataPendingAckStore": ``appendIndividualAck`` appends a
sequential ack op record; commit and abort are "triggered locally when the
header watch on /txn/<txnId>.state fires (materialization runs in that callback). Commit: range-query
idx:acks-by-segment-subscription == (<my-segment>, <my-subscription>)
filtered to <txnId>; apply to cursor; range-delete the op records. Abort:
range-delete the op records, no cursor work." ``replayAsync`` on recovery
range-queries the same index and hydrates the in-memory state.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from . import store
from .state import ACK, COMMITTED, FINAL, Op, State


def actions(m, s: State):
    cfg = m.config
    nsubs = cfg.subs + cfg.late_subs
    for t in range(1, cfg.txns + 1):
        c = s.clients[t - 1]
        if c.phase != "open" or c.acks >= cfg.acks:
            continue
        for i, sub in enumerate(s.subs):
            seg = i // nsubs
            if not s.up[seg] or not sub.exists:
                continue
            claimed = {p for _, ps in s.pending[i].acks for p in ps}
            for pos in sorted(sub.received - sub.acked - claimed):
                yield act("txn_ack", txn=t, seg=seg, sub=i % nsubs, pos=pos)
                yield act("txn_ack_cumulative", txn=t, seg=seg, sub=i % nsubs, pos=pos)
    for i, p in enumerate(s.pending):
        seg, sub = divmod(i, nsubs)
        if not s.up[seg]:
            continue
        for t in sorted(p.pend):
            yield act("pa_header", seg=seg, sub=sub, txn=t)
        for t in sorted(p.done):
            if _records(s, t, seg, sub):
                yield act("pa_cleanup", seg=seg, sub=sub, txn=t)
        if "owners-reap-orphans" in m.fixes:  # the store's index, not its memory: a txn it forgot may have records
            for t in sorted(store.acks_by_segment_subscription(s, seg, sub)):
                if t not in s.headers:
                    yield act("pa_reap", seg=seg, sub=sub, txn=t)


def _records(s: State, txn: int, seg: int, sub: int) -> list:
    return [k for k, op in s.ops if k[0] == txn and op.kind == ACK and op.seg == seg and op.sub == sub]


def _index(m, seg: int, sub: int) -> int:
    return seg * (m.config.subs + m.config.late_subs) + sub


def txn_ack(m, s, a):
    """``appendIndividualAck``: one sequential ack op record."""
    return _append_ack(m, s, a, cumulative=False)


def txn_ack_cumulative(m, s, a):
    """``appendCumulativeAck``: "Same shape, single op record carrying the cumulative position"."""
    return _append_ack(m, s, a, cumulative=True)


def _append_ack(m, s, a, cumulative: bool):
    t, seg, sub, pos = a.param("txn"), a.param("seg"), a.param("sub"), a.param("pos")
    i = _index(m, seg, sub)
    p = s.pending[i]
    h = s.headers.get(t)  # the text has no header check on the ack path: the record is written regardless
    hdr = p.hdr if t in p.hdr or h is None else p.hdr.set(t, h.state)
    if h is not None or "forget-collected-acks" not in m.fixes:  # fix: no header, nothing to apply: not kept
        p = replace(p, acks=p.acks.set(t, tuple(sorted(p.acks.get(t, ()) + (pos,)))))
    p = replace(p, hdr=hdr)
    s = store.put_op(s, t, Op(ACK, seg, sub, pos, cumulative))
    c = s.clients[t - 1]
    return replace(s, pending=put(s.pending, i, p), acks_made=s.acks_made | {(t, seg, sub, pos)},
                        clients=put(s.clients, t - 1, replace(c, acks=c.acks + 1)))


def pa_header(m, s, a):
    """The header watch fires: reload the cached header; on a final state materialize in
    the same callback. Commit: the index query for this txn's acks, applied to the cursor.
    Abort: nothing. The header deleted (GC): the text says nothing; as written the txn's pending
    acks stay (fix forget-collected-acks drops them)."""
    seg, sub, t = a.param("seg"), a.param("sub"), a.param("txn")
    i = _index(m, seg, sub)
    p = s.pending[i]
    h = s.headers.get(t)
    p = replace(p, hdr=p.hdr.remove(t) if h is None else p.hdr.set(t, h.state), pend=p.pend - {t})
    if h is None and "forget-collected-acks" in m.fixes:  # the txn is over and collected: nothing to apply
        p = replace(p, acks=p.acks.remove(t))
    if h is None or h.state not in FINAL or t in p.done:
        return replace(s, pending=put(s.pending, i, p))
    if h.state == COMMITTED or m.config.variant == "mutant:apply-aborted-acks":
        positions = set()
        for (txn, _), op in s.ops:  # the index query, filtered to this txn
            if txn == t and op.kind == ACK and op.seg == seg and op.sub == sub:
                # markDelete for a cumulative ack, individualAck otherwise
                positions.update(range(op.pos + 1) if op.cumulative else (op.pos,))
        cursor = s.subs[i]
        applied = s.applied
        for pos in positions:
            applied = applied.set((seg, sub, pos), t)
        s = replace(s, subs=put(s.subs, i, replace(cursor, acked=cursor.acked | set(positions))), applied=applied)
    p = replace(p, done=p.done | {t}, acks=p.acks.remove(t))
    return replace(s, pending=put(s.pending, i, p))


def pa_cleanup(m, s, a):
    seg, sub, t = a.param("seg"), a.param("sub"), a.param("txn")
    return store.delete_ops(s, _records(s, t, seg, sub))


def pa_reap(m, s, a):
    """Fix ``owners-reap-orphans``: ack records of a txn whose header is gone, found through the store's index
    ``idx:acks-by-segment-subscription`` (a txn the store no longer holds in memory may still have records there)."""
    seg, sub, t = a.param("seg"), a.param("sub"), a.param("txn")
    i = _index(m, seg, sub)
    p = s.pending[i]
    s = store.delete_ops(s, _records(s, t, seg, sub))
    return replace(s, pending=put(s.pending, i, replace(p, acks=p.acks.remove(t), hdr=p.hdr.remove(t))))


APPLY = {f.__name__: f for f in (txn_ack, txn_ack_cumulative, pa_header, pa_cleanup, pa_reap)}
