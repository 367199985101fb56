"""Txns are interchangeable in the PIP-473 model: every txn runs the same client, TC V5, sweep, buffer
and pending-ack steps; the sweeps may pick any txn their index lists, and no step, property or fairness
set compares two txn ids or names one. Id 0 (non-transactional entries) is not renamed."""
from __future__ import annotations

from pulsar_verify.symmetry import Renaming, per_id, renamed_keys, renamed_values, shared
from pulsar_verify.values import FrozenMap, replace

from .state import State


def signature(s: State, t: int) -> tuple:
    """What the state says of txn ``t`` alone: its client, header, decision, op record count and
    where its entries are."""
    c, h = s.clients[t - 1], s.headers.get(t)
    return (c.phase, c.sends, c.acks, c.failed, c.want, c.outcome, h.state if h else "", h.finalized if h else -1,
            h.version if h else -1, s.decided.get(t, ""), s.seqs[t - 1],
            tuple(tuple(pos for pos, x in enumerate(log) if x == t) for log in s.logs))


def _txns(ts: frozenset, ids: Renaming) -> frozenset:
    return frozenset(ids.get(t, t) for t in ts) if ts else ts


@shared
def _ops(ops: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap(((ids.get(t, t), seq), op) for (t, seq), op in ops)


@shared
def _logs(logs: tuple, ids: Renaming) -> tuple:
    return tuple(tuple(ids.get(t, t) for t in log) for log in logs)


@shared
def _buffers(buffers: tuple, ids: Renaming) -> tuple:
    return tuple(replace(b, hdr=renamed_keys(b.hdr, ids), writes=renamed_keys(b.writes, ids),
                         aborted=_txns(b.aborted, ids), done=_txns(b.done, ids), pend_hdr=_txns(b.pend_hdr, ids))
                 for b in buffers)


@shared
def _pending(pending: tuple, ids: Renaming) -> tuple:
    return tuple(replace(p, hdr=renamed_keys(p.hdr, ids), acks=renamed_keys(p.acks, ids), done=_txns(p.done, ids),
                         pend=_txns(p.pend, ids)) for p in pending)


@shared
def _sorted_by_txn(items: tuple, ids: Renaming) -> tuple:
    """``publishes`` or ``ends``: sorted records with a ``txn`` field."""
    return tuple(sorted(replace(x, txn=ids.get(x.txn, x.txn)) for x in items))


@shared
def _sweeps(sweeps: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap((ids.get(t, t), tuple((ids.get(x, x), seq) for x, seq in listed)) for t, listed in sweeps)


@shared
def _acks_made(acks: frozenset, ids: Renaming) -> frozenset:
    return frozenset((ids.get(t, t), *rest) for t, *rest in acks)


def rename(s: State, ids: Renaming) -> State:
    """``s`` with every txn id ``t`` in ``ids`` replaced by ``ids[t]``."""
    return replace(
        s, headers=renamed_keys(s.headers, ids), ops=_ops(s.ops, ids), seqs=per_id(s.seqs, ids),
        logs=_logs(s.logs, ids), buffers=_buffers(s.buffers, ids), pending=_pending(s.pending, ids),
        publishes=_sorted_by_txn(s.publishes, ids), ends=_sorted_by_txn(s.ends, ids), sweeps=_sweeps(s.sweeps, ids),
        clients=per_id(s.clients, ids), decided=renamed_keys(s.decided, ids),
        acks_made=_acks_made(s.acks_made, ids), applied=renamed_values(s.applied, ids))
