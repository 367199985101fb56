"""Symmetry reduction: the renamings a model declares map it onto itself, its representative depends
only on a state's class, and the reduced search decides what the full one does, at every in-process
bound set of every model."""
from __future__ import annotations

import functools
import itertools
import json
import random
import tempfile
from pathlib import Path

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import Explorer, explore, state_key
from pulsar_verify.fingerprint import fingerprint
from pulsar_verify.model import Model, ModelDefinitionError
from pulsar_verify.models.pip473 import symmetry as pip473_symmetry
from pulsar_verify.models.v4txn import symmetry as v4_symmetry
from pulsar_verify.symmetry import renaming
from pulsar_verify.values import replace

from .helpers import NIGHTLY, cli

CASES = [(cls.name, preset) for cls in registry.all_models() for preset in cls.in_process_presets()]
RENAMES = {"v4-txn": v4_symmetry.rename, "pip-373": v4_symmetry.rename, "pip-473": pip473_symmetry.rename}


def decided(result) -> dict:
    """Each violated property with its counterexample's length (a lasso's length may differ)."""
    return {v.prop.id: (v.length if v.loop is None else "lasso") for v in result.violations}


@pytest.mark.parametrize("name,preset", CASES)
def test_the_reduced_search_decides_what_the_full_one_does(name, preset):
    """The same violated properties, and safety counterexamples of the same length: for every variant
    at the model's smallest bound set that reduces (fewest states as written), and the baseline and the
    best variant at the others (every variant at every bound set nightly: v4-txn's at two-txns took
    349 s of CI); a bound set without two interchangeable actors is searched in full."""
    cls = registry.model_class(name)
    reduced = registry.build(name, preset=preset)
    if not reduced.reduction:
        assert state_key(reduced) is fingerprint
        return
    every = NIGHTLY or preset == smallest_reducing(name)
    for variant in [v for v in cls.variant_names() if every or v in (cls.baseline(), cls.best_variant())]:
        small, _ = explore(registry.build(name, variant, preset=preset))
        full, _ = explore(registry.build(name, variant, preset=preset, reduction=False))
        assert decided(small) == decided(full), variant
        assert small.reduction and not full.reduction
        assert full.distinct_states > small.distinct_states


@functools.lru_cache(maxsize=None)
def smallest_reducing(name: str) -> str:
    reducing = [p for n, p in CASES if n == name and registry.build(name, preset=p).reduction]
    return min(reducing, key=lambda p: explore(registry.build(name, preset=p), check_liveness=False)[0].distinct_states)


def reachable(model: Model, limit: int) -> list:
    """The first ``limit`` states of the full search, in breadth-first order."""
    explorer = Explorer(model.full_search(), max_states=limit, check_liveness=False)
    explorer.run()
    return [explorer.path_to(fp)[0][-1] for fp in explorer.parents]


def walked(model: Model, walks: int, steps: int) -> list:
    """The states of ``walks`` seeded random walks of up to ``steps`` steps: deeper than ``reachable``."""
    rng, out = random.Random(0), []
    for _ in range(walks):
        s = model.init_states()[0]
        for _ in range(steps):
            succ = model.successors(s)
            if not succ:
                break
            s = rng.choice(succ)[1]
            out.append(s)
    return out


def broken_symmetry(model: Model, rename, states: list) -> str | None:
    """The first way a renaming fails to map the model onto itself on ``states``: the renamed state's
    successors are not the renamed successors (by label), a property's verdict or a liveness label
    differs, or the two have different representatives; None if it never fails."""
    ids = range(1, model.config.txns + 1)
    for s, perm in itertools.product(states, itertools.permutations(ids)):
        mapping = renaming(tuple(zip(ids, perm)))
        r = rename(s, mapping)
        succ = {(a.name, fingerprint(rename(t, mapping))): (a, t) for a, t in model.successors(s)}
        theirs = {(a.name, fingerprint(t)): (a, t) for a, t in model.successors(r)}
        if sorted(succ) != sorted(theirs):
            return f"successors of {s} under {mapping}"
        if fingerprint(model.canonicalize(r)) != fingerprint(model.canonicalize(s)):
            return f"representative of {s} under {mapping}"
        for p in model.invariants:
            if p.check(model, s) != p.check(model, r):
                return f"{p.id} on {s} under {mapping}"
        for p in model.liveness:
            if (bool(p.goal(model, s)), p.trigger is None or bool(p.trigger(model, s))) != \
                    (bool(p.goal(model, r)), p.trigger is None or bool(p.trigger(model, r))):
                return f"{p.id}'s labels on {s} under {mapping}"
        for key, (a, t) in succ.items():
            ra, rt = theirs[key]
            for p in model.action_properties:
                if p.check(model, s, a, t) != p.check(model, r, ra, rt):
                    return f"{p.id} on {s} --{a}--> under {mapping}"
    return None


@pytest.mark.parametrize("name,preset,variant", [("v4-txn", "two-txns", "as-written"),
                                                 ("v4-txn", "two-txns", "off-segment-markers"),
                                                 ("v4-txn", "two-txns", "mutant:end-any-state"),
                                                 ("pip-373", "two-txns", "all-fixes"),
                                                 ("pip-473", "two-txns", "as-written"),
                                                 ("pip-473", "two-txns", "all-fixes")])
def test_a_renaming_maps_the_model_onto_itself(name, preset, variant):
    model = registry.build(name, variant, preset=preset)
    states = reachable(model, 2000) + walked(model, 40, 40)
    assert broken_symmetry(model, RENAMES[name], states) is None


def test_a_renaming_that_forgets_a_field_is_caught():
    """The check above can fail: a renaming that leaves the TC's records as they were."""
    model = registry.build("v4-txn", preset="two-txns")
    states = reachable(model, 300)
    assert broken_symmetry(model, lambda s, m: replace(v4_symmetry.rename(s, m), tc=s.tc), states)


def test_a_declared_symmetry_needs_canonicalize_and_a_parameter():
    for attrs_, message in [({"interchangeable": {"txns": "x"}, "params": {}}, "no parameter"),
                            ({"interchangeable": {"txns": "x"}, "params": {"txns": None}}, "no canonicalize")]:
        cls = type("Broken", (Model,), {"name": "broken", "__module__": __name__, **attrs_})
        with pytest.raises(ModelDefinitionError, match=message):
            cls.check_declaration(())



def test_explore_reduces_unless_asked_not_to():
    """The CLI reports the symmetry it reduced by, and ``--no-reduction`` runs the full search."""
    runs = [json.loads(cli("explore", "v4-txn", "--bounds", "two-txns", "--max-depth", "8", "--json", *flag,
                           "--out", str(Path(tmp) / "out")).stdout)
            for flag, tmp in [((), tempfile.mkdtemp()), (("--no-reduction",), tempfile.mkdtemp())]]
    assert runs[0]["reduction"] == "2 txns interchangeable" and runs[1]["reduction"] == ""
    assert runs[1]["distinct_states"] > runs[0]["distinct_states"]
