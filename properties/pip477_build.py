"""PIP-477 ``build-idempotent``: BUILD reports a ledger failed only when the old cluster cannot serve its source
or the new cluster holds another ledger under its id, for any number of ledgers, brokers and restarts (the fix
``recopy-own-copy``).

Ledgers and brokers are uninterpreted sorts. The encoding keeps whether the old cluster is reachable (up, client
open); per ledger whether the old cluster holds it and its length, whether an id was ever handed out for a ledger
there (the old idgen's, or the new one's under the idgen fence), whether the new cluster holds a ledger under the
id and its length, whether the new cluster's idgen handed the id out, and whether BUILD recorded it failed; per
broker and ledger, BUILD's copy in progress and the entries it is to copy (its copy takes the source's id).
Its steps, from ``models/pip477``: BUILD's three steps (``build``: fail an unreadable source, compare an existing
ledger, or create the empty copy and read the source's length; ``build_add``: copy one entry, or fail on a source
entry it cannot read, or drop a copy someone deleted; ``build_record``); a restart losing a broker's copies; a
ledger created on either cluster (on the old one only under an id never handed out there: its idgen only
advances, and under the fence the new one's ids are past every old id, I11), an entry appended to
a ledger of the old cluster, a deletion, the old cluster going down or its client closed; writes to the new
cluster's ledgers may leave any length. ``simulation`` checks on every reachable state that each model step is
one of these, BUILD's as themselves.

The claim is about BUILD's first two steps. Strengthened: a copy in progress is to copy no more entries than its
source holds while the old cluster holds it (a source only grows), and every ledger the old cluster holds or a
copy is of was handed out there (so an id is never re-created under a copy). As written the counterexample is
BUILD failing a ledger whose mismatching copy on the new cluster is its own, which a restart interrupted (the
finding ``restart-mid-build-fails-ledger-for-good``).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip477.routing import reachable
from pulsar_verify.models.pip477.state import NEW, OLD

from .obligations import Obligation, Verdict, inductive as induction, not_simulated, simulating, universe, with_fix

Ledger = z3.DeclareSort("BuildLedger")
Broker = z3.DeclareSort("BuildBroker")
FIX = "recopy-own-copy"
BUILD = ("build", "build_add")  # the steps the model checks the property on
SECTION = ("PIP-477 Phase 4: 'Idempotency on LedgerExistException' ('BUILD retry / partial prior run'); Failure "
           "Handling, BUILD rows: 'operator can retry switch'")


class Vars:
    NAMES = ("old_up", "on_old", "src", "handed_old", "on_new", "dst", "alloc_new", "failed", "copying", "want")

    def __init__(self, tag: str):
        bools, ints = z3.ArraySort(Ledger, z3.BoolSort()), z3.ArraySort(Ledger, z3.IntSort())
        self.old_up = z3.Bool(f"bd_old_up{tag}")  # the old cluster is up and its client open
        self.on_old = z3.Const(f"bd_on_old{tag}", bools)
        self.src = z3.Const(f"bd_src{tag}", ints)  # the old cluster's ledger's entries
        self.handed_old = z3.Const(f"bd_handed_old{tag}", bools)  # an id handed out for a ledger on old
        self.on_new = z3.Const(f"bd_on_new{tag}", bools)
        self.dst = z3.Const(f"bd_dst{tag}", ints)  # the new cluster's ledger's entries
        self.alloc_new = z3.Const(f"bd_alloc_new{tag}", bools)  # the new cluster's idgen handed it out
        self.failed = z3.Const(f"bd_failed{tag}", bools)  # in BUILD's failedLedgers
        self.copying = z3.Array(f"bd_copying{tag}", Broker, bools)  # the broker's BUILD copies it
        self.want = z3.Array(f"bd_want{tag}", Broker, ints)  # the entries that copy is to hold

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, b, lid) -> dict:
    """Each step from ``v`` to ``w``, for the broker ``b`` and the ledger ``lid``."""
    readable = z3.And(v.old_up, v.on_old[lid])
    have = z3.If(v.on_new[lid], v.dst[lid], 0)
    fail = z3.And(w.failed == z3.Store(v.failed, lid, True), *v.keep(w, "failed"))
    drop = z3.And(w.copying == z3.Store(v.copying, b, z3.Store(v.copying[b], lid, False)),
                  w.want == z3.Store(v.want, b, z3.Store(v.want[b], lid, 0)))
    recopy = z3.And(*([z3.Not(v.alloc_new[lid])] if FIX in fixes else [z3.BoolVal(False)]))
    copy = z3.And(w.on_new == z3.Store(v.on_new, lid, True), w.dst == z3.Store(v.dst, lid, 0),
                  w.copying == z3.Store(v.copying, b, z3.Store(v.copying[b], lid, True)),
                  w.want == z3.Store(v.want, b, z3.Store(v.want[b], lid, v.src[lid])),
                  *v.keep(w, "on_new", "dst", "copying", "want"))
    compare = z3.If(v.dst[lid] == v.src[lid], z3.And(*v.keep(w)),
                    z3.If(recopy, z3.And(w.on_new == z3.Store(v.on_new, lid, False),
                                                     w.dst == z3.Store(v.dst, lid, 0), *v.keep(w, "on_new", "dst")),
                          fail))
    copied = z3.And(w.dst == z3.Store(v.dst, lid, v.dst[lid] + 1), *v.keep(w, "dst"))
    return {
        "build": z3.And(z3.Not(v.copying[b][lid]),
                        z3.If(z3.Not(readable), fail, z3.If(v.on_new[lid], compare, copy))),
        "build_add": z3.And(v.copying[b][lid], have < v.want[b][lid],
                            z3.If(z3.Not(v.on_new[lid]), z3.And(drop, *v.keep(w, "copying", "want")),
                                  z3.If(z3.And(readable, v.src[lid] >= v.dst[lid] + 1), copied,
                                        z3.And(drop, w.failed == z3.Store(v.failed, lid, True),
                                               *v.keep(w, "copying", "want", "failed"))))),
        "build_record": z3.And(v.copying[b][lid], have >= v.want[b][lid], drop, *v.keep(w, "copying", "want")),
        "restart": z3.And(w.copying == z3.Store(v.copying, b, z3.K(Ledger, z3.BoolVal(False))),
                          w.want == z3.Store(v.want, b, z3.K(Ledger, z3.IntVal(0))), *v.keep(w, "copying", "want")),
        "create_old": z3.And(z3.Not(v.handed_old[lid]), z3.Not(v.on_old[lid]),
                             w.on_old == z3.Store(v.on_old, lid, True), w.src == z3.Store(v.src, lid, w.src[lid]),
                             w.src[lid] >= 0,
                             w.handed_old == z3.Store(v.handed_old, lid, True),
                             z3.Or(w.alloc_new == v.alloc_new, w.alloc_new == z3.Store(v.alloc_new, lid, True)),
                             *v.keep(w, "on_old", "src", "handed_old", "alloc_new", "failed")),
        "append_old": z3.And(v.on_old[lid], w.src == z3.Store(v.src, lid, v.src[lid] + 1), *v.keep(w, "src", "failed")),
        "delete_old": z3.And(w.on_old == z3.Store(v.on_old, lid, False), w.src == z3.Store(v.src, lid, 0),
                             *v.keep(w, "on_old", "src", "failed")),
        "create_new": z3.And(z3.Not(v.on_new[lid]), w.on_new == z3.Store(v.on_new, lid, True),
                             w.dst == z3.Store(v.dst, lid, w.dst[lid]), w.dst[lid] >= 0,
                             w.alloc_new == z3.Store(v.alloc_new, lid, True),
                             *v.keep(w, "on_new", "dst", "alloc_new", "failed")),
        "delete_new": z3.And(w.on_new == z3.Store(v.on_new, lid, False), w.dst == z3.Store(v.dst, lid, 0),
                             *v.keep(w, "on_new", "dst", "failed")),
        # the old cluster down or its client closed; writes to the new cluster's ledgers; failures BUILD's are not
        "other": z3.And(*v.keep(w, "old_up", "dst", "failed")),
    }


def claim(v: Vars, w: Vars, lid) -> z3.BoolRef:
    """A ledger BUILD newly fails has a source the old cluster cannot serve, or an id the new cluster handed out."""
    return z3.Implies(z3.And(w.failed[lid], z3.Not(v.failed[lid])),
                      z3.Or(z3.Not(z3.And(v.old_up, v.on_old[lid])), v.alloc_new[lid]))


def strengthened(v: Vars) -> z3.BoolRef:
    b, x = z3.Const("b", Broker), z3.Const("x", Ledger)
    return z3.ForAll([b, x], z3.And(z3.Implies(z3.And(v.copying[b][x], v.on_old[x]), v.want[b][x] <= v.src[x]),
                                    z3.Implies(z3.Or(v.on_old[x], v.copying[b][x]), v.handed_old[x])))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    b, lid = z3.Const("broker", Broker), z3.Const("ledger", Ledger)
    x = z3.Const("x", Ledger)
    init = z3.And(z3.ForAll([x], z3.Implies(v.on_old[x], v.handed_old[x])),
                  v.copying == z3.K(Broker, z3.K(Ledger, z3.BoolVal(False))))
    return induction(init, strengthened(v), strengthened(w), steps(v, w, fixes, b, lid),
                     before=lambda m: describe(m, v, b), after=lambda m: describe(m, w, b),
                     also=lambda label: claim(v, w, lid) if label in BUILD else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars, b) -> str:
    """The old cluster, then each ledger on either cluster, handed out, failed, and the broker's copy of it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    ledgers, names = universe(m, Ledger, "l")

    def one(x):
        held = [f"{e(v.src[x])} entries on old" if z3.is_true(e(v.on_old[x])) else "not on old"]
        held.append(f"{e(v.dst[x])} entries on new" if z3.is_true(e(v.on_new[x])) else "not on new")
        held += [f for f, arr in (("handed out on old", v.handed_old), ("new's idgen's id", v.alloc_new),
                                  ("failed", v.failed)) if z3.is_true(e(arr[x]))]
        if z3.is_true(e(v.copying[b][x])):
            held.append(f"the broker copies {e(v.want[b][x])} entries")
        return f"{names[str(x)]}: {', '.join(held)}"
    up = "old cluster up" if z3.is_true(e(v.old_up)) else "old cluster unreachable"
    return "{" + "; ".join([up, *(one(x) for x in ledgers)]) + "}"


def _views(s) -> tuple:
    """The model state's values of the encoding's variables: whether the old cluster is reachable, and per ledger
    id (those absent from every view are on no cluster, never handed out, not failed, copied by none) its length
    on the old cluster, whether handed out there, its length on the new one, whether the new idgen handed it out,
    whether failed, and each broker's entries to copy."""
    failed = s.progress.failed if s.progress is not None else frozenset()
    old, new, handed, alloc = s.bk[OLD], s.bk[NEW], s.allocated[OLD] | s.borrowed, s.allocated[NEW]
    copies = [{lid: n for lid, (_, n, _) in x.copies.items()} for x in s.brokers]
    ids = set(old.keys()) | set(new.keys()) | handed | alloc | failed | {lid for c in copies for lid in c}
    return reachable(s, OLD), {lid: (len(old[lid]) if lid in old else None, lid in handed,
                                     len(new[lid]) if lid in new else None, lid in alloc, lid in failed,
                                     tuple(c.get(lid) for c in copies)) for lid in ids}


def _pin(v: Vars, x, view, bs: list) -> list:
    """``v``'s values for the ledger ``x`` are the model's ``view`` of it."""
    old, handed, new, alloc, failed, copies = view
    out = [v.on_old[x] == (old is not None), v.src[x] == (old or 0), v.handed_old[x] == handed,
           v.on_new[x] == (new is not None), v.dst[x] == (new or 0), v.alloc_new[x] == alloc, v.failed[x] == failed]
    for b, n in zip(bs, copies):
        out += [v.copying[b][x] == (n is not None), v.want[b][x] == (n or 0)]
    return out


def _show(view) -> str:
    old, handed, new, alloc, failed, copies = view
    held = [f"{old} entries on old" if old is not None else "not on old", *(["handed out on old"] if handed else []),
            f"{new} entries on new" if new is not None else "not on new", *(["new's idgen's id"] if alloc else []),
            *(["failed"] if failed else []), *(f"broker {b} copies {n}" for b, n in enumerate(copies) if n is not None)]
    return "(" + ", ".join(held) + ")"


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps, BUILD's as
    themselves; every copy takes its source's id. A change is decided once up to the renaming of ledger ids (an
    uninterpreted sort), over the ledgers it changes: each step writes one ledger and keeps the others, so the
    values of the ledgers a change leaves alone cannot decide whether a step takes it."""
    out = [f"{a}: BUILD copies ledger {lid} under the id {dst}" for _, a, t in pairs for x in t.brokers
           for lid, (_, _, dst) in x.copies.items() if dst != lid]
    v, w = Vars(""), Vars("'")
    b, lid = z3.Const("broker", Broker), z3.Const("ledger", Ledger)
    candidates = steps_of(v, w, model.fixes, b, lid)
    views, seen = {}, set()
    last = {}  # model label -> the encoding's step that simulated its last change, tried first
    absent = (None, False, None, False, False, (None,) * model.config.brokers)
    for s, a, t in pairs:
        for x in (s, t):
            if x not in views:
                views[x] = _views(x)
        (up, before), (up_after, after) = views[s], views[t]
        changed = [(before.get(x, absent), after.get(x, absent)) for x in sorted(before.keys() | after.keys())
                   if before.get(x, absent) != after.get(x, absent)]
        key = (a.name if a.name in BUILD else "", up, up_after, tuple(changed))
        if (up == up_after and not changed) or key in seen:
            continue
        seen.add(key)
        ls = [z3.Const(f"L{i}", Ledger) for i in range(len(changed))]
        bs = [z3.Const(f"B{i}", Broker) for i in range(len(s.brokers))]
        facts = [*[z3.Distinct(*group) for group in (ls, bs) if len(group) > 1],
                 *([z3.Or(*[lid == x for x in ls])] if ls else []), z3.Or(*[b == x for x in bs]),
                 v.old_up == up, w.old_up == up_after,
                 *[f for x, (pre, post) in zip(ls, changed) for f in _pin(v, x, pre, bs) + _pin(w, x, post, bs)]]
        answer = simulating(a, facts, candidates, BUILD, last)
        moves = "; ".join(f"l{i + 1} from {_show(pre)} to {_show(post)}" for i, (pre, post) in enumerate(changed))
        out += not_simulated(a, f"no step of the encoding takes {moves or 'no ledger'} (old cluster reachable: "
                                f"{up} to {up_after})", answer)
    return out


OBLIGATIONS = [
    Obligation("pip-477", "build-idempotent-inductive", "BUILD fails a ledger only when the old cluster cannot serve "
               "its source or the new cluster handed its id out, for any number of ledgers, brokers and restarts, "
               "failing every mismatching copy", SECTION, lambda: inductive(frozenset()), ("as-written",),
               proves=("build-idempotent",)),
    Obligation("pip-477", "build-idempotent-inductive", "BUILD fails a ledger only when the old cluster cannot serve "
               "its source or the new cluster handed its id out, for any number of ledgers, brokers and restarts, "
               "deleting and copying again a mismatching copy of its own (strengthened: a copy in progress is to "
               "copy no more than its source holds, and only ids handed out on the old cluster are there or "
               "copied)", SECTION, lambda: inductive(frozenset({FIX})), with_fix("pip-477", FIX),
               proves=("build-idempotent",)),
]
