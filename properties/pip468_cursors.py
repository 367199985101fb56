"""PIP-468 ``cursors-before-routing``: a producer's write lands only on a segment that has a cursor for every
subscription created so far, for any number of segments, subscriptions, brokers, splits and merges (the fix
``subs-in-metadata``).

Segments, subscriptions, controllers (brokers) and operations are uninterpreted sorts; an operation's controller,
parents and children are rigid. The encoding keeps the metadata (its version, the layout's active segments, the
subscriptions in it), each segment topic (whether it exists, is terminated, and its cursors), the producer's view
(the active segments of the layout its DAG watch last pushed), each controller's loaded metadata (version, active
segments, subscriptions), each operation (whether in progress, the version it was started at, its step, the
subscriptions it discovered, the children it created), each admin createSubscription in progress (the
subscriptions created, the one in progress and its controller, the segments still to issue it on). Its steps, from
``models/pip468``: the five steps of a split or merge (discover, create one child, terminate one parent, the CAS,
notify), BadVersion (the operation starts over on the reloaded layout, as a new operation, or fails), starting an
operation, a controller's reload (election, the layout watch), a crash, createSubscription (with the fix a CAS on
the metadata and a reload; as written on the controller's loaded layout) and each segment's call of it, the
producer's DAG update and publish. Everything else keeps these. ``simulation`` checks on every reachable state
that each model step is one of them, ``publish`` as itself.

The claim is about ``publish``. Strengthened by what the protocol keeps: an active segment exists and has a cursor
for every created subscription; a segment in the producer's view is active or terminated; a created subscription
is in the metadata; a controller at the current version loaded the current layout and subscriptions, and none is
ahead of the metadata; an operation started at a version its controller loaded; an operation at the current
version that discovered did so after every subscription in the metadata was written; a child an operation created
exists with a cursor for each subscription it discovered; an operation at its CAS created every child and
terminated every parent; a subscription in progress is in the metadata and each active segment has its cursor or
is still to get it. As written the counterexample to induction is a split's discovery from a parent that lacks a
cursor for a subscription the admin API has created or is creating (in the finding
``subscription-created-during-split-loses-messages`` the split discovers before the subscription exists, and its
CAS, whose version the creation did not change, then routes the producer to children without the cursor).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip468.state import CAS, CREATE, DISCOVER, NOTIFY, TERMINATE

from .obligations import (Obligation, Verdict, inductive as induction, members, not_simulated, simulating, universe,
                          with_fix)

Seg, Sub, Ctl, Op = (z3.DeclareSort(f"Cursors{x}") for x in ("Segment", "Subscription", "Controller", "Operation"))
Step, STEPS = z3.EnumSort("OpStep", (DISCOVER, CREATE, TERMINATE, CAS, NOTIFY))
STEP = dict(zip((DISCOVER, CREATE, TERMINATE, CAS, NOTIFY), STEPS))
ctl_of = z3.Function("op_controller", Op, Ctl)
parent = z3.Function("op_parent", Op, Seg, z3.BoolSort())
child = z3.Function("op_child", Op, Seg, z3.BoolSort())
FIX = "subs-in-metadata"
SECTION = ("PIP-468 Motivation: 'all subscription cursors exist before producers are redirected'; Split Protocol "
           "Step 1: 'The controller queries the parent segment topic for its list of subscriptions'; Admin REST API: "
           "PUT .../subscriptions/{subscription}")
SEGS, SUBS = z3.ArraySort(Seg, z3.BoolSort()), z3.ArraySort(Sub, z3.BoolSort())


class Vars:
    NAMES = ("version", "active", "subs", "created", "exists", "term", "cur", "view", "cver", "cactive", "csubs",
             "on", "base", "step", "found", "made", "infl", "prop", "pend")

    def __init__(self, tag: str):
        c = lambda name, sort: z3.Const(f"cr_{name}{tag}", sort)  # noqa: E731
        self.version = z3.Int(f"cr_version{tag}")
        self.active, self.subs, self.created = c("active", SEGS), c("subs", SUBS), c("created", SUBS)
        self.exists, self.term = c("exists", SEGS), c("term", SEGS)
        self.cur = c("cursor", z3.ArraySort(Seg, SUBS))
        self.view = c("view", SEGS)
        self.cver, self.cactive = c("cver", z3.ArraySort(Ctl, z3.IntSort())), c("cactive", z3.ArraySort(Ctl, SEGS))
        self.csubs = c("csubs", z3.ArraySort(Ctl, SUBS))
        self.on, self.base = c("on", z3.ArraySort(Op, z3.BoolSort())), c("base", z3.ArraySort(Op, z3.IntSort()))
        self.step = c("step", z3.ArraySort(Op, Step))
        self.found, self.made = c("found", z3.ArraySort(Op, SUBS)), c("made", z3.ArraySort(Op, SEGS))
        self.infl, self.prop = c("inflight", SUBS), c("prop", z3.ArraySort(Sub, Ctl))
        self.pend = c("pending", z3.ArraySort(Sub, SEGS))

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]

    def same(self, w, *names) -> list:
        return [getattr(w, k) == getattr(self, k) for k in names]


def _reload(v: Vars, w: Vars, ctl, version, active, subs) -> list:
    return [w.cver == z3.Store(v.cver, ctl, version), w.cactive == z3.Store(v.cactive, ctl, active),
            w.csubs == z3.Store(v.csubs, ctl, subs)]


def _started(v: Vars, w: Vars, o, c, on, base) -> z3.BoolRef:
    """The controller ``c`` starts the operation ``o`` (not running in ``v``) at the version ``base``: running in
    ``w`` beside those ``on`` says, at its first step, nothing discovered or created yet."""
    return z3.And(z3.Not(v.on[o]), ctl_of(o) == c, w.on == z3.Store(on, o, True), w.base == z3.Store(v.base, o, base),
                  w.step == z3.Store(v.step, o, STEP[DISCOVER]),
                  w.made == z3.Store(v.made, o, z3.K(Seg, z3.BoolVal(False))),
                  w.found == z3.Store(v.found, o, z3.K(Sub, z3.BoolVal(False))))


def steps(v: Vars, w: Vars, fixes, o, c, seg, sub) -> dict:
    """Each step from ``v`` to ``w``, for the operation ``o``, the controller ``c``, the segment ``seg`` and the
    subscription ``sub``."""
    x, y, p = z3.Const("x", Seg), z3.Const("y", Sub), z3.Const("p", Op)
    fixed = FIX in fixes
    at = lambda name: z3.And(v.on[o], v.step[o] == STEP[name])  # noqa: E731
    to = lambda name: w.step == z3.Store(v.step, o, STEP[name])  # noqa: E731
    after_cas = z3.Lambda([x], z3.Or(z3.And(v.active[x], z3.Not(parent(o, x))), child(o, x)))
    fresh = _started(v, w, o, c, v.on, w.cver[c])
    cursors = z3.Lambda([y], z3.Or(v.cur[seg][y], v.found[o][y]))
    made = z3.Store(v.made[o], seg, True)
    done_pend = z3.Store(v.pend[sub], seg, False)
    last = z3.ForAll([x], z3.Not(done_pend[x]))
    ops = ("on", "base", "step", "found", "made")
    return {
        # with the fix one read, of the metadata the controller loaded; as written the parents' cursors, one
        # parent a step
        "discover": z3.And(at(DISCOVER), to(CREATE), w.found == z3.Store(v.found, o, v.csubs[ctl_of(o)]),
                           *v.keep(w, "step", "found")) if fixed else
        z3.And(at(DISCOVER), parent(o, seg), z3.Or(to(CREATE), to(DISCOVER)),
               w.found == z3.Store(v.found, o, z3.Lambda([y], z3.Or(v.found[o][y], z3.And(v.exists[seg],
                                                                                          v.cur[seg][y])))),
               *v.keep(w, "step", "found")),
        "create": z3.And(at(CREATE), child(o, seg), w.exists == z3.Store(v.exists, seg, True),
                         w.cur == z3.Store(v.cur, seg, cursors), w.made == z3.Store(v.made, o, made),
                         z3.Or(to(CREATE), z3.And(to(TERMINATE), z3.ForAll([x], z3.Implies(child(o, x), made[x])))),
                         *v.keep(w, "exists", "cur", "made", "step")),
        "terminate": z3.And(at(TERMINATE), parent(o, seg), w.term == z3.Store(v.term, seg, True),
                            z3.Or(to(TERMINATE), z3.And(to(CAS), z3.ForAll([x], z3.Implies(parent(o, x),
                                                                                           w.term[x])))),
                            *v.keep(w, "term", "step")),
        "cas": z3.And(at(CAS), v.base[o] == v.version, w.version == v.version + 1, w.active == after_cas, to(NOTIFY),
                      *_reload(v, w, ctl_of(o), v.version + 1, after_cas, v.subs),
                      *v.keep(w, "version", "active", "step", "cver", "cactive", "csubs")),
        # BadVersion: reload; the operation ends, and may start over as a new one on the reloaded layout
        "cas_conflict": z3.And(at(CAS), v.base[o] != v.version, ctl_of(o) == c,
                               *_reload(v, w, c, v.version, v.active, v.subs),
                               z3.Or(z3.And(w.on == z3.Store(v.on, o, False), *v.same(w, *ops[1:])),
                                     _started(v, w, p, c, z3.Store(v.on, o, False), v.version)),
                               *v.keep(w, *ops, "cver", "cactive", "csubs")),
        "notify": z3.And(at(NOTIFY), w.on == z3.Store(v.on, o, False), *v.keep(w, "on")),
        "start": z3.And(fresh, *v.keep(w, *ops)),
        # election (which may resume the persisted operation), the leader's layout watch
        "reload": z3.And(*_reload(v, w, c, v.version, v.active, v.subs),
                         z3.Or(z3.And(*v.same(w, *ops)), fresh), *v.keep(w, *ops, "cver", "cactive", "csubs")),
        "crash": z3.And(*_reload(v, w, c, -1, z3.K(Seg, z3.BoolVal(False)), z3.K(Sub, z3.BoolVal(False))),
                        w.on == z3.Lambda([p], z3.And(v.on[p], ctl_of(p) != c)),
                        w.infl == z3.Lambda([y], z3.And(v.infl[y], v.prop[y] != c)),
                        *v.keep(w, "cver", "cactive", "csubs", "on", "infl")),
        "create_subscription": z3.And(z3.Not(v.subs[sub]), w.subs == z3.Store(v.subs, sub, True),
                                      w.infl == z3.Store(v.infl, sub, True), w.prop == z3.Store(v.prop, sub, c),
                                      *([w.version == v.version + 1,
                                         *_reload(v, w, c, v.version + 1, v.active, w.subs),
                                         w.pend == z3.Store(v.pend, sub, v.active)] if fixed else
                                        [w.version == v.version, w.pend == z3.Store(v.pend, sub, v.cactive[c]),
                                         *v.same(w, "cver", "cactive", "csubs")]),
                                      *v.keep(w, "subs", "infl", "prop", "version", "pend", "cver", "cactive",
                                              "csubs")),
        "propagate_subscription": z3.And(v.infl[sub], v.pend[sub][seg], w.exists == z3.Store(v.exists, seg, True),
                                         w.cur == z3.Store(v.cur, seg, z3.Store(v.cur[seg], sub, True)),
                                         w.pend == z3.Store(v.pend, sub, done_pend),
                                         z3.If(last, z3.And(w.created == z3.Store(v.created, sub, True),
                                                            w.infl == z3.Store(v.infl, sub, False)),
                                               z3.And(w.created == v.created, w.infl == v.infl)),
                                         *v.keep(w, "exists", "cur", "pend", "created", "infl")),
        "dag_update": z3.And(w.view == v.active, *v.keep(w, "view")),
        "publish": z3.And(v.view[seg], z3.Not(v.term[seg]), w.exists == z3.Store(v.exists, seg, True),
                          *v.keep(w, "exists")),
    }


def claim(v: Vars, seg) -> z3.BoolRef:
    """The segment a publish lands on has a cursor for every created subscription."""
    y = z3.Const("y", Sub)
    return z3.And(v.exists[seg], z3.ForAll([y], z3.Implies(v.created[y], v.cur[seg][y])))


def strengthened(v: Vars) -> z3.BoolRef:
    x, y, c, o = z3.Const("x", Seg), z3.Const("y", Sub), z3.Const("c", Ctl), z3.Const("o", Op)
    return z3.And(
        v.version >= 0,
        z3.ForAll([x], z3.And(z3.Implies(v.active[x], claim(v, x)), z3.Implies(v.view[x], z3.Or(v.active[x],
                                                                                               v.term[x])))),
        z3.ForAll([y], z3.And(z3.Implies(v.created[y], v.subs[y]),
                              z3.Implies(v.infl[y], z3.And(v.subs[y], z3.ForAll([x], z3.Implies(
                                  v.active[x], z3.Or(v.cur[x][y], v.pend[y][x]))))))),
        z3.ForAll([c], z3.And(v.cver[c] <= v.version, z3.Implies(v.cver[c] == v.version, z3.And(
            v.cactive[c] == v.active, v.csubs[c] == v.subs)))),
        z3.ForAll([o], z3.Implies(v.on[o], z3.And(
            v.base[o] <= v.cver[ctl_of(o)],
            z3.Implies(v.step[o] == STEP[DISCOVER], v.made[o] == z3.K(Seg, z3.BoolVal(False))),
            z3.Implies(z3.And(v.base[o] == v.version, v.step[o] != STEP[DISCOVER]),
                       z3.ForAll([y], z3.Implies(v.subs[y], v.found[o][y]))),
            z3.ForAll([x], z3.Implies(v.made[o][x], z3.And(v.exists[x], z3.ForAll([y], z3.Implies(
                v.found[o][y], v.cur[x][y]))))),
            z3.Implies(z3.Or(v.step[o] == STEP[TERMINATE], v.step[o] == STEP[CAS]),
                       z3.ForAll([x], z3.Implies(child(o, x), v.made[o][x]))),
            z3.Implies(v.step[o] == STEP[CAS], z3.ForAll([x], z3.Implies(parent(o, x), v.term[x])))))))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    o, c, seg, sub = z3.Const("op", Op), z3.Const("controller", Ctl), z3.Const("segment", Seg), z3.Const("sub", Sub)
    x, y, p = z3.Const("x", Seg), z3.Const("y", Sub), z3.Const("p", Op)
    init = z3.And(strengthened(v), z3.ForAll([p], z3.Not(v.on[p])), z3.ForAll([y], z3.Not(v.infl[y])),
                  z3.ForAll([x], z3.Implies(v.active[x], z3.ForAll([y], z3.Implies(v.subs[y], v.cur[x][y])))))
    return induction(init, strengthened(v), strengthened(w), steps(v, w, fixes, o, c, seg, sub),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w),
                     also=lambda label: claim(v, seg) if label == "publish" else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The metadata, each segment topic and each subscription, named g1.., s1.."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    segs, sn = universe(m, Seg, "g")
    subs, un = universe(m, Sub, "s")

    def seg(x):
        flags = [f for f, arr in (("active", v.active), ("in the producer's view", v.view), ("exists", v.exists),
                                  ("terminated", v.term)) if z3.is_true(e(arr[x]))]
        cursors = [un[str(y)] for y in subs if z3.is_true(e(v.cur[x][y]))]
        return f"{sn[str(x)]}: {', '.join(flags) or 'nothing'}, cursors {{{', '.join(cursors)}}}"

    def sub(y):
        flags = [f for f, arr in (("in the metadata", v.subs), ("created", v.created), ("in progress", v.infl))
                 if z3.is_true(e(arr[y]))]
        return f"{un[str(y)]}: {', '.join(flags) or 'none'}"
    ops, on = universe(m, Op, "o")

    def op(o):
        def names(arr, elements, named):
            return "{" + ", ".join(named[str(x)] for x in elements if z3.is_true(e(arr(x)))) + "}"
        return (f"{on[str(o)]}: step {e(v.step[o])} at version {e(v.base[o])}, parents "
                f"{names(lambda x: parent(o, x), segs, sn)}, children {names(lambda x: child(o, x), segs, sn)}, "
                f"created {names(lambda x: v.made[o][x], segs, sn)}, found {names(lambda y: v.found[o][y], subs, un)}")
    running = [op(o) for o in ops if z3.is_true(e(v.on[o]))]
    return f"{{version {e(v.version)}; " + "; ".join([*map(seg, segs), *map(sub, subs), *running]) + "}"


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables (controllers by broker, operations by broker and
    their content)."""
    def active(layout):
        return frozenset(x.segment_id for x in layout.active_segments) if layout is not None else frozenset()
    topics = tuple(sorted((k, t.terminated, frozenset(t.cursors.keys())) for k, t in s.topics))
    ctrls = tuple((c.version, active(c.layout), c.subs) for c in s.ctrls)
    order = (DISCOVER, CREATE, TERMINATE, CAS, NOTIFY)
    ops = tuple(sorted((b, op.kind, op.parents, op.children, op.base, op.step, op.subs,
                        frozenset(op.children[:op.progress] if op.step == CREATE else
                                  op.children if order.index(op.step) > order.index(CREATE) else ()))
                       for b, c in enumerate(s.ctrls) for op in c.ops))
    subscribing = tuple(sorted((sub, b, frozenset(left)) for b, c in enumerate(s.ctrls) for sub, left in c.subscribing))
    return (s.version, active(s.layout), s.subs, s.created, topics, active(s.view), ctrls, ops, subscribing)


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided once
    per distinct change), ``publish`` as itself."""
    out, seen, last = [], set(), {}
    v, w = Vars(""), Vars("'")
    o, c, seg, sub = z3.Const("op", Op), z3.Const("controller", Ctl), z3.Const("segment", Seg), z3.Const("sub", Sub)
    candidates = steps_of(v, w, model.fixes, o, c, seg, sub)
    for s, a, t in pairs:
        change = (_projection(s), _projection(t))
        key = (a.name == "publish", change)
        if (change[0] == change[1] and a.name != "publish") or key in seen:
            continue
        seen.add(key)
        facts = _facts(v, w, change, o, c, seg, sub, len(s.ctrls))
        answer = simulating(a, facts, candidates, ("publish",), last)
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}", answer)
    return out


def _facts(v: Vars, w: Vars, change, o, c, seg, sub, brokers: int) -> list:
    segs = sorted({x for side in change for x in side[1] | side[5] | {k for k, _, _ in side[4]}
                   | {x for op in side[7] for x in op[2] + op[3]} | {x for _, _, left in side[8] for x in left}
                   | {x for _, act, _ in side[6] for x in act}})
    subs = sorted({y for side in change for y in side[2] | side[3] | {y for _, _, cs in side[4] for y in cs}
                   | {y for op in side[7] for y in op[6]} | {y for _, _, subs in side[6] for y in subs}})
    gs, us = {x: z3.Const(f"G{x}", Seg) for x in segs}, {y: z3.Const(f"U{y}", Sub) for y in subs}
    cs = [z3.Const(f"C{b}", Ctl) for b in range(brokers)]
    keys = sorted({op[:5] for side in change for op in side[7]})
    os = {k: z3.Const(f"O{i}", Op) for i, k in enumerate(keys)}
    out = [z3.Distinct(*g) for g in (list(gs.values()), list(us.values()), cs, list(os.values())) if len(g) > 1]
    out += [z3.Or(*[seg == x for x in gs.values()]), z3.Or(*[c == x for x in cs])]
    out += [z3.Or(*[sub == x for x in us.values()])] if us else []
    out += [z3.Or(*[o == x for x in os.values()])] if os else []
    x = z3.Const("x", Seg)
    for k, op in os.items():
        out += [ctl_of(op) == cs[k[0]], z3.ForAll([x], parent(op, x) == z3.Or(*[x == gs[g] for g in k[2]])),
                z3.ForAll([x], child(op, x) == z3.Or(*[x == gs[g] for g in k[3]]))]
    for u, side in zip((v, w), change):
        out += _pin(u, side, gs, us, cs, os)
    return out


def _pin(v: Vars, side, gs, us, cs, os) -> list:
    version, active, subs, created, topics, view, ctrls, ops, subscribing = side
    out = [v.version == version, v.active == members(Seg, [gs[x] for x in active]),
           v.subs == members(Sub, [us[y] for y in subs]), v.created == members(Sub, [us[y] for y in created]),
           v.view == members(Seg, [gs[x] for x in view]),
           v.exists == members(Seg, [gs[k] for k, _, _ in topics]),
           v.term == members(Seg, [gs[k] for k, term, _ in topics if term])]
    out += [v.cur[gs[k]] == members(Sub, [us[y] for y in cursors]) for k, _, cursors in topics]
    for ctl, (version, act, loaded) in zip(cs, ctrls):
        out += [v.cver[ctl] == version, v.cactive[ctl] == members(Seg, [gs[x] for x in act]),
                v.csubs[ctl] == members(Sub, [us[y] for y in loaded])]
    running = {op[:5]: op for op in ops}
    for k, op in os.items():
        out.append(v.on[op] == (k in running))
        if k in running:
            _, _, _, _, base, step, found, made = running[k]
            out += [v.base[op] == base, v.step[op] == STEP[step], v.made[op] == members(Seg, [gs[x] for x in made])]
            out += [v.found[op] == members(Sub, [us[y] for y in found])] if step != DISCOVER else []
    inflight = {y: (b, left) for y, b, left in subscribing}
    for y, u in us.items():
        out.append(v.infl[u] == (y in inflight))
        if y in inflight:
            out += [v.prop[u] == cs[inflight[y][0]], v.pend[u] == members(Seg, [gs[x] for x in inflight[y][1]])]
    return out


OBLIGATIONS = [
    Obligation("pip-468", "cursors-before-routing-inductive", "A producer's write lands only on a segment with a "
               "cursor for every created subscription, for any number of segments, subscriptions, brokers, splits "
               "and merges, subscriptions created on the controller's loaded layout", SECTION,
               lambda: inductive(frozenset()), ("as-written",), proves=("cursors-before-routing",)),
    Obligation("pip-468", "cursors-before-routing-inductive", "A producer's write lands only on a segment with a "
               "cursor for every created subscription, for any number of segments, subscriptions, brokers, splits "
               "and merges, subscriptions written into the CASed metadata (strengthened: see "
               "properties/pip468_cursors.py)", SECTION, lambda: inductive(frozenset({FIX})),
               with_fix("pip-468", FIX), proves=("cursors-before-routing",)),
]
