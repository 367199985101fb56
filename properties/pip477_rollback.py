"""PIP-477 ``rollback-keeps-reads``: ROLLBACK routes a ledger back to the old cluster only where the old cluster
can serve it, for any number of schema versions, ledgers and brokers (the fix ``rollback-only-to-readable-old``).

Ledgers are an uninterpreted sort. The encoding keeps each ledger's schema index entry and stamp, whether
PROMOTE promoted it and whether the old cluster can serve it (up, client open, the ledger there with an entry);
the cursor znode's ledger and whether it is stamped ``new``; and whether a broker owns the topic, with the cursor
ledger its in-memory ``ManagedCursorInfo`` names. ROLLBACK re-stamps ``old`` in two steps of ``models/pip477``:
the orchestrator's ``rollback_schema`` (every promoted ledger's entry; with the fix only the readable ones) and
the owner's ``promote_cursor_handle`` (the cursor, when the request's ledger is the owner's; with the fix only if
readable). The topic load, the unload (a move or a restart) and the cursor rollover change the owner or the
cursor ledger; every other step keeps those and may change anything else. ``simulation`` checks on every
reachable state that each model step is one of these steps, the two ROLLBACK steps each as itself, and that
those two write no ledger-list record (so the claim over schema entries and the cursor is the model property).

The claim is about one step: a schema entry or the cursor that ROLLBACK takes from ``new`` is of a ledger the
old cluster can serve. Strengthened: an owner's in-memory cursor names the znode's ledger (the handler checks
the request against the former and re-stamps the latter). As written the counterexample is the flip of a ledger
the old cluster cannot serve (the finding ``rollback-routes-reads-to-dead-old-cluster``).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip477.routing import readable
from pulsar_verify.models.pip477.state import NEW, OLD

from .obligations import (Obligation, Verdict, distinct_changes, inductive as induction, members, not_simulated,
                          simulating, universe, with_fix)
from .pip477_stamps import STAMP, STAMP_NEW, STAMP_OLD, Stamp

Ledger = z3.DeclareSort("RollbackLedger")
FIX = "rollback-only-to-readable-old"
FLIPS = ("rollback_schema", "promote_cursor_handle")  # the steps the model checks the property on
SECTION = ("PIP-477 Phase 7: 'The reverse-CAS flips the attribution property back to oldCluster'; Rollout P5 "
           "(Scenario A): 'Already-migrated Schema/Cursor still readable'")


class Vars:
    NAMES = ("listed", "stamp", "promoted", "readable", "cursor", "cursor_new", "owned", "owned_cursor")

    def __init__(self, tag: str):
        self.listed = z3.Array(f"rb_listed{tag}", Ledger, z3.BoolSort())  # the schema index has its entry
        self.stamp = z3.Array(f"rb_stamp{tag}", Ledger, Stamp)
        self.promoted = z3.Array(f"rb_promoted{tag}", Ledger, z3.BoolSort())
        self.readable = z3.Array(f"rb_readable{tag}", Ledger, z3.BoolSort())  # the old cluster can serve it
        self.cursor = z3.Const(f"rb_cursor{tag}", Ledger)  # the cursor znode's cursorsLedgerId
        self.cursor_new = z3.Bool(f"rb_cursor_new{tag}")  # the cursor znode's attribution is new
        self.owned = z3.Bool(f"rb_owned{tag}")  # a broker owns the topic
        self.owned_cursor = z3.Const(f"rb_owned_cursor{tag}", Ledger)  # the owner's in-memory cursorsLedgerId

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, lid) -> dict:
    """Each step from ``v`` to ``w``; ``lid`` the ledger of the owner's request, the new cursor ledger of a
    rollover."""
    x = z3.Const("x", Ledger)
    fixed = FIX in fixes
    back = z3.And(v.listed[x], v.promoted[x], *([v.readable[x]] if fixed else []))
    flip = z3.And(v.owned, v.owned_cursor == lid, *([v.readable[lid]] if fixed else []))
    return {
        "rollback_schema": z3.And(z3.ForAll([x], w.stamp[x] == z3.If(back, STAMP_OLD, v.stamp[x])),
                                  *v.keep(w, "stamp")),
        # the handler: PROMOTE's (stamp new and record the ledger promoted, or a 409) or ROLLBACK's (old, where
        # the guards pass)
        "promote_cursor_handle": z3.And(z3.Or(z3.And(w.cursor_new, w.promoted == z3.Store(v.promoted, lid, True)),
                                              z3.And(w.cursor_new == z3.And(v.cursor_new, z3.Not(flip)),
                                                     w.promoted == v.promoted)),
                                        *v.keep(w, "cursor_new", "promoted")),
        "load_topic": z3.And(w.owned, w.owned_cursor == v.cursor, *v.keep(w, "owned", "owned_cursor")),
        "unload": z3.And(z3.Not(w.owned), *v.keep(w, "owned", "owned_cursor")),
        "cursor_rollover": z3.And(v.owned, w.cursor == lid, w.owned_cursor == lid,
                                  *v.keep(w, "cursor", "owned_cursor", "cursor_new", "readable")),
        "other": z3.And(*v.keep(w, "listed", "stamp", "promoted", "readable", "cursor_new")),
    }


def reads_kept(v: Vars, w: Vars) -> z3.BoolRef:
    """Every schema entry and the cursor a step takes from ``new`` is of a ledger the old cluster can serve."""
    x = z3.Const("x", Ledger)
    entries = z3.ForAll([x], z3.Implies(z3.And(v.listed[x], v.stamp[x] == STAMP_NEW, w.stamp[x] != STAMP_NEW),
                                        v.readable[x]))
    return z3.And(entries, z3.Implies(z3.And(v.cursor_new, z3.Not(w.cursor_new)), v.readable[v.cursor]))


def owner_names_cursor(v: Vars) -> z3.BoolRef:
    return z3.Implies(v.owned, v.owned_cursor == v.cursor)


def inductive(fixes) -> Verdict:
    v, w, lid = Vars(""), Vars("'"), z3.Const("ledger", Ledger)
    init = z3.And(owner_names_cursor(v), z3.Not(v.cursor_new))
    return induction(init, owner_names_cursor(v), owner_names_cursor(w), steps(v, w, fixes, lid),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w),
                     also=lambda label: reads_kept(v, w) if label in FLIPS else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """Each ledger's schema entry, promotion and readability on the old cluster, then the cursor and its owner."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    ledgers, names = universe(m, Ledger, "l")
    name = lambda x: names.get(str(e(x)), str(e(x)))  # noqa: E731

    def one(x):
        held = [f"entry stamped {e(v.stamp[x])}" if z3.is_true(e(v.listed[x])) else "no entry"]
        held += [f for f, arr in (("promoted", v.promoted), ("readable on old", v.readable)) if z3.is_true(e(arr[x]))]
        return f"{name(x)}: {', '.join(held)}"
    owner = f"owner's cursor {name(v.owned_cursor)}" if z3.is_true(e(v.owned)) else "no owner"
    cursor = f"cursor {name(v.cursor)} stamped {'new' if z3.is_true(e(v.cursor_new)) else 'not new'}"
    return "{" + "; ".join([*(one(x) for x in ledgers), cursor, owner]) + "}"


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables, the readable ledgers among those it names."""
    promoted = frozenset(s.progress.promoted) if s.progress is not None else frozenset()
    schema = tuple(sorted((e.ledger, e.attr or "") for e in s.schema))
    owned = s.own.info.ledger if s.own is not None else None
    named = {lid for lid, _ in schema} | promoted | {s.cursor.ledger} | ({owned} if owned is not None else set())
    return (schema, promoted, frozenset(x for x in named if readable(s, OLD, x)), s.cursor.ledger,
            s.cursor.attr == NEW, owned)


def _concrete(v: Vars, projection, ls: dict) -> z3.BoolRef:
    schema, promoted, readable_ids, cursor, cursor_new, owned = projection
    no = z3.K(Ledger, z3.BoolVal(False))
    listed, stamp = no, z3.K(Ledger, STAMP[None])
    for lid, attr in schema:
        listed, stamp = z3.Store(listed, ls[lid], True), z3.Store(stamp, ls[lid], STAMP[attr or None])
    promo, ok = (members(Ledger, [ls[lid] for lid in sorted(ids)]) for ids in (promoted, readable_ids))
    return z3.And(v.listed == listed, v.stamp == stamp, v.promoted == promo, v.readable == ok, v.cursor == ls[cursor],
                  v.cursor_new == cursor_new, v.owned == (owned is not None),
                  *([v.owned_cursor == ls[owned]] if owned is not None else []))


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), a ROLLBACK step as itself, which writes no ledger-list record."""
    out = [f"{a}: ROLLBACK changes the ledger list" for s, a, t in pairs if a.name in FLIPS and s.ml != t.ml]
    last = {}
    for s, a, t, change in distinct_changes(pairs, _projection):
        (schema, promoted, ok, cursor, _, owned), after = change
        ids = {cursor, after[3]} | {lid for lid, _ in schema + after[0]} | promoted | after[1] | ok | after[2]
        ids = sorted(ids | {x for x in (owned, after[5]) if x is not None})
        ls = {lid: z3.Const(f"L{lid}", Ledger) for lid in ids}
        v, w, lid = Vars(""), Vars("'"), z3.Const("ledger", Ledger)
        facts = [*([z3.Distinct(*ls.values())] if len(ls) > 1 else []), z3.Or(*[lid == x for x in ls.values()]),
                 _concrete(v, change[0], ls), _concrete(w, change[1], ls)]
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}",
                             simulating(a, facts, steps_of(v, w, model.fixes, lid), FLIPS, last))
    return out


OBLIGATIONS = [
    Obligation("pip-477", "rollback-keeps-reads-inductive", "ROLLBACK re-stamps old only schema entries and cursors "
               "of ledgers the old cluster can serve, for any number of schema versions, ledgers and brokers, "
               "flipping back every promoted ledger", SECTION, lambda: inductive(frozenset()), ("as-written",),
               proves=("rollback-keeps-reads",)),
    Obligation("pip-477", "rollback-keeps-reads-inductive", "ROLLBACK re-stamps old only schema entries and cursors "
               "of ledgers the old cluster can serve, for any number of schema versions, ledgers and brokers, "
               "flipping back only readable ledgers (strengthened: an owner's in-memory cursor names the znode's "
               "ledger)", SECTION, lambda: inductive(frozenset({FIX})), with_fix("pip-477", FIX),
               proves=("rollback-keeps-reads",)),
]
