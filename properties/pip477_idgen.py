"""PIP-477 I11: no ledger id is handed out by both clusters' ``/ledgers/idgen-long``, for any number of
ledgers created on either cluster, before and after the switch (the fix ``fence-old-idgen``).

The encoding keeps the two idgens (integers), the ids each has handed out (arrays from ids to
booleans), the fence of the old cluster's idgen, whether a broker holds the switch request fenced or
prechecked, and whether the directive is written. Its steps: the fence, the precheck (which, with
the fix, advances the new cluster's idgen to the fence), the directive write, a restart that loses a
request, and ``asyncCreateLedger`` on either cluster, taking any id at or past the next one (the model
skips ids a BUILD copy holds); a ledger created on the old cluster after the fence takes its id from
the new cluster's idgen, past the fence. Which model step allocates, and on which cluster, depends on
state the encoding leaves out (brokers' active clusters, BUILD), so the encoding is an abstraction:
``simulation`` checks on every reachable state that each step of the model is one of these steps (or
changes none of their variables), which keeps a proof over them sound for the model.

As written the claim is not inductive: the counterexample to induction is a ledger one cluster
creates under an id the other cluster's idgen handed out (the finding at ``cursor``, 10 steps: the old
cluster creates it after the precheck). With the fix it is, strengthened: the old cluster's ids are all below the
fence, and the new cluster hands out none below it.
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip477.state import NEW, OLD

from .obligations import Obligation, Verdict, all_of, distinct_changes, inductive as induction, sat, with_fix

SECTION = ("PIP-477 I11; Phase 2: 'verifies the new cluster's /ledgers/idgen-long is advanced beyond "
           "max(ledgerId) of the source cluster'")
FIXED = with_fix("pip-477", "fence-old-idgen")
BROKEN = "mutant:no-precheck"  # with the fix, the precheck does not advance the new cluster's idgen


class Ids:
    def __init__(self, tag: str):
        self.idgen_old, self.idgen_new = z3.Int(f"idgen_old{tag}"), z3.Int(f"idgen_new{tag}")
        self.old = z3.Array(f"handed_old{tag}", z3.IntSort(), z3.BoolSort())
        self.new = z3.Array(f"handed_new{tag}", z3.IntSort(), z3.BoolSort())
        self.has_fence, self.fence = z3.Bool(f"has_fence{tag}"), z3.Int(f"fence{tag}")
        self.fenced, self.checked = z3.Bool(f"request_fenced{tag}"), z3.Bool(f"request_checked{tag}")
        self.switched = z3.Bool(f"switched{tag}")

    def vars(self) -> list:
        return [self.idgen_old, self.idgen_new, self.old, self.new, self.has_fence, self.fence, self.fenced,
                self.checked, self.switched]

    def keep(self, w: "Ids", *changed) -> z3.BoolRef:
        return z3.And(*[b == a for a, b in zip(self.vars(), w.vars()) if not any(b.eq(c) for c in changed)])


def _max(a, b):
    return z3.If(a >= b, a, b)


def steps(v: Ids, w: Ids, fixes, variant: str, lid) -> dict:
    """Each step from ``v`` to ``w``; ``lid`` the id a creation takes (a free constant: any id)."""
    fix = "fence-old-idgen" in fixes
    raised = _max(v.idgen_new, v.fence) if fix and variant != BROKEN else v.idgen_new
    borrow = z3.And(lid >= _max(v.idgen_new, v.fence), w.new == z3.Store(v.new, lid, True), w.idgen_new == lid + 1,
                    v.keep(w, w.new, w.idgen_new))
    own = z3.And(lid >= v.idgen_old, w.old == z3.Store(v.old, lid, True), w.idgen_old == lid + 1,
                 v.keep(w, w.old, w.idgen_old))
    out = {
        "create_on_old": z3.If(v.has_fence, borrow, own),
        "create_on_new": z3.And(v.switched, lid >= v.idgen_new, w.new == z3.Store(v.new, lid, True),
                                w.idgen_new == lid + 1, v.keep(w, w.new, w.idgen_new)),
        "precheck": z3.And(v.fenced if fix else z3.BoolVal(True), w.idgen_new == raised, w.checked,
                           v.keep(w, w.idgen_new, w.checked, w.fenced)),
        "switch": z3.And(v.checked, w.switched, v.keep(w, w.switched, w.checked)),
        "restart": z3.And(z3.Implies(w.fenced, v.fenced), z3.Implies(w.checked, v.checked),
                          v.keep(w, w.fenced, w.checked)),
    }
    if fix:
        out["fence_idgen"] = z3.And(w.has_fence, w.fence == z3.If(v.has_fence, v.fence, v.idgen_old), w.fenced,
                                    v.keep(w, w.has_fence, w.fence, w.fenced))
    return out


def apart(v: Ids) -> z3.BoolRef:
    """I11: no id handed out by both."""
    i = z3.Int("i")
    return z3.ForAll([i], z3.Not(z3.And(v.old[i], v.new[i])))


def plain(v: Ids) -> z3.BoolRef:
    """I11, and every id the old cluster handed out is below its idgen."""
    i = z3.Int("i")
    return z3.And(apart(v), z3.ForAll([i], z3.Implies(v.old[i], i < v.idgen_old)))


def strengthened(v: Ids) -> z3.BoolRef:
    i = z3.Int("i")
    past = z3.And(v.has_fence, v.idgen_new >= v.fence)
    return z3.And(plain(v), z3.Implies(v.has_fence, v.fence == v.idgen_old), z3.Implies(v.fenced, v.has_fence),
                  z3.ForAll([i], z3.Implies(v.new[i], z3.And(v.has_fence, i >= v.fence))),
                  z3.Implies(v.checked, past), z3.Implies(v.switched, past))


def inductive(variant: str) -> Verdict:
    from pulsar_verify import registry
    fixes = registry.model_class("pip-477").variant_named(variant).fixes
    v, w, lid = Ids(""), Ids("'"), z3.Int("lid")
    i = z3.Int("i")
    init = z3.And(z3.ForAll([i], z3.And(z3.Implies(v.old[i], i < v.idgen_old), z3.Not(v.new[i]))),
                  z3.Not(v.has_fence), z3.Not(v.fenced), z3.Not(v.checked), z3.Not(v.switched))
    claim = strengthened if "fence-old-idgen" in fixes else plain  # as written there is no fence to state
    return induction(init, claim(v), claim(w), steps(v, w, fixes, variant, lid),
                     before=lambda m: _show(m, v, lid), after=lambda m: _show(m, w, lid))


def _show(m: z3.ModelRef, v: Ids, lid) -> str:
    def ev(x):
        return m.eval(x, model_completion=True)
    fence = f"fenced at {ev(v.fence)}" if z3.is_true(ev(v.has_fence)) else "not fenced"
    return (f"idgen old {ev(v.idgen_old)}, new {ev(v.idgen_new)}, {fence}; id {ev(lid)} handed out by old: "
            f"{ev(v.old[lid])}, by new: {ev(v.new[lid])}; request fenced {ev(v.fenced)}, checked {ev(v.checked)}; "
            f"directive {ev(v.switched)}")


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables, in ``Ids.vars`` order."""
    requests = {x.request for x in s.brokers}
    return (s.idgen[OLD], s.idgen[NEW], s.allocated[OLD], s.allocated[NEW], s.fenced is not None, s.fenced or 0,
            "fenced" in requests, "checked" in requests, s.directive is not None)


def _concrete(v: Ids, s) -> z3.BoolRef:
    def handed(arr, ids):
        value = z3.K(z3.IntSort(), z3.BoolVal(False))
        for x in sorted(ids):
            value = z3.Store(value, x, True)
        return arr == value
    values = _projection(s)
    return z3.And(*[handed(x, value) if z3.is_array(x) else x == value for x, value in zip(v.vars(), values)])


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps
    (decided once per distinct change: the variables' values before and after)."""
    out = []
    for s, a, t, _ in distinct_changes(pairs, _projection):
        v, w, lid = Ids(""), Ids("'"), z3.Int("lid")
        if not sat(_concrete(v, s), _concrete(w, t),
                   z3.Or(v.keep(w), *steps_of(v, w, model.fixes, model.config.variant, lid).values())):
            out.append(f"{a}: no step of the encoding takes {_show_concrete(s)} to {_show_concrete(t)}")
    return out


def _show_concrete(s) -> str:
    return (f"(idgen {dict(s.idgen)}, handed out {dict((c, sorted(x)) for c, x in s.allocated.items())}, "
            f"fence {s.fenced}, requests {[x.request for x in s.brokers]}, directive {s.directive is not None})")


OBLIGATIONS = [
    Obligation("pip-477", "I11-inductive", "I11 (no id handed out by both clusters' idgen) is inductive, for any "
               "number of ledgers created on either cluster", SECTION, lambda: inductive("as-written"),
               ("as-written",), proves=("I11",)),
    Obligation("pip-477", "I11-inductive", "I11, strengthened (the old cluster's ids all below the fence, the new "
               "cluster's none), is inductive with the old idgen fenced, for any number of ledgers", SECTION,
               lambda: all_of(inductive(x) for x in FIXED), FIXED, proves=("I11",)),
    Obligation("pip-477", "I11-inductive", "I11, strengthened, is inductive with the old idgen fenced but the new "
               "one not advanced to the fence", SECTION, lambda: inductive(BROKEN), (BROKEN,), proves=("I11",)),
]
