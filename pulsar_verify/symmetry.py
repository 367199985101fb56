"""Symmetry reduction: one representative per class of states that differ only by a renaming of
interchangeable ids (txns 1..n, say). A model that declares ``interchangeable`` counts implements
``canonicalize`` with ``representative``; the search files every state under its representative's
fingerprint, so it visits one state per class.

Sound when the renaming maps the model onto itself: initial states to initial states, an action's
successor to the renamed action's successor, and every property's verdict on a state to its verdict on
the renamed state (no step, property or fairness set singles out an id of the group). Then a state is
reachable in k steps exactly when its renamings are, so safety verdicts and counterexample lengths are
those of the full search; a lasso may close on a renaming of its loop state, and so be shorter.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

from .fingerprint import fingerprint
from .values import FrozenMap


def representative(state: Any, ids: Sequence[int], signature: Callable[[Any, int], tuple],
                   rename: Callable[[Any, dict], Any]) -> Any:
    """The renaming of ``state`` that numbers ``ids`` (in increasing order) by increasing signature;
    among ids whose signatures are equal, the order whose renamed state has the least fingerprint. The
    result depends only on the class of ``state``, because a renaming permutes the signatures with the
    ids.

    ``signature(state, i)``: what the state says of id ``i`` alone, as a tuple of ints and strs that
    names no id of the group (any such tuple is sound; a finer one leaves fewer ties to break by
    fingerprint). ``rename(state, mapping)``: the state with each id ``i`` of the group replaced by
    ``mapping[i]``."""
    keyed = sorted(((signature(state, i), i) for i in ids), key=_first)
    groups = [[i for _, i in g] for _, g in itertools.groupby(keyed, key=_first)]
    if len(groups) == len(ids):
        moves = tuple((old, new) for (_, old), new in zip(keyed, ids) if old != new)
        return rename(state, renaming(moves)) if moves else state
    best = best_fp = None
    for order in itertools.product(*(itertools.permutations(g) for g in groups)):
        moves = tuple((old, new) for old, new in zip((i for g in order for i in g), ids) if old != new)
        renamed = rename(state, renaming(moves)) if moves else state
        fp = fingerprint(renamed)
        if best_fp is None or fp < best_fp:
            best, best_fp = renamed, fp
    return best


def _first(pair: tuple):
    return pair[0]


class Renaming(dict):
    """Old id -> new id, for the ids a renaming moves; hashable, so that ``shared`` can remember the
    renamed parts of states per renaming."""

    __slots__ = ("_hash",)

    def __init__(self, pairs):
        super().__init__(pairs)
        self._hash = hash(tuple(sorted(self.items())))

    def __hash__(self):
        return self._hash


_renamings: dict = {}


def renaming(moves: tuple) -> Renaming:
    """The one ``Renaming`` object per set of moves."""
    r = _renamings.get(moves)
    if r is None:
        r = _renamings[moves] = Renaming(moves)
    return r


_renamed: dict = {}  # (function, id(part), renaming) -> (part, renamed part)
SHARED_SIZE = 1 << 17


def shared(fn: Callable[[Any, Renaming], Any]) -> Callable[[Any, Renaming], Any]:
    """``fn(part, renaming)``, computed once per part object and renaming while remembered: a state
    shares most of its parts with its neighbours, so renaming it costs what changed in it, and the
    renamed parts are the same objects each time (which the fingerprint's identity cache knows)."""
    def renamed(part, ids: Renaming):
        key = (fn, id(part), ids)
        hit = _renamed.get(key)
        if hit is not None and hit[0] is part:
            return hit[1]
        out = fn(part, ids)
        if len(_renamed) >= SHARED_SIZE:
            _renamed.clear()
        _renamed[key] = (part, out)
        return out
    return renamed


@shared
def renamed_keys(m, ids: Renaming):
    """A ``FrozenMap`` keyed by ids, its keys renamed."""
    return FrozenMap((ids.get(k, k), v) for k, v in m) if m else m


@shared
def renamed_values(m, ids: Renaming):
    """A ``FrozenMap`` whose values are ids, its values renamed."""
    return FrozenMap((k, ids.get(v, v)) for k, v in m) if m else m


@shared
def per_id(items: tuple, ids: Renaming) -> tuple:
    """A tuple with an item per id (id ``i`` at index ``i - 1``), its items moved with their ids."""
    out = list(items)
    for old, new in ids.items():
        out[new - 1] = items[old - 1]
    return tuple(out)
