"""PIP-468, the fix ``leader-watches-layout``: the leader's assignment catches up with the layout. Once the lock is
held, its holder eventually holds the metadata's current layout and an assignment that is the round robin of that layout
over its coordinator's members, for any number of brokers, segments and consumers and any finite number of layout
changes and failovers (the controller's side of ``assignment-complete``: what a new leader computes and pushes).

A liveness claim, proved by a ranking argument (``obligations.ranked``) under the model's weak fairness (``SYSTEM``
in ``invariants/pip468.py``). Brokers are an uninterpreted sort. The encoding keeps the layout changes (CASes) and
failovers left, the leader lock and its holder, and per broker whether it believes it leads, whether it has loaded
the metadata's current version (``current``: the guard of the watch step ``layout_changed``), whether its assignment
is the round robin of the layout it loaded over its members (``fresh``), and whether one of its operations is past
its CAS, at the notify step (``notifying``). Segments and consumers are inside ``fresh``: each step says whether it
recomputes the assignment (a rebalance), keeps it, or may leave it stale. The steps, from ``models/pip468``:
``elect`` (loads the metadata; with the fix, rebalances on it), ``learn_deposed``, ``layout_changed`` (the fix's
watch: a reload and a rebalance), ``lose_session``, ``crash`` (the broker's memory lost), ``cas`` (the layout moves;
the broker reloads it, and the notify step of its operation is to come), ``cas_conflict`` (a reload; with the fix,
a leader rebalances on it), ``notify`` (a rebalance), a request (with ``op-intent``, a reload on a stale version),
``connect`` (a new member joins the lock holder's coordinator: a rebalance) and ``grace_expire`` (a member leaves: a
rebalance). Every other step changes none of these. ``simulation`` checks on every reachable state that each model
step is one of these, the helpers below as themselves.

Strengthened invariant: the lock's holder believes it leads; a broker that believes it leads and holds the current
version has a fresh assignment or an operation at its notify step. The measure, lexicographic: the layout changes
left, the failovers left; then, while the lock is free, the brokers that believe they lead (pointwise; a held lock is
below any of these); else the holder's rank: stale version 2, current but not fresh 1. Proved, for a state that is
not the goal: no step raises the measure; with the lock free some broker can be elected or learn it was deposed;
with it held, the holder's watch fires on a stale version, or its notify step runs. The measure is well founded over
finitely many brokers. A notify step's action instance keeps its operation's index in its broker's list unless an
operation ahead of it ends, which happens finitely often (an operation starts only from a request, or with
``op-intent`` from a new leader's resume: both bounded).

As written the election restores the persisted assignment instead of rebalancing and no watch reloads a stale
leader: the counterexample to induction is the election after a CAS whose notify step was lost with its broker (the
finding ``new-segments-unassigned-after-leader-crash``). The claim is made for the fix alone: with
``subs-in-metadata`` as well (``all-fixes``), a createSubscription's write moves the version and the leader that
handles it reloads the metadata without a rebalance, so a leader left stale by another broker's CAS can become
current with an assignment computed on the old layout, and the watch's guard no longer holds; what rebalances it
then is ``op-intent``'s copy of the operation, whose CAS conflicts. This encoding keeps no operation's progress (the
``writable-coverage`` encoding does), so ``all-fixes`` is checked at the bounds only. At bound sets without failovers
the model has no watch step; a stale leader is unreachable there (only the single leader's own CAS moves the layout).
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.pip468 import SYSTEM
from pulsar_verify.models.pip468.assignment import round_robin
from pulsar_verify.models.pip468.state import CAS, NOTIFY

from .obligations import Obligation, Verdict, fixes_of, members, ranked, simulated, told_by, universe

Broker = z3.DeclareSort("RebalanceBroker")
FIX = "leader-watches-layout"
SECTION = ("PIP-468 Failover 3-4: 'controller.initialize(), which reloads metadata and re-attempts election', 'the new "
           "leader restores in-memory state from the persisted metadata'; Layout Change Propagation 1-3: 'The "
           "controller reloads the metadata', 'recomputes assignments against the new active segments'")


class Vars:
    NAMES = ("changes", "failovers", "locked", "holder", "leader", "current", "fresh", "notifying")

    def __init__(self, tag: str):
        self.changes = z3.Int(f"rb_changes{tag}")  # layout changes (and metadata writes) left
        self.failovers = z3.Int(f"rb_failovers{tag}")  # session losses and crashes left
        self.locked = z3.Bool(f"rb_locked{tag}")
        self.holder = z3.Const(f"rb_holder{tag}", Broker)
        for name in ("leader", "current", "fresh", "notifying"):
            setattr(self, name, z3.Array(f"rb_{name}{tag}", Broker, z3.BoolSort()))

    def keep(self, w, *changed) -> list:
        return [getattr(w, n) == getattr(self, n) for n in self.NAMES if n not in changed]


def steps(v: Vars, w: Vars, fixes, k) -> dict:
    """Each step from ``v`` to ``w`` by the broker ``k``. The labels are the model's."""
    fixed = FIX in fixes

    def only(name, value):  # ``w``'s array ``name`` is ``v``'s with ``k`` at ``value``
        return getattr(w, name) == z3.Store(getattr(v, name), k, value)

    def reload():  # ``k`` loads the current version; with the fix a leader rebalances on it
        return [only("current", True), only("fresh", z3.Or(w.fresh[k], z3.And(fixed, v.leader[k]))),
                *v.keep(w, "current", "fresh")]
    moved = [v.changes > 0, w.changes == v.changes - 1,
             w.current == z3.Store(z3.K(Broker, z3.BoolVal(False)), k, True)]  # every other broker now stale
    request = z3.And(v.leader[k], z3.Or(z3.And(*v.keep(w)), z3.And("op-intent" in fixes, *reload())))
    # with subs-in-metadata createSubscription writes the metadata: the version moves, the layout does not
    written = z3.And(*moved, only("fresh", z3.If(v.current[k], v.fresh[k], w.fresh[k])),
                     *v.keep(w, "changes", "current", "fresh"))
    joined = z3.And(w.fresh == z3.Store(v.fresh, v.holder, True), *v.keep(w, "fresh"))  # a new member: a rebalance
    return {
        "elect": z3.And(z3.Not(v.locked), z3.Not(v.leader[k]), w.locked, w.holder == k, only("leader", True),
                        only("current", True), only("fresh", z3.Or(fixed, w.fresh[k])),
                        *v.keep(w, "locked", "holder", "leader", "current", "fresh")),
        "learn_deposed": z3.And(v.leader[k], z3.Not(z3.And(v.locked, v.holder == k)), only("leader", False),
                                *v.keep(w, "leader")),
        "layout_changed": z3.And(fixed, v.leader[k], z3.Not(v.current[k]), only("current", True),
                                 only("fresh", True), *v.keep(w, "current", "fresh")),
        "lose_session": z3.And(v.locked, v.failovers > 0, z3.Not(w.locked), w.failovers == v.failovers - 1,
                               *v.keep(w, "locked", "failovers")),
        "crash": z3.And(v.failovers > 0, w.failovers == v.failovers - 1, w.locked == z3.And(v.locked, v.holder != k),
                        only("leader", False), only("notifying", False), only("current", w.current[k]),
                        only("fresh", w.fresh[k]),
                        *v.keep(w, "failovers", "locked", "leader", "notifying", "current", "fresh")),
        CAS: z3.And(*moved, only("fresh", w.fresh[k]), only("notifying", True),
                    *v.keep(w, "changes", "current", "fresh", "notifying")),
        "cas_conflict": z3.And(*reload()),
        NOTIFY: z3.And(v.notifying[k], only("fresh", True), only("notifying", w.notifying[k]),
                       *v.keep(w, "fresh", "notifying")),  # another operation may still be at its notify step
        "request_split": request,
        "request_merge": request,
        "create_subscription": z3.And(v.leader[k], written if "subs-in-metadata" in fixes else z3.And(*v.keep(w))),
        "connect": z3.And(v.locked, v.leader[v.holder], z3.Or(z3.And(*v.keep(w)), joined)),
        "grace_expire": z3.And(v.leader[k], only("fresh", True), *v.keep(w, "fresh")),
    }


def settled(v: Vars) -> z3.BoolRef:
    """The goal: the lock's holder holds the current version and the round robin of its layout."""
    return z3.And(v.locked, v.current[v.holder], v.fresh[v.holder])


def invariant(v: Vars) -> z3.BoolRef:
    """See the module's docstring."""
    b = z3.Const("b", Broker)
    return z3.And(v.changes >= 0, v.failovers >= 0, z3.Implies(v.locked, v.leader[v.holder]),
                  z3.ForAll([b], z3.Implies(z3.And(v.leader[b], v.current[b]),
                                            z3.Or(v.fresh[b], v.notifying[b]))))


def _rank(v: Vars, b) -> z3.ArithRef:
    return z3.If(z3.Not(v.current[b]), 2, z3.If(v.fresh[b], 0, 1))


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    """``w``'s measure is at most ``v``'s (below it, if ``strictly``): see the module's docstring."""
    b = z3.Const("b", Broker)
    leaders = z3.ForAll([b], z3.Implies(w.leader[b], v.leader[b]))
    fewer = z3.Exists([b], z3.And(v.leader[b], z3.Not(w.leader[b])))
    r, r2 = _rank(v, v.holder), _rank(w, v.holder)
    held = z3.And(w.locked, w.holder == v.holder, r2 < r if strictly else r2 <= r)
    same = z3.If(v.locked, held, z3.Or(w.locked, z3.And(leaders, *([fewer] if strictly else []))))
    budgets = z3.Or(w.changes < v.changes, z3.And(w.changes == v.changes, w.failovers < v.failovers))
    return z3.Or(budgets, z3.And(w.changes == v.changes, w.failovers == v.failovers, same))


def helpers(v: Vars, fixes, k) -> dict:
    """The fair step to take, by label: when it is the one (the broker ``k``), and its guard."""
    holds = z3.And(v.locked, v.holder == k)
    return {
        "elect": (z3.And(z3.Not(v.locked), z3.Not(v.leader[k])), z3.And(z3.Not(v.locked), z3.Not(v.leader[k]))),
        "learn_deposed": (z3.And(z3.Not(v.locked), v.leader[k]), z3.And(v.leader[k], z3.Not(holds))),
        "layout_changed": (z3.And(holds, z3.Not(v.current[k])),
                           z3.And(FIX in fixes, v.leader[k], z3.Not(v.current[k]))),
        NOTIFY: (z3.And(holds, v.current[k], z3.Not(v.fresh[k])), v.notifying[k]),
    }


def rebalanced(fixes, invariant_of=invariant, helpers_of=helpers) -> Verdict:
    """The ranking argument from no lock held (``obligations.ranked`` proves the invariant inductive first)."""
    v, w = Vars(""), Vars("'")
    k, b = z3.Const("broker", Broker), z3.Const("b", Broker)
    none = z3.K(Broker, z3.BoolVal(False))
    init = z3.And(v.changes >= 0, v.failovers >= 0, z3.Not(v.locked), v.leader == none, v.notifying == none)
    covers = z3.Exists([b], z3.Or(*[when for when, _ in helpers_of(v, fixes, b).values()]))
    return ranked(init, invariant_of(v), invariant_of(w), z3.Not(settled(v)), z3.Not(settled(w)), settled(w),
                  steps(v, w, fixes, k), helpers_of(v, fixes, k), covers, no_worse(v, w), no_worse(v, w, strictly=True),
                  SYSTEM, before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The lock, each broker, the budgets left."""
    e = lambda t: z3.is_true(m.eval(t, model_completion=True))  # noqa: E731
    brokers, names = universe(m, Broker, "broker ", first=0)
    lock = f"lock held by {names.get(str(m.eval(v.holder, model_completion=True)), '?')}" if e(v.locked) \
        else "lock free"
    return _text(lock, [(names[str(b)], e(v.leader[b]), e(v.current[b]), e(v.fresh[b]), e(v.notifying[b]))
                        for b in brokers], m.eval(v.changes, model_completion=True),
                 m.eval(v.failovers, model_completion=True))


def _text(lock: str, brokers: list, changes, failovers) -> str:
    def broker(name, leader, current, fresh, notifying):
        held = ["believes it leads" if leader else "follower", "current version" if current else "stale version",
                "assignment fresh" if fresh else "assignment stale"]
        return f"{name}: {', '.join(held + (['an operation at notify'] if notifying else []))}"
    return "{" + "; ".join([lock, *(broker(*x) for x in brokers), f"{changes} layout changes left",
                            f"{failovers} failovers left"]) + "}"


def _view(model, s) -> tuple:
    """The model state's values of the encoding's variables."""
    cfg = model.config
    changes = cfg.splits + cfg.merges + (cfg.new_subs if "subs-in-metadata" in model.fixes else 0) - s.version
    return (changes, cfg.failovers - s.failovers, s.lock,
            tuple((c.leader, c.version == s.version, c.layout is None or c.assigned == round_robin(c.layout, c.members),
                   any(op.step == NOTIFY for op in c.ops)) for c in s.ctrls))


def _show(view) -> str:
    changes, failovers, lock, brokers = view
    return _text("lock free" if lock is None else f"lock held by broker {lock}",
                 [(f"broker {b}", *x) for b, x in enumerate(brokers)], changes, failovers)


def _concrete(v: Vars, view, brokers: list) -> list:
    changes, failovers, lock, rows = view
    out = [v.changes == changes, v.failovers == failovers, v.locked == (lock is not None)]
    out += [v.holder == brokers[lock]] if lock is not None else []
    for i, name in enumerate(("leader", "current", "fresh", "notifying")):
        out.append(getattr(v, name) == members(Broker, [brokers[b] for b, row in enumerate(rows) if row[i]]))
    return out


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps; a fair helper
    as itself (the label the ranking argument takes as fair must be the model's)."""
    v, w = Vars(""), Vars("'")
    k = z3.Const("broker", Broker)
    candidates = steps_of(v, w, model.fixes, k)

    def facts(s, t, before, after):
        brokers = [z3.Const(f"B{b}", Broker) for b in range(len(s.ctrls))]
        return [*([z3.Distinct(*brokers)] if len(brokers) > 1 else []), z3.Or(*[k == b for b in brokers]),
                *_concrete(v, before, brokers), *_concrete(w, after, brokers)]
    return simulated(pairs, lambda s: _view(model, s), facts, candidates,
                     tuple(set(helpers(v, model.fixes, k)) & set(candidates)), told_by(_show))


OBLIGATIONS = [
    Obligation("pip-468", "leader-assignment-current-ranked", "Once the leader lock is held, its holder comes to hold "
               "the current layout and the round robin of it over its members, for any number of brokers, segments "
               "and consumers and any finite number of layout changes and failovers: the new leader rebalances on "
               "the layout it loads and its watch reloads a stale one (ranked by the layout changes and failovers "
               "left, then the brokers that believe they lead while the lock is free, else the holder's staleness; "
               "strengthened: a leader on the current version has a fresh assignment or a notify step to come)",
               SECTION, lambda: rebalanced(fixes_of("pip-468", FIX)), (FIX,)),
]
