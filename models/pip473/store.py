"""The metadata store of PIP-473: versioned records with CAS, sequential op
keys, the four secondary indexes, and watch notifications.

PIP-473 "Data Model": header ``/txn/<txnId>`` and op records
``/txn-op/<txnId>/<seq>`` (server-assigned ``<seq>``). The secondary indexes
are *derived* from the records here, never stored, so they cannot drift
("Indexes update transactionally with the underlying records").

Watches (primer, "Metadata store"): a change marks a notification pending for
every watcher; delivery is a separate, later action that re-reads the current
value (caches reload the current value, not every intermediate version), so
notifications are asynchronous, late, and per key in order.
"""
from __future__ import annotations

from pulsar_verify.values import replace

from .state import ACK, FINAL, OPEN, WRITE, Header, Op, State


def _notify_header(s: State, txn: int) -> dict:
    """Point watches on ``/txn/<txn>``: every cache holding the txn gets a notification."""
    buffers = tuple(
        replace(b, pend_hdr=b.pend_hdr | {txn}) if s.up[seg] and txn in b.hdr else b
        for seg, b in enumerate(s.buffers))
    nsubs = len(s.pending) // len(s.buffers)
    pending = tuple(
        replace(p, pend=p.pend | {txn}) if s.up[i // nsubs] and txn in p.hdr else p
        for i, p in enumerate(s.pending))
    return {"buffers": buffers, "pending": pending}


def set_header(s: State, txn: int, new: Header | None) -> State:
    """A put or delete of the header (the caller has checked the expected version)."""
    headers = s.headers.remove(txn) if new is None else s.headers.set(txn, new)
    return replace(s, headers=headers, **_notify_header(s, txn))


def _notify_index(s: State, buffers: tuple, seg: int) -> tuple:
    """The range watch ``idx:writes-by-segment == seg`` of that segment's buffer."""
    b = buffers[seg]
    if not s.up[seg] or b.pend_idx:
        return buffers
    return buffers[:seg] + (replace(b, pend_idx=True),) + buffers[seg + 1:]


def put_op(s: State, txn: int, op: Op) -> State:
    """Create ``/txn-op/<txn>/<seq>`` with a server-assigned sequential key."""
    seq = s.seqs[txn - 1]
    buffers = _notify_index(s, s.buffers, op.seg) if op.kind == WRITE else s.buffers
    return replace(s, ops=s.ops.set((txn, seq), op),
                        seqs=s.seqs[:txn - 1] + (seq + 1,) + s.seqs[txn:], buffers=buffers)


def delete_ops(s: State, keys: list) -> State:
    ops = s.ops
    buffers = s.buffers
    for key in keys:
        op = ops[key]
        ops = ops.remove(key)
        if op.kind == WRITE:
            buffers = _notify_index(s, buffers, op.seg)
    return replace(s, ops=ops, buffers=buffers)


def ops_of(s: State, txn: int) -> list:
    """List ``/txn-op/<txn>/`` (one partition: partitionKey = txnId)."""
    return [k for k, _ in s.ops if k[0] == txn]


def writes_by_segment(s: State, seg: int) -> dict:
    """``idx:writes-by-segment == seg``: txn -> positions."""
    out: dict = {}
    for (txn, _), op in s.ops:
        if op.kind == WRITE and op.seg == seg:
            out.setdefault(txn, []).append(op.pos)
    return {t: tuple(sorted(p)) for t, p in out.items()}


def acks_by_segment_subscription(s: State, seg: int, sub: int) -> dict:
    """``idx:acks-by-segment-subscription == (seg, sub)``: txn -> positions."""
    out: dict = {}
    for (txn, _), op in s.ops:
        if op.kind == ACK and op.seg == seg and op.sub == sub:
            out.setdefault(txn, []).append(op.pos)
    return {t: tuple(sorted(p)) for t, p in out.items()}


def txn_by_deadline(s: State) -> list:
    """``idx:txn-by-deadline``: OPEN txns (each one's deadline may have passed: time is
    nondeterministic, so the sweep may find any of them)."""
    return [t for t, h in s.headers if h.state == OPEN]


def txn_by_final_state(s: State) -> list:
    """``idx:txn-by-final-state`` (keyed by finalized_ms, so only headers whose
    ``finalized_ms`` is set are in it; any of them may be past the retention window)."""
    return [t for t, h in s.headers if h.state in FINAL and h.finalized]
