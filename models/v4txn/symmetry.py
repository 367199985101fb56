"""Txns are interchangeable in the v4 model (and in PIP-373's, which runs on its state): every txn runs
the same client, TC and broker steps, and no step, property or fairness set compares two txn ids or
names one. Id 0 (non-transactional entries) and PIP-373's legacy txn are not renamed."""
from __future__ import annotations

from pulsar_verify.symmetry import Renaming, renamed_keys, renamed_values, shared
from pulsar_verify.values import FrozenMap, replace

from .state import State


def signature(s: State, t: int) -> tuple:
    """What the state says of txn ``t`` alone: its client, its TC record, its decision and where its
    entries are."""
    c = s.clients[t]
    return (c.phase, c.sends, c.acks, c.failed, c.outcome, s.tc.get(t, ""), s.decided.get(t, ""),
            tuple(tuple(pos for pos, (_, x) in enumerate(log) if x == t) for log in s.logs))


@shared
def _entries(logs: tuple, ids: Renaming) -> tuple:
    """Per topic, a log of entries ``(kind, txn, ...)``."""
    return tuple(tuple((e[0], ids.get(e[1], e[1]), *e[2:]) for e in log) for log in logs)


@shared
def _buffers(buffers: tuple, ids: Renaming) -> tuple:
    return tuple(replace(b, ongoing=renamed_keys(b.ongoing, ids),
                         aborted=frozenset(ids.get(t, t) for t in b.aborted)) for b in buffers)


@shared
def _snapshots(snapshots: tuple, ids: Renaming) -> tuple:
    return tuple(snap and (snap[0], frozenset(ids.get(t, t) for t in snap[1])) for snap in snapshots)


@shared
def _rpcs(rpcs: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap(((ids.get(t, t), kind, topic), v) for (t, kind, topic), v in rpcs)


@shared
def _publishes(publishes: frozenset, ids: Renaming) -> frozenset:
    return frozenset((ids.get(t, t), topic) for t, topic in publishes)


def rename(s: State, ids: Renaming) -> State:
    """``s`` with every txn id ``t`` in ``ids`` replaced by ``ids[t]``."""
    return replace(
        s, tc=renamed_keys(s.tc, ids), parts=renamed_keys(s.parts, ids), subs_of=renamed_keys(s.subs_of, ids),
        rpcs=_rpcs(s.rpcs, ids), logs=_entries(s.logs, ids), side=_entries(s.side, ids),
        snapshots=_snapshots(s.snapshots, ids), pending_logs=_entries(s.pending_logs, ids),
        cursors=renamed_values(s.cursors, ids), buffers=_buffers(s.buffers, ids),
        publishes=_publishes(s.publishes, ids),
        clients=renamed_keys(s.clients, ids), decided=renamed_keys(s.decided, ids))
