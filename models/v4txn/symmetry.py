"""Txns are interchangeable in the v4 model (and in PIP-373's, which runs on its state): every txn runs
the same client, TC and broker steps, and no step, property or fairness set compares two txn ids or
names one. Id 0 (non-transactional entries) and PIP-373's legacy txn are not renamed."""
from __future__ import annotations

from pulsar_verify.symmetry import Renaming, shared
from pulsar_verify.values import FrozenMap, replace

from .state import State


def signature(s: State, t: int) -> tuple:
    """What the state says of txn ``t`` alone: its client, its TC record, its decision and where its
    entries are."""
    c = s.clients[t - 1]
    return (c.phase, c.sends, c.acks, c.failed, c.outcome, s.tc.get(t, ""), s.decided.get(t, ""),
            tuple(tuple(pos for pos, (_, x) in enumerate(log) if x == t) for log in s.logs))


@shared
def _keys(m: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap((ids.get(t, t), v) for t, v in m) if m else m


@shared
def _entries(logs: tuple, ids: Renaming) -> tuple:
    """Per topic, a log of entries ``(kind, txn, ...)``."""
    return tuple(tuple((e[0], ids.get(e[1], e[1]), *e[2:]) for e in log) for log in logs)


@shared
def _buffers(buffers: tuple, ids: Renaming) -> tuple:
    return tuple(replace(b, ongoing=_keys(b.ongoing, ids), aborted=frozenset(ids.get(t, t) for t in b.aborted))
                 for b in buffers)


@shared
def _snapshots(snapshots: tuple, ids: Renaming) -> tuple:
    return tuple(snap and (snap[0], frozenset(ids.get(t, t) for t in snap[1])) for snap in snapshots)


@shared
def _rpcs(rpcs: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap(((ids.get(t, t), kind, topic), v) for (t, kind, topic), v in rpcs)


@shared
def _cursors(cursors: FrozenMap, ids: Renaming) -> FrozenMap:
    return FrozenMap((key, ids.get(t, t)) for key, t in cursors)


@shared
def _publishes(publishes: frozenset, ids: Renaming) -> frozenset:
    return frozenset((ids.get(t, t), topic) for t, topic in publishes)


@shared
def _clients(clients: tuple, ids: Renaming) -> tuple:
    out = list(clients)
    for t, new in ids.items():
        out[new - 1] = clients[t - 1]
    return tuple(out)


def rename(s: State, ids: Renaming) -> State:
    """``s`` with every txn id ``t`` in ``ids`` replaced by ``ids[t]``."""
    return replace(
        s, tc=_keys(s.tc, ids), parts=_keys(s.parts, ids), subs_of=_keys(s.subs_of, ids), rpcs=_rpcs(s.rpcs, ids),
        logs=_entries(s.logs, ids), side=_entries(s.side, ids), snapshots=_snapshots(s.snapshots, ids),
        pending_logs=_entries(s.pending_logs, ids), cursors=_cursors(s.cursors, ids),
        buffers=_buffers(s.buffers, ids), publishes=_publishes(s.publishes, ids), clients=_clients(s.clients, ids),
        decided=_keys(s.decided, ids))
