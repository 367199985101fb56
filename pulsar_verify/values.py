"""Immutable value types for model states beyond what Python ships frozen."""
from __future__ import annotations

import operator
from types import MemberDescriptorType
from typing import Any, Iterable

import attrs

# The leaf types of a state: everything else in it is a tuple, frozenset, FrozenMap or attrs value.
PRIMITIVES = frozenset({int, str, bool, type(None), bytes, float})


class FrozenMap(tuple):
    """An immutable, hashable map kept as a tuple of ``(key, value)`` pairs sorted by key.

    Keys of one map must be mutually orderable (ints, strs or tuples of them).
    Written to ITF as ``#map``.
    """

    __slots__ = ()

    def __new__(cls, pairs: Iterable[tuple[Any, Any]] | dict = ()):
        items = pairs.items() if isinstance(pairs, dict) else pairs
        return super().__new__(cls, sorted(items))

    @classmethod
    def _sorted(cls, pairs: list):
        return tuple.__new__(cls, pairs)

    def get(self, key, default=None):
        for k, v in self:
            if k == key:
                return v
        return default

    def __contains__(self, key) -> bool:  # type: ignore[override]
        return any(k == key for k, _ in self)

    def __getitem__(self, key):  # type: ignore[override]
        for k, v in self:
            if k == key:
                return v
        raise KeyError(key)

    def keys(self):
        return [k for k, _ in self]

    def values(self):
        return [v for _, v in self]

    def items(self):
        return list(tuple.__iter__(self))

    def set(self, key, value) -> "FrozenMap":
        pairs = [(k, v) for k, v in self if k != key]
        pairs.append((key, value))
        pairs.sort()
        return FrozenMap._sorted(pairs)

    def remove(self, key) -> "FrozenMap":
        return FrozenMap._sorted([(k, v) for k, v in self if k != key])

    def __repr__(self) -> str:
        return "FrozenMap({%s})" % ", ".join(f"{k!r}: {v!r}" for k, v in self)


def ordered(cls: type) -> type:
    """An attrs class ordered as ``order=True`` orders it (by its fields, in declaration order, against its
    own class only), by comparisons on an ``operator.attrgetter``: attrs' own build each side's tuple in
    Python on every comparison, which made sorting the records of a state a visible share of a search.
    ``!=`` is left to Python's own negation of the generated ``__eq__`` (attrs adds a Python-level one)."""
    key = operator.attrgetter(*(f.name for f in attrs.fields(cls)))

    def comparison(op):
        def compare(self, other):
            return op(key(self), key(other)) if other.__class__ is self.__class__ else NotImplemented
        compare.__name__ = f"__{op.__name__}__"
        return compare

    for op in (operator.lt, operator.le, operator.gt, operator.ge):
        setattr(cls, f"__{op.__name__}__", comparison(op))
    if "__ne__" in cls.__dict__:
        del cls.__ne__
    return cls


_replacers: dict = {}


def _replace(obj, changes: dict):
    """``replace`` through the class's constructor: a generated per-class function that calls it
    positionally (several times faster than ``attrs.evolve``)."""
    cls = type(obj)
    fn = _replacers.get(cls)
    if fn is None:
        names = [f.name for f in attrs.fields(cls)]
        for f in attrs.fields(cls):
            if not f.init:
                raise TypeError(f"{cls.__name__}.{f.name}: replace() needs every field in __init__")
        args = ", ".join(f"kw[{n!r}] if {n!r} in kw else o.{n}" for n in names)
        scope = {"cls": cls}
        exec(f"def fn(o, kw):\n    return cls({args})\n", scope)
        fn = _replacers[cls] = scope["fn"]
    for key in changes:
        if not hasattr(obj, key):
            raise TypeError(f"{cls.__name__} has no field {key!r}")
    return fn(obj, changes)


def field_slots(cls: type) -> tuple | None:
    """The member descriptors of an attrs class's fields, in declaration order, when every field is a
    slot (for compiled code to read and write them in place); else None."""
    slots = tuple(getattr(cls, f.name, None) for f in attrs.fields(cls))
    return slots if all(type(d) is MemberDescriptorType for d in slots) else None


def slots_of(cls: type) -> tuple | None:
    """``field_slots(cls)`` when copying the slots builds what the constructor would: a slotted
    attrs class whose ``__init__`` only stores its arguments (no converter, validator, pre/post-init
    hook or cached hash). Else None."""
    if not attrs.has(cls) or "__slots__" not in cls.__dict__ or hasattr(cls, "__attrs_pre_init__") \
            or hasattr(cls, "__attrs_post_init__") or "__attrs_cached_hash" in getattr(cls, "__slots__", ()):
        return None
    if any(not f.init or f.converter is not None or f.validator is not None for f in attrs.fields(cls)):
        return None
    return field_slots(cls)


try:  # compiled: a copy of the slots with the changes, where slots_of allows it; FrozenMap's methods
    from ._values import install_map as _install_map, replace as _compiled, setup as _setup
except ImportError:  # no compiler where the package was installed: the constructor, slower
    _compiled = None

# FrozenMap's methods as written above: what the compiled ones replace, and are tested against
MAP_METHODS = {name: FrozenMap.__dict__[name] for name in ("get", "__getitem__", "__contains__", "set", "remove")}

if _compiled is not None:
    _setup(slots_of, _replace)
    _install_map(FrozenMap)
    replace = _compiled
else:
    def replace(obj, **changes):
        """``obj`` (an attrs value) with the named fields changed, as ``attrs.evolve`` builds it."""
        return _replace(obj, changes)


def put(items: tuple, i: int, value) -> tuple:
    """``items`` with position ``i`` replaced by ``value``."""
    return items[:i] + (value,) + items[i + 1:]
