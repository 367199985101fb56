"""PIP-477 schema stamps (every schema index entry stamped ``new`` is of a ledger the new cluster holds: created
there, or copied there by BUILD), for any number of schema versions and brokers, with the fix
``promote-built-only``. It is what I2 needs of the schema reads routed to the new cluster.

Ledgers are an uninterpreted sort; ``created_new(l)`` says the ledger was created on the new cluster (rigid: an id
is allocated once). The encoding keeps, per ledger, whether the locator's index has its entry and that entry's
stamp (none, old or new), whether a putSchema of it is in flight, and whether BUILD recorded it as built. Its
steps, from ``models/pip477``: putSchema creates its ledger, then its locator CAS appends the entry stamped with
the cluster it was created on; schema PROMOTE's CAS (after its read, at the version read, so over the current
index) re-stamps ``new`` every entry stamped ``old`` (with the fix, only those of built ledgers); ROLLBACK
re-stamps entries ``old``; BUILD records ledgers built. Everything else of the model writes none of these, which
``simulation`` checks on every reachable state, each model step being one of these steps or a stutter.

As written the counterexample to induction is PROMOTE re-stamping an entry whose ledger BUILD never copied (the
finding ``schema-promoted-without-copy``: a lagging broker's putSchema after BUILD, read from the new cluster).
"""
from __future__ import annotations

import z3

from .obligations import (Obligation, Verdict, distinct_changes, inductive as induction, not_simulated, one_of,
                          with_fix)

Ledger = z3.DeclareSort("SchemaLedger")
Stamp, (UNSTAMPED, STAMP_OLD, STAMP_NEW) = z3.EnumSort("Stamp", ("none", "old", "new"))
created_new = z3.Function("created_new", Ledger, z3.BoolSort())
STAMP = {None: UNSTAMPED, "old": STAMP_OLD, "new": STAMP_NEW}
FIX = "promote-built-only"
SECTION = ("PIP-477 I2; Schema PROMOTE: 'if (readClusterAttr(ie.position).equals(oldCluster))' re-stamps the "
           "entry; Phase 4 BUILD")


class Vars:
    NAMES = ("listed", "stamp", "pending", "built")

    def __init__(self, tag: str):
        self.listed = z3.Array(f"sch_listed{tag}", Ledger, z3.BoolSort())  # the index has its entry
        self.stamp = z3.Array(f"sch_stamp{tag}", Ledger, Stamp)
        self.pending = z3.Array(f"sch_pending{tag}", Ledger, z3.BoolSort())  # a putSchema of it in flight
        self.built = z3.Array(f"sch_built{tag}", Ledger, z3.BoolSort())  # recorded built by BUILD

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, lid) -> dict:
    """Each step from ``v`` to ``w`` for the ledger ``lid``."""
    x = z3.Const("x", Ledger)
    flipped = z3.And(v.listed[x], v.stamp[x] == STAMP_OLD, *([v.built[x]] if FIX in fixes else []))
    return {
        "put_schema_start": z3.And(z3.Not(v.listed[lid]), z3.Not(v.pending[lid]),
                                   w.pending == z3.Store(v.pending, lid, True), *v.keep(w, "pending")),
        "put_schema_cas": z3.And(v.pending[lid], w.pending == z3.Store(v.pending, lid, False),
                                 w.listed == z3.Store(v.listed, lid, True),
                                 w.stamp == z3.Store(v.stamp, lid, z3.If(created_new(lid), STAMP_NEW, STAMP_OLD)),
                                 *v.keep(w, "pending", "listed", "stamp")),
        "promote_schema_cas": z3.And(z3.ForAll([x], w.stamp[x] == z3.If(flipped, STAMP_NEW, v.stamp[x])),
                                     *v.keep(w, "stamp")),
        "rollback_schema": z3.And(z3.ForAll([x], z3.Or(w.stamp[x] == v.stamp[x],
                                                        z3.And(v.stamp[x] == STAMP_NEW, w.stamp[x] == STAMP_OLD))),
                                  *v.keep(w, "stamp")),
        "build_record": z3.And(z3.ForAll([x], z3.Implies(v.built[x], w.built[x])), *v.keep(w, "built")),
    }


def claim(v: Vars) -> z3.BoolRef:
    """An entry stamped ``new`` is of a ledger created on the new cluster or built there."""
    x = z3.Const("x", Ledger)
    return z3.ForAll([x], z3.Implies(z3.And(v.listed[x], v.stamp[x] == STAMP_NEW), z3.Or(created_new(x), v.built[x])))


def init(v: Vars) -> z3.BoolRef:
    x = z3.Const("x", Ledger)
    return z3.ForAll([x], z3.And(z3.Not(v.pending[x]), z3.Not(v.built[x]),
                                 z3.Implies(v.listed[x], v.stamp[x] == STAMP_OLD)))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    lid = z3.Const("ledger", Ledger)
    return induction(init(v), claim(v), claim(w), steps(v, w, fixes, lid), before=lambda m: describe(m, v),
                     after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """Each ledger's index entry and stamp, putSchema in flight, BUILD record and creating cluster, named l1, ..."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731

    def one(i, x):
        held = [f"stamped {e(v.stamp[x])}" if z3.is_true(e(v.listed[x])) else "not listed"]
        held += [f for f, arr in (("putSchema in flight", v.pending), ("built", v.built)) if z3.is_true(e(arr[x]))]
        held.append("created on new" if z3.is_true(e(created_new(x))) else "created on old")
        return f"l{i + 1}: {', '.join(held)}"
    return "{" + "; ".join(one(i, x) for i, x in enumerate(m.get_universe(Ledger) or [])) + "}"


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: each listed ledger's stamp, the ledgers of the
    putSchema calls in flight, and the ledgers BUILD recorded."""
    built = frozenset(s.progress.built.keys()) if s.progress is not None else frozenset()
    pending = frozenset(x.put_schema[0] for x in s.brokers if x.put_schema is not None)
    return tuple(sorted((e.ledger, e.attr or "") for e in s.schema)), pending, built


def _concrete(v: Vars, projection, ls: dict) -> z3.BoolRef:
    listed, pending, built = projection
    arrays = {"listed": z3.K(Ledger, z3.BoolVal(False)), "pending": z3.K(Ledger, z3.BoolVal(False)),
              "built": z3.K(Ledger, z3.BoolVal(False))}
    stamp = z3.K(Ledger, UNSTAMPED)
    for lid, attr in listed:
        arrays["listed"] = z3.Store(arrays["listed"], ls[lid], True)
        stamp = z3.Store(stamp, ls[lid], STAMP[attr or None])
    for name, ids in (("pending", pending), ("built", built)):
        for lid in sorted(ids):
            arrays[name] = z3.Store(arrays[name], ls[lid], True)
    return z3.And(v.stamp == stamp, *[getattr(v, k) == arr for k, arr in arrays.items()])


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), for a named ledger; ``created_new`` is the model's (the new cluster's idgen handed
    the id out for a ledger created there)."""
    out = []
    for s, a, t, change in distinct_changes(pairs, _projection):
        ids = sorted({lid for side in change for lid, _ in side[0]}.union(*[side[1] | side[2] for side in change]))
        ls = {lid: z3.Const(f"L{lid}", Ledger) for lid in ids}
        on_new = t.allocated.get("new", frozenset()) - t.borrowed
        v, w = Vars(""), Vars("'")
        lid = z3.Const("ledger", Ledger)
        facts = [*([z3.Distinct(*ls.values())] if len(ls) > 1 else []), z3.Or(*[lid == x for x in ls.values()]),
                 *[created_new(x) == (i in on_new) for i, x in ls.items()],
                 _concrete(v, change[0], ls), _concrete(w, change[1], ls)]
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}",
                             one_of(facts, steps_of(v, w, model.fixes, lid).values()))
    return out


OBLIGATIONS = [
    Obligation("pip-477", "schema-stamps-inductive", "Every schema entry stamped new is of a ledger created on the "
               "new cluster or built there, for any number of schema versions and brokers, PROMOTE re-stamping every "
               "entry stamped old", SECTION, lambda: inductive(frozenset()), ("as-written",)),
    Obligation("pip-477", "schema-stamps-inductive", "Every schema entry stamped new is of a ledger created on the "
               "new cluster or built there, for any number of schema versions and brokers, PROMOTE re-stamping only "
               "built ledgers' entries", SECTION, lambda: inductive(frozenset({FIX})), with_fix("pip-477", FIX)),
]
