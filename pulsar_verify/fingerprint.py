"""Stable state fingerprints.

A state is turned into a canonical tree of ints, strs, bools, None and tuples
(attrs values become ``(class name, field...)``, frozensets become sorted
tuples, ``FrozenMap`` its sorted pairs), serialised with ``marshal`` format 2
(which, unlike formats 3+, writes no back-references that depend on reference
counts) and hashed with BLAKE2b. The result is identical across processes,
``PYTHONHASHSEED`` values and machines of the same byte order: Python's salted
``hash()`` is never used.
"""
from __future__ import annotations

import marshal
import operator
from hashlib import blake2b
from typing import Any

import attrs

from .values import FrozenMap

_PRIMITIVE = frozenset({int, str, bool, type(None), bytes, float})
_converters: dict[type, Any] = {}
# Canonical forms of immutable containers, by identity. Successor states share most of
# their sub-values with their parent, so most lookups hit. Each entry keeps its object
# alive, so an id is never reused while cached; the cache is bounded.
_memo: dict[int, tuple] = {}
_MEMO_LIMIT = 1 << 18


def _canon_tuple(v):
    out = [x if type(x) in _PRIMITIVE else canon(x) for x in v]
    return v if all(a is b for a, b in zip(out, v)) else tuple(out)


def _canon_set(v):
    items = [canon(x) for x in v]
    try:
        items.sort()
    except TypeError:  # mixed element types: order by their canonical bytes
        items.sort(key=lambda x: marshal.dumps(x, 2))
    return ("#set", tuple(items))


def _canon_map(v):
    return ("#map", tuple([(canon(k), canon(x)) for k, x in v.items()]))


def _attrs_converter(cls):
    """All fields read at once (``attrgetter``, in C); when they are all primitives (one C-level
    set test) the tuple is used as it is, else each non-primitive field is converted."""
    names = [f.name for f in attrs.fields(cls)]
    get = operator.attrgetter(*names) if len(names) > 1 else (lambda s: (getattr(s, names[0]),))
    tag = (cls.__qualname__,)
    prim = _PRIMITIVE

    def conv(s):
        values = get(s)
        if prim.issuperset(map(type, values)):
            return tag + values
        return tag + tuple([x if type(x) in prim else canon(x) for x in values])
    return conv


def canon(v):
    """The canonical tree of a value."""
    t = type(v)
    if t in _PRIMITIVE:
        return v
    hit = _memo.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    conv = _converters.get(t) or _converter(v, t)
    out = conv(v)
    if len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[id(v)] = (v, out)
    return out


def _converter(v, t):
    if t is tuple:
        conv = _canon_tuple
    elif isinstance(v, FrozenMap):
        conv = _canon_map
    elif isinstance(v, frozenset):
        conv = _canon_set
    elif attrs.has(t):
        conv = _attrs_converter(t)
    else:
        raise TypeError(f"cannot fingerprint a value of type {t.__name__}: use ints, strs, tuples, "
                        f"frozensets, FrozenMap or attrs classes")
    _converters[t] = conv
    return conv


def _canon_top(state):
    """Like ``canon``, without memoising the state itself: it is fingerprinted once,
    and its entry would only evict the shared sub-values that make the memo pay."""
    t = type(state)
    if t in _PRIMITIVE:
        return state
    return (_converters.get(t) or _converter(state, t))(state)


def encode(state) -> bytes:
    """The canonical byte encoding of a state."""
    return marshal.dumps(_canon_top(state), 2)


def fingerprint(state) -> int:
    """A 64-bit signed fingerprint (fits a Parquet/Spark LongType)."""
    return int.from_bytes(blake2b(marshal.dumps(_canon_top(state), 2), digest_size=8).digest(),
                          "little", signed=True)
