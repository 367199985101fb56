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
from hashlib import blake2b
from typing import Any

import attrs

from .values import FrozenMap

_PRIMITIVE = (int, str, bool, type(None), bytes, float)
_converters: dict[type, Any] = {}


def _canon_tuple(v):
    return tuple([canon(x) for x in v])


def _canon_set(v):
    items = [canon(x) for x in v]
    items.sort(key=lambda x: marshal.dumps(x, 2))
    return ("#set", tuple(items))


def _canon_map(v):
    return ("#map", tuple([(canon(k), canon(x)) for k, x in v.items()]))


def _attrs_converter(cls):
    names = [f.name for f in attrs.fields(cls)]
    tag = cls.__qualname__
    src = "def conv(s):\n    return (%r, %s)\n" % (
        tag, "".join(f"canon(s.{n}), " for n in names))
    scope = {"canon": canon}
    exec(src, scope)  # a straight-line converter per class: no per-field loop at run time
    return scope["conv"]


def canon(v):
    """The canonical tree of a value."""
    t = type(v)
    conv = _converters.get(t)
    if conv is not None:
        return conv(v)
    if t in _PRIMITIVE:
        _converters[t] = _identity
        return v
    if isinstance(v, FrozenMap):
        conv = _canon_map
    elif isinstance(v, tuple):
        conv = _canon_tuple
    elif isinstance(v, frozenset):
        conv = _canon_set
    elif attrs.has(t):
        conv = _attrs_converter(t)
    else:
        raise TypeError(f"cannot fingerprint a value of type {t.__name__}: use ints, strs, tuples, "
                        f"frozensets, FrozenMap or attrs classes")
    _converters[t] = conv
    return conv(v)


def _identity(v):
    return v


def encode(state) -> bytes:
    """The canonical byte encoding of a state."""
    return marshal.dumps(canon(state), 2)


def fingerprint(state) -> int:
    """A 64-bit signed fingerprint (fits a Parquet/Spark LongType)."""
    return int.from_bytes(blake2b(marshal.dumps(canon(state), 2), digest_size=8).digest(),
                          "little", signed=True)
