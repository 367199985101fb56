"""Z3 proof obligations: each one proved, violated (with its counterexample) or unknown, timed.

An obligation is a named claim about a model, with the PIP section it comes from and a check
that returns a ``Verdict``. ``properties.registry()`` lists them per model; ``pulsar-verify
prove [MODEL]`` runs them.
"""
from __future__ import annotations

import time
from typing import Callable

import attrs
import z3

PROVED, VIOLATED, UNKNOWN = "proved", "violated", "unknown"


@attrs.frozen
class Verdict:
    status: str
    detail: str = ""  # the counterexample (violated) or the reason (unknown)
    seconds: float = 0.0


@attrs.frozen
class Obligation:
    model: str
    name: str
    statement: str
    section: str
    check: Callable[[], Verdict]
    variants: tuple = ("as-written",)  # the model variants the claim is about

    def run(self) -> Verdict:
        started = time.perf_counter()
        verdict = self.check()
        return attrs.evolve(verdict, seconds=time.perf_counter() - started)


def valid(claim, *, show: Callable[[z3.ModelRef], str] = str, timeout_ms: int = 60_000) -> Verdict:
    """Whether ``claim`` holds for every value of its free constants: its negation is unsat."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(z3.Not(claim))
    answer = solver.check()
    if answer == z3.unsat:
        return Verdict(PROVED)
    if answer == z3.sat:
        return Verdict(VIOLATED, show(solver.model()))
    return Verdict(UNKNOWN, solver.reason_unknown())


def all_of(verdicts) -> Verdict:
    """The first verdict that is not ``proved``, else ``proved`` (for claims checked per size)."""
    for v in verdicts:
        if v.status != PROVED:
            return v
    return Verdict(PROVED)
