"""PIP-477 cluster registry (I12: exactly one ACTIVE cluster), for any number of clusters.

Clusters are an uninterpreted sort (any number of them; ``old`` and ``new`` are two distinct
ones), statuses an array over it, and the orchestrator's phase and status-CAS count are kept,
which is everything the registry's writers read. Each action of ``models/pip477`` is a
transition formula over these variables; an action that writes none of them is a stutter. The
formulas over-approximate where the model decides by state kept out of this encoding (whether
a watch or a restart starts the orchestrator), which keeps a proof sound.

I12 is proved inductive for ``single-cas-status-flip`` (strengthened: until the flip, the old
cluster is the active one; the new one is active exactly when the phase is done). For the PIP
as written, "two sequential CAS" (Phase 6.2), it is not: the counterexample to induction is two
concrete states and the CAS between them, and a bounded search finds the reachable violation
(the explorer's finding ``status-flip-leaves-no-active-cluster``, whose 13 steps include the
data-plane steps this encoding leaves out).
"""
from __future__ import annotations

import z3

from .obligations import (PROVED, VIOLATED, Obligation, Verdict, agreement, inductive as induction, shortest_run,
                          with_fix)

Cluster = z3.DeclareSort("Cluster")
Status, (ABSENT, STANDBY, ACTIVE, DEPRECATED) = z3.EnumSort("Status", ("ABSENT", "STANDBY", "ACTIVE", "DEPRECATED"))
Phase, PHASES = z3.EnumSort("Phase", ("none", "build", "cleanup", "rollback", "done", "rolled_back"))
NONE, BUILD, CLEANUP, ROLLBACK, DONE, ROLLED_BACK = PHASES
OLD, NEW = z3.Consts("old new", Cluster)
STATUS = {"STANDBY": STANDBY, "ACTIVE": ACTIVE, "DEPRECATED": DEPRECATED}
PHASE = {"build": BUILD, "cleanup": CLEANUP, "rollback": ROLLBACK, "done": DONE, "rolled-back": ROLLED_BACK}
SECTION = "PIP-477 I12; Phase 1; Phase 6.2 'two sequential CAS'; Wiring on Broker Start (tier 3)"


class Vars:
    """One state: statuses, whether the switch directive exists, phase, status CASes done."""

    def __init__(self, tag: str):
        self.status = z3.Array(f"status{tag}", Cluster, Status)
        self.directive = z3.Bool(f"directive{tag}")
        self.phase = z3.Const(f"phase{tag}", Phase)
        self.flips = z3.Int(f"flips{tag}")


def exactly_one_active(v: Vars):
    c, d = z3.Consts("c d", Cluster)
    return z3.Exists([c], z3.And(v.status[c] == ACTIVE,
                                 z3.ForAll([d], z3.Implies(v.status[d] == ACTIVE, d == c))))


def none_active(v: Vars):
    c = z3.Const("c", Cluster)
    return z3.ForAll([c], v.status[c] != ACTIVE)


def init(v: Vars):
    c = z3.Const("c", Cluster)
    return z3.And(v.status[OLD] == ACTIVE, z3.ForAll([c], z3.Implies(c != OLD, v.status[c] == ABSENT)),
                  z3.Not(v.directive), v.phase == NONE, v.flips == 0)


def _same(v: Vars, w: Vars, status=True, phase=True, flips=True):
    return z3.And(w.directive == v.directive, *([w.status == v.status] if status else []),
                  *([w.phase == v.phase] if phase else []), *([w.flips == v.flips] if flips else []))


def _maybe_start(v: Vars, w: Vars):
    """A watch or restart on the origin broker, once the directive exists, creates the
    orchestrator's progress (phase build)."""
    return z3.And(w.directive == v.directive,
                  z3.Or(w.phase == v.phase, z3.And(v.directive, v.phase == NONE, w.phase == BUILD)))


def transitions(v: Vars, w: Vars, single_cas: bool) -> dict:
    """Action label -> transition formula. Labels not listed write none of these variables."""
    t = {
        "register": z3.And(v.status[NEW] == ABSENT, w.status == z3.Store(v.status, NEW, STANDBY),
                           _same(v, w, status=False)),
        "switch": z3.And(z3.Not(v.directive), v.status[NEW] == STANDBY, w.directive, w.status == v.status,
                         w.phase == v.phase, w.flips == v.flips),
        "watch": z3.And(v.directive, w.status == v.status, w.flips == v.flips, _maybe_start(v, w)),
        "restart": z3.And(w.status == z3.If(none_active(v), z3.Store(v.status, OLD, ACTIVE), v.status),
                          w.flips == v.flips, _maybe_start(v, w)),
        "start_cleanup": z3.And(v.phase == BUILD, w.phase == CLEANUP, _same(v, w, phase=False)),
        "start_rollback": z3.And(v.phase == BUILD, w.phase == ROLLBACK, _same(v, w, phase=False)),
        "rollback_done": z3.And(v.phase == ROLLBACK, w.phase == ROLLED_BACK, _same(v, w, phase=False)),
    }
    if single_cas:
        t["cleanup_status"] = z3.And(v.phase == CLEANUP, v.flips == 0, w.flips == 2, w.phase == DONE,
                                     w.directive == v.directive,
                                     w.status == z3.Store(z3.Store(v.status, OLD, DEPRECATED), NEW, ACTIVE))
    else:
        t["cleanup_status_old"] = z3.And(v.phase == CLEANUP, v.flips == 0, w.flips == 1, w.phase == v.phase,
                                         w.directive == v.directive,
                                         w.status == z3.Store(v.status, OLD, DEPRECATED))
        t["cleanup_status_new"] = z3.And(v.phase == CLEANUP, v.flips == 1, w.flips == 2, w.phase == DONE,
                                         w.directive == v.directive,
                                         w.status == z3.Store(v.status, NEW, ACTIVE))
    return t


def invariant(v: Vars, single_cas: bool):
    i12 = exactly_one_active(v)
    if not single_cas:
        return i12
    return z3.And(i12, (v.status[NEW] == ACTIVE) == (v.phase == DONE),
                  z3.Implies(v.phase != DONE, v.status[OLD] == ACTIVE), z3.Or(v.flips == 0, v.phase == DONE))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """old's and new's statuses, how many other registered clusters have each status, phase and
    CAS count."""
    old, new = m.eval(OLD, model_completion=True), m.eval(NEW, model_completion=True)
    others: dict = {}
    for c in m.get_universe(Cluster) or []:
        if not (c.eq(old) or c.eq(new)):
            st = str(m.eval(v.status[c], model_completion=True))
            if st != "ABSENT":  # unregistered: nothing to show
                others[st] = others.get(st, 0) + 1
    rest = "".join(f", {n} other cluster{'s' if n > 1 else ''} {st}" for st, n in sorted(others.items()))
    status = v.status
    return (f"{{old={m.eval(status[OLD], model_completion=True)}, new={m.eval(status[NEW], model_completion=True)}"
            f"{rest}; "
            f"directive={m.eval(v.directive, model_completion=True)}; phase={m.eval(v.phase, model_completion=True)}; status CASes={m.eval(v.flips, model_completion=True)}}}")


def concrete(v: Vars, state, phase=True):
    """The formula fixing ``v`` to a Python model state (models/pip477/state.py): its two
    clusters' statuses (every other cluster absent), directive, phase and status CASes."""
    c = z3.Const("c", Cluster)
    p = state.progress
    return z3.And(OLD != NEW, *[v.status[k] == STATUS[state.registry[name]] if name in state.registry.keys()
                                else v.status[k] == ABSENT for k, name in ((OLD, "old"), (NEW, "new"))],
                  z3.ForAll([c], z3.Implies(z3.And(c != OLD, c != NEW), v.status[c] == ABSENT)),
                  v.directive == (state.directive is not None),
                  *([v.phase == (NONE if p is None else PHASE[p.phase])] if phase else []),
                  v.flips == (0 if p is None else p.status_flips))


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """For Python transitions ``(s, a, t)``: the formula of ``a`` must admit ``t`` from ``s`` (an
    unlisted action must leave every encoded variable as it was), and admit nothing else
    (``watch`` and ``restart`` may also start the orchestrator, by state not encoded)."""
    single = "single-cas-status-flip" in model.fixes
    v, w = Vars(""), Vars("'")
    steps = transitions_of(v, w, single)
    out = []
    for s, a, t in pairs:
        allowed = None
        if a.name in ("watch", "restart"):
            allowed = z3.And(concrete(w, t, phase=False), z3.Or(w.phase == v.phase, w.phase == BUILD))
        out += [f"{a} from {s.registry}, {s.progress}: {problem}" for problem in agreement(
            concrete(v, s), steps.get(a.name, _same(v, w)), concrete(w, t), allowed, lambda m: describe(m, w))]
    return out


def inductive(single_cas: bool) -> Verdict:
    """Init implies Inv, and Inv and any one action imply Inv'. A failure is shown as the two
    states and the action (a counterexample to induction)."""
    v, w = Vars(""), Vars("'")
    return induction(z3.And(OLD != NEW, init(v)), z3.And(OLD != NEW, invariant(v, single_cas)),
                     invariant(w, single_cas), transitions(v, w, single_cas),
                     lambda m: describe(m, v), lambda m: describe(m, w))


def bounded(single_cas: bool, k: int = 6) -> Verdict:
    """Bounded model checking of I12 for up to ``k`` registry steps (stutters elided): the
    shortest violating run, or proved within ``k``."""
    states = [Vars(f"@{i}") for i in range(k + 1)]
    solver = z3.Solver()
    solver.add(OLD != NEW, init(states[0]))
    found = shortest_run(solver, states, lambda i: transitions(states[i], states[i + 1], single_cas),
                         lambda v: z3.Not(exactly_one_active(v)))
    if found is None:
        return Verdict(PROVED, f"no violation within {k} registry steps")
    m, labels = found
    run = "".join(f" --{label}--> {describe(m, states[j + 1])}" for j, label in enumerate(labels))
    return Verdict(VIOLATED, f"reachable in {len(labels)} registry steps: {describe(m, states[0])}{run}")


OBLIGATIONS = [
    Obligation("pip-477", "I12-inductive", "I12 (exactly one ACTIVE cluster) is inductive, for any number of clusters",
               SECTION, lambda: inductive(False), ("as-written",), proves=("I12",)),
    Obligation("pip-477", "I12-bounded", "No run of up to 6 registry steps reaches a state breaking I12",
               SECTION, lambda: bounded(False), ("as-written",)),
    Obligation("pip-477", "I12-inductive", "I12, strengthened, is inductive, for any number of clusters",
               SECTION, lambda: inductive(True), with_fix("pip-477", "single-cas-status-flip"), proves=("I12",)),
]
