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


def inductive(init, inv, inv_next, steps: dict, before: Callable[[z3.ModelRef], str],
              after: Callable[[z3.ModelRef], str], also: Callable[[str], object] | None = None) -> Verdict:
    """Init implies Inv, and Inv with any one step implies Inv' (and ``also(label)``, a claim
    about that step, where given). A failure shows the initial state, or the two states around
    the step (a counterexample to induction), as ``before`` and ``after`` render them."""
    start = valid(z3.Implies(init, inv), show=lambda m: f"an initial state breaks it: {before(m)}")
    if start.status != PROVED:
        return start
    for label, step in steps.items():
        claim = inv_next if also is None else z3.And(inv_next, also(label))
        verdict = valid(z3.Implies(z3.And(inv, step), claim),
                        show=lambda m, label=label: f"counterexample to induction: {before(m)} --{label}--> "
                                                    f"{after(m)}")
        if verdict.status != PROVED:
            return verdict
    return Verdict(PROVED)


def shortest_run(solver: z3.Solver, states: list, steps_between: Callable[[int], dict],
                 bad: Callable[[object], object], bad_step: Callable[[int, str], object] | None = None):
    """Bounded model checking: the shortest run from ``states[0]`` (which ``solver`` already
    constrains) to a state where ``bad`` holds, or (with ``bad_step``, for action properties)
    through a step that breaks the claim, as (Z3 model, action labels); None if there is none of up
    to ``len(states) - 1`` steps. ``steps_between(i)`` gives the transition formulas, by label,
    between ``states[i]`` and ``states[i + 1]``; ``bad_step(i, label)`` says that step breaks it."""
    chosen = []
    for i, state in enumerate(states):
        solver.push()
        broken = [bad(state)]
        if chosen and bad_step is not None:
            choice, names = chosen[-1]
            broken += [z3.And(choice == j, bad_step(i - 1, n)) for j, n in enumerate(names)]
        solver.add(z3.Or(*broken))
        if solver.check() == z3.sat:
            m = solver.model()
            return m, _labels(m, chosen)
        solver.pop()
        if i + 1 < len(states):
            chosen.append(_one_step(solver, i, steps_between(i)))
    return None


def _one_step(solver: z3.Solver, i: int, steps: dict) -> tuple:
    """Step ``i`` is one of ``steps`` (by label): its choice variable and the labels, in order."""
    names = sorted(steps)
    choice = z3.Int(f"action@{i}")
    solver.add(z3.Or(*[z3.And(choice == j, steps[n]) for j, n in enumerate(names)]))
    return choice, names


def _labels(m: z3.ModelRef, chosen: list) -> list[str]:
    return [names[m.eval(c, model_completion=True).as_long()] for c, names in chosen]


def shortest_lasso(solver: z3.Solver, states: list, actions_at: Callable[[int], dict],
                   steps_between: Callable[[int], dict], same: Callable[[object, object], object],
                   stuck: Callable[[object], object], fair: tuple):
    """Bounded liveness checking: the shortest lasso from ``states[0]`` (which ``solver`` already
    constrains) that stays in ``stuck`` states (a leads-to's trigger without its goal) forever, under
    weak fairness of the actions whose labels start with a name in ``fair``; as (action labels,
    index of the state the loop returns to), or None if there is none of up to ``len(states) - 1``
    steps. The loop either returns to an earlier state, and every fair action enabled in each of
    its states is taken in it, or (an empty loop) stutters in a state where no fair action is
    enabled. ``actions_at(i)`` gives (guard, changes) by label at ``states[i]``; ``steps_between``
    as for ``shortest_run``."""
    chosen = []
    guards = []
    for k, state in enumerate(states):
        guards.append({label: guard for label, (guard, _) in actions_at(k).items()})
        fair_here = [label for label in guards[k] if label.split("(")[0] in fair]
        loops = []
        for j in range(k + 1):
            inside = [stuck(states[m]) for m in range(j, k + 1)]
            if j == k:
                loops.append(z3.And(*inside, *[z3.Not(guards[k][label]) for label in fair_here]))
                continue
            fairness = []
            for label in fair_here:
                taken = [c == names.index(label) for c, names in chosen[j:k]]
                disabled = [z3.Not(guards[m][label]) for m in range(j, k)]
                fairness.append(z3.Or(*taken, *disabled))
            loops.append(z3.And(same(states[j], states[k]), *inside, *fairness))
        solver.push()
        choice = z3.Int(f"loop@{k}")
        solver.add(z3.Or(*[z3.And(choice == j, loop) for j, loop in enumerate(loops)]))
        if solver.check() == z3.sat:
            m = solver.model()
            return _labels(m, chosen), m.eval(choice, model_completion=True).as_long()
        solver.pop()
        if k + 1 < len(states):
            chosen.append(_one_step(solver, k, steps_between(k)))
    return None


def agreement(pre, step, post, allowed=None, show: Callable[[z3.ModelRef], str] | None = None) -> list[str]:
    """How a transition formula ``step`` disagrees with one concrete transition of the Python
    model: from ``pre`` it must admit ``post``, and nothing outside ``allowed`` (default: ``post``)."""
    out = []
    admits, _ = _decide(pre, step, post)
    if admits == z3.unsat:
        out.append("the formula does not admit the model's successor")
    more, m = _decide(pre, step, z3.Not(post if allowed is None else allowed))
    if more == z3.sat:
        out.append("the formula admits a successor the model lacks" + (f": {show(m)}" if show else ""))
    out += [f"Z3 answered unknown ({what})" for what, r in (("admits", admits), ("nothing else", more))
            if r == z3.unknown]
    return out


def _decide(*facts, seeds=(0, 1, 2, 3)):
    """sat or unsat for ``facts``, with its model when sat. On a formula with array lambdas Z3 may
    answer unknown (incomplete quantifiers) under one random seed and decide under another; only
    an answer under every seed tried stays unknown."""
    for seed in seeds:
        solver = z3.Solver()
        solver.set("random_seed", seed)
        solver.add(*facts)
        answer = solver.check()
        if answer != z3.unknown:
            return answer, solver.model() if answer == z3.sat else None
    return z3.unknown, None
