"""PIP-473: the op records of a txn whose header is gone are eventually deleted, for any number of segments,
subscriptions, txns, sends, acks, seals, crashes and restarts (the fix ``owners-reap-orphans``).

This is the second phase of ``finalized-txns-collected``, the one the fix is about: after the GC sweep deleted the
header, a slow publish or an ack (neither checks the header) may still put a record, which as written nothing
deletes (the finding ``op-record-leaked-after-header-gc``). The first phase, a finalized txn's header deleted, is
not claimed here: with ``keep-decisions-with-data`` the sweep waits for retention to trim every entry of the txn,
which waits for every subscription to read past it, so its ranking would be the dispatchers' progress as well.

A liveness claim, proved by a ranking argument (``obligations.ranked``) under the model's weak fairness (``SYSTEM``
in ``invariants/pip473.py``). Segments and pending-ack stores are the uninterpreted sorts of ``pip473_forget``. For
one txn the encoding keeps whether its header exists; what the client may still do (``left``: its sends and acks
left, counting as left a send still to be appended to a sealed segment, which will be turned back); the seals and
crashes left; per segment whether the broker is up and the segment sealed, whether the buffer has the txn in its
``idx:writes-by-segment`` view, whether an index notification is pending, whether the txn has write records there,
and how many of its sends are to be appended and to be put; per store whether the txn has ack records for it. Its
steps, from ``models/pip473``: the header's creation (a new txn: nothing of it anywhere) and any later header
write or delete; a send (a slot of the client, or, to a sealed segment, a send to be turned back), a send refused
by the header check, its append, its TopicTerminated, its record put (the segment's index watch notified); an ack
and its record; the reaps (with the fix), and any other deletion of records (cleanups, the GC sweep); the index
notification's delivery; a seal, a crash (the segment's broker memory and its sends in flight lost) and a restart
(the view rebuilt from the store); any other step may mark a running buffer's index notification pending.
``simulation`` checks on every reachable state, for each txn, that each model step is one of these, the helpers
below as themselves.

The measure, lexicographic: the seals left, the crashes left, ``left``, then pointwise per segment its sends to be
appended to it unsealed, to be put, and its records (in its running buffer's view, missing from that view, or on a
segment whose broker is down, in this order), and per store its records (its broker up or down). Proved, for a
header-less txn with a record (the trigger): no step raises the measure; each segment or store with a positive rank
has a helper to take: the append or the put of a send, the restart of a down broker, the index delivery for a
record not in the view (strengthened: a running buffer whose view differs from the records has its notification
pending, a down broker has no view, notification or send in flight), and the reap; and taking it lowers the
measure. As written there is no reap: a record in the view of a running buffer, with no header, has nothing to
take it away.
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.pip473 import SYSTEM
from pulsar_verify.models.pip473.state import ACK, WRITE

from .obligations import Obligation, Verdict, ranked, universe, with_fix
from .pip473_forget import Seg, Store, index_watch, per_txn_simulation, seg_of, stored

FIX = "owners-reap-orphans"
HELPERS = ("pub_append", "pub_put", "restart", "tb_index", "tb_reap", "pa_reap")
SECTION = ("PIP-473 Garbage collection: 'The TC's GC sweep ... detects when all participants have done their cleanup "
           "-- the prefix /txn-op/<txnId>/* is empty -- and deletes the header'; the op-record put on the publish "
           "path and appendIndividualAck")


class Vars:
    INTS = ("left", "seals", "crashes")
    SEG_BOOLS = ("up", "sealed", "view", "pend_idx", "wrec")
    SEG_INTS = ("app", "put")
    NAMES = ("header", *INTS, *SEG_BOOLS, *SEG_INTS, "arec")

    def __init__(self, tag: str):
        self.header = z3.Bool(f"rp_header{tag}")  # /txn/<txn> exists
        for name in self.INTS:
            setattr(self, name, z3.Int(f"rp_{name}{tag}"))
        for name in self.SEG_BOOLS:
            setattr(self, name, z3.Array(f"rp_{name}{tag}", Seg, z3.BoolSort()))
        for name in self.SEG_INTS:
            setattr(self, name, z3.Array(f"rp_{name}{tag}", Seg, z3.IntSort()))
        self.arec = z3.Array(f"rp_arec{tag}", Store, z3.BoolSort())

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, k, st) -> dict:
    """Each step from ``v`` to ``w``, at the segment ``k`` or the store ``st``."""
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    indexed, more_idx = index_watch(v, w)
    up_st = v.up[seg_of(st)]
    fewer = z3.And(z3.ForAll([x], z3.Implies(w.wrec[x], v.wrec[x])), z3.ForAll([y], z3.Implies(w.arec[y], v.arec[y])))
    # a send: a slot of the client, unless the segment is sealed (the send will be turned back, its slot freed)
    spent = w.left == z3.If(v.sealed[k], v.left, v.left - 1)
    lost = ("view", "pend_idx", "app", "put")
    out = {
        "header_create": z3.And(z3.Not(v.header), w.header, z3.ForAll([x], z3.And(z3.Not(v.wrec[x]), v.app[x] == 0,
                                                                                 v.put[x] == 0)),
                                z3.ForAll([y], z3.Not(v.arec[y])), *v.keep(w, "header")),
        # the TC's CAS and finalize, the GC sweep's delete
        "header_write": z3.And(v.header, *v.keep(w, "header")),
        "send": z3.And(v.up[k], v.left >= 1, spent, stored(w.app, v.app, k, v.app[k] + 1), *v.keep(w, "left", "app")),
        "send_conflict": z3.And(v.left >= 1, w.left == v.left - 1, *v.keep(w, "left")),
        "pub_append": z3.And(v.up[k], z3.Not(v.sealed[k]), v.app[k] >= 1, stored(w.app, v.app, k, v.app[k] - 1),
                             stored(w.put, v.put, k, v.put[k] + 1), *v.keep(w, "app", "put")),
        "pub_terminated": z3.And(v.up[k], v.sealed[k], v.app[k] >= 1, stored(w.app, v.app, k, v.app[k] - 1),
                                 *v.keep(w, "app")),
        "pub_put": z3.And(v.up[k], v.put[k] >= 1, stored(w.put, v.put, k, v.put[k] - 1),
                          stored(w.wrec, v.wrec, k, True), indexed, more_idx, *v.keep(w, "put", "wrec", "pend_idx")),
        "txn_ack": z3.And(up_st, v.left >= 1, w.left == v.left - 1, stored(w.arec, v.arec, st, True),
                          *v.keep(w, "left", "arec")),
        # the cleanups of a materialized txn, the GC sweep's deletion (the index notified of write records)
        "records_delete": z3.And(fewer, indexed, more_idx, *v.keep(w, "wrec", "arec", "pend_idx")),
        "tb_index": z3.And(v.up[k], v.pend_idx[k], stored(w.pend_idx, v.pend_idx, k, False),
                           stored(w.view, v.view, k, v.wrec[k]), *v.keep(w, "pend_idx", "view")),
        "seal": z3.And(v.seals >= 1, w.seals == v.seals - 1, z3.Not(v.sealed[k]), stored(w.sealed, v.sealed, k, True),
                       w.left >= v.left, *v.keep(w, "seals", "sealed", "left")),
        "crash": z3.And(v.crashes >= 1, w.crashes == v.crashes - 1, v.up[k], stored(w.up, v.up, k, False),
                        stored(w.view, v.view, k, False), stored(w.pend_idx, v.pend_idx, k, False),
                        stored(w.app, v.app, k, 0), stored(w.put, v.put, k, 0), w.left >= 0, w.left <= v.left,
                        *v.keep(w, "crashes", "up", "left", *lost)),
        "restart": z3.And(z3.Not(v.up[k]), stored(w.up, v.up, k, True), stored(w.view, v.view, k, v.wrec[k]),
                          *v.keep(w, "up", "view")),
        # anything else: another txn's record written or deleted notifies running buffers' index watches
        "other": z3.And(more_idx, *v.keep(w, "pend_idx")),
    }
    if FIX in fixes:
        out["tb_reap"] = z3.And(v.up[k], v.view[k], z3.Not(v.header), v.wrec[k], stored(w.wrec, v.wrec, k, False),
                                indexed, more_idx, *v.keep(w, "wrec", "pend_idx"))
        out["pa_reap"] = z3.And(up_st, z3.Not(v.header), v.arec[st], stored(w.arec, v.arec, st, False),
                                *v.keep(w, "arec"))
    return out


def invariant(v: Vars) -> z3.BoolRef:
    """What is left is not negative; a down broker has no view, no pending notification, no send in flight; a
    running buffer whose view of the txn differs from its records has its index notification pending."""
    x = z3.Const("x", Seg)
    return z3.And(v.left >= 0, v.seals >= 0, v.crashes >= 0,
                  z3.ForAll([x], z3.And(v.app[x] >= 0, v.put[x] >= 0)),
                  z3.ForAll([x], z3.Implies(z3.Not(v.up[x]), z3.And(z3.Not(v.view[x]), z3.Not(v.pend_idx[x]),
                                                                    v.app[x] == 0, v.put[x] == 0))),
                  z3.ForAll([x], z3.Implies(z3.And(v.up[x], v.view[x] != v.wrec[x]), v.pend_idx[x])))


def orphaned(v: Vars) -> z3.BoolRef:
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    return z3.And(z3.Not(v.header), z3.Or(z3.Exists([x], v.wrec[x]), z3.Exists([y], v.arec[y])))


def ranks(v: Vars, x, y) -> tuple:
    """The rank of segment ``x`` (its sends to append unsealed, to put, its records) and of store ``y``."""
    held = z3.If(v.wrec[x], z3.If(v.up[x], z3.If(v.view[x], 1, 2), 3), 0)
    seg = z3.If(v.sealed[x], 0, 8 * v.app[x]) + 4 * v.put[x] + held
    store = z3.If(v.arec[y], z3.If(v.up[seg_of(y)], 1, 2), 0)
    return seg, store


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    (a, b), (a2, b2) = ranks(v, x, y), ranks(w, x, y)
    pointwise = z3.And(z3.ForAll([x], a2 <= a), z3.ForAll([y], b2 <= b))
    if strictly:
        pointwise = z3.And(pointwise, z3.Or(z3.Exists([x], a2 < a), z3.Exists([y], b2 < b)))
    top = [(v.seals, w.seals), (v.crashes, w.crashes), (v.left, w.left)]
    out = pointwise
    for old, new in reversed(top):
        out = z3.Or(new < old, z3.And(new == old, out))
    return out


def helpers(v: Vars, fixes, k, st) -> dict:
    """The step to take at the segment ``k`` or the store ``st``: when it is the one, and its guard."""
    y = z3.Const("y", Store)
    up_st = v.up[seg_of(st)]
    out = {"pub_append": (z3.And(v.up[k], z3.Not(v.sealed[k]), v.app[k] >= 1),) * 2,
           "pub_put": (z3.And(v.up[k], v.put[k] >= 1),) * 2,
           "restart": (z3.And(z3.Not(v.up[k]), z3.Or(v.wrec[k], z3.Exists([y], z3.And(seg_of(y) == k, v.arec[y])))),
                       z3.Not(v.up[k])),
           "tb_index": (z3.And(v.up[k], v.wrec[k], z3.Not(v.view[k])), z3.And(v.up[k], v.pend_idx[k]))}
    if FIX in fixes:
        out["tb_reap"] = (z3.And(v.up[k], v.wrec[k], v.view[k]),
                          z3.And(v.up[k], v.view[k], z3.Not(v.header), v.wrec[k]))
        out["pa_reap"] = (z3.And(up_st, v.arec[st]), z3.And(up_st, z3.Not(v.header), v.arec[st]))
    return out


def reaped(fixes, invariant_of=invariant) -> Verdict:
    """The ranking argument for a header-less txn with a record (the trigger) until it has none, from the invariant
    (``obligations.ranked`` proves it inductive)."""
    v, w = Vars(""), Vars("'")
    k, st = z3.Const("segment", Seg), z3.Const("store", Store)
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    init = z3.And(z3.Not(v.header), v.left >= 0, v.seals >= 0, v.crashes >= 0, v.up == z3.K(Seg, z3.BoolVal(True)),
                  *[getattr(v, n) == z3.K(Seg, z3.BoolVal(False)) for n in Vars.SEG_BOOLS if n != "up"],
                  *[getattr(v, n) == z3.K(Seg, z3.IntVal(0)) for n in Vars.SEG_INTS],
                  v.arec == z3.K(Store, z3.BoolVal(False)))
    seg, store = ranks(v, x, y)
    at_seg, at_store = helpers(v, fixes, x, y), helpers(v, fixes, seg_of(y), y)
    stores_helped = [when for name, (when, _) in at_store.items() if name in ("restart", "pa_reap")]
    covers = z3.And(z3.ForAll([x], z3.Implies(seg > 0, z3.Or(*[when for name, (when, _) in at_seg.items()
                                                                if name != "pa_reap"]))),
                    z3.ForAll([y], z3.Implies(store > 0, z3.Or(*stores_helped))))
    return ranked(init, invariant_of(v), invariant_of(w), orphaned(v), orphaned(w), z3.Not(orphaned(w)),
                  steps(v, w, fixes, k, st), helpers(v, fixes, k, st), covers, no_worse(v, w),
                  no_worse(v, w, strictly=True), SYSTEM, before=lambda m: describe(m, v),
                  after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The header and what is left, then each segment's broker, view and records, each store's records."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    segs, snames = universe(m, Seg, "segment ", first=0)
    stores, tnames = universe(m, Store, "store ", first=0)
    words = {"sealed": "sealed", "view": "in its index view", "pend_idx": "index event pending",
             "wrec": "write records"}

    def seg(x):
        held = [words[n] for n in words if z3.is_true(e(getattr(v, n)[x]))]
        held += [f"{e(getattr(v, n)[x])} sends to {n.replace('app', 'append')}" for n in Vars.SEG_INTS
                 if e(getattr(v, n)[x]).as_long()]
        return f"{snames[str(x)]}{'' if z3.is_true(e(v.up[x])) else ' (down)'}: {', '.join(held) or 'nothing'}"
    out = ["header exists" if z3.is_true(e(v.header)) else "no header",
           f"{e(v.left)} sends and acks left, {e(v.seals)} seals, {e(v.crashes)} crashes"]
    out += [seg(x) for x in segs]
    out += [f"{tnames[str(y)]} on {snames.get(str(e(seg_of(y))), '?')}: "
            f"{'ack records' if z3.is_true(e(v.arec[y])) else 'nothing'}" for y in stores]
    return "{" + "; ".join(out) + "}"


def _views(model, s, t: int) -> tuple:
    """The model state's values of the encoding's variables for the txn ``t``."""
    cfg = model.config
    nsubs = len(s.pending) // len(s.buffers)
    c = s.clients[t - 1]
    records = [(op.kind, op.seg, op.sub) for (x, _), op in s.ops if x == t]
    mine = [(p.seg, p.stage) for p in s.publishes if p.txn == t]
    turned_back = sum(stage == "append" and s.sealed[seg] for seg, stage in mine)
    left = cfg.writes - c.sends + turned_back + cfg.acks - c.acks
    segs = tuple((s.up[seg], s.sealed[seg], t in b.writes, b.pend_idx,
                  any(kind == WRITE and g == seg for kind, g, _ in records),
                  mine.count((seg, "append")), mine.count((seg, "put"))) for seg, b in enumerate(s.buffers))
    stores = tuple(any(kind == ACK and g == i // nsubs and sub == i % nsubs for kind, g, sub in records)
                   for i in range(len(s.pending)))
    return t in s.headers, left, cfg.seals - s.seals, cfg.crashes - s.crashes, segs, stores


def _concrete(v: Vars, view, ks: list, ss: list) -> list:
    header, left, seals, crashes, segs, stores = view
    out = [v.header == header, v.left == left, v.seals == seals, v.crashes == crashes]
    for k, values in zip(ks, segs):
        out += [getattr(v, n)[k] == x for n, x in zip(Vars.SEG_BOOLS + Vars.SEG_INTS, values)]
    out += [v.arec[y] == x for y, x in zip(ss, stores)]
    return out


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn is one of its steps,
    for that txn; the helpers as themselves (the ranking argument takes them as the model's fair steps)."""
    return per_txn_simulation(model, pairs, Vars, steps_of, lambda s, t: _views(model, s, t), _concrete, HELPERS)


OBLIGATIONS = [
    Obligation("pip-473", "orphan-records-reaped-ranked", "The op records of a txn whose header is gone are "
               "eventually deleted, for any number of segments, subscriptions, txns, sends, acks, seals, crashes and "
               "restarts, as written: nothing deletes a record put after the GC sweep deleted the header", SECTION,
               lambda: reaped(frozenset()), ("as-written",)),
    Obligation("pip-473", "orphan-records-reaped-ranked", "The op records of a txn whose header is gone are "
               "eventually deleted, for any number of segments, subscriptions, txns, sends, acks, seals, crashes and "
               "restarts, each owner reaping them through its index (ranked by the seals, crashes, sends and acks "
               "left, then per segment its sends in flight and records, per store its records; strengthened: a "
               "running buffer whose view differs from the records has its index notification pending)", SECTION,
               lambda: reaped(frozenset({FIX})), with_fix("pip-473", FIX)),
]
