"""PIP-468 ``writable-coverage``: once a split or merge has terminated a parent that is still in the layout, the
layout's CAS follows, for any number of segments, brokers and operations and any finite number of failovers and
createSubscription calls (the fix ``op-intent``, alone and with every fix).

A liveness claim, proved by a ranking argument (``obligations.ranked``) under the model's weak fairness (``SYSTEM``
in ``invariants/pip468.py``). Segments and brokers are uninterpreted sorts. The encoding keeps, from the metadata
store: the layout's active segments, the segments it has ever held (``used``), its version, the leader lock and its
holder, and the persisted intent (whether there is one, and its parents); the segment topics that are terminated;
the failovers and createSubscription calls left; and per broker whether it believes it leads and whether it runs a
copy of the intent's operation, with that copy's step, the calls of that step still to make, and the version it
was based on. Its steps, from ``models/pip468``: ``elect`` (with the fix, resuming the intent unless the broker
still runs it), ``learn_deposed``, ``lose_session``, ``crash`` (the broker's memory lost), ``create_subscription``
(with ``subs-in-metadata``, a write of the metadata: its version moves), a request (with the fix, written as the
intent under the leader lock, on the current metadata), the copy's ``discover``, ``create``, ``terminate`` (of one
of the intent's parents) and ``cas`` (the parents leave the layout, children never in it before enter it, the
intent is cleared), its ``cas_conflict`` (restarted on the current version: its parents are still active); and
any operation of an earlier intent terminating a parent that has left the layout. Every other step changes none of
these. ``simulation`` checks on every reachable state that each model step is one of these, the helpers below as
themselves.

Strengthened invariant: an active segment whose topic is terminated is a parent of the intent, and the intent's
parents are active; no copy is based on a later version than the metadata's (an operation of an earlier intent is
based on an older version than the CAS that cleared it, so it never CASes); the lock's holder believes it leads and
runs the intent.

The measure, lexicographic: the failovers left, the createSubscription calls left; then, while no broker runs a
copy, the brokers that believe they lead (pointwise; a copy anywhere is below any of these); else per broker its
copy, pointwise: none above any copy, then a copy based on an older version (its CAS will conflict) above one based
on the current, then its step, then its calls left. Proved, for a layout with a terminated active segment (the
trigger): no step raises the measure; with no copy, the lock is free and some broker can be elected (resuming the
intent) or learn it was deposed; with a copy, its next step is enabled (a stale copy at the CAS its conflict), and
its CAS leaves no active segment terminated. The measure is well founded over finitely many brokers. An operation's
action instance keeps its index in its broker's list unless an operation of an earlier intent ahead of it
finishes, which happens finitely often: none is created without a CAS. As written nothing persists the operation: a
crash loses it, and no step leads back to the CAS (the finding ``terminated-parent-stranded-after-leader-crash``);
the encoding of the fix has no step for the model's unrecorded operations as written (a test). The first version of
this encoding missed ``create_subscription``'s write of the metadata with ``subs-in-metadata``: the simulation at
``merge-new-sub`` found it (every fix), since a conflict restarts the operation.
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.pip468 import SYSTEM
from pulsar_verify.models.pip468.state import CAS, CREATE, DISCOVER, TERMINATE

from .obligations import (Obligation, Verdict, all_of, fixes_of, members, ranked, simulated, told_by, universe,
                          with_fix)

Seg = z3.DeclareSort("IntentSeg")
Broker = z3.DeclareSort("IntentBroker")
Stage, STAGE_VALUES = z3.EnumSort("IntentStage", (DISCOVER, CREATE, TERMINATE, CAS))
STAGE = dict(zip((DISCOVER, CREATE, TERMINATE, CAS), STAGE_VALUES))
ORDER = {DISCOVER: 3, CREATE: 2, TERMINATE: 1, CAS: 0}  # a copy's steps still to go, by stage
FIX = "op-intent"
SECTION = ("PIP-468 Leader Election and Failover: 'the new leader ... resumes'; Split Protocol steps 1-4: the parent "
           "is terminated (step 3) before the layout's CAS (step 4)")


class Vars:
    NAMES = ("active", "used", "term", "intent", "parents", "version", "failovers", "subs", "locked", "holder",
             "leader", "runs", "stage", "left", "base")

    def __init__(self, tag: str):
        for name in ("active", "used", "term", "parents"):  # the layout's, ever in it, topic terminated, intent's
            setattr(self, name, z3.Array(f"oi_{name}{tag}", Seg, z3.BoolSort()))
        self.intent = z3.Bool(f"oi_intent{tag}")  # an intent is persisted
        self.version = z3.Int(f"oi_version{tag}")
        self.failovers = z3.Int(f"oi_failovers{tag}")  # failovers (session losses, crashes) left
        self.subs = z3.Int(f"oi_subs{tag}")  # createSubscription calls left
        self.locked = z3.Bool(f"oi_locked{tag}")
        self.holder = z3.Const(f"oi_holder{tag}", Broker)
        self.leader = z3.Array(f"oi_leader{tag}", Broker, z3.BoolSort())  # the broker believes it leads
        self.runs = z3.Array(f"oi_runs{tag}", Broker, z3.BoolSort())  # it runs a copy of the intent's operation
        self.stage = z3.Array(f"oi_stage{tag}", Broker, Stage)
        self.left = z3.Array(f"oi_left{tag}", Broker, z3.IntSort())  # calls of the stage still to make
        self.base = z3.Array(f"oi_base{tag}", Broker, z3.IntSort())

    def keep(self, w, *changed) -> list:
        return [getattr(w, n) == getattr(self, n) for n in self.NAMES if n not in changed]


def _copy(v: Vars, w: Vars, k, stage, base) -> list:
    """``w`` has a new copy at ``k``, at ``stage`` with some calls left, based on ``base``; no other copy changes."""
    return [w.runs == z3.Store(v.runs, k, True), w.stage == z3.Store(v.stage, k, stage), w.left[k] >= 1,
            w.left == z3.Store(v.left, k, w.left[k]), w.base == z3.Store(v.base, k, base)]


def steps(v: Vars, w: Vars, fixes, k, x) -> dict:
    """Each step from ``v`` to ``w``, by the broker ``k``, at the segment ``x``. The labels are the model's."""
    fixed = FIX in fixes
    y = z3.Const("y", Seg)
    unchanged = z3.And(*[getattr(w, n) == getattr(v, n) for n in ("runs", "stage", "left", "base")])
    resume = z3.If(z3.And(v.intent, z3.Not(v.runs[k])), z3.And(*_copy(v, w, k, STAGE[DISCOVER], v.version)),
                   unchanged)
    elect = z3.And(z3.Not(v.locked), z3.Not(v.leader[k]), w.locked, w.holder == k,
                   w.leader == z3.Store(v.leader, k, True), resume if fixed else unchanged,
                   *v.keep(w, "locked", "holder", "leader", "runs", "stage", "left", "base"))

    def advance(stage, following, *also):
        """The copy at ``k`` makes one call of ``stage``: the next stage once none is left."""
        done = z3.And(w.stage == z3.Store(v.stage, k, STAGE[following]), w.left[k] >= 1,
                      w.left == z3.Store(v.left, k, w.left[k]))
        more = z3.And(w.stage == v.stage, w.left == z3.Store(v.left, k, v.left[k] - 1))
        return z3.And(v.runs[k], v.stage[k] == STAGE[stage], z3.If(v.left[k] > 1, more, done), *also)
    terminated = w.term == z3.Store(v.term, x, True)
    request = (z3.And(v.locked, v.holder == k, v.leader[k], z3.Not(v.intent), w.intent,
                      z3.ForAll([y], z3.Implies(w.parents[y], v.active[y])), z3.Exists([y], w.parents[y]),
                      *_copy(v, w, k, STAGE[DISCOVER], v.version), *v.keep(w, "intent", "parents", "runs", "stage",
                                                                            "left", "base"))
               if fixed else z3.And(v.leader[k], *v.keep(w)))  # as written nothing the encoding keeps records it
    out = {
        "elect": elect,
        "learn_deposed": z3.And(v.leader[k], z3.Not(z3.And(v.locked, v.holder == k)),
                                w.leader == z3.Store(v.leader, k, False), *v.keep(w, "leader")),
        "lose_session": z3.And(v.locked, v.failovers > 0, z3.Not(w.locked), w.failovers == v.failovers - 1,
                               *v.keep(w, "locked", "failovers")),
        "crash": z3.And(v.failovers > 0, w.failovers == v.failovers - 1, w.leader == z3.Store(v.leader, k, False),
                        w.runs == z3.Store(v.runs, k, False), w.locked == z3.And(v.locked, v.holder != k),
                        *v.keep(w, "failovers", "leader", "runs", "locked")),
        "create_subscription": z3.And(v.leader[k], v.subs > 0, w.subs == v.subs - 1,
                                      w.version == v.version + ("subs-in-metadata" in fixes),
                                      *v.keep(w, "subs", "version")),
        "request_split": request,
        "request_merge": request,
        DISCOVER: z3.And(advance(DISCOVER, CREATE), *v.keep(w, "stage", "left")),
        CREATE: z3.And(advance(CREATE, TERMINATE), *v.keep(w, "stage", "left")),
        TERMINATE: z3.And(z3.Or(advance(TERMINATE, CAS, v.parents[x]),  # the copy, at one of the intent's parents
                                z3.And(v.used[x], z3.Not(v.active[x]), *v.keep(w, "term"))),  # an earlier intent's
                          terminated, *v.keep(w, "term", "stage", "left")),
        CAS: z3.And(v.runs[k], v.stage[k] == STAGE[CAS], v.base[k] == v.version, w.version == v.version + 1,
                    z3.ForAll([y], z3.And(
                        w.active[y] == z3.Or(z3.And(v.active[y], z3.Not(v.parents[y])),
                                             z3.And(w.active[y], z3.Not(v.used[y]), z3.Not(v.term[y]))),
                        w.used[y] == z3.Or(v.used[y], w.active[y]))),
                    z3.Not(w.intent), w.runs == z3.K(Broker, z3.BoolVal(False)),
                    *v.keep(w, "active", "used", "version", "intent", "runs")),
        "cas_conflict": z3.And(v.runs[k], v.stage[k] == STAGE[CAS], v.base[k] != v.version,
                               *_copy(v, w, k, STAGE[DISCOVER], v.version),
                               *v.keep(w, "runs", "stage", "left", "base")),  # the parents still active: restarted
    }
    return out


def _copies(v: Vars) -> z3.BoolRef:
    b = z3.Const("b", Broker)
    return z3.Exists([b], v.runs[b])


def stranded(v: Vars) -> z3.BoolRef:
    """The model's trigger ``stranded``: an active segment whose topic is terminated."""
    y = z3.Const("y", Seg)
    return z3.Exists([y], z3.And(v.active[y], v.term[y]))


def invariant(v: Vars) -> z3.BoolRef:
    """See the module's docstring."""
    y, b = z3.Const("y", Seg), z3.Const("b", Broker)
    return z3.And(
        v.failovers >= 0,
        z3.ForAll([y], z3.And(z3.Implies(z3.Or(v.active[y], v.term[y]), v.used[y]),
                              z3.Implies(z3.And(v.active[y], v.term[y]), z3.And(v.intent, v.parents[y])),
                              z3.Implies(z3.And(v.intent, v.parents[y]), v.active[y]))),
        z3.Implies(v.intent, z3.Exists([y], v.parents[y])),
        v.subs >= 0, z3.ForAll([b], z3.Implies(v.runs[b], z3.And(v.intent, v.base[b] <= v.version, v.left[b] >= 1))),
        z3.Implies(v.locked, z3.And(v.leader[v.holder], z3.Implies(v.intent, v.runs[v.holder]))))


def _rank(v: Vars, b) -> tuple:
    """A copy's rank: based on an older version (its CAS will conflict and restart it) above any copy based on the
    current one, then its stage, then its calls left (at least one: the ranks below a stage's are its calls)."""
    order = z3.If(v.stage[b] == STAGE[DISCOVER], ORDER[DISCOVER], z3.If(v.stage[b] == STAGE[CREATE], ORDER[CREATE],
                  z3.If(v.stage[b] == STAGE[TERMINATE], ORDER[TERMINATE], ORDER[CAS])))
    return z3.If(v.base[b] != v.version, 2, 1), order, v.left[b]


def _below(r2: tuple, r: tuple, strictly: bool) -> z3.BoolRef:
    """``r2`` below ``r`` lexicographically (or equal, unless ``strictly``)."""
    out = z3.BoolVal(not strictly)
    for x2, x in reversed(list(zip(r2, r))):
        out = z3.Or(x2 < x, z3.And(x2 == x, out))
    return out


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    """``w``'s measure is at most ``v``'s (below it, if ``strictly``): see the module's docstring."""
    b = z3.Const("b", Broker)
    r, r2 = _rank(v, b), _rank(w, b)
    kept = z3.ForAll([b], z3.Implies(v.runs[b], z3.And(w.runs[b], _below(r2, r, False))))
    gained = z3.Exists([b], z3.Or(z3.And(z3.Not(v.runs[b]), w.runs[b]), z3.And(v.runs[b], _below(r2, r, True))))
    leaders = z3.ForAll([b], z3.Implies(w.leader[b], v.leader[b]))
    fewer = z3.Exists([b], z3.And(v.leader[b], z3.Not(w.leader[b])))
    same = z3.If(_copies(v), z3.And(_copies(w), kept, *([gained] if strictly else [])),
                 z3.Or(_copies(w), z3.And(leaders, *([fewer] if strictly else []))))
    budgets = _below((w.failovers, w.subs), (v.failovers, v.subs), True)
    return z3.Or(budgets, z3.And(w.failovers == v.failovers, w.subs == v.subs, same))


def helpers(v: Vars, fixes, k, x) -> dict:
    """The fair step to take, by label: when it is the one (the broker ``k``, the segment ``x``), and its guard."""
    idle = z3.Not(_copies(v))
    at = lambda stage: z3.And(v.runs[k], v.stage[k] == STAGE[stage])  # noqa: E731
    return {
        "elect": (z3.And(idle, z3.Not(v.leader[k])), z3.And(z3.Not(v.locked), z3.Not(v.leader[k]))),
        "learn_deposed": (z3.And(idle, v.leader[k]), z3.And(v.leader[k], z3.Not(z3.And(v.locked, v.holder == k)))),
        DISCOVER: (at(DISCOVER), at(DISCOVER)),
        CREATE: (at(CREATE), at(CREATE)),
        TERMINATE: (z3.And(at(TERMINATE), v.parents[x]), z3.And(at(TERMINATE), v.parents[x])),
        CAS: (z3.And(at(CAS), v.base[k] == v.version), z3.And(at(CAS), v.base[k] == v.version)),
        "cas_conflict": (z3.And(at(CAS), v.base[k] != v.version), z3.And(at(CAS), v.base[k] != v.version)),
    }


def resumed(fixes, invariant_of=invariant, helpers_of=helpers) -> Verdict:
    """The ranking argument for a stranded layout, from the invariant (``obligations.ranked`` proves it inductive)."""
    v, w = Vars(""), Vars("'")
    k, x = z3.Const("broker", Broker), z3.Const("segment", Seg)
    y, b = z3.Const("y", Seg), z3.Const("b", Broker)
    init = z3.And(z3.Not(v.intent), v.failovers >= 0, v.subs >= 0, z3.Not(v.locked),
                  v.leader == z3.K(Broker, z3.BoolVal(False)), v.runs == z3.K(Broker, z3.BoolVal(False)),
                  v.term == z3.K(Seg, z3.BoolVal(False)),
                  z3.ForAll([y], v.used[y] == v.active[y]))
    covers = z3.Exists([b, y], z3.Or(*[when for when, _ in helpers_of(v, fixes, b, y).values()]))
    return ranked(init, invariant_of(v), invariant_of(w), stranded(v), stranded(w), z3.Not(stranded(w)),
                  steps(v, w, fixes, k, x), helpers_of(v, fixes, k, x), covers, no_worse(v, w),
                  no_worse(v, w, strictly=True), SYSTEM, before=lambda m: describe(m, v),
                  after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The layout's segments and the terminated topics, the intent, the lock, each broker, the failovers left."""
    e = lambda t: m.eval(t, model_completion=True)  # noqa: E731
    segs, snames = universe(m, Seg, "segment ", first=0)
    brokers, bnames = universe(m, Broker, "broker ", first=0)

    def seg(y):
        held = [w for w, arr in (("active", v.active), ("retired", v.used), ("terminated", v.term))
                if z3.is_true(e(arr[y])) and not (w == "retired" and z3.is_true(e(v.active[y])))]
        return f"{snames[str(y)]}: {', '.join(held) or 'never in the layout'}"

    def broker(b):
        held = ["believes it leads" if z3.is_true(e(v.leader[b])) else "follower"]
        if z3.is_true(e(v.runs[b])):
            held.append(f"runs the intent at {e(v.stage[b])} ({e(v.left[b])} calls left, based on "
                        f"version {e(v.base[b])})")
        return f"{bnames[str(b)]}: {', '.join(held)}"
    intent = (f"intent on {', '.join(snames[str(y)] for y in segs if z3.is_true(e(v.parents[y])))}"
              if z3.is_true(e(v.intent)) else "no intent")
    lock = f"lock held by {bnames.get(str(e(v.holder)), '?')}" if z3.is_true(e(v.locked)) else "lock free"
    return "{" + "; ".join([*(seg(y) for y in segs), intent, f"version {e(v.version)}", lock,
                            *(broker(b) for b in brokers), f"{e(v.failovers)} failovers left",
                            f"{e(v.subs)} createSubscription calls left"]) + "}"


def _left(model, op) -> int:
    """The calls of the copy's step still to make: one per parent or child, one discovery with subs-in-metadata."""
    if op.step == DISCOVER:
        return (1 if "subs-in-metadata" in model.fixes else len(op.parents)) - op.progress
    return {CREATE: len(op.children), TERMINATE: len(op.parents)}.get(op.step, 1) - op.progress


def _view(model, s) -> tuple:
    """The model state's values of the encoding's variables."""
    copies = []
    for c in s.ctrls:
        op = next((op for op in c.ops if s.intent and (op.kind, op.parents) == s.intent), None)
        copies.append((c.leader, None if op is None else (op.step, _left(model, op), op.base)))
    return (frozenset(seg.segment_id for seg in s.layout.active_segments), frozenset(s.layout.all_segments),
            frozenset(i for i, t in s.topics.items() if t.terminated), s.intent[1] if s.intent else None, s.version,
            model.config.failovers - s.failovers, model.config.subs + model.config.new_subs - len(s.subs), s.lock,
            tuple(copies))


def _show(view) -> str:
    active, used, term, parents, version, failovers, subs, lock, copies = view
    ids = lambda xs: "{" + ", ".join(map(str, sorted(xs))) + "}"  # noqa: E731
    brokers = [f"broker {b}: {'leads' if leader else 'follower'}" + (f", runs the intent at {copy[0]} ({copy[1]} "
                                                                     f"calls left, based on version {copy[2]})"
                                                                     if copy else "")
               for b, (leader, copy) in enumerate(copies)]
    return "{" + "; ".join([f"active {ids(active)}", f"retired {ids(used - active)}", f"terminated {ids(term)}",
                            "no intent" if parents is None else f"intent on {ids(parents)}", f"version {version}",
                            "lock free" if lock is None else f"lock held by broker {lock}", *brokers,
                            f"{failovers} failovers left", f"{subs} createSubscription calls left"]) + "}"


def _concrete(v: Vars, view, segs: dict, brokers: list) -> list:
    active, used, term, parents, version, failovers, subs, lock, copies = view
    of = lambda ids: members(Seg, [segs[i] for i in ids])  # noqa: E731
    out = [v.active == of(active), v.used == of(used), v.term == of(term), v.intent == (parents is not None),
           v.version == version, v.failovers == failovers, v.subs == subs, v.locked == (lock is not None),
           v.leader == members(Broker, [brokers[b] for b, (leader, _) in enumerate(copies) if leader]),
           v.runs == members(Broker, [brokers[b] for b, (_, copy) in enumerate(copies) if copy])]
    out += [v.parents == of(parents)] if parents is not None else []
    out += [v.holder == brokers[lock]] if lock is not None else []
    for b, (_, copy) in enumerate(copies):
        if copy:
            stage, left, base = copy
            out += [v.stage[brokers[b]] == STAGE[stage], v.left[brokers[b]] == left, v.base[brokers[b]] == base]
    return out


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps; a fair helper
    as itself (the label the ranking argument takes as fair must be the model's)."""
    v, w = Vars(""), Vars("'")
    k, x = z3.Const("broker", Broker), z3.Const("segment", Seg)
    candidates = steps_of(v, w, model.fixes, k, x)

    def facts(s, t, before, after):
        ids = sorted(set().union(*(view[i] for view in (before, after) for i in (0, 1, 2)), s.topics.keys(),
                                 t.topics.keys()))
        segs = {i: z3.Const(f"S{i}", Seg) for i in ids}
        brokers = [z3.Const(f"B{b}", Broker) for b in range(len(s.ctrls))]
        return [*([z3.Distinct(*segs.values())] if len(segs) > 1 else []),
                *([z3.Distinct(*brokers)] if len(brokers) > 1 else []),
                z3.Or(*[k == b for b in brokers]), z3.Or(*[x == y for y in segs.values()]),
                *_concrete(v, before, segs, brokers), *_concrete(w, after, segs, brokers)]
    return simulated(pairs, lambda s: _view(model, s), facts, candidates,
                     tuple(set(helpers(v, model.fixes, k, x)) & set(candidates)), told_by(_show))


OBLIGATIONS = [
    Obligation("pip-468", "writable-coverage-ranked", "Once a split or merge has terminated a parent still in the "
               "layout, the layout's CAS follows, for any number of segments, brokers and operations and any finite "
               "number of failovers and createSubscription calls: the operation persisted as the intent under the "
               "leader lock and resumed by each new leader (ranked by the failovers and createSubscription calls "
               "left, then the brokers that believe they lead while no copy runs, else each copy's staleness, step "
               "and calls left; strengthened: a terminated active segment is a parent of the intent, and the lock's "
               "holder runs the intent)", SECTION,
               lambda: all_of(resumed(fixes_of("pip-468", v)) for v in with_fix("pip-468", FIX)),
               with_fix("pip-468", FIX), proves=("writable-coverage",)),
]
