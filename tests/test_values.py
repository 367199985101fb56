"""``values.replace``: the compiled copy of the slots builds exactly what the class's constructor
builds, for every kind of value in every model's reachable states, and leaves the others to it; ``values.ordered``
compares as attrs' ``order=True`` does."""
from __future__ import annotations

import sys

import attrs
import pytest

from pulsar_verify import registry, values
from pulsar_verify.models.pip468.layout import HashRange, LayoutError


def test_the_compiled_replace_is_built():
    """``pip install`` compiles ``_values.c`` on this machine kind: without it every model step
    would build its values through the attrs constructor, several times slower."""
    assert type(values.replace).__name__ == "builtin_function_or_method"


def parts(v):
    """``v`` and every attrs value inside it."""
    if attrs.has(type(v)):
        yield v
        for f in attrs.fields(type(v)):
            yield from parts(getattr(v, f.name))
    elif isinstance(v, (tuple, frozenset)):
        for x in v:
            yield from parts(x)


@pytest.mark.parametrize("name", [c.name for c in registry.all_models()])
def test_replace_builds_what_the_constructor_builds_on_reachable_values(name):
    cls = registry.model_class(name)
    model = registry.build(name, cls.best_variant() or cls.baseline())
    frontier, seen = list(model.init_states()), {}
    for _ in range(6):
        nxt = []
        for s in frontier:
            for v in parts(s):
                seen.setdefault(type(v), v)
            nxt += [t for _, t in model.successors(s)]
        frontier = nxt[:100]
    for t, v in seen.items():
        for f in attrs.fields(t):
            other = getattr(v, f.name)
            for new in (other, None, (other,)):
                try:
                    want = attrs.evolve(v, **{f.name: new})
                except Exception as e:  # a class whose hook refuses the value refuses it either way
                    with pytest.raises(type(e)):
                        values.replace(v, **{f.name: new})
                    continue
                got = values.replace(v, **{f.name: new})
                assert type(got) is t and got == want and hash(got) == hash(want), (t, f.name)
        assert values.replace(v) == v and values.replace(v) is not v


def test_a_class_with_a_hook_is_built_by_its_constructor():
    assert values.slots_of(HashRange) is None  # its __attrs_post_init__ checks the range
    r = HashRange(0, 10)
    assert values.replace(r, end=20) == HashRange(0, 20)
    with pytest.raises(LayoutError):
        values.replace(r, end=-1)


def test_an_unknown_field_is_refused_and_nothing_leaks():
    @attrs.frozen
    class Pair:
        a: object
        b: object

    p, marker = Pair(1, 2), object()
    with pytest.raises(TypeError, match="Pair has no field 'c'"):
        values.replace(p, c=1)
    before = sys.getrefcount(marker)
    for _ in range(1000):
        values.replace(values.replace(p, a=marker), a=2)
    assert sys.getrefcount(marker) == before
    with pytest.raises(attrs.exceptions.NotAnAttrsClassError):
        values.replace((1, 2), a=1)


def test_ordered_compares_as_attrs_order_true():
    """``values.ordered`` (the records the models sort) orders, and tells apart, exactly as attrs'
    ``order=True`` does, and refuses to compare with another class as it does."""
    from itertools import product

    @attrs.frozen(order=True)
    class Slow:
        a: int
        b: str

    @values.ordered
    @attrs.frozen
    class Fast:
        a: int
        b: str

    pairs = list(product(range(3), "xy"))
    for (p, q) in product(pairs, pairs):
        slow, fast = (Slow(*p), Slow(*q)), (Fast(*p), Fast(*q))
        for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
            assert getattr(fast[0], op)(fast[1]) == getattr(slow[0], op)(slow[1]), (p, q, op)
    assert sorted(Fast(*p) for p in reversed(pairs)) == [Fast(*p) for p in pairs]
    with pytest.raises(TypeError):
        Fast(0, "x") < (0, "x")
    assert Fast(0, "x") != (0, "x")


def test_the_compiled_frozen_map_methods_do_what_the_python_ones_do():
    """``_values.install_map`` gives FrozenMap compiled lookups, ``set`` and ``remove``: each returns (or raises)
    exactly what the method written in Python does, on maps of int, str and tuple keys, present or absent."""
    import random
    rng = random.Random(473)
    assert all(type(values.FrozenMap.__dict__[n]).__name__ == "method_descriptor" for n in values.MAP_METHODS)
    keys = [0, 1, 2, 5, "a", "b", (1, "x"), (2, "y")]

    def outcome(fn, *args):
        try:
            out = fn(*args)
        except KeyError as exc:
            return "KeyError", exc.args
        return type(out), out

    for _ in range(3000):
        kind = rng.choice((int, str, tuple))
        pool = [k for k in keys if type(k) is kind]
        m = values.FrozenMap({rng.choice(pool): rng.randrange(3) for _ in range(rng.randrange(len(pool) + 1))})
        key, value = rng.choice(pool + [kind() if kind is not tuple else (9, "z")]), rng.randrange(3)
        for name, args in (("get", (key,)), ("get", (key, "d")), ("__getitem__", (key,)), ("__contains__", (key,)),
                           ("set", (key, value)), ("remove", (key,))):
            assert outcome(getattr(m, name), *args) == outcome(values.MAP_METHODS[name], m, *args), (m, name, args)
    with pytest.raises(TypeError):
        values.FrozenMap.__dict__["get"](values.FrozenMap(), 1, 2, 3)
