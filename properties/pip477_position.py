"""PIP-477 ``position-not-rewound``: cursor recovery never returns a markDelete position behind the last one confirmed,
for any number of cursor ledgers, topic moves, restarts and markDeletes (the fix ``promote-cursor-at-copied-lac``).

Ledgers are an uninterpreted sort, positions integers. The encoding keeps the cursor znode (its ledger, its
attribution: ``old``, ``new`` or no cluster, its markDelete position), the position last confirmed to the consumer,
per ledger whether each cluster holds it with an entry and its last entry, whether each cluster is reachable, the
ledgers PROMOTE promoted, whether CLEANUP or ROLLBACK has started, and the owner: the cursor ledger handle its
markDeletes go to (ledger and cluster, bound at open, I4), its in-memory ``ManagedCursorInfo`` (ledger and
attribution), its position and whether it must roll before its next markDelete. Its steps, from ``models/pip477``:
markDelete (appended through the handle, then confirmed); the cursor rollover (a new ledger with the position, the
znode CAS); the topic load (the attribution's cluster, the last entry of the cursor ledger there, else the znode's
position); the unload and the owner's restart; a subscription-property write (the owner's ``cursorProperties``
written back; without the fix ``reserved-keys-rejected`` a user may overwrite the attribution); the owner's
promote-cursor handler (PROMOTE during BUILD, ROLLBACK's reverse CAS during ROLLBACK, each on the owner's cursor
ledger; a 409 changes nothing here); BUILD writing or deleting the new cluster's copy of a ledger; CLEANUP deleting a
promoted ledger's old copy; ROLLBACK deleting a promoted ledger's new copy unless the cursor routes to it; CLEANUP
and ROLLBACK starting. Every other step keeps the cursor's ledgers and may change the rest.

Assumed, and checked on every reachable state by ``simulation`` (each model step is one of these steps, the claimed
ones as themselves): a new cursor ledger was never promoted (an id is not reused); BUILD copies no ledger the cursor
routes to the new cluster or that was promoted; no other step (retention, BUILD's re-copy, schema writes) writes or
deletes a copy of the cursor's ledger (a ledger under its id on the other cluster aside, I11); PROMOTE with the fix
finds both copies holding the same last entry (the owner's 409 check that the ledger has not grown past BUILD's
copy). The first holds only with the fixes ``fence-old-idgen`` and ``promote-built-only``: with the cursor fix
alone, the simulation at ``schema`` shows the cursor's ledger on the new cluster sharing its id with a schema
ledger on the old one (each cluster's idgen handed it out) that PROMOTE re-stamps without a copy, so the fixed claim
is made for ``all-fixes``, and the fix alone is checked at the bounds only.

The claim is about the topic load: the recovered position is at least the one confirmed. Strengthened: the owner's
in-memory cursor is the znode's (I13); an owner that need not roll writes to the znode's ledger on the cluster
its attribution names, which was not promoted; the cluster the attribution names holds the cursor ledger with an
entry at or past the confirmed position; a promoted cursor ledger routed away from the old cluster is still there,
at or past the confirmed position, until CLEANUP (ROLLBACK's target); CLEANUP and ROLLBACK never both start. As
written the counterexample to induction is a markDelete through the old cluster's handle after PROMOTE stamped the
cursor new (the finding ``cursor-position-rewound-after-promote``).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip477.routing import reachable
from pulsar_verify.models.pip477.state import NEW, OLD

from .obligations import Obligation, Verdict, fixes_of, inductive as induction, not_simulated, simulating, universe

Ledger = z3.DeclareSort("PositionLedger")
Attr, (A_OLD, A_NEW, A_NONE) = z3.EnumSort("CursorAttr", ("old", "new", "none"))
ATTR = {"old": A_OLD, "new": A_NEW, "none": A_NONE}  # the stamp of a ledger named by no cluster: none or a user's
FIX = "promote-cursor-at-copied-lac"
RESERVED = "reserved-keys-rejected"  # the other fixes the encoding's steps read
READABLE_OLD = "rollback-only-to-readable-old"
LOAD = ("load_topic",)  # the step the model checks the property after
SECTION = ("PIP-477 Data Plane Continuity: 'markDelete ... Continues'; Cursor PROMOTE (forwarded to topic owner): "
           "'if (cursor.cursorsLedgerId != expectedCursorsLedgerId) return 409'; I9 consequence: 'Consumption "
           "position lost or rewound'")


class Vars:
    NAMES = ("cursor", "attr", "cursor_md", "acked", "has_old", "top_old", "has_new", "top_new", "reach_old",
             "reach_new", "promoted", "copying", "cleaning", "rolling", "owned", "handle", "handle_new", "info",
             "info_attr", "md", "roll")
    OWNER = ("handle", "handle_new", "info", "info_attr", "md", "roll")  # meaningless while no broker owns the topic

    def __init__(self, tag: str):
        bools, ints = z3.ArraySort(Ledger, z3.BoolSort()), z3.ArraySort(Ledger, z3.IntSort())
        self.cursor = z3.Const(f"ps_cursor{tag}", Ledger)  # the znode's cursorsLedgerId
        self.attr = z3.Const(f"ps_attr{tag}", Attr)
        self.cursor_md = z3.Int(f"ps_cursor_md{tag}")  # the znode's markDelete position
        self.acked = z3.Int(f"ps_acked{tag}")  # the position last confirmed to the consumer
        self.has_old = z3.Const(f"ps_has_old{tag}", bools)  # the old cluster holds the ledger, with an entry
        self.top_old = z3.Const(f"ps_top_old{tag}", ints)  # its last entry there (0 when it holds none)
        self.has_new = z3.Const(f"ps_has_new{tag}", bools)
        self.top_new = z3.Const(f"ps_top_new{tag}", ints)
        self.reach_old = z3.Bool(f"ps_reach_old{tag}")  # up and its client open
        self.reach_new = z3.Bool(f"ps_reach_new{tag}")
        self.promoted = z3.Const(f"ps_promoted{tag}", bools)
        self.copying = z3.Const(f"ps_copying{tag}", bools)  # an orchestrator's BUILD copies it
        self.cleaning = z3.Bool(f"ps_cleaning{tag}")  # CLEANUP started (phase cleanup or done)
        self.rolling = z3.Bool(f"ps_rolling{tag}")  # ROLLBACK started
        self.owned = z3.Bool(f"ps_owned{tag}")  # a broker owns the topic
        self.handle = z3.Const(f"ps_handle{tag}", Ledger)  # the ledger of the cursor handle markDeletes go to
        self.handle_new = z3.Bool(f"ps_handle_new{tag}")  # that handle is bound to the new cluster
        self.info = z3.Const(f"ps_info{tag}", Ledger)  # the owner's in-memory cursorsLedgerId
        self.info_attr = z3.Const(f"ps_info_attr{tag}", Attr)  # and attribution
        self.md = z3.Int(f"ps_md{tag}")  # the owner's markDelete position
        self.roll = z3.Bool(f"ps_roll{tag}")  # must roll the cursor ledger before its next markDelete

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]

    def holds(self, new, lid):
        """Whether the cluster (``new``: a Z3 Boolean) holds the ledger with an entry, and its last entry."""
        return z3.If(new, self.has_new[lid], self.has_old[lid]), z3.If(new, self.top_new[lid], self.top_old[lid])


def _write(v: Vars, w: Vars, new, lid, p) -> list:
    """``w``'s copies are ``v``'s with the ledger on the cluster (``new``) holding ``p`` as its last entry."""
    return [w.has_new == z3.If(new, z3.Store(v.has_new, lid, True), v.has_new),
            w.top_new == z3.If(new, z3.Store(v.top_new, lid, p), v.top_new),
            w.has_old == z3.If(new, v.has_old, z3.Store(v.has_old, lid, True)),
            w.top_old == z3.If(new, v.top_old, z3.Store(v.top_old, lid, p))]


def _gone(has, top, has2, top2, lid) -> list:
    """The second copy map is the first with the ledger removed."""
    return [has2 == z3.Store(has, lid, False), top2 == z3.Store(top, lid, top2[lid])]


def _owner(v: Vars, w: Vars, handle, handle_new, info, info_attr, md, roll) -> list:
    return [w.handle == handle, w.handle_new == handle_new, w.info == info, w.info_attr == info_attr, w.md == md,
            w.roll == roll]


def steps(v: Vars, w: Vars, fixes, lid, new, p) -> dict:
    """Each step from ``v`` to ``w``, for the ledger ``lid``, the cluster ``new`` (a Boolean: the new one) and the
    position ``p``."""
    x = z3.Const("x", Ledger)
    fixed = FIX in fixes
    attr_of = z3.If(new, A_NEW, A_OLD)
    routed = z3.Or(v.attr == A_OLD, v.attr == A_NEW)
    here = v.holds(v.attr == A_NEW, v.cursor)
    recovered = z3.If(here[0], here[1], v.cursor_md)  # the cursor ledger's last entry, else the znode's position
    promote = z3.And(z3.Not(v.cleaning), z3.Not(v.rolling), v.has_new[lid], z3.Not(v.copying[lid]),
                     *([v.has_old[lid], v.top_old[lid] == v.top_new[lid]] if fixed else []))
    revert = z3.And(v.rolling, v.promoted[lid], *([v.reach_old, v.has_old[lid]] if READABLE_OLD in fixes else []))
    copies = ("has_old", "top_old", "has_new", "top_new")
    return {
        "mark_delete": z3.And(v.owned, z3.Not(v.roll), *_write(v, w, v.handle_new, v.handle, p), w.md == p,
                              w.acked == p, *v.keep(w, *copies, "md", "acked")),
        "cursor_rollover": z3.And(v.owned, z3.Not(v.promoted[lid]), z3.Not(v.copying[lid]), *_write(v, w, new, lid, p),
                                  w.cursor == lid, w.attr == attr_of, w.cursor_md == p, w.acked == p,
                                  *_owner(v, w, lid, new, lid, attr_of, p, False),
                                  *v.keep(w, *copies, "cursor", "attr", "cursor_md", "acked", *Vars.OWNER)),
        "load_topic": z3.And(z3.Not(v.owned), routed, z3.If(v.attr == A_NEW, v.reach_new, v.reach_old), w.owned,
                             *_owner(v, w, v.cursor, v.attr == A_NEW, v.cursor, v.attr, recovered, True),
                             *v.keep(w, "owned", *Vars.OWNER)),
        # a topic unload, or the owner's restart (which also drops the copies its orchestrator ran)
        "unload": z3.And(v.owned, z3.Not(w.owned), z3.ForAll([x], z3.Implies(w.copying[x], v.copying[x])),
                         *v.keep(w, "owned", "copying", *Vars.OWNER)),
        "set_sub_property": z3.And(v.owned, w.info == v.cursor, w.info_attr == w.attr,
                                   z3.Or(w.attr == v.info_attr, *([] if RESERVED in fixes else [w.attr == A_NONE])),
                                   *v.keep(w, "attr", "info", "info_attr")),
        "promote_cursor_handle": z3.And(v.owned, v.info == lid, z3.If(new, promote, revert), w.attr == attr_of,
                                        w.info == v.cursor, w.info_attr == attr_of,
                                        w.roll == z3.Or(v.roll, z3.And(new, fixed)),
                                        w.promoted == z3.If(new, z3.Store(v.promoted, lid, True), v.promoted),
                                        *v.keep(w, "attr", "info", "info_attr", "roll", "promoted")),
        # BUILD's first step on a ledger stamped old: its copy created empty or deleted for a re-copy
        "build": z3.And(z3.Implies(lid == v.cursor, z3.And(v.attr == A_OLD, z3.Not(v.promoted[lid]))),
                        z3.Or(w.copying == v.copying, w.copying == z3.Store(v.copying, lid, True)),
                        *_gone(v.has_new, v.top_new, w.has_new, w.top_new, lid),
                        *v.keep(w, "has_new", "top_new", "copying")),
        "build_add": z3.And(v.copying[lid], z3.Implies(lid == v.cursor, z3.And(v.attr != A_NEW,
                                                                               z3.Not(v.promoted[lid]))),
                            w.has_new == z3.Store(v.has_new, lid, True),
                            w.top_new == z3.Store(v.top_new, lid, w.top_new[lid]),
                            *v.keep(w, "has_new", "top_new")),
        # a copy recorded, dropped or failed, or an orchestrator's restart
        "build_done": z3.And(z3.ForAll([x], z3.Implies(w.copying[x], v.copying[x])), *v.keep(w, "copying")),
        "cleanup_delete": z3.And(v.cleaning, v.promoted[lid], *_gone(v.has_old, v.top_old, w.has_old, w.top_old, lid),
                                 *v.keep(w, "has_old", "top_old")),
        "rollback_delete": z3.And(v.rolling, v.promoted[lid], z3.Not(z3.And(lid == v.cursor, v.attr == A_NEW)),
                                  *_gone(v.has_new, v.top_new, w.has_new, w.top_new, lid),
                                  *v.keep(w, "has_new", "top_new")),
        "start_cleanup": z3.And(z3.Not(v.rolling), w.cleaning, *v.keep(w, "cleaning")),
        "start_rollback": z3.And(z3.Not(v.cleaning), w.rolling, *v.keep(w, "rolling")),
        # anything else: the other ledgers written or deleted, clusters going down, schema ledgers promoted; the
        # cursor's ledger kept on the cluster its stamp names, and elsewhere unless promoted or copied (another
        # ledger under its id: the idgens collide, I11)
        "other": z3.And(z3.Implies(z3.Or(v.attr == A_OLD, v.promoted[v.cursor], v.copying[v.cursor]),
                                   z3.And(w.has_old[v.cursor] == v.has_old[v.cursor],
                                          w.top_old[v.cursor] == v.top_old[v.cursor])),
                        z3.Implies(z3.Or(v.attr == A_NEW, v.promoted[v.cursor], v.copying[v.cursor]),
                                   z3.And(w.has_new[v.cursor] == v.has_new[v.cursor],
                                          w.top_new[v.cursor] == v.top_new[v.cursor])),
                        z3.Implies(v.attr == A_NONE, z3.And(*[getattr(w, k)[v.cursor] == getattr(v, k)[v.cursor]
                                                              for k in copies])),
                        w.promoted[v.cursor] == v.promoted[v.cursor],
                        z3.ForAll([x], z3.Implies(v.promoted[x], w.promoted[x])),
                        *v.keep(w, *copies, "reach_old", "reach_new", "promoted")),
    }


def recovers(v: Vars) -> z3.BoolRef:
    """The property: an owner's position is at or past the one confirmed to the consumer."""
    return z3.Implies(v.owned, v.md >= v.acked)


def strengthened(v: Vars, fixes) -> z3.BoolRef:
    """The claim with what the protocol keeps (the module docstring says it in words)."""
    routed = z3.Or(v.attr == A_OLD, v.attr == A_NEW)
    here, handled = v.holds(v.attr == A_NEW, v.cursor), v.holds(v.handle_new, v.cursor)
    return z3.And(
        recovers(v),
        z3.Implies(v.owned, z3.And(v.info == v.cursor, v.info_attr == v.attr)),
        z3.Implies(z3.And(v.owned, z3.Not(v.roll)),
                   z3.And(z3.Not(v.promoted[v.cursor]), v.handle == v.cursor, handled[0], handled[1] >= v.acked,
                          z3.Implies(routed, v.handle_new == (v.attr == A_NEW)),
                          z3.Implies(v.copying[v.cursor], z3.Not(v.handle_new)))),
        z3.Implies(routed, z3.And(here[0], here[1] >= v.acked)),
        z3.Implies(z3.And(v.promoted[v.cursor], v.attr != A_OLD, z3.Not(v.cleaning)),
                   z3.And(v.has_old[v.cursor], v.top_old[v.cursor] >= v.acked)),
        z3.Implies(z3.And(v.promoted[v.cursor], v.attr != A_OLD, z3.Not(v.rolling)),
                   z3.And(v.has_new[v.cursor], v.top_new[v.cursor] >= v.acked)),
        z3.Implies(z3.And(v.promoted[v.cursor], v.attr == A_OLD), v.rolling),
        z3.Not(z3.And(v.cleaning, v.rolling)),
        z3.Implies(v.copying[v.cursor], z3.And(v.has_old[v.cursor], v.top_old[v.cursor] >= v.acked,
                                               z3.Not(v.promoted[v.cursor]))),
        z3.Implies(v.attr == A_NONE, z3.Or(z3.And(v.has_old[v.cursor], v.top_old[v.cursor] >= v.acked),
                                           z3.And(v.has_new[v.cursor], v.top_new[v.cursor] >= v.acked))),
        *([routed] if RESERVED in fixes else []))


def initial(v: Vars) -> z3.BoolRef:
    """The model's initial state: ledger 2 on the old cluster holds position 0, broker 0 owns the topic."""
    return z3.And(v.attr == A_OLD, v.cursor_md == 0, v.acked == 0, v.has_old[v.cursor], v.top_old[v.cursor] == 0,
                  v.promoted == z3.K(Ledger, z3.BoolVal(False)),
                  v.copying == z3.K(Ledger, z3.BoolVal(False)), z3.Not(v.cleaning), z3.Not(v.rolling), v.owned,
                  v.handle == v.cursor, z3.Not(v.handle_new), v.info == v.cursor, v.info_attr == A_OLD, v.md == 0,
                  z3.Not(v.roll))


def inductive(fixes, strong=strengthened) -> Verdict:
    v, w = Vars(""), Vars("'")
    lid, new, p = z3.Const("ledger", Ledger), z3.Bool("new"), z3.Int("position")
    return induction(initial(v), strong(v, fixes), strong(w, fixes), steps(v, w, fixes, lid, new, p),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The cursor znode and the position confirmed, each ledger's copies, the phase, then the owner."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    ledgers, names = universe(m, Ledger, "l")
    name = lambda x: names.get(str(e(x)), str(e(x)))  # noqa: E731

    def one(x):
        held = [f"{c} holds it to {e(top[x])}" for c, has, top in (("old", v.has_old, v.top_old),
                                                                   ("new", v.has_new, v.top_new))
                if z3.is_true(e(has[x]))] or ["on no cluster"]
        held += [f for f, arr in (("promoted", v.promoted), ("BUILD copies it", v.copying)) if z3.is_true(e(arr[x]))]
        return f"{name(x)}: {', '.join(held)}"
    down = [c for c, up in (("old", v.reach_old), ("new", v.reach_new)) if not z3.is_true(e(up))]
    phase = [p for p, on in (("CLEANUP", v.cleaning), ("ROLLBACK", v.rolling)) if z3.is_true(e(on))]
    cursor = f"cursor znode: {name(v.cursor)} stamped {e(v.attr)}, position {e(v.cursor_md)}"
    owner = "no owner"
    if z3.is_true(e(v.owned)):
        owner = (f"owner: markDeletes to {name(v.handle)} on {'new' if z3.is_true(e(v.handle_new)) else 'old'}"
                 f"{' (must roll first)' if z3.is_true(e(v.roll)) else ''}, position {e(v.md)}, in memory "
                 f"{name(v.info)} stamped {e(v.info_attr)}")
    return "{" + "; ".join([cursor, f"confirmed {e(v.acked)}", *(one(x) for x in ledgers),
                            *([f"unreachable: {', '.join(down)}"] if down else []), *phase, owner]) + "}"


def _attr(attr) -> str:
    return attr if attr in (OLD, NEW) else "none"


def _views(s) -> tuple:
    """The model state's values of the encoding's variables: the scalars, the roles (cursor, handle and in-memory
    ledger ids), and per ledger id (those absent hold no entry on either cluster, promoted or copied by none) what
    each cluster holds of it (its last entry, or None), whether promoted and whether a BUILD copy of it runs."""
    p, o = s.progress, s.own
    phase = p.phase if p is not None else "none"
    promoted = p.promoted if p is not None else frozenset()
    copying = {lid for x in s.brokers for lid in x.copies.keys()}
    held = {c: {lid: es[-1] for lid, es in s.bk[c].items() if es} for c in (OLD, NEW)}
    ids = set(held[OLD]) | set(held[NEW]) | promoted | copying
    ledgers = {lid: (held[OLD].get(lid), held[NEW].get(lid), lid in promoted, lid in copying) for lid in ids}
    owner = (o.cursor[1] == NEW, _attr(o.info.attr), o.md, o.must_roll) if o is not None else None
    scalars = (_attr(s.cursor.attr), s.cursor.md, s.acked_md, reachable(s, OLD), reachable(s, NEW),
               phase in ("cleanup", "done"), phase in ("rollback", "rolled-back"), owner)
    roles = (s.cursor.ledger, *((o.cursor[0], o.info.ledger) if o is not None else ()))
    return scalars, roles, ledgers


def _pin(v: Vars, x, view) -> list:
    old, new, promoted, copying = view
    return [v.has_old[x] == (old is not None), v.top_old[x] == (old or 0), v.has_new[x] == (new is not None),
            v.top_new[x] == (new or 0), v.promoted[x] == promoted, v.copying[x] == copying]


def _concrete(v: Vars, scalars, roles, ls: dict) -> list:
    attr, cursor_md, acked, reach_old, reach_new, cleaning, rolling, owner = scalars
    out = [v.cursor == ls[roles[0]], v.attr == ATTR[attr], v.cursor_md == cursor_md, v.acked == acked,
           v.reach_old == reach_old, v.reach_new == reach_new, v.cleaning == cleaning, v.rolling == rolling,
           v.owned == (owner is not None)]
    if owner is not None:
        handle_new, info_attr, md, roll = owner
        out += [v.handle == ls[roles[1]], v.handle_new == handle_new, v.info == ls[roles[2]],
                v.info_attr == ATTR[info_attr], v.md == md, v.roll == roll]
    return out


def _show(scalars, roles, named: list, views: list) -> str:
    """A projected state as the encoding sees it, over the ledgers a change names."""
    attr, cursor_md, acked, reach_old, reach_new, cleaning, rolling, owner = scalars
    out = [f"cursor {roles[0]} stamped {attr} at {cursor_md}", f"confirmed {acked}",
           *[f"{c} unreachable" for c, up in ((OLD, reach_old), (NEW, reach_new)) if not up],
           *[p for p, on in (("CLEANUP", cleaning), ("ROLLBACK", rolling)) if on]]
    if owner is not None:
        handle_new, info_attr, md, roll = owner
        out.append(f"owner writes {roles[1]} on {NEW if handle_new else OLD}{' (must roll first)' if roll else ''} "
                   f"at {md}, in memory {roles[2]} stamped {info_attr}")
    for x, (old, new, promoted, copying) in zip(named, views):
        held = [f"{c} to {top}" for c, top in ((OLD, old), (NEW, new)) if top is not None] or ["on no cluster"]
        out.append(f"ledger {x}: " + ", ".join(held + ["promoted"] * promoted + ["BUILD copies it"] * copying))
    return "(" + "; ".join(out) + ")"


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps, the topic load
    as itself. A change is decided once up to the renaming of ledger ids, over the ledgers it changes and those the
    cursor and its owner name (a step writes one ledger and keeps the others)."""
    v, w = Vars(""), Vars("'")
    lid, new, p = z3.Const("ledger", Ledger), z3.Bool("new"), z3.Int("position")
    candidates = steps_of(v, w, model.fixes, lid, new, p)
    views, seen, last, out = {}, set(), {}, []
    absent = (None, None, False, False)
    for s, a, t in pairs:
        for x in (s, t):
            if x not in views:
                views[x] = _views(x)
        (scalars, roles, before), (scalars2, roles2, after) = views[s], views[t]
        changed = {x for x in before.keys() | after.keys() if before.get(x, absent) != after.get(x, absent)}
        if scalars == scalars2 and roles == roles2 and not changed:
            continue
        named = sorted(changed | set(roles) | set(roles2))
        key = (a.name if a.name in LOAD else "", scalars, scalars2,
               tuple((before.get(x, absent), after.get(x, absent), tuple(r == x for r in roles),
                      tuple(r == x for r in roles2)) for x in named))
        if key in seen:
            continue
        seen.add(key)
        ls = {x: z3.Const(f"L{i}", Ledger) for i, x in enumerate(named)}
        pre, post = [before.get(x, absent) for x in named], [after.get(x, absent) for x in named]
        facts = [*([z3.Distinct(*ls.values())] if len(ls) > 1 else []), z3.Or(*[lid == x for x in ls.values()]),
                 *_concrete(v, scalars, roles, ls), *_concrete(w, scalars2, roles2, ls),
                 *[f for x, b, c in zip(named, pre, post) for f in _pin(v, ls[x], b) + _pin(w, ls[x], c)]]
        answer = simulating(a, facts, candidates, LOAD, last)
        out += not_simulated(a, f"no step of the encoding takes {_show(scalars, roles, named, pre)} to "
                                f"{_show(scalars2, roles2, named, post)}", answer)
    return out


OBLIGATIONS = [
    Obligation("pip-477", "position-not-rewound-inductive", "Cursor recovery on a topic load returns a position at or "
               "past the one confirmed, for any number of cursor ledgers, topic moves, restarts and markDeletes, "
               "promoting a cursor ledger by its id only", SECTION, lambda: inductive(frozenset()), ("as-written",),
               proves=("position-not-rewound",)),
    Obligation("pip-477", "position-not-rewound-inductive", "Cursor recovery on a topic load returns a position at or "
               "past the one confirmed, for any number of cursor ledgers, topic moves, restarts and markDeletes, "
               "promoting a cursor ledger only at BUILD's copy and rolling it before the next markDelete "
               "(strengthened: the owner writes to the znode's unpromoted ledger on the cluster it is stamped with, "
               "that cluster holds the confirmed position, and a promoted ledger's copies do until CLEANUP and "
               "ROLLBACK delete them)", SECTION, lambda: inductive(fixes_of("pip-477", "all-fixes")), ("all-fixes",),
               proves=("position-not-rewound",)),
]
