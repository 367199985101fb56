"""One generic Hypothesis ``RuleBasedStateMachine`` per model.

Each step draws one of the enabled successors (so Hypothesis shrinks towards
short traces of early-listed actions) and every invariant and action property
is checked after it. A failure is written as the same ITF counterexample the
explorer writes, so ``pulsar-verify replay`` reproduces it.

Profiles: ``ci`` (fast, derandomized, no example database) and ``nightly``
(many examples, longer runs), selected with ``HYPOTHESIS_PROFILE``; the review
runs its machines under ``review`` (``ci`` with more examples) or ``nightly``.
"""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .explorer import DEADLOCK
from .itf import trace_document, write_trace
from .model import Model

# Hypothesis's ``explain`` phase (which parts of a minimal failure could vary) is not reported here,
# and it re-ran the failing machine for most of a shrink's time.
PHASES = tuple(p for p in Phase if p is not Phase.explain)
settings.register_profile("ci", max_examples=60, stateful_step_count=40, derandomize=True, database=None,
                          deadline=None, report_multiple_bugs=False, phases=PHASES,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=5000, stateful_step_count=120, deadline=None, phases=PHASES,
                          report_multiple_bugs=True, suppress_health_check=[HealthCheck.too_slow])
# The review's machines: the ``ci`` profile with more examples, and every property violated shrunk
# on its own (see ``run_machine``).
settings.register_profile("review", settings.get_profile("ci"), max_examples=100, report_multiple_bugs=True)
settings.register_profile("dev", max_examples=200, stateful_step_count=60, deadline=None)


def load_profile() -> str:
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    settings.load_profile(name)
    return name


class PropertyFailed(AssertionError):
    pass


def run_machine(model: Model, out_dir: Path, nightly: bool = False) -> tuple[int, set]:
    """Run the model's machine once under the ``review`` (or ``nightly``) profile: the examples tried
    and the ids of the properties it found violated (each written under ``out_dir``). Each property
    violated in any example is shrunk on its own (``report_multiple_bugs``), so the set does not
    depend on which property a run happened to break first."""
    from hypothesis.stateful import run_state_machine_as_test

    profile = settings.get_profile("nightly" if nightly else "review")
    try:
        run_state_machine_as_test(machine_for(model, out_dir), settings=profile)
    except* PropertyFailed:
        pass
    failed = {p.name[len("hypothesis-"):-len(".itf.json")] for p in Path(out_dir).glob("hypothesis-*.itf.json")}
    return profile.max_examples, failed


_FAILED: dict[str, type] = {}


def _failure(pid: str) -> type[PropertyFailed]:
    """The exception a violation of property ``pid`` raises: one class per property, since Hypothesis
    tells failures apart by their exception's type and where it was raised."""
    if pid not in _FAILED:
        _FAILED[pid] = type(f"PropertyFailed[{pid}]", (PropertyFailed,), {})
    return _FAILED[pid]


def machine_for(model: Model, out_dir: Path | None = None) -> type[RuleBasedStateMachine]:
    """A state machine class driving ``model``; failures are written under ``out_dir``.

    Hypothesis runs many failing examples (while shrinking, and variations of the minimal
    one afterwards), so only the shortest counterexample per property is kept."""
    shortest: dict[str, int] = {}

    class ModelMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.states: list = []
            self.actions: list = []
            self.succ: list = []

        def _fail(self, prop, states=None, actions=None):
            states = states or self.states
            actions = actions if actions is not None else self.actions
            where = ""
            if out_dir is not None and len(actions) <= shortest.get(prop.id, len(actions)):
                shortest[prop.id] = len(actions)
                info = {"property": prop.id, "kind": prop.kind, "statement": prop.statement,
                        "section": prop.section, "length": len(actions), "found-by": "hypothesis"}
                path = write_trace(Path(out_dir) / f"hypothesis-{prop.id}.itf.json",
                                   trace_document(model, states, actions, info))
                where = f"; counterexample {path}"
            raise _failure(prop.id)(f"{prop.kind} {prop.id} violated after {len(actions)} steps: "
                                 f"{prop.statement}{where}")

        @initialize(data=st.data())
        def start(self, data):
            s = data.draw(st.sampled_from(model.init_states()), label="init")
            self.states = [s]
            self.succ = model.successors(s)

        @precondition(lambda self: bool(self.states))
        @rule(data=st.data())
        def step(self, data):
            if not self.succ:
                if not model.is_terminal(self.states[-1]):
                    self._fail(DEADLOCK)
                return
            a, t = data.draw(st.sampled_from(self.succ), label="action")
            s = self.states[-1]
            for prop in model.action_properties:
                if not prop.check(model, s, a, t):
                    self._fail(prop, self.states + [t], self.actions + [a])
            self.states.append(t)
            self.actions.append(a)
            self.succ = model.successors(t)

        @invariant()
        def invariants_hold(self):
            if not self.states:
                return
            for prop in model.invariants:
                if not prop.check(model, self.states[-1]):
                    self._fail(prop)

    ModelMachine.__name__ = f"{model.name}_{model.config.variant_name}".replace("-", "_")
    return ModelMachine
