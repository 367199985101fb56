"""The segment broker's MetadataTransactionBuffer and the transactional publish flow.

PIP-473 "Flows / Publish (transactional)": the header check against the
*cached* header, ``ML.asyncAddEntry``, the op-record put, and the send-ack
are four separate steps. "Notification mechanism": the buffer keeps a header
cache for txns it has writes from, populated when a write is authorised and
"kept up to date by point-watches"; ``getMaxReadPosition`` is "populated by a
watch on idx:writes-by-segment == <my-segment> joined against the header
cache", result "min(position over OPEN txns) - 1, capped at LAC". On the
header watch: commit evicts the cache entry, abort marks the txn aborted,
"After materialization, the participant deletes the op records it owns".
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, put, replace

from . import store
from .state import ABORTED, COMMITTED, FINAL, OPEN, WRITE, Op, Publish, State


def actions(m, s: State):
    cfg = m.config
    for t in range(1, cfg.txns + 1):
        c = s.clients[t - 1]
        if c.phase == "open" and c.sends < cfg.writes:
            for seg in range(cfg.segments):
                if s.up[seg]:
                    yield act("send" if _check_state(m, s, seg, t) == OPEN else "send_conflict", txn=t, seg=seg)
    for p in dict.fromkeys(s.publishes):  # two sends not yet appended are alike: one action
        if not s.up[p.seg]:
            continue
        if p.stage == "append":
            yield act("pub_terminated" if s.sealed[p.seg] else "pub_append", txn=p.txn, seg=p.seg, pos=p.pos)
        elif p.stage == "put":
            yield act("pub_put", txn=p.txn, seg=p.seg, pos=p.pos)
        elif "recheck-before-ack" in m.fixes and _store_state(s, p.txn) != OPEN:
            yield act("pub_late", txn=p.txn, seg=p.seg, pos=p.pos)
        else:
            yield act("pub_ack", txn=p.txn, seg=p.seg, pos=p.pos)
    for seg, b in enumerate(s.buffers):
        if not s.up[seg]:
            continue
        for t in sorted(b.pend_hdr):
            yield act("tb_header", seg=seg, txn=t)
        if b.pend_idx:
            yield act("tb_index", seg=seg)
        if "keep-decisions-with-data" not in m.fixes:
            for t in sorted(b.done):
                if _records(s, t, seg):
                    yield act("tb_cleanup", seg=seg, txn=t)
        if "owners-reap-orphans" in m.fixes:
            for t, _ in b.writes:
                if t not in s.headers and _records(s, t, seg):
                    yield act("tb_reap", seg=seg, txn=t)


def _records(s: State, txn: int, seg: int) -> list:
    """The write op records of ``txn`` this segment's buffer owns."""
    return [k for k, op in s.ops if k[0] == txn and op.kind == WRITE and op.seg == seg]


def _store_state(s: State, txn: int) -> str | None:
    h = s.headers.get(txn)
    return None if h is None else h.state


def _check_state(m, s: State, seg: int, txn: int) -> str | None:
    """"read /txn/<txnId>.state (cached)": the cache first, else the store."""
    cached = s.buffers[seg].hdr.get(txn)
    if cached is None and m.config.variant == "mutant:conflict-on-cache-miss":
        return None
    return cached if cached is not None else _store_state(s, txn)


def _publish(s: State, a) -> Publish:
    """The send an action names. A producer pipelines its sends, so one txn can have several in flight
    to one segment: appended, each is told apart by its position; not yet appended, they are alike
    (the managed ledger appends them in the order sent)."""
    txn, seg, pos = a.param("txn"), a.param("seg"), a.param("pos")
    return next(p for p in s.publishes if p.txn == txn and p.seg == seg and p.pos == pos)


def _replace(s: State, old: Publish, new: Publish | None) -> tuple:
    items = list(s.publishes)
    items.remove(old)
    if new is not None:
        items.append(new)
    return tuple(sorted(items))


def _client(s: State, txn: int, **changes) -> tuple:
    return put(s.clients, txn - 1, replace(s.clients[txn - 1], **changes))


def _buffer(s: State, seg: int, **changes) -> tuple:
    return put(s.buffers, seg, replace(s.buffers[seg], **changes))


def send(m, s, a):
    """The client's send reaches the broker, whose header read authorises it and caches
    the header (with its point watch)."""
    t, seg = a.param("txn"), a.param("seg")
    c = s.clients[t - 1]
    b = s.buffers[seg]
    if t not in b.hdr:
        s = replace(s, buffers=_buffer(s, seg, hdr=b.hdr.set(t, _store_state(s, t))))
    return replace(s, publishes=tuple(sorted(s.publishes + (Publish(t, seg, "append"),))),
                   clients=_client(s, t, sends=c.sends + 1))


def send_conflict(m, s, a):
    """The header read says state != OPEN: TxnConflict to the client."""
    t = a.param("txn")
    return replace(s, clients=_client(s, t, failed=True, sends=s.clients[t - 1].sends + 1))


def pub_append(m, s, a):
    p = _publish(s, a)
    log = s.logs[p.seg]
    if m.config.variant == "mutant:double-append":
        log += (p.txn,)
    return replace(s, logs=put(s.logs, p.seg, log + (p.txn,)),
                        publishes=_replace(s, p, replace(p, stage="put", pos=len(log))))


def pub_terminated(m, s, a):
    """The segment was sealed: TopicTerminated; the client re-routes the send (its slot is free again)."""
    p = _publish(s, a)
    c = s.clients[p.txn - 1]
    return replace(s, publishes=_replace(s, p, None), clients=_client(s, p.txn, sends=c.sends - 1))


def pub_put(m, s, a):
    p = _publish(s, a)
    s = store.put_op(s, p.txn, Op(WRITE, p.seg, -1, p.pos))
    return replace(s, publishes=_replace(s, p, replace(p, stage="ack")))


def pub_ack(m, s, a):
    p = _publish(s, a)
    return replace(s, publishes=_replace(s, p, None))


def pub_late(m, s, a):
    """Fix ``recheck-before-ack``: the header left OPEN meanwhile: TxnConflict, not a send-ack."""
    p = _publish(s, a)
    return replace(s, publishes=_replace(s, p, None), clients=_client(s, p.txn, failed=True))


def tb_header(m, s, a):
    """A header notification reaches the cache, which reloads the current value; in the
    same callback a final state is materialized: commit evicts the entry (it no longer
    pins maxReadPosition), abort marks the txn aborted."""
    seg, t = a.param("seg"), a.param("txn")
    b = s.buffers[seg]
    b = replace(b, hdr=_reload(s, b.hdr, t), pend_hdr=b.pend_hdr - {t})
    return replace(s, buffers=put(s.buffers, seg, materialize(b)))


def _reload(s: State, hdr: FrozenMap, t: int) -> FrozenMap:
    state = _store_state(s, t)
    return hdr.remove(t) if state is None else hdr.set(t, state)


def materialize(b):
    """Apply every final decision in the cache not yet applied."""
    for t, state in b.hdr:
        if state in FINAL and t not in b.done:
            if state == COMMITTED:
                b = replace(b, hdr=b.hdr.remove(t), done=b.done | {t})
            else:
                b = replace(b, aborted=b.aborted | {t}, done=b.done | {t})
    return b


def tb_index(m, s, a):
    """The idx:writes-by-segment notification: reload the view, join against the header cache."""
    seg = a.param("seg")
    b = s.buffers[seg]
    return replace(s, buffers=put(s.buffers, seg, materialize(load_index(s, seg, b))))


def load_index(s: State, seg: int, b):
    writes = store.writes_by_segment(s, seg)
    hdr = b.hdr
    for t in writes:
        if t not in hdr and t not in b.done and _store_state(s, t) is not None:
            hdr = hdr.set(t, _store_state(s, t))
    return replace(b, writes=FrozenMap(writes), hdr=hdr, pend_idx=False)


def tb_cleanup(m, s, a):
    """Delete the op records this buffer owns for the txn."""
    return store.delete_ops(s, _records(s, a.param("txn"), a.param("seg")))


def tb_reap(m, s, a):
    """Fix ``owners-reap-orphans``: records of a txn whose header is gone can only be
    leftovers of a write that landed after the GC sweep; nobody else will delete them."""
    return store.delete_ops(s, _records(s, a.param("txn"), a.param("seg")))


def max_read_position(m, s: State, seg: int) -> int:
    """min(position over OPEN txns) - 1, capped at LAC."""
    b = s.buffers[seg]
    lac = len(s.logs[seg]) - 1
    opens = [positions[0] for t, positions in b.writes if b.hdr.get(t) == OPEN
             or (m.config.variant == "mutant:pin-committed" and t in b.done and t not in b.aborted)]
    return min(min(opens) - 1, lac) if opens else lac


def txn_status(s: State, seg: int, txn: int) -> str | None:
    """What ``isTxnAborted`` sees: the buffer's caches, else a header read; None if no header."""
    b = s.buffers[seg]
    if txn in b.aborted:
        return ABORTED
    cached = b.hdr.get(txn)
    return cached if cached is not None else _store_state(s, txn)


APPLY = {f.__name__: f for f in (send, send_conflict, pub_append, pub_terminated, pub_put, pub_ack, pub_late,
                                 tb_header, tb_index, tb_cleanup, tb_reap)}
