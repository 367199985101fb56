"""Stable state fingerprints, and the state encoding states travel in.

The fingerprint is ``merkle.fingerprint``: a Merkle hash of the state's parts, each part's digest
computed once per object (see ``merkle`` for what is hashed and the collision probability). It is
identical across processes, ``PYTHONHASHSEED`` values and machines: Python's salted ``hash()`` is
never used.

The encoding (``encode`` / ``decode``) is how a state travels between processes (the explorer's
workers, Spark): a canonical tree of ints, strs, bools, None, tuples and lists, where an attrs
value becomes ``["module:Class", field...]``, a frozenset ``["#set", item...]`` sorted, a
``FrozenMap`` ``["#map", (key, value)...]``; a list is never anything else, so the tree decodes
back to the state. It is serialised with ``marshal`` format 2 (which, unlike formats 3+, writes no
back-references that depend on reference counts). Decoding fills the canonical-form memo, so the
successors of a decoded state are encoded as cheaply as in the process that found it.
"""
from __future__ import annotations

import importlib
import marshal
import operator
from typing import Any

import attrs

from . import merkle
from .values import PRIMITIVES as _PRIMITIVE, FrozenMap

# The compiled Merkle hash when it was built, else the same function in Python.
fingerprint = merkle._merkle.fingerprint if merkle._merkle is not None else merkle.fingerprint

_converters: dict[type, Any] = {}
_classes: dict[str, type] = {}  # "module:Class" -> class, for decoding
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
    return ["#set", *items]


def _canon_map(v):
    return ["#map", *[(canon(k), canon(x)) for k, x in v.items()]]


def _attrs_converter(cls):
    """All fields read at once (``attrgetter``, in C); when they are all primitives (one C-level
    set test) the tuple is used as it is, else each non-primitive field is converted."""
    fields = attrs.fields(cls)
    if not all(f.init for f in fields):
        raise TypeError(f"cannot fingerprint {cls.__qualname__}: every field must be an __init__ argument")
    names = [f.name for f in fields]
    get = operator.attrgetter(*names) if len(names) > 1 else (lambda s: tuple(getattr(s, n) for n in names))
    tag = f"{cls.__module__}:{cls.__qualname__}"
    _classes[tag] = cls
    prim = _PRIMITIVE

    def conv(s):
        values = get(s)
        if prim.issuperset(map(type, values)):
            return [tag, *values]
        return [tag, *[x if type(x) in prim else canon(x) for x in values]]
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
        raise TypeError(f"cannot encode a value of type {t.__name__}: use ints, strs, tuples, "
                        f"frozensets, FrozenMap or attrs classes")
    _converters[t] = conv
    return conv


def _canon_top(state):
    """Like ``canon``, without memoising the state itself: it is encoded once,
    and its entry would only evict the shared sub-values that make the memo pay."""
    t = type(state)
    if t in _PRIMITIVE:
        return state
    return (_converters.get(t) or _converter(state, t))(state)


def encode(state) -> bytes:
    """The canonical byte encoding of a state."""
    return marshal.dumps(_canon_top(state), 2)


def _class(tag: str) -> type:
    cls = _classes.get(tag)
    if cls is None:
        module, _, qualname = tag.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        cls = _classes[tag] = obj
    return cls


# Decoded values, hash-consed by the bytes of their sub-tree (``marshal`` tells True from 1, as
# dict keys of the trees themselves would not): equal sub-trees decode to one object, found
# without walking it, so decoded states share their parts as the states of one process do, and
# the canonical-form memo (by identity) hits across them. Cleared whole when full.
_decoded: dict[bytes, Any] = {}


def _build(node):
    """The value of a canonical sub-tree; each is interned and memoised with its tree."""
    key = marshal.dumps(node, 2)
    value = _decoded.get(key)
    if value is not None:
        return value
    prim = _PRIMITIVE
    if type(node) is tuple:
        parts = [x if type(x) in prim else _build(x) for x in node]
        value = node if all(a is b for a, b in zip(parts, node)) else tuple(parts)
    else:
        tag = node[0]
        parts = [x if type(x) in prim else _build(x) for x in node[1:]]
        if tag == "#set":
            value = frozenset(parts)
        elif tag == "#map":
            value = FrozenMap._sorted(parts)
        else:
            value = _class(tag)(*parts)
    if len(_decoded) >= _MEMO_LIMIT:
        _decoded.clear()
    _decoded[key] = value
    if len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[id(value)] = (value, node)
    return value


def decode(data: bytes):
    """The state ``encode`` wrote."""
    node = marshal.loads(data)
    t = type(node)
    if t is list:
        tag = node[0]
        if tag not in ("#set", "#map"):  # the top-level state: not memoised, as in ``_canon_top``
            return _class(tag)(*[x if type(x) in _PRIMITIVE else _build(x) for x in node[1:]])
    return _build(node)
