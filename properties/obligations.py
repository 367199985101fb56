"""Z3 proof obligations: each one proved, violated (with its counterexample) or unknown, timed.

An obligation is a named claim about a model, with the PIP section it comes from and a check
that returns a ``Verdict``. ``properties.registry()`` lists them per model; ``pulsar-verify
prove [MODEL]`` runs them.
"""
from __future__ import annotations

import time
from functools import lru_cache
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
    minutes: bool = False  # takes minutes: the CI test suite leaves it to the nightly run
    proves: tuple = ()  # the model's properties a proved verdict establishes for any size (unbounded claims only)

    def run(self) -> Verdict:
        started = time.perf_counter()
        verdict = self.check()
        return attrs.evolve(verdict, seconds=time.perf_counter() - started)


# With quantifiers Z3's default solver may answer "incomplete quantifiers" where another strategy decides. Which
# one does depends on the order the claim's terms were created in, hence on every module imported before it (the
# v4-impl encodings' declarations turned two pip-477 counterexamples into unknowns); an unknown that is not a
# timeout is tried again with the claim simplified first, with the plain SMT core, then under other seeds.
_ATTEMPTS = (lambda ctx: z3.Solver(ctx=ctx), lambda ctx: z3.Then("simplify", "smt", ctx=ctx).solver(),
             lambda ctx: z3.SimpleSolver(ctx=ctx),
             *[lambda ctx, seed=seed: _seeded(z3.Solver(ctx=ctx), seed) for seed in (1, 2)])


def _seeded(solver: z3.Solver, seed: int) -> z3.Solver:
    solver.set("random_seed", seed)
    return solver


def valid(claim, *, show: Callable[[z3.ModelRef], str] = str, timeout_ms: int = 60_000) -> Verdict:
    """Whether ``claim`` holds for every value of its free constants: its negation is unsat. Solved in
    a fresh context, so the counterexample does not depend on the queries Z3 solved before in the process
    (the model Z3 picks depends on its context's history: the test order, a review run before); what still
    does, the order the claim's terms were made in, ``_ATTEMPTS`` is for."""
    for attempt in _ATTEMPTS:
        ctx = z3.Context()
        solver = attempt(ctx)
        solver.set("timeout", timeout_ms)
        solver.add(z3.Not(claim).translate(ctx))
        answer = solver.check()
        if answer == z3.unsat:
            return Verdict(PROVED)
        if answer == z3.sat:
            return Verdict(VIOLATED, show(solver.model().translate(claim.ctx)))
        if "timeout" in solver.reason_unknown() or "canceled" in solver.reason_unknown():
            break
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


def ranked(init, inv, inv_next, pending, pending_next, goal, steps: dict, helpers: dict, covers, no_worse, better,
           fair: tuple, before: Callable[[z3.ModelRef], str], after: Callable[[z3.ModelRef], str]) -> Verdict:
    """``pending`` leads to ``goal`` under weak fairness, by a ranking argument: the invariant ``inv`` is proved
    inductive first (``inductive``), then from a pending state (1) every step reaches ``goal`` or stays pending
    (``pending_next``) at a measure ``no_worse`` than before; (2) some helper is the one to take (``covers``); (3) each
    helper (label -> (when, guard)) is enabled whenever it is the one to take, and taking it then reaches ``goal`` or
    a ``better`` measure, still pending. With a well-founded measure and the helpers fair, a run that never reaches
    ``goal`` ends at a measure it keeps, where a helper stays enabled and is never taken. A failure shows the two
    states around the step, or the state. A helper whose label is not among the model's weakly ``fair`` steps is an
    error of the encoding (ValueError)."""
    if set(helpers) - set(fair):
        raise ValueError(f"helpers the model does not treat as fair: {sorted(set(helpers) - set(fair))}")
    kept = inductive(init, inv, inv_next, steps, before, after)
    if kept.status != PROVED:
        return kept

    def around(label):
        return lambda m: f"counterexample to progress: {before(m)} --{label}--> {after(m)}"
    for label, step in steps.items():
        verdict = valid(z3.Implies(z3.And(inv, pending, step), z3.Or(goal, z3.And(pending_next, no_worse))),
                        show=around(label))
        if verdict.status != PROVED:
            return verdict
    verdict = valid(z3.Implies(z3.And(inv, pending), covers),
                    show=lambda m: f"no fair step is to be taken in {before(m)}")
    if verdict.status != PROVED:
        return verdict
    for label, (when, guard) in helpers.items():
        verdict = valid(z3.Implies(z3.And(inv, pending, when), guard),
                        show=lambda m, label=label: f"{label} is to be taken but disabled in {before(m)}")
        if verdict.status == PROVED:
            verdict = valid(z3.Implies(z3.And(inv, pending, when, steps[label]),
                                       z3.Or(goal, z3.And(pending_next, better))),
                            show=lambda m, label=label: f"{label} makes no progress: {before(m)} --{label}--> "
                                                        f"{after(m)}")
        if verdict.status != PROVED:
            return verdict
    return Verdict(PROVED)


def vacuous_steps(inv, steps: dict) -> list[str]:
    """The labels of the steps no state satisfying ``inv`` can take (or Z3 cannot say it can): an induction proof
    over them holds whatever they claim, so a step that is never enabled is a defect of the encoding (a change that
    contradicts a frame condition, say)."""
    return [label for label, step in steps.items() if _decide(inv, step, seeds=range(8), timeout_ms=5000)[0] != z3.sat]


@lru_cache(maxsize=None)
def explored(model: str, variant: str, preset: str):
    """The explorer's result for the model's variant at ``preset``, computed once: the encodings read
    their bounds from it instead of re-typing them."""
    from pulsar_verify import registry
    from pulsar_verify.explorer import explore
    return explore(registry.build(model, variant, preset=preset))[0]


def explorer_depth(model: str, preset: str, variants: tuple) -> int:
    """The explorer's greatest depth at ``preset`` over ``variants``: a bounded check of that many steps
    plus one covers every run the explorer decides there."""
    return max(explored(model, v, preset).depth for v in variants)


def finding_bounds(model: str) -> tuple:
    """The bound sets the model's findings are at, in the catalogue's order."""
    from pulsar_verify.findings import catalogue
    return tuple(dict.fromkeys(f.bounds for f in catalogue(model)))


def finding_variants(model: str, presets: tuple, all_fixes: bool = True) -> tuple:
    """``as-written``, the fix of each finding at ``presets``, and ``all-fixes`` (unless not
    ``all_fixes``), in the model's order; a variant whose fix set an earlier one has (``all-fixes`` of a
    model with one fix) is left out."""
    from pulsar_verify import registry
    from pulsar_verify.findings import catalogue
    fixes = {f.fix for f in catalogue(model) if f.bounds in presets}
    chosen, sets = [], set()
    for v in registry.model_class(model).variants:
        if v.kind == "mutant" or v.fixes in sets or not (v.kind == "as-written" or v.name in fixes
                                                          or (all_fixes and v.name == "all-fixes")):
            continue
        chosen.append(v.name)
        sets.add(v.fixes)
    return tuple(chosen)


def fixes_of(model: str, variant: str) -> frozenset:
    """The fixes the model's variant applies, as the kernel computes them (never re-typed in an encoding)."""
    from pulsar_verify import registry
    return registry.model_class(model).variant_named(variant).fixes


def with_fix(model: str, fix: str) -> tuple:
    """The model's fix variants (not its mutants) that apply ``fix``: the fix itself and ``all-fixes``."""
    from pulsar_verify import registry
    variants = registry.model_class(model).variants
    if fix not in {v.name for v in variants if v.kind == "fix"}:
        raise ValueError(f"{model} has no fix {fix!r}")
    return tuple(v.name for v in variants if v.kind == "fix" and fix in v.fixes)


def shortest_run(solver: z3.Solver, states: list, steps_between: Callable[[int], dict],
                 bad: Callable[[object], object]):
    """Bounded model checking: the shortest run from ``states[0]`` (which ``solver`` already
    constrains) to a state where ``bad`` holds, as (Z3 model, action labels), or None if there is
    none of up to ``len(states) - 1`` steps. ``steps_between(i)`` gives the transition formulas, by
    label, between ``states[i]`` and ``states[i + 1]``."""
    chosen = []
    for i, state in enumerate(states):
        solver.push()
        solver.add(bad(state))
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


def _functional_step(solver: z3.Solver, i: int, actions: dict, v, w) -> tuple:
    """Step ``i`` from ``v`` to ``w`` is one of ``actions`` (label -> (guard, changes)): its choice
    variable and the labels, in order. Each variable of ``w`` is stated once, as the value the
    chosen action gives it (the old one if the action leaves it), rather than once per action: the
    same transition relation as ``guard and same(v, w, changes)`` for the chosen action, with far
    fewer equalities for the solver."""
    names = sorted(actions)
    choice = z3.Int(f"action@{i}")
    solver.add(choice >= 0, choice < len(names))
    solver.add(*[z3.Implies(choice == j, actions[n][0]) for j, n in enumerate(names)])
    for key, old in v.vars.items():
        new = old
        for j, n in enumerate(names):
            if key in actions[n][1]:
                new = z3.If(choice == j, actions[n][1][key], new)
        solver.add(w[key] == new)
    return choice, names


def _labels(m: z3.ModelRef, chosen: list) -> list[str]:
    return [names[m.eval(c, model_completion=True).as_long()] for c, names in chosen]


def shortest_counterexamples(solver: z3.Solver, states: list, loop, actions_at: Callable[[int], dict],
                             same: Callable[[object, object], object], breaks: dict, stuck: dict, fair: tuple,
                             lassos: int | None = None) -> dict:
    """Bounded model checking of several properties over one unrolling (so the solver reuses
    what it learns): for each name in ``breaks`` (``breaks[name](i, label)``: the step ``label``
    from ``states[i]`` to ``states[i + 1]`` breaks it), the shortest run through such a step, as
    (action labels, None); for each name in ``stuck`` (a leads-to whose trigger without its goal is
    ``stuck[name](state)``), the shortest lasso staying in such states forever under weak
    fairness of the actions whose labels start with a name in ``fair``, as (action labels, index
    of the state the loop returns to). A name maps to None if there is none of up to
    ``len(states) - 1`` steps (a lasso: of up to ``lassos`` steps, where given). ``solver`` already
    constrains ``states[0]``; ``actions_at(i)`` gives (guard, changes) by label at ``states[i]``, and
    the step from ``states[i]`` is one of them (each as ``guard`` and ``same(states[i], states[i + 1], changes)``).

    A lasso's loop either returns to an earlier state, and every fair action enabled in all of
    its states is taken in it, or (an empty loop) stutters in a state where no fair action is
    enabled. ``loop`` is one more set of state variables, the state the loop starts at (the
    usual linear encoding: the loop start is guessed once, and what the loop has seen is
    accumulated step by step)."""
    found = {}
    chosen, saved, seen = [], [], {}
    for k, state in enumerate(states):
        actions = actions_at(k)
        lassoing = lassos is None or k <= lassos
        guards = {label: guard for label, (guard, _) in actions.items() if label.split("(")[0] in fair and lassoing}
        saved.append(z3.Bool(f"saved@{k}"))  # the loop has started at or before this state
        start = saved[k] if k == 0 else z3.And(saved[k], z3.Not(saved[k - 1]))
        solver.add(z3.Implies(start, same(loop, state, {})), *([z3.Implies(saved[k - 1], saved[k])] if k else []))
        for name, bad in breaks.items():
            if name in found or not k:
                continue
            choice, names = chosen[-1]
            run = _first(solver, chosen, z3.Or(*[z3.And(choice == j, bad(k - 1, n)) for j, n in enumerate(names)]))
            if run is not None:
                found[name] = (run[0], None)
        for name, trigger in stuck.items():
            if name in found or not lassoing:
                continue
            closes = z3.And(saved[k - 1], same(loop, state, {}), *[seen[label] for label in guards]) if k else False
            stutters = z3.And(trigger(state), *[z3.Not(guard) for guard in guards.values()])
            inside = [z3.Implies(saved[i], trigger(states[i])) for i in range(k + 1)]
            lasso = _first(solver, chosen, z3.And(*inside, z3.Or(closes, stutters)), extra=saved[:k] + [stutters])
            if lasso is not None:
                labels, marks = lasso
                found[name] = (labels, k if marks[-1] else marks.index(True))
        lassoing = lassos is None or k < lassos  # a longer lasso is still to be looked for
        searching = [n for n in breaks if n not in found] + [n for n in stuck if n not in found and lassoing]
        if not searching or k + 1 == len(states):
            break
        chosen.append(_functional_step(solver, k, actions, state, states[k + 1]))
        choice, labels = chosen[-1]
        for label, guard in guards.items() if lassoing else ():
            before = z3.And(z3.Not(start), seen[label]) if label in seen else z3.BoolVal(False)
            now = z3.Bool(f"seen@{k + 1}:{label}")  # since the loop started: taken, or disabled somewhere
            solver.add(now == z3.And(saved[k], z3.Or(before, choice == labels.index(label), z3.Not(guard))))
            seen[label] = now
    return {name: found.get(name) for name in (*breaks, *stuck)}


def bounded_verdict(found: dict, liveness: tuple, k: int, lassos: int | None = None) -> Verdict:
    """The verdict on ``shortest_counterexamples``' result: each shortest run, or none within ``k``
    (for the leads-to properties in ``liveness``: no lasso of up to ``lassos`` steps, default ``k``)."""
    broken = []
    for name, run in found.items():
        if run is not None:
            labels, loop = run
            if loop is None:
                broken.append(f"{name} in {steps_text(len(labels))}: {', '.join(labels)}")
            else:
                broken.append(f"{name} in {steps_text(len(labels))} (a lasso): {', '.join(labels[:loop])}, then "
                              f"forever {', '.join(labels[loop:]) or 'nothing (no fair action is enabled)'}")
    if broken:
        return Verdict(VIOLATED, "; ".join(broken))
    safety = [name for name in found if name not in liveness]
    no_lasso = f"; no lasso of up to {lassos or k} steps breaks {', '.join(liveness)}" if liveness else ""
    return Verdict(PROVED, f"no run of up to {k} steps breaks any of: {', '.join(safety)}{no_lasso}")


def _first(solver: z3.Solver, chosen: list, claim, extra=()):
    """If ``claim`` can hold after the steps ``chosen`` so far: their labels, and the values of
    ``extra`` (Booleans), else None."""
    solver.push()
    solver.add(claim)
    try:
        if solver.check() != z3.sat:
            return None
        m = solver.model()
        return _labels(m, chosen), [z3.is_true(m.eval(x, model_completion=True)) for x in extra]
    finally:
        solver.pop()


class StateVars:
    """One state of a step-for-step encoding, as named Z3 constants."""

    def __init__(self, ints: list, bools: list, tag: str):
        self.vars = {**{k: z3.Int(f"{k}{tag}") for k in ints}, **{k: z3.Bool(f"{k}{tag}") for k in bools}}

    def __getitem__(self, name):
        return self.vars[name]

    def select(self, fmt: str, index, choices, default=0):
        """``self[fmt.format(i)]`` for the ``i`` of ``choices`` equal to ``index`` (a symbolic index
        into an array of variables), ``default`` for none."""
        if isinstance(index, int):
            return self[fmt.format(index)] if index in choices else default
        out = default
        for i in reversed(choices):
            out = z3.If(index == i, self[fmt.format(i)], out)
        return out


class Pinned(tuple):
    """``(name, value)``: a variable of a concrete state fixed to a Python value (``Pins``)."""


class _Pin:
    __slots__ = ("name",)
    __hash__ = None

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, value):
        return Pinned((self.name, value))


class Pins:
    """Stands for a state's variables in ``StepEncoding.concrete``: ``pins[name] == value`` is a ``Pinned``, not a Z3
    equation, and ``concrete`` then returns the state's values (name -> value) without building a Z3 term (the
    agreement check reads every reachable state this way: building the terms took most of its time)."""

    def __init__(self):
        self.pins: dict = {}

    def __getitem__(self, name: str) -> _Pin:
        pin = self.pins.get(name)
        if pin is None:
            pin = self.pins[name] = _Pin(name)
        return pin


def same(v: StateVars, w: StateVars, changes: dict) -> z3.BoolRef:
    """``w`` is ``v`` with ``changes`` (name -> new value) made."""
    return z3.And(*[w[k] == changes.get(k, v[k]) for k in v.vars])


def sat(*facts) -> bool:
    solver = z3.Solver()
    solver.add(*facts)
    return solver.check() == z3.sat


def steps_text(n: int) -> str:
    return f"{n} step" + ("s" if n != 1 else "")


class StepEncoding:
    """A model encoded step for step: each action a (guard, changes) pair over one state's
    variables. A subclass gives ``vars(tag)``, ``init(v)``, ``actions(v)``, ``breaks(prop, v,
    label, w)``, ``stuck(prop, v)``, ``concrete(v, s)``, ``label(a)``, and the names of its
    ``properties`` (safety), ``liveness`` (leads-to) and ``fair`` actions; this class gives the
    transition formulas, the bounded checks and their verdict, and the agreement check."""

    properties: tuple = ()
    liveness: tuple = ()
    fair: tuple = ()
    invariants: tuple = ()  # the state invariants that can fail, each stated by ``invariant(prop, v)``
    model: str = ""  # the name of the model encoded

    @classmethod
    def fixes_of(cls, variant: str) -> frozenset:
        """The fixes the model's variant applies, as the kernel computes them (never re-typed here)."""
        return fixes_of(cls.model, variant)

    @classmethod
    def at(cls, variant: str, preset: str):
        """The encoding of the model's variant at a bound set."""
        from pulsar_verify import registry
        return cls(registry.build(cls.model, variant, preset=preset).config)

    @classmethod
    def disagreements_of(cls, model, pairs, transitions_of=None) -> list[str]:
        """``disagreements`` of the encoding of the model's own configuration (the agreement tests'
        entry point)."""
        return cls(model.config).disagreements(model, pairs, transitions_of)

    @staticmethod
    def conjunction(facts: list):
        """What ``concrete`` returns for its ``facts``: their ``And``; for ``Pins``, the values they fix."""
        if facts and type(facts[0]) is Pinned:  # all of them are (a Z3 term among them: dict() raises)
            return dict(facts)
        return z3.And(*facts)

    def transitions(self, v, w) -> dict:
        """Action label -> formula from ``v`` to ``w``."""
        return {label: z3.And(guard, same(v, w, changes)) for label, (guard, changes) in self.actions(v).items()}

    def check(self, k: int, only=None, lassos: int | None = None) -> dict:
        """Each property's (or those in ``only``) shortest breaking run of up to ``k`` steps (for
        the leads-to properties a lasso, of up to ``lassos`` steps where given):
        ``shortest_counterexamples``. A run goes on through states that break an invariant, as the
        explorer expands them: each verdict speaks of every run within ``k`` steps."""
        states = [self.vars(f"@{i}") for i in range(k + 1)]
        solver = z3.Solver()
        solver.add(self.init(states[0]))
        breaks = {p: lambda i, label, p=p: self.breaks(p, states[i], label, states[i + 1])
                  for p in self.properties if only is None or p in only}
        stuck = {p: lambda v, p=p: self.stuck(p, v) for p in self.liveness if only is None or p in only}
        return shortest_counterexamples(solver, states, self.vars("@loop"), lambda i: self.actions(states[i]), same,
                                        breaks, stuck, self.fair, lassos)

    def run_of(self, k: int, prop: str, labels: list | None = None) -> list | None:
        """The labels of a run of exactly ``k`` steps (those ``labels``, where given) reaching a state
        that breaks the invariant ``prop``, or None: one satisfiability query, which finds a run of a
        given length far faster than ``check`` shows that none is shorter."""
        states = [self.vars(f"@{i}") for i in range(k + 1)]
        solver = z3.Solver()
        solver.add(self.init(states[0]))
        chosen = [_functional_step(solver, i, self.actions(states[i]), states[i], states[i + 1]) for i in range(k)]
        for (choice, names), label in zip(chosen, labels or ()):
            solver.add(choice == names.index(label) if label in names else z3.BoolVal(False))
        solver.add(z3.Not(self.invariant(prop, states[k])))
        return _labels(solver.model(), chosen) if solver.check() == z3.sat else None

    def verdict(self, k: int, lassos: int | None = None) -> Verdict:
        return bounded_verdict(self.check(k, lassos=lassos), self.liveness, k, lassos)

    def disagreements(self, model, pairs, transitions_of=None) -> list[str]:
        """How the encoding disagrees with Python transitions ``(s, a, t)``: the formula of ``a``
        must admit ``t`` from ``s`` and nothing else; no formula of an action the Python model does
        not take from ``s`` may admit a step; each property's ``breaks`` must hold exactly when the
        Python property fails; each leads-to's ``stuck`` must be its Python trigger."""
        v, w = self.vars(""), self.vars("'")
        steps = (transitions_of or self.transitions)(v, w)
        props = {p.id: p for p in model.props}
        out = []
        for s in {s for s, _, _ in pairs}:
            taken = {self.label(a) for a, _ in model.successors(s)}
            pre = self.concrete(v, s)
            out += [f"{s}: {label} is enabled in the formulas only" for label in sorted(set(steps) - taken)
                    if sat(pre, steps[label])]
            out += [f"{s}: the trigger of {name} differs" for name in self.liveness
                    if sat(pre, self.stuck(name, v)) != bool(props[name].trigger(model, s))]
        for s, a, t in pairs:
            label = self.label(a)
            if label not in steps:
                out.append(f"{a}: the encoding has no formula for {label}")
                continue
            pre, post = self.concrete(v, s), self.concrete(w, t)
            out += [f"{a}: {problem}" for problem in agreement(pre, steps[label], post)]
            for name in self.properties:
                p = props[name]
                fails = not (p.check(model, t) if p.kind == "invariant" else p.check(model, s, a, t))
                if sat(pre, post, self.breaks(name, v, label, w)) != fails:
                    out.append(f"{a}: {name} {'fails' if fails else 'holds'} in Python, not in the formula")
        return out


def distinct_changes(pairs, projection: Callable):
    """The transitions ``(s, a, t)`` that change an abstraction's variables (``projection`` of a state), each
    distinct change once, as ``(s, a, t, (before, after))``: what a simulation check decides (a stutter of the
    abstraction needs no step, and a change already decided needs no second query)."""
    seen = set()
    for s, a, t in pairs:
        change = (projection(s), projection(t))
        if change[0] != change[1] and change not in seen:
            seen.add(change)
            yield s, a, t, change


def universe(m: z3.ModelRef, sort, prefix: str, first: int = 1) -> tuple[list, dict]:
    """The elements of an uninterpreted ``sort`` in a counterexample, and the names a reader sees them by:
    ``prefix`` numbered from ``first`` (Z3's own names, ``Txn!val!3``, say nothing)."""
    elements = m.get_universe(sort) or []
    return elements, {str(x): f"{prefix}{i + first}" for i, x in enumerate(elements)}


def members(sort, elements) -> z3.ArrayRef:
    """The set of ``elements`` (Z3 constants of ``sort``), as an array to booleans."""
    arr = z3.K(sort, z3.BoolVal(False))
    for x in elements:
        arr = z3.Store(arr, x, True)
    return arr


def one_of(facts: list, steps) -> z3.CheckSatResult:
    """``sat`` if one of the transition formulas ``steps`` holds together with ``facts`` (each decided on its own:
    Z3 decides each at once, their disjunction only slowly), else ``unknown`` if some answer was, else ``unsat``."""
    answer = z3.unsat
    for step in steps:
        got = _decide(*facts, step)[0]
        if got == z3.sat:
            return got
        if got == z3.unknown:
            answer = got
    return answer


def simulating(a, facts: list, steps: dict, own: tuple, last: dict) -> z3.CheckSatResult:
    """``one_of`` the transition formulas ``steps`` (label -> formula) for the model's transition ``a``: only the one
    of its own label when that label is in ``own`` (the steps a claim is about), else each in turn, the one that
    simulated ``a``'s label last first (``last``, updated: most changes of a label are one step's)."""
    names = [a.name] if a.name in own else sorted(steps, key=lambda n: n != last.get(a.name))
    answer = z3.unsat
    for name in names:
        answer = one_of(facts, [steps[name]])
        if answer == z3.sat:
            last[a.name] = name
            break
    return answer


def simulated(pairs, view, facts_of, steps: dict, own: tuple, told) -> list[str]:
    """The simulation check over the model's transitions ``pairs`` (state, action, state; a state may be paired with
    the txn viewed): each whose ``view`` changes is one of the ``steps`` (``simulating``), given ``facts_of(s, t,
    before, after)`` (the two views as constraints on the encoding's variables); one problem per (action, change) that
    is not, saying what the encoding does not take: ``told(s, before, after)``."""
    seen, last, out = set(), {}, []
    for s, a, t in pairs:
        change = (view(s), view(t))
        if change[0] == change[1] or (a.name, change) in seen:
            continue
        seen.add((a.name, change))
        answer = simulating(a, facts_of(s, t, *change), steps, own, last)
        out += not_simulated(a, f"no step of the encoding takes {told(s, *change)}", answer)
    return out


def told_by(show: Callable) -> Callable:
    """``simulated``'s ``told`` for a view ``show`` renders: "<before> to <after>"."""
    return lambda s, before, after: f"{show(before)} to {show(after)}"


def not_simulated(a, what: str, answer) -> list[str]:
    """The problem a simulation check reports for the model's transition ``a`` when ``answer`` is not ``sat``."""
    if answer == z3.sat:
        return []
    return [f"{a}: {what}" + (" (Z3 answered unknown)" if answer == z3.unknown else "")]


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


def _decide(*facts, seeds=(0, 1, 2, 3), timeout_ms: int | None = None):
    """sat or unsat for ``facts``, with its model when sat. On a formula with array lambdas Z3 may
    answer unknown (incomplete quantifiers) under one random seed and decide under another; only
    an answer under every seed tried stays unknown."""
    for seed in seeds:
        solver = z3.Solver()
        solver.set("random_seed", seed)
        if timeout_ms is not None:
            solver.set("timeout", timeout_ms)
        solver.add(*facts)
        answer = solver.check()
        if answer != z3.unknown:
            return answer, solver.model() if answer == z3.sat else None
    return z3.unknown, None
