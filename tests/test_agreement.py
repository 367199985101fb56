"""Each step-for-step Z3 encoding agrees with its Python model on every state the model reaches
(``properties/agreement.py``): in CI at each encoding's smallest covered bound set, for the design as
written and with every fix; in the nightly at every in-process bound set it covers, for every variant."""
from __future__ import annotations

import pytest
import z3
from hypothesis import given, settings, strategies as st

from pulsar_verify import registry
from pulsar_verify.properties import agreement, step_encodings, v4txn_steps

from .helpers import NIGHTLY


# CI also checks these bound sets of an encoding: pip-468's smallest has no failover, so no election after the first,
# no deposed leader and none of op-intent's or leader-watches-layout's guards on them
ALSO_IN_CI = {"Pip468Steps": "failover"}


def _cases() -> list:
    out = []
    for enc in step_encodings():
        covered, _ = agreement.cases(enc)
        if not NIGHTLY:
            cls = registry.model_class(enc.model)
            ends = {cls.baseline(), cls.best_variant() or cls.baseline()}
            smallest = covered[0][1]  # the first covered bound set, in the model's order (the small ones first)
            chosen = {smallest, ALSO_IN_CI.get(enc.__name__)}
            covered = [(v, p) for v, p in covered if p in chosen and v in ends]
        out += [pytest.param(enc, v, p, id=f"{enc.__module__.rpartition('.')[2]}-{v}-{p}") for v, p in covered]
    return out


@pytest.mark.parametrize("encoding, variant, preset", _cases())
def test_the_encoding_agrees_with_its_model_on_every_reachable_state(encoding, variant, preset):
    r = agreement.check(encoding, variant, preset)
    assert r.states > 1 and r.steps > 0
    assert r.disagreements == 0, "\n".join(r.problems)


def test_every_encoding_covers_a_case_and_says_why_it_skips_the_others():
    for enc in step_encodings():
        covered, not_covered = agreement.cases(enc)
        assert covered, enc
        cls = registry.model_class(enc.model)
        every = {(v, p) for p in cls.in_process_presets() for v in cls.variant_names()}
        assert set(covered) | set(not_covered) == every and not set(covered) & set(not_covered)
        assert all(why for why in not_covered.values())


def test_a_drifted_encoding_is_named_by_state_action_and_variable(monkeypatch):
    """A guard dropped and an update forgotten in the v4 encoding's append: the check names both."""
    original = v4txn_steps.Steps.actions

    def drifted(self, v):
        out = original(self, v)
        guard, changes = out["append(1)"]
        out["append(1)"] = (guard, {k: x for k, x in changes.items() if k != "n"})
        guard, changes = out["seal"]
        out["seal"] = (z3.BoolVal(True), changes)
        return out
    monkeypatch.setattr(v4txn_steps.Steps, "actions", drifted)
    r = agreement.check(v4txn_steps.Steps, "as-written", "sealed", show=10_000)
    assert len(r.problems) == r.disagreements
    assert any(p.startswith("append(txn=1, topic=0): n is 1 in the model, 0 in the encoding; in the state at depth")
               for p in r.problems)
    assert any(p.startswith("seal is enabled in the encoding only; in the state at depth") for p in r.problems)


_INTS = st.integers(-3, 3)


@st.composite
def terms(draw, depth=3):
    """A Z3 term over x, y (Int) and b (Bool), with the operators the encodings use."""
    x, y, b = z3.Int("x"), z3.Int("y"), z3.Bool("b")
    if depth == 0:
        return draw(st.sampled_from([x, y, z3.IntVal(draw(_INTS))]))
    a, c = draw(terms(depth - 1)), draw(terms(depth - 1))
    test = draw(st.sampled_from([a < c, a <= c, a == c, a != c, a > c, a >= c, b, z3.Not(b)]))
    return draw(st.sampled_from([a + c, a - c, a * c, -a, z3.If(test, a, c), z3.If(z3.And(test, b), a, c),
                                 z3.If(z3.Or(test, z3.Not(b)), c, a), z3.If(z3.Implies(b, test), a, c)]))


@settings(max_examples=200, deadline=None)
@given(terms(), _INTS, _INTS, st.booleans())
def test_a_compiled_term_evaluates_as_z3_does(term, x, y, b):
    env = {"x": x, "y": y, "b": b}
    expected = z3.simplify(z3.substitute(term, (z3.Int("x"), z3.IntVal(x)), (z3.Int("y"), z3.IntVal(y)),
                                         (z3.Bool("b"), z3.BoolVal(b))))
    assert agreement.compiled(term, {})(env) == expected.as_long()
    assert agreement._function(term, {})(env) == expected.as_long()  # the form of a term too long to inline


@pytest.mark.parametrize("encoding", step_encodings(), ids=lambda e: e.__name__)
def test_a_states_pinned_values_are_those_its_z3_formula_fixes(encoding):
    """The agreement check reads each state through ``Pins``: the values must be the only ones the encoding's Z3
    formula of the state allows, for every variable it keeps (30 states of its first covered case)."""
    variant, preset = agreement.cases(encoding)[0][0]
    model = registry.build(encoding.model, variant, preset=preset)
    enc = encoding(model.config)
    v = enc.vars("")
    for _, s, _ in agreement.reachable(model)[::7][:30]:
        pinned = enc.concrete(agreement.PINS, s)
        assert set(pinned) == set(v.vars)
        solver = z3.Solver()
        solver.add(enc.concrete(v, s))
        assert solver.check() == z3.sat
        m = solver.model()
        found = {k: m.eval(x, model_completion=True) for k, x in v.vars.items()}
        assert {k: z3.is_true(x) if z3.is_bool(x) else x.as_long() for k, x in found.items()} == {
            k: bool(x) if z3.is_bool(v[k]) else int(x) for k, x in pinned.items()}
        solver.add(z3.Or(*[x != found[k] for k, x in v.vars.items()]))
        assert solver.check() == z3.unsat
