"""PIP-473 ``committed-acks-not-lost`` (every ack of a committed txn is in the cursor or still recorded for its
pending-ack store to apply), for any number of txns, acks and (segment, subscription) stores, with the fix
``gc-waits-for-participants``.

Txns, acks and stores are uninterpreted sorts; each ack belongs to one txn and one store. The encoding keeps each
txn's client phase (idle, open, or past its end-txn), header state and decided outcome (a ghost, kept after GC),
each ack's op record, whether it was made and whether its position is acked in the cursor, and each store's
in-memory set of txns it has materialized. Its steps, from ``models/pip473``: a txn is created; its client ends
it; the CAS commits (only after the client's end-txn) or aborts it; an ack writes its record (while the client
has the txn open: the text has no header check on the ack path); a store materializes a final header (commit:
every record of the txn for that store reaches the cursor, which may take more positions, a cumulative ack's);
a store deletes the records of a txn it materialized, or (``owners-reap-orphans``, kept here for every variant,
which only adds behaviours) of a txn whose header is gone; the GC sweep force-deletes some of a final txn's
records (with the fix: not of a committed one), then deletes the header (with the fix: only when no record of a
committed txn is left); a broker crash loses stores' materialized sets. The GC's listing, the TC's requests,
finalize, dispatch and the write records are left out, so the encoding is an abstraction: ``simulation`` checks
on every reachable state that each model step is one of these steps or changes none of their variables.

Strengthened by what the protocol keeps: a txn's acks are all made before its commit (the client ends it
first); a header's state and the decided outcome agree; a store that materialized a committed txn put every
ack of the txn for it in the cursor; the header of a committed txn is deleted only with none of its records
left. As written the counterexample to induction is the GC sweep force-deleting a committed txn's record before
its store applied it (the finding ``gc-deletes-unapplied-acks``).
"""
from __future__ import annotations

import z3

from .obligations import (Obligation, Verdict, distinct_changes, inductive as induction, not_simulated, one_of,
                          universe, with_fix)
from .pip473_header import ABORTED, COMMITTED, HSTATE, NONE, OPEN, HState, Txn

Ack = z3.DeclareSort("Ack")
Store = z3.DeclareSort("Store")
Phase, (IDLE, ACKING, ENDED) = z3.EnumSort("ClientPhase", ("idle", "open", "ended"))
ack_txn = z3.Function("ack_txn", Ack, Txn)
ack_store = z3.Function("ack_store", Ack, Store)
FIX = "gc-waits-for-participants"
PROVES = ("committed-acks-not-lost",)
SECTION = ("PIP-473 MetadataPendingAckStore: 'Commit: range-query idx:acks-by-segment-subscription ... apply to "
           "cursor; range-delete the op records'; GC sweep: 'forces deletion of any leftovers, and finally deletes "
           "the header'")


class Vars:
    NAMES = ("phase", "header", "decided", "made", "rec", "acked", "done")

    def __init__(self, tag: str):
        self.phase = z3.Array(f"phase{tag}", Txn, Phase)
        self.header = z3.Array(f"header{tag}", Txn, HState)  # NONE: not created, or deleted by GC
        self.decided = z3.Array(f"decided{tag}", Txn, HState)  # NONE: undecided
        self.made = z3.Array(f"made{tag}", Ack, z3.BoolSort())
        self.rec = z3.Array(f"rec{tag}", Ack, z3.BoolSort())  # its op record exists
        self.acked = z3.Array(f"acked{tag}", Ack, z3.BoolSort())  # its position is acked in the cursor
        self.done = z3.Array(f"done{tag}", Store, z3.ArraySort(Txn, z3.BoolSort()))  # materialized, in memory

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def _of(x, st, t):
    return z3.And(ack_store(x) == st, ack_txn(x) == t)


def steps(v: Vars, w: Vars, fixes, t, x, st) -> dict:
    """Each step from ``v`` to ``w`` for the txn ``t``, the ack ``x`` and the store ``st``; the GC steps come
    before the store's reap, so a failing proof names the GC first."""
    y, u, k = z3.Const("y", Ack), z3.Const("u", Txn), z3.Const("k", Store)
    final = z3.Or(v.header[t] == COMMITTED, v.header[t] == ABORTED)
    waits = FIX in fixes

    def delete_of(store):  # every record of t at ``store``
        return z3.ForAll([y], w.rec[y] == z3.And(v.rec[y], z3.Not(_of(y, store, t))))

    def decide(outcome):
        return [w.header == z3.Store(v.header, t, outcome), w.decided == z3.Store(v.decided, t, outcome)]
    return {
        "new_txn": z3.And(v.phase[t] == IDLE, w.phase == z3.Store(v.phase, t, ACKING),
                          w.header == z3.Store(v.header, t, OPEN), *v.keep(w, "phase", "header")),
        "end_txn": z3.And(v.phase[t] == ACKING, w.phase == z3.Store(v.phase, t, ENDED), *v.keep(w, "phase")),
        "commit": z3.And(v.header[t] == OPEN, v.phase[t] == ENDED, *decide(COMMITTED), *v.keep(w, "header", "decided")),
        "abort": z3.And(v.header[t] == OPEN, *decide(ABORTED), *v.keep(w, "header", "decided")),
        "ack": z3.And(v.phase[ack_txn(x)] == ACKING, w.made == z3.Store(v.made, x, True),
                      w.rec == z3.Store(v.rec, x, True), *v.keep(w, "made", "rec")),
        "materialize": z3.And(final, w.done == z3.Store(v.done, st, z3.Store(v.done[st], t, True)),
                              z3.ForAll([y], z3.Implies(z3.Or(v.acked[y], z3.And(
                                  v.header[t] == COMMITTED, _of(y, st, t), v.rec[y])), w.acked[y])),
                              *v.keep(w, "done", "acked")),
        "cleanup": z3.And(v.done[st][t], delete_of(st), *v.keep(w, "rec")),
        "gc_ops": z3.And(final, z3.ForAll([y], z3.And(z3.Implies(w.rec[y], v.rec[y]), z3.Implies(
                             z3.And(v.rec[y], z3.Not(w.rec[y])),
                             z3.And(ack_txn(y) == t, *([v.header[t] != COMMITTED] if waits else []))))),
                         *v.keep(w, "rec")),
        "gc_header": z3.And(final, *([z3.Implies(v.header[t] == COMMITTED, z3.ForAll(
                                [y], z3.Implies(ack_txn(y) == t, z3.Not(v.rec[y]))))] if waits else []),
                            w.header == z3.Store(v.header, t, NONE), *v.keep(w, "header")),
        "reap": z3.And(v.header[t] == NONE, delete_of(st), *v.keep(w, "rec")),
        "crash": z3.And(z3.ForAll([k, u], z3.Implies(w.done[k][u], v.done[k][u])), *v.keep(w, "done")),
    }


def plain(v: Vars) -> z3.BoolRef:
    """The property: a made ack of a committed txn is recorded or in the cursor."""
    y = z3.Const("y", Ack)
    return z3.ForAll([y], z3.Implies(z3.And(v.made[y], v.decided[ack_txn(y)] == COMMITTED, z3.Not(v.rec[y])),
                                     v.acked[y]))


def strengthened(v: Vars) -> z3.BoolRef:
    t, y, st = z3.Const("t", Txn), z3.Const("y", Ack), z3.Const("st", Store)
    h, d, p = v.header[t], v.decided[t], v.phase[t]
    return z3.And(plain(v), z3.ForAll([t], z3.And(
        z3.Implies(p == IDLE, z3.And(h == NONE, d == NONE)), d != OPEN,
        z3.Implies(h == OPEN, d == NONE),
        z3.Implies(h == COMMITTED, d == COMMITTED), z3.Implies(h == ABORTED, d == ABORTED),
        z3.Implies(z3.And(h == NONE, p != IDLE), d != NONE),
        z3.Implies(d == COMMITTED, p == ENDED))),
        z3.ForAll([y], z3.And(z3.Implies(v.rec[y], v.made[y]), z3.Implies(v.made[y], v.phase[ack_txn(y)] != IDLE),
                              z3.Implies(z3.And(v.made[y], v.decided[ack_txn(y)] == NONE), v.rec[y]),
                              z3.Implies(z3.And(v.header[ack_txn(y)] == NONE, v.decided[ack_txn(y)] == COMMITTED),
                                         z3.Not(v.rec[y])))),
        z3.ForAll([st, t], z3.Implies(v.done[st][t], d != NONE)),
        z3.ForAll([st, t, y], z3.Implies(z3.And(v.done[st][t], d == COMMITTED, _of(y, st, t), v.made[y]),
                                         v.acked[y])))


def init(v: Vars) -> z3.BoolRef:
    t, y, st = z3.Const("t", Txn), z3.Const("y", Ack), z3.Const("st", Store)
    return z3.And(z3.ForAll([t], z3.And(v.phase[t] == IDLE, v.header[t] == NONE, v.decided[t] == NONE)),
                  z3.ForAll([y], z3.And(z3.Not(v.made[y]), z3.Not(v.rec[y]))),
                  z3.ForAll([st, t], z3.Not(v.done[st][t])))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    t, x, st = z3.Const("txn", Txn), z3.Const("ack", Ack), z3.Const("store", Store)
    return induction(init(v), strengthened(v), strengthened(w), steps(v, w, fixes, t, x, st),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w, (t, x, st)))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """Each txn's client phase, header and decided outcome, each ack's txn, store and state, and each store's
    materialized txns, named t1, a1, s1, ...; with ``step`` (txn, ack, store), which of them took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    (txns, tn), (acks, an), (stores, sn) = (universe(m, *x) for x in ((Txn, "t"), (Ack, "a"), (Store, "s")))
    txn_text = ", ".join(f"{tn[str(t)]}: {e(v.phase[t])}, header {e(v.header[t])}, decided {e(v.decided[t])}"
                         for t in txns)
    def flags(y):
        held = [f for f, arr in (("made", v.made), ("recorded", v.rec), ("in the cursor", v.acked))
                if z3.is_true(e(arr[y]))]
        return " ".join(held) or "not made"
    ack_text = ", ".join(f"{an[str(y)]} of {tn[str(e(ack_txn(y)))]} at {sn[str(e(ack_store(y)))]}: {flags(y)}"
                         for y in acks)
    done_text = ", ".join(f"{sn[str(k)]} materialized {{"
                          + ", ".join(tn[str(t)] for t in txns if z3.is_true(e(v.done[k][t]))) + "}" for k in stores)
    took = "" if step is None else (f" (taken for {tn[str(e(step[0]))]}, {an.get(str(e(step[1])), 'an ack')}, "
                                    f"{sn.get(str(e(step[2])), 'a store')})")
    return f"{{txns {txn_text}; acks {ack_text}; stores {done_text}}}{took}"


PHASE = {"idle": IDLE, "open": ACKING}


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: per txn (phase, header, decided); each ack made or
    recorded, ((txn, store, position), made, recorded, acked in the cursor); per store the txns it materialized."""
    nsubs = len(s.pending) // len(s.logs)
    txns = tuple((c.phase if c.phase in PHASE else "ended", s.headers[t].state if t in s.headers else "NONE",
                  s.decided.get(t, "NONE")) for t, c in enumerate(s.clients, 1))
    recorded = {(t, op.seg * nsubs + op.sub, op.pos) for (t, _), op in s.ops if op.kind == "ack"}
    made = {(t, seg * nsubs + sub, pos) for t, seg, sub, pos in s.acks_made}
    acks = tuple((key, key in made, key in recorded, key[2] in s.subs[key[1]].acked) for key in sorted(made | recorded))
    return txns, acks, tuple(frozenset(p.done) for p in s.pending)


def _concrete(v: Vars, projection, ts: list, xs: dict, ss: list) -> z3.BoolRef:
    """``v`` is the projected state, over the named txns ``ts`` (by id - 1), acks ``xs`` (by key) and stores
    ``ss`` (by index); an ack not in the projection is neither made, recorded nor acked."""
    txns, acks, done = projection
    state = lambda name: NONE if name == "NONE" else HSTATE[name]  # noqa: E731
    out = []
    for t, (phase, header, decided) in zip(ts, txns):
        out += [v.phase[t] == PHASE.get(phase, ENDED), v.header[t] == state(header), v.decided[t] == state(decided)]
    arrays = {"made": z3.K(Ack, z3.BoolVal(False)), "rec": z3.K(Ack, z3.BoolVal(False)),
              "acked": z3.K(Ack, z3.BoolVal(False))}
    for key, *flags in acks:
        arrays = {name: z3.Store(arr, xs[key], flag) for (name, arr), flag in zip(arrays.items(), flags)}
    out += [getattr(v, name) == arr for name, arr in arrays.items()]
    for k, txns_done in zip(ss, done):
        row = z3.K(Txn, z3.BoolVal(False))
        for t in sorted(txns_done):
            row = z3.Store(row, ts[t - 1], True)
        out.append(v.done[k] == row)
    return z3.And(*out)


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), with the acting txn, ack and store among the named ones."""
    out = []
    for s, a, t, change in distinct_changes(pairs, _projection):
        ts = [z3.Const(f"T{i}", Txn) for i in range(1, len(s.clients) + 1)]
        ss = [z3.Const(f"S{i}", Store) for i in range(len(s.pending))]
        keys = sorted({key for side in change for key, *_ in side[1]})
        xs = {key: z3.Const("A{}_{}_{}".format(*key), Ack) for key in keys}
        rigid = [z3.And(ack_txn(xs[key]) == ts[key[0] - 1], ack_store(xs[key]) == ss[key[1]]) for key in keys]
        distinct = [z3.Distinct(*group) for group in (ts, ss, list(xs.values())) if len(group) > 1]
        v, w = Vars(""), Vars("'")
        txn, x, st = z3.Const("txn", Txn), z3.Const("ack", Ack), z3.Const("store", Store)
        named = [z3.Or(*[txn == c for c in ts]), z3.Or(*[st == c for c in ss])]
        pre, post = _concrete(v, change[0], ts, xs, ss), _concrete(w, change[1], ts, xs, ss)
        answer = one_of([*distinct, *rigid, *named, pre, post], steps_of(v, w, model.fixes, txn, x, st).values())
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}", answer)
    return out


OBLIGATIONS = [
    Obligation("pip-473", "committed-acks-inductive", "committed-acks-not-lost, strengthened, is inductive for any "
               "number of txns, acks and pending-ack stores, with the GC sweep as written", SECTION,
               lambda: inductive(frozenset()), ("as-written",), proves=PROVES),
    Obligation("pip-473", "committed-acks-inductive", "committed-acks-not-lost, strengthened, is inductive for any "
               "number of txns, acks and pending-ack stores, with the GC sweep waiting for a committed txn's "
               "pending-ack stores", SECTION, lambda: inductive(frozenset({FIX})), with_fix("pip-473", FIX),
               proves=PROVES),
]
