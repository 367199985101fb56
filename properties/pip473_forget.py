"""PIP-473 ``collected-txns-leave-brokers``: once a txn's header and op records are gone, every running broker drops
it from its header cache, its index view and its pending acks, for any number of segments, subscriptions, txns,
crashes and restarts (the fix ``forget-collected-acks``).

A liveness claim, proved by a ranking argument (``obligations.ranked``) under the model's weak fairness (``SYSTEM``
in ``invariants/pip473.py``). Segments and pending-ack stores are uninterpreted sorts, each store on its segment. For
one txn the encoding keeps whether its header exists; per segment whether the broker is up, whether the buffer caches
the txn's header and has it in its ``idx:writes-by-segment`` view, whether a header notification for it and an index
notification are pending there, and whether the txn has write records on the segment; per store whether it caches
the header, holds pending acks of the txn, has a header notification pending, and whether the txn has ack records
for it, and whether it materialized the txn. Its steps, from ``models/pip473``: the header's creation, put or delete
(every cache holding it notified); a write record put, and write records deleted (the segment's index watch
notified); an ack (its record, and the pending ack, which with the fix a store does not keep for a txn without a
header); the GC sweep's deletion (of a txn with a header), a store's cleanup of a txn it materialized and its reap
of one without a header; the three watch deliveries (``tb_header``, ``tb_index``, ``pa_header``); a send caching
the header; a crash (the segment's memory lost) and a restart (the buffer and stores rebuilt from the store); any
other step may mark a running buffer's index notification pending.
``simulation`` checks on every reachable state, for each txn, that each model step is one of these, the three
deliveries as themselves.

The measure: per segment, what its running buffer holds of the txn (cached header, index view), per store what it
holds (cached header, pending acks), ordered pointwise. Proved, for a txn collected while a running broker holds
some of it: no step raises the measure (a step that writes a record or a header ends the trigger); each segment or
store holding some of it has its delivery enabled (strengthened: a crashed broker holds nothing; a cached header of
a txn without one and a view that differs from the records each have their notification pending; a store holding
pending acks caches the header if there is one, and holds them without a cached header only after a restart, with
their record, not having materialized the txn); and that delivery lowers the measure. As written that invariant
fails: a store keeps an ack of a txn it materialized, and the header notification drops a store's cached header but
keeps the pending acks; either way nothing is left to deliver (the finding ``pending-acks-kept-after-header-gc``).
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.pip473 import SYSTEM
from pulsar_verify.models.pip473.state import ACK, WRITE

from .obligations import Obligation, Verdict, ranked, simulated, universe, with_fix

Seg = z3.DeclareSort("ForgetSeg")
Store = z3.DeclareSort("ForgetStore")
seg_of = z3.Function("seg_of", Store, Seg)  # the segment a (segment, subscription) store belongs to: rigid
FIX = "forget-collected-acks"
DELIVERIES = ("tb_header", "tb_index", "pa_header")  # the helpers: the model's fair watch deliveries
SECTION = ("PIP-473 Notification mechanism: the header cache is 'kept up to date by point-watches', maxReadPosition "
           "'populated by a watch on idx:writes-by-segment'; MetadataPendingAckStore; Garbage collection")


class Vars:
    SEGS = ("up", "hdr", "pend_hdr", "view", "pend_idx", "wrec")
    STORES = ("phdr", "pend", "acks", "arec", "done")
    NAMES = ("header", *SEGS, *STORES)

    def __init__(self, tag: str):
        self.header = z3.Bool(f"fg_header{tag}")  # /txn/<txn> exists
        for name in self.SEGS:
            setattr(self, name, z3.Array(f"fg_{name}{tag}", Seg, z3.BoolSort()))
        for name in self.STORES:
            setattr(self, name, z3.Array(f"fg_{name}{tag}", Store, z3.BoolSort()))

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def stored(w_arr, v_arr, k, value) -> z3.BoolRef:
    """``w_arr`` is ``v_arr`` with ``value`` at ``k``."""
    return w_arr == z3.Store(v_arr, k, value)


def steps(v: Vars, w: Vars, fixes, k, st) -> dict:
    """Each step from ``v`` to ``w``, at the segment ``k`` or the store ``st``."""
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    up_st = lambda arr, s: arr[seg_of(s)]  # noqa: E731
    notify = z3.And(z3.ForAll([x], w.pend_hdr[x] == z3.Or(v.pend_hdr[x], z3.And(v.up[x], v.hdr[x]))),
                    z3.ForAll([y], w.pend[y] == z3.Or(v.pend[y], z3.And(up_st(v.up, y), v.phdr[y]))))
    indexed, more_idx = index_watch(v, w)
    lost = z3.And(*[z3.ForAll([x], getattr(w, n)[x] == z3.And(x != k, getattr(v, n)[x]))
                    for n in ("hdr", "pend_hdr", "view", "pend_idx")],
                  *[z3.ForAll([y], getattr(w, n)[y] == z3.And(seg_of(y) != k, getattr(v, n)[y]))
                    for n in ("phdr", "pend", "acks", "done")])
    rebuilt = z3.And(*[z3.ForAll([x], z3.Implies(x != k, getattr(w, n)[x] == getattr(v, n)[x]))
                       for n in ("hdr", "pend_hdr", "view", "pend_idx")],
                     w.view[k] == v.wrec[k], w.hdr[k] == z3.And(v.header, v.wrec[k]), w.pend_hdr[k] == w.hdr[k],
                     z3.Not(w.pend_idx[k]),
                     z3.ForAll([y], z3.If(seg_of(y) == k,
                                          z3.And(w.acks[y] == v.arec[y], w.phdr[y] == z3.And(v.arec[y], v.header),
                                                 w.pend[y] == w.phdr[y], z3.Not(w.done[y])),
                                          z3.And(w.acks[y] == v.acks[y], w.phdr[y] == v.phdr[y], w.pend[y] == v.pend[y],
                                                 w.done[y] == v.done[y]))))
    # materializing a final state drops the pending acks; a header that is gone drops them only with the fix
    dropped = z3.And(z3.Implies(w.acks[st], v.acks[st]),
                     z3.Implies(z3.Not(v.header), w.acks[st] == z3.And(v.acks[st], FIX not in fixes)))
    lose = ("hdr", "pend_hdr", "view", "pend_idx", "phdr", "pend", "acks", "done")  # a broker's memory
    return {
        # new_txn: the txn's first record of any kind (its id is new)
        "header_create": z3.And(z3.Not(v.header), w.header, _pristine(v), notify, *v.keep(w, "header", "pend_hdr",
                                                                                        "pend")),
        # the TC's CAS and finalize, then the GC sweep's delete: every cache of the header notified
        "header_write": z3.And(v.header, notify, *v.keep(w, "header", "pend_hdr", "pend")),
        "pub_put": z3.And(w.wrec == z3.Store(v.wrec, k, True), indexed, more_idx, *v.keep(w, "wrec", "pend_idx")),
        # an ack: its record, and the store's pending acks with the header cached if there is one (with the fix,
        # an ack of a txn without a header is not kept)
        "txn_ack": z3.And(up_st(v.up, st), stored(w.arec, v.arec, st, True),
                          stored(w.acks, v.acks, st, z3.Or(v.acks[st], v.header, FIX not in fixes)),
                          stored(w.phdr, v.phdr, st, z3.Or(v.phdr[st], v.header)), *v.keep(w, "arec", "acks", "phdr")),
        # the buffer's cleanup and reap, the GC sweep's forced deletion: write records (the index notified)
        "write_delete": z3.And(z3.ForAll([x], z3.Implies(w.wrec[x], v.wrec[x])), indexed, more_idx,
                               *v.keep(w, "wrec", "pend_idx")),
        # the GC sweep deletes the records of a txn it listed while the header was there
        "gc_delete_ops": z3.And(v.header, z3.ForAll([x], z3.Implies(w.wrec[x], v.wrec[x])),
                                z3.ForAll([y], z3.Implies(w.arec[y], v.arec[y])), indexed, more_idx,
                                *v.keep(w, "wrec", "arec", "pend_idx")),
        "pa_cleanup": z3.And(up_st(v.up, st), v.done[st], stored(w.arec, v.arec, st, False), *v.keep(w, "arec")),
        "pa_reap": z3.And(up_st(v.up, st), z3.Not(v.header), v.arec[st], stored(w.arec, v.arec, st, False),
                          stored(w.acks, v.acks, st, False), stored(w.phdr, v.phdr, st, False),
                          *v.keep(w, "arec", "acks", "phdr")),
        "tb_header": z3.And(v.up[k], v.pend_hdr[k], stored(w.pend_hdr, v.pend_hdr, k, False),
                            stored(w.hdr, v.hdr, k, z3.And(v.header, w.hdr[k])), *v.keep(w, "pend_hdr", "hdr")),
        "tb_index": z3.And(v.up[k], v.pend_idx[k], stored(w.pend_idx, v.pend_idx, k, False),
                           stored(w.view, v.view, k, v.wrec[k]),
                           stored(w.hdr, v.hdr, k, z3.And(w.hdr[k], z3.Or(v.hdr[k], z3.And(v.header, v.wrec[k])))),
                           *v.keep(w, "pend_idx", "view", "hdr")),
        "pa_header": z3.And(up_st(v.up, st), v.pend[st], stored(w.pend, v.pend, st, False),
                            stored(w.phdr, v.phdr, st, v.header), stored(w.acks, v.acks, st, w.acks[st]), dropped,
                            # materializing a final state: done, and the acks dropped
                            stored(w.done, v.done, st, w.done[st]), z3.Implies(w.done[st] != v.done[st],
                                                                               z3.And(w.done[st], z3.Not(w.acks[st]))),
                            *v.keep(w, "pend", "phdr", "acks", "done")),
        "send": z3.And(v.up[k], z3.Or(v.hdr[k], v.header), stored(w.hdr, v.hdr, k, True), *v.keep(w, "hdr")),
        "crash": z3.And(v.up[k], stored(w.up, v.up, k, False), lost, *v.keep(w, "up", *lose)),
        "restart": z3.And(z3.Not(v.up[k]), stored(w.up, v.up, k, True), rebuilt, *v.keep(w, "up", *lose)),
        # anything else: another txn's record written or deleted notifies the segment's index watch
        "other": z3.And(more_idx, *v.keep(w, "pend_idx")),
    }


def index_watch(v, w) -> tuple:
    """A running buffer's index notification is pending after a change of the txn's write records on its segment
    (``indexed``); any write or delete of a record, of any txn, may notify running buffers, and none is lost
    (``more_idx``). Over per-segment arrays ``up``, ``wrec`` and ``pend_idx``."""
    x = z3.Const("x", Seg)
    indexed = z3.ForAll([x], z3.Implies(z3.And(v.up[x], w.wrec[x] != v.wrec[x]), w.pend_idx[x]))
    more_idx = z3.ForAll([x], z3.And(z3.Implies(v.pend_idx[x], w.pend_idx[x]),
                                     z3.Implies(w.pend_idx[x], z3.Or(v.pend_idx[x], v.up[x]))))
    return indexed, more_idx


def _pristine(v: Vars) -> z3.BoolRef:
    """Nothing of the txn anywhere: no record, nothing cached or pending."""
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    return z3.And(*[z3.ForAll([x], z3.Not(getattr(v, n)[x])) for n in ("hdr", "pend_hdr", "view", "wrec")],
                  *[z3.ForAll([y], z3.Not(getattr(v, n)[y])) for n in Vars.STORES])


def invariant(v: Vars) -> z3.BoolRef:
    """What the watches keep: a cached header of a txn without one, a view that differs from the records, and
    pending acks without a cached header or a record each have their notification pending; a store holding acks
    of a txn with a header caches it."""
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    up = v.up[seg_of(y)]
    return z3.And(
        z3.ForAll([x], z3.Implies(z3.Not(v.up[x]), z3.Not(z3.Or(v.hdr[x], v.pend_hdr[x], v.view[x], v.pend_idx[x])))),
        z3.ForAll([y], z3.Implies(z3.Not(up), z3.Not(z3.Or(v.phdr[y], v.pend[y], v.acks[y])))),
        z3.ForAll([x], z3.Implies(z3.And(v.up[x], v.hdr[x], z3.Not(v.header)), v.pend_hdr[x])),
        z3.ForAll([x], z3.Implies(z3.And(v.up[x], v.view[x] != v.wrec[x]), v.pend_idx[x])),
        z3.ForAll([y], z3.Implies(z3.And(up, v.phdr[y], z3.Not(v.header)), v.pend[y])),
        z3.ForAll([y], z3.Implies(z3.And(up, v.acks[y], z3.Not(v.phdr[y])), z3.And(v.arec[y], z3.Not(v.done[y])))),
        z3.ForAll([y], z3.Implies(z3.Not(up), z3.Not(v.done[y]))),
        z3.ForAll([y], z3.Implies(z3.And(up, v.acks[y], v.header), v.phdr[y])))


def forgotten(v: Vars) -> z3.BoolRef:
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    return z3.And(z3.Not(v.header), z3.ForAll([x], z3.Not(v.wrec[x])), z3.ForAll([y], z3.Not(v.arec[y])))


def ranks(v: Vars, x, y) -> tuple:
    """What the running buffer of segment ``x`` and the running store ``y`` hold of the txn."""
    seg = z3.If(v.up[x], z3.If(v.hdr[x], 1, 0) + z3.If(v.view[x], 1, 0), 0)
    store = z3.If(v.up[seg_of(y)], z3.If(v.phdr[y], 1, 0) + z3.If(v.acks[y], 1, 0), 0)
    return seg, store


def held(v: Vars) -> z3.BoolRef:
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    seg, store = ranks(v, x, y)
    return z3.Or(z3.Exists([x], seg > 0), z3.Exists([y], store > 0))


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    (a, b), (a2, b2) = ranks(v, x, y), ranks(w, x, y)
    pointwise = z3.And(z3.ForAll([x], a2 <= a), z3.ForAll([y], b2 <= b))
    return z3.And(pointwise, z3.Or(z3.Exists([x], a2 < a), z3.Exists([y], b2 < b))) if strictly else pointwise


def helpers(v: Vars, k, st) -> dict:
    """The delivery to take at the segment ``k`` or the store ``st``: when it is the one, and its guard."""
    up = v.up[seg_of(st)]
    return {"tb_header": (z3.And(v.up[k], v.hdr[k]), z3.And(v.up[k], v.pend_hdr[k])),
            "tb_index": (z3.And(v.up[k], v.view[k]), z3.And(v.up[k], v.pend_idx[k])),
            "pa_header": (z3.And(up, z3.Or(v.phdr[st], v.acks[st])), z3.And(up, v.pend[st]))}


def leaves(fixes, invariant_of=invariant) -> Verdict:
    """The ranking argument for a collected txn some running broker holds (the trigger) until the trigger ends, from
    the invariant (``obligations.ranked`` proves it inductive)."""
    v, w = Vars(""), Vars("'")
    k, st = z3.Const("segment", Seg), z3.Const("store", Store)
    x, y = z3.Const("x", Seg), z3.Const("y", Store)
    init = z3.And(z3.Not(v.header), *[getattr(v, n) == z3.K(Seg, z3.BoolVal(False)) for n in Vars.SEGS if n != "up"],
                  *[getattr(v, n) == z3.K(Store, z3.BoolVal(False)) for n in Vars.STORES])
    whens = helpers(v, x, y)
    seg, store = ranks(v, x, y)
    covers = z3.And(z3.ForAll([x], z3.Implies(seg > 0, z3.Or(whens["tb_header"][0], whens["tb_index"][0]))),
                    z3.ForAll([y], z3.Implies(store > 0, whens["pa_header"][0])))
    trigger, trigger2 = z3.And(forgotten(v), held(v)), z3.And(forgotten(w), held(w))
    return ranked(init, invariant_of(v), invariant_of(w), trigger, trigger2, z3.Not(trigger2),
                  steps(v, w, fixes, k, st), helpers(v, k, st), covers, no_worse(v, w), no_worse(v, w, strictly=True),
                  SYSTEM, before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The header, then each segment's buffer and records, each store's state and records."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    segs, snames = universe(m, Seg, "segment ", first=0)
    stores, tnames = universe(m, Store, "store ", first=0)
    words = {"hdr": "caches the header", "pend_hdr": "header event pending", "view": "in its index view",
             "pend_idx": "index event pending", "wrec": "write records", "phdr": "caches the header",
             "pend": "header event pending", "acks": "pending acks", "arec": "ack records", "done": "materialized"}

    def one(x, names, fields, up):
        held = [words[n] for n in fields if z3.is_true(e(getattr(v, n)[x]))]
        return f"{names[str(x)]}{'' if up else ' (down)'}: {', '.join(held) or 'nothing'}"
    out = ["header exists" if z3.is_true(e(v.header)) else "no header"]
    out += [one(x, snames, Vars.SEGS[1:], z3.is_true(e(v.up[x]))) for x in segs]
    out += [one(y, tnames, Vars.STORES, z3.is_true(e(v.up[seg_of(y)]))) + f" on {snames.get(str(e(seg_of(y))), '?')}"
            for y in stores]
    return "{" + "; ".join(out) + "}"


def _views(s, t: int) -> tuple:
    """The model state's values of the encoding's variables for the txn ``t``: whether its header exists, per
    segment (up, cached header, header event, index view, index event, write records) and per store (cached
    header, header event, pending acks, ack records, materialized)."""
    nsubs = len(s.pending) // len(s.buffers)
    records = [(op.kind, op.seg, op.sub) for (x, _), op in s.ops if x == t]
    segs = tuple((s.up[seg], t in b.hdr, t in b.pend_hdr, t in b.writes, b.pend_idx,
                  any(kind == WRITE and g == seg for kind, g, _ in records)) for seg, b in enumerate(s.buffers))
    stores = tuple((t in p.hdr, t in p.pend, t in p.acks,
                    any(kind == ACK and g == i // nsubs and sub == i % nsubs for kind, g, sub in records),
                    t in p.done) for i, p in enumerate(s.pending))
    return t in s.headers, segs, stores


def _concrete(v: Vars, view, ks: list, ss: list) -> list:
    header, segs, stores = view
    out = [v.header == header]
    for k, values in zip(ks, segs):
        out += [getattr(v, n)[k] == x for n, x in zip(Vars.SEGS, values)]
    for y, values in zip(ss, stores):
        out += [getattr(v, n)[y] == x for n, x in zip(Vars.STORES, values)]
    return out


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn is one of its steps,
    for that txn; the three deliveries as themselves (the ranking argument takes them as the model's fair steps)."""
    return per_txn_simulation(model, pairs, Vars, steps_of, _views, _concrete, DELIVERIES)


def per_txn_simulation(model, pairs, vars_of, steps_of, views, concrete, own: tuple) -> list[str]:
    """The simulation check of an encoding over segments and pending-ack stores, for one txn at a time: for each
    transition (``pairs``) and txn whose ``views`` (state, txn) differ, some step of ``steps_of`` takes the
    ``concrete`` values of the one to the other (those in ``own`` as themselves), the segments and stores of the
    model's bounds being distinct elements of the sorts."""
    v, w = vars_of(""), vars_of("'")
    k, st = z3.Const("segment", Seg), z3.Const("store", Store)
    candidates = steps_of(v, w, model.fixes, k, st)
    nsegs, nsubs = model.config.segments, model.config.subs + model.config.late_subs
    ks = [z3.Const(f"K{i}", Seg) for i in range(nsegs)]
    ss = [z3.Const(f"S{i}", Store) for i in range(nsegs * nsubs)]
    shape = [*([z3.Distinct(*ks)] if nsegs > 1 else []), *([z3.Distinct(*ss)] if len(ss) > 1 else []),
             *[seg_of(y) == ks[i // nsubs] for i, y in enumerate(ss)], z3.Or(*[k == x for x in ks]),
             z3.Or(*[st == y for y in ss])]
    txns = range(1, model.config.txns + 1)
    return simulated((((s, x), a, (t, x)) for s, a, t in pairs for x in txns), lambda sx: views(*sx),
                     lambda _, __, before, after: [*shape, *concrete(v, before, ks, ss), *concrete(w, after, ks, ss)],
                     candidates, own, lambda sx, before, after: f"txn {sx[1]} from {before} to {after}")


OBLIGATIONS = [
    Obligation("pip-473", "collected-txns-leave-brokers-ranked", "A collected txn leaves every running broker, for "
               "any number of segments, subscriptions, txns, crashes and restarts, a store keeping the pending acks "
               "of a txn whose header is gone", SECTION, lambda: leaves(frozenset()), ("as-written",),
               proves=("collected-txns-leave-brokers",)),
    Obligation("pip-473", "collected-txns-leave-brokers-ranked", "A collected txn leaves every running broker, for "
               "any number of segments, subscriptions, txns, crashes and restarts, a store dropping the pending acks "
               "of a txn whose header is gone (ranked by what each running buffer and store holds of it; "
               "strengthened: each cached header of a txn without one, view that differs from the records and "
               "pending ack without a cached header has its notification pending or its record)", SECTION,
               lambda: leaves(frozenset({FIX})), with_fix("pip-473", FIX), proves=("collected-txns-leave-brokers",)),
]
