"""Merkle fingerprints: the compiled hash is built, is the reference function of ``merkle.py`` on
every kind of value and on reachable states of every model, and never changes (Spark checkpoints
and recorded runs depend on it)."""
from __future__ import annotations

import os

import mmh3
import pytest
from toy_lock import LockState

from pulsar_verify import merkle, registry
from pulsar_verify.fingerprint import fingerprint
from pulsar_verify.values import FrozenMap

compiled = merkle._merkle

VALUES = [0, 1, -1, True, False, None, "", "1", "é", b"", b"1", 1.5, -0.0, 2**63 - 1, -2**63, 2**63, -2**80,
          (), (1,), ((),), frozenset(), frozenset({1, "1", (1,)}), FrozenMap(), FrozenMap({"a": (1, 2), "b": None}),
          LockState(pc=("idle", "critical"), lock=1), LockState(pc=(), lock=None)]


def test_the_compiled_hash_is_built():
    """``pip install`` compiles ``_merkle.c`` on this machine kind (gcc and the Python headers are there):
    without it every run would silently take the reference implementation, several times slower."""
    assert compiled is not None


def test_the_node_hash_is_murmurhash3_x64_128():
    """Compiled and reference, against mmh3 (the maintained binding of Appleby's implementation)."""
    for n in [*range(0, 300), 1000, 4096]:
        data = os.urandom(n)
        assert compiled.hash128(data) == merkle._h128(data) == mmh3.hash_bytes(data)


def test_compiled_and_reference_agree_on_every_kind_of_value():
    for v in VALUES:
        assert compiled.digest(v) == merkle.digest(v), v
    assert len({merkle.digest(v) for v in VALUES}) == len(VALUES)  # True is not 1, "1" is not 1, () is not frozenset()


@pytest.mark.parametrize("name", [c.name for c in registry.all_models()])
def test_compiled_and_reference_agree_on_reachable_states(name):
    cls = registry.model_class(name)
    for variant in (cls.baseline(), cls.best_variant() or cls.baseline()):
        model = registry.build(name, variant)
        frontier, checked = list(model.init_states()), 0
        while frontier and checked < 600:
            nxt = []
            for s in frontier:
                assert compiled.digest(s) == merkle.digest(s)
                checked += 1
                nxt += [t for _, t in model.successors(s)]
            frontier = nxt[:200]


def test_a_set_or_map_is_hashed_by_value_not_by_construction_order():
    assert fingerprint(frozenset({1, 2, 3})) == fingerprint(frozenset([3, 2, 1]))
    assert fingerprint(FrozenMap({"b": 2, "a": 1})) == fingerprint(FrozenMap([("a", 1), ("b", 2)]))
    assert fingerprint((1, 2)) != fingerprint(frozenset({1, 2})) != fingerprint(FrozenMap({1: 2}))


def test_values_that_are_not_state_values_are_refused():
    for impl in (compiled.fingerprint, merkle.fingerprint):
        with pytest.raises(TypeError):
            impl([1, 2])
        with pytest.raises(TypeError):
            impl((1, {2: 3}))


def test_the_function_never_changes():
    """Golden values: a change to what is hashed must be deliberate (and bump the Spark checkpoint format)."""
    assert fingerprint(LockState(pc=("idle", "critical"), lock=1)) == 4759245824851108795
    assert fingerprint((frozenset({"a", "b", "c"}), FrozenMap({"x": 1, "y": 2}), None, True, 1.5, b"z",
                        -2**80)) == -4734737516068244550
