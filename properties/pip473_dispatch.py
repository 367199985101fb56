"""PIP-473's dispatcher, for any number of txns, segments and entries: ``read-committed`` (no subscription receives
an entry of a txn that is not committed) with the fix ``open-entry-barrier``, and ``committed-never-filtered`` (no
subscription skips an entry of a committed txn as aborted) with the fix ``keep-decisions-with-data``.

Txns, segments and entries are uninterpreted sorts; each entry belongs to one txn and one segment. The encoding
keeps each txn's header state in the store (NONE: not created, or deleted by GC), decided outcome (a ghost, kept
after GC) and whether its client may still send (the txn is open at the client, or a send is in flight); each
segment buffer's header cache (NONE: not cached) and aborted set, both in memory; and each entry's append, its
retention and its write op record. Its steps, from ``models/pip473``: a txn is created; the client stops sending;
the CAS commits (once no send is in flight, so every retained entry of the txn has its record) or aborts it; GC
deletes a final header (with ``keep-decisions-with-data``: only with no write record of a retained entry left);
a buffer changes its cache (each entry kept, reloaded from the store, or dropped: a watch delivery, the index
load, a commit's eviction, a crash) and marks aborted txns it has cached as ABORTED (or forgets them: a crash);
a send appends an entry, then puts its record; records are deleted and entries trimmed (as written a record may go
once its txn is decided, by its buffer's cleanup or the GC sweep; with the fix only with its entry's trimming;
either way, by the reap of an orphan); the dispatcher delivers or filters a retained entry by ``isTxnAborted``
(the aborted set, else the cache, else the store; no header: aborted), and with ``open-entry-barrier`` waits on a
txn it sees OPEN. Read positions, publish stages, the TC's requests and the pending-ack stores are left out, so
the encoding is an abstraction: ``simulation`` checks on every reachable state that each model step is one of
these steps (or changes none of their variables), and that each delivery or filtering of a transactional entry
is one the encoding's dispatcher makes.

Both claims hold what the caches say: a header, a cache entry or an aborted mark that says an outcome says the
decided one. ``committed-never-filtered`` adds: a committed txn has no send left, its retained entries have their
records, and a retained entry's record keeps its header. As written the counterexamples to induction are the
delivery of an OPEN txn's entry (the finding ``uncommitted-entry-dispatched``) and the deletion of a committed
txn's record while its entry is retained (``committed-entry-skipped-after-gc``: GC then deletes the header, and
the entry is filtered).
"""
from __future__ import annotations

import z3

from .obligations import (Obligation, Verdict, distinct_changes, inductive as induction, not_simulated, one_of,
                          universe, with_fix)
from .pip473_header import ABORTED, COMMITTED, HSTATE, NONE, OPEN, HState, Txn

Segment = z3.DeclareSort("TxnSegment")
Entry = z3.DeclareSort("Entry")
entry_txn = z3.Function("entry_txn", Entry, Txn)
entry_segment = z3.Function("entry_segment", Entry, Segment)
BARRIER = "open-entry-barrier"
KEEP = "keep-decisions-with-data"
SECTION = ("PIP-473 Subscribe / dispatch: 'polls tb.getMaxReadPosition() and filters by tb.isTxnAborted(msg)'; "
           "Notification mechanism: the header cache 'kept up to date by point-watches'")
KEEP_SECTION = ("PIP-473 GC sweep: 'verify /txn-op/<txnId>/* is empty (force-delete leftovers); delete header'; "
                "Recovery: 'falls back to abort for unknown txnIds'")


class Vars:
    NAMES = ("header", "decided", "sending", "cache", "aborted", "written", "retained", "record")

    def __init__(self, tag: str):
        self.header = z3.Array(f"d_header{tag}", Txn, HState)
        self.decided = z3.Array(f"d_decided{tag}", Txn, HState)  # NONE: undecided
        self.sending = z3.Array(f"d_sending{tag}", Txn, z3.BoolSort())  # open at the client, or a send in flight
        self.cache = z3.Array(f"d_cache{tag}", Segment, z3.ArraySort(Txn, HState))  # NONE: not cached
        self.aborted = z3.Array(f"d_aborted{tag}", Segment, z3.ArraySort(Txn, z3.BoolSort()))
        self.written = z3.Array(f"d_written{tag}", Entry, z3.BoolSort())  # appended to its segment
        self.retained = z3.Array(f"d_retained{tag}", Entry, z3.BoolSort())  # not trimmed
        self.record = z3.Array(f"d_record{tag}", Entry, z3.BoolSort())  # its write op record exists

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def status(v: Vars, e):
    """What ``isTxnAborted`` reads for the entry ``e``: its buffer's aborted set, else its cache, else the store."""
    g, t = entry_segment(e), entry_txn(e)
    cached = v.cache[g][t]
    return z3.If(v.aborted[g][t], ABORTED, z3.If(cached != NONE, cached, v.header[t]))


def steps(v: Vars, w: Vars, fixes, t, g, e) -> dict:
    """Each step from ``v`` to ``w`` for the txn ``t``, the segment ``g`` and the entry ``e``; record deletions
    come before GC's header deletion, so a failing proof names the deletion that loses the decision."""
    u, x = z3.Const("u", Txn), z3.Const("x", Entry)

    def decide(outcome, *guard):
        return z3.And(v.header[t] == OPEN, *guard, w.header == z3.Store(v.header, t, outcome),
                      w.decided == z3.Store(v.decided, t, outcome), *v.keep(w, "header", "decided"))
    seen = status(v, e)
    readable = z3.And(v.written[e], v.retained[e])
    new, old, mark = w.cache[g][u], v.cache[g][u], w.aborted[g][u]
    gone = z3.And(v.record[x], z3.Not(w.record[x]))
    may_go = z3.Or(z3.Not(w.retained[x]), v.header[entry_txn(x)] == NONE,
                   *([] if KEEP in fixes else [v.decided[entry_txn(x)] != NONE]))
    kept = z3.ForAll([x], z3.Implies(z3.And(entry_txn(x) == t, v.record[x], v.retained[x]), False))
    return {
        "new_txn": z3.And(v.header[t] == NONE, v.decided[t] == NONE, w.header == z3.Store(v.header, t, OPEN),
                          w.sending == z3.Store(v.sending, t, True), *v.keep(w, "header", "sending")),
        "stop_sending": z3.And(z3.ForAll([u], z3.Implies(w.sending[u], v.sending[u])), *v.keep(w, "sending")),
        "commit": decide(COMMITTED, z3.Not(v.sending[t]), z3.ForAll([x], z3.Implies(
            z3.And(entry_txn(x) == t, v.written[x], v.retained[x]), v.record[x]))),
        "abort": decide(ABORTED),
        "buffer": z3.And(z3.ForAll([u], z3.And(z3.Or(new == old, new == v.header[u], new == NONE),
                                               z3.Implies(mark, z3.Or(v.aborted[g][u], new == ABORTED)))),
                         w.cache == z3.Store(v.cache, g, w.cache[g]), w.aborted == z3.Store(v.aborted, g, w.aborted[g]),
                         *v.keep(w, "cache", "aborted")),
        "append": z3.And(z3.Not(v.written[e]), v.sending[entry_txn(e)], w.written == z3.Store(v.written, e, True),
                         w.retained == z3.Store(v.retained, e, True), *v.keep(w, "written", "retained")),
        "put": z3.And(v.written[e], v.sending[entry_txn(e)], w.record == z3.Store(v.record, e, True),
                      *v.keep(w, "record")),
        "drop": z3.And(z3.ForAll([x], z3.And(z3.Implies(w.retained[x], v.retained[x]), z3.Implies(gone, may_go))),
                       z3.ForAll([x], z3.Implies(w.record[x], v.record[x])), *v.keep(w, "retained", "record")),
        "gc_header": z3.And(z3.Or(v.header[t] == COMMITTED, v.header[t] == ABORTED), *([kept] if KEEP in fixes else []),
                            w.header == z3.Store(v.header, t, NONE), *v.keep(w, "header")),
        "deliver": z3.And(readable, seen != ABORTED, seen != NONE, *([seen != OPEN] if BARRIER in fixes else []),
                          *v.keep(w)),
        "filter": z3.And(readable, z3.Or(seen == ABORTED, seen == NONE), *v.keep(w)),
    }


def cached_outcomes(v: Vars) -> z3.BoolRef:
    """What the store and the caches say of a decided txn is its outcome."""
    t, g = z3.Const("t", Txn), z3.Const("g", Segment)
    h, d, c = v.header[t], v.decided[t], v.cache[g][t]
    return z3.And(z3.ForAll([t], z3.And(d != OPEN, z3.Implies(h == OPEN, d == NONE),
                                        z3.Implies(h == COMMITTED, d == COMMITTED),
                                        z3.Implies(h == ABORTED, d == ABORTED))),
                  z3.ForAll([g, t], z3.And(z3.Implies(c == COMMITTED, d == COMMITTED),
                                           z3.Implies(c == ABORTED, d == ABORTED),
                                           z3.Implies(v.aborted[g][t], d == ABORTED))))


def decisions_kept(v: Vars) -> z3.BoolRef:
    """``cached_outcomes``; a committed txn sends no more, a record is of an appended entry, each retained entry of
    a committed txn has its record, and that record keeps the txn's header."""
    t, x = z3.Const("t", Txn), z3.Const("x", Entry)
    committed = v.decided[entry_txn(x)] == COMMITTED
    return z3.And(cached_outcomes(v), z3.ForAll([t], z3.Implies(v.decided[t] == COMMITTED, z3.Not(v.sending[t]))),
                  z3.ForAll([x], z3.And(z3.Implies(v.record[x], v.written[x]),
                                        z3.Implies(z3.And(v.written[x], v.retained[x], committed), v.record[x]),
                                        z3.Implies(z3.And(v.record[x], v.retained[x], committed),
                                                   v.header[entry_txn(x)] != NONE))))


def init(v: Vars) -> z3.BoolRef:
    t, g, x = z3.Const("t", Txn), z3.Const("g", Segment), z3.Const("x", Entry)
    return z3.And(z3.ForAll([t], z3.And(v.header[t] == NONE, v.decided[t] == NONE, z3.Not(v.sending[t]))),
                  z3.ForAll([g, t], z3.And(v.cache[g][t] == NONE, z3.Not(v.aborted[g][t]))),
                  z3.ForAll([x], z3.And(z3.Not(v.written[x]), z3.Not(v.retained[x]), z3.Not(v.record[x]))))


CLAIMS = {  # property -> (its strengthening, the dispatcher step it is about, what that step must satisfy)
    "read-committed": (cached_outcomes, "deliver", lambda d: d == COMMITTED),
    "committed-never-filtered": (decisions_kept, "filter", lambda d: d != COMMITTED),
}


def inductive(prop: str, fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    t, g, e = z3.Const("txn", Txn), z3.Const("segment", Segment), z3.Const("entry", Entry)
    claim, step, holds = CLAIMS[prop]
    return induction(init(v), claim(v), claim(w), steps(v, w, fixes, t, g, e),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w, (t, g, e)),
                     also=lambda label: holds(v.decided[entry_txn(e)]) if label == step else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """Each txn's header, decided outcome and sending, each segment buffer's cache and aborted set, and each
    entry's txn, segment and state, named t1, g1, e1, ...; with ``step`` (txn, segment, entry), which took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    (txns, tn), (segments, gn), (entries, en) = (universe(m, *x) for x in ((Txn, "t"), (Segment, "g"), (Entry, "e")))
    txn_text = ", ".join(f"{tn[str(t)]}: header {e(v.header[t])}, decided {e(v.decided[t])}"
                         + (", sending" if z3.is_true(e(v.sending[t])) else "") for t in txns)

    def buffer(g):
        cached = ", ".join(f"{tn[str(t)]} {e(v.cache[g][t])}" for t in txns if str(e(v.cache[g][t])) != "NONE")
        aborted = ", ".join(tn[str(t)] for t in txns if z3.is_true(e(v.aborted[g][t])))
        return f"{gn[str(g)]} caches {{{cached}}}, aborted {{{aborted}}}"

    def entry(x):
        held = [f for f, arr in (("written", v.written), ("retained", v.retained), ("recorded", v.record))
                if z3.is_true(e(arr[x]))]
        return f"{en[str(x)]} of {tn[str(e(entry_txn(x)))]} at {gn[str(e(entry_segment(x)))]}: {' '.join(held) or '-'}"
    took = "" if step is None else (f" (taken for {tn[str(e(step[0]))]} at {gn.get(str(e(step[1])), 'a segment')}, "
                                    f"{en.get(str(e(step[2])), 'an entry')})")
    return (f"{{txns {txn_text}; buffers {'; '.join(buffer(g) for g in segments)}; "
            f"entries {', '.join(entry(x) for x in entries)}}}{took}")


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: per txn (header, decided, sending), per segment
    buffer (its cache, txn -> state, an entry caching no header left out; its aborted set), and each transactional
    entry ((segment, position), txn, retained, recorded)."""
    flying = {p.txn for p in s.publishes}
    txns = tuple((s.headers[t].state if t in s.headers else "NONE", s.decided.get(t, "NONE"),
                  c.phase == "open" or t in flying) for t, c in enumerate(s.clients, 1))
    buffers = tuple((tuple(sorted((t, c) for t, c in b.hdr if c is not None)), frozenset(b.aborted))
                    for b in s.buffers)
    recorded = {(op.seg, op.pos) for _, op in s.ops if op.kind == "write"}
    entries = tuple(((seg, pos), txn, pos >= s.first[seg], (seg, pos) in recorded)
                    for seg, log in enumerate(s.logs) for pos, txn in enumerate(log) if txn)
    return txns, buffers, entries


class Named:
    """Z3 constants for the txns, segments and entries of a model state (entries by (segment, position))."""

    def __init__(self, s, entries: dict):
        self.ts = [z3.Const(f"T{i}", Txn) for i in range(1, len(s.clients) + 1)]
        self.gs = [z3.Const(f"G{i}", Segment) for i in range(len(s.buffers))]
        self.es = {key: z3.Const("E{}_{}".format(*key), Entry) for key in sorted(entries)}
        self.facts = [z3.Distinct(*group) for group in (self.ts, self.gs, list(self.es.values())) if len(group) > 1]
        self.facts += [z3.And(entry_txn(e) == self.ts[entries[key] - 1], entry_segment(e) == self.gs[key[0]])
                       for key, e in self.es.items()]

    def state(self, v: Vars, projection) -> z3.BoolRef:
        """``v`` is the projected state; a named entry not in it is not appended (nor retained, nor recorded)."""
        name = lambda n: NONE if n == "NONE" else HSTATE[n]  # noqa: E731
        txns, buffers, entries = projection
        out = []
        for t, (header, decided, sending) in zip(self.ts, txns):
            out += [v.header[t] == name(header), v.decided[t] == name(decided), v.sending[t] == sending]
        for g, (cached, aborted) in zip(self.gs, buffers):
            row, marks = z3.K(Txn, NONE), z3.K(Txn, z3.BoolVal(False))
            for t, c in cached:
                row = z3.Store(row, self.ts[t - 1], name(c))
            for t in sorted(aborted):
                marks = z3.Store(marks, self.ts[t - 1], True)
            out += [v.cache[g] == row, v.aborted[g] == marks]
        arrays = {k: z3.K(Entry, z3.BoolVal(False)) for k in ("written", "retained", "record")}
        for key, _, retained, recorded in entries:
            for k, flag in (("written", True), ("retained", retained), ("record", recorded)):
                arrays[k] = z3.Store(arrays[k], self.es[key], flag)
        return z3.And(*out, *[getattr(v, k) == arr for k, arr in arrays.items()])


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), and each delivery or filtering of a transactional entry is the encoding's
    dispatcher step (once per distinct state and entry), with the acting txn, segment and entry named."""
    pairs = list(pairs)
    out = []

    def decide(s, labels, before, after, bind=None):
        named = Named(s, {key: txn for side in (before, after) for key, txn, *_ in side[2]})
        v, w = Vars(""), Vars("'")
        t, g, e = z3.Const("txn", Txn), z3.Const("segment", Segment), z3.Const("entry", Entry)
        facts = [*named.facts, named.state(v, before), named.state(w, after), z3.Or(*[t == c for c in named.ts]),
                 z3.Or(*[g == c for c in named.gs]), *([e == named.es[bind]] if bind else [])]
        return one_of(facts, [step for label, step in steps_of(v, w, model.fixes, t, g, e).items() if label in labels])

    for s, a, t, change in distinct_changes(pairs, _projection):
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}", decide(
            s, ("new_txn", "stop_sending", "commit", "abort", "buffer", "append", "put", "drop", "gc_header"), *change))
    seen = set()
    for s, a, _ in pairs:
        key = (a.param("seg"), a.param("pos")) if a.name in ("deliver", "filter") else None
        if key is None or not s.logs[key[0]][key[1]]:
            continue
        state = _projection(s)
        if (a.name, key, state) in seen:
            continue
        seen.add((a.name, key, state))
        out += not_simulated(a, f"the encoding's dispatcher does not {a.name} it in {state}",
                             decide(s, (a.name,), state, state, key))
    return out


OBLIGATIONS = [
    Obligation("pip-473", "read-committed-inductive", "read-committed (with what the caches say of decided txns) is "
               "inductive for any number of txns, segments and entries, the dispatcher as written", SECTION,
               lambda: inductive("read-committed", frozenset()), ("as-written",), proves=("read-committed",)),
    Obligation("pip-473", "read-committed-inductive", "read-committed (with what the caches say of decided txns) is "
               "inductive for any number of txns, segments and entries, the dispatcher waiting on an OPEN txn",
               SECTION, lambda: inductive("read-committed", frozenset({BARRIER})), with_fix("pip-473", BARRIER),
               proves=("read-committed",)),
    Obligation("pip-473", "committed-never-filtered-inductive", "committed-never-filtered (strengthened: a committed "
               "txn's retained entries keep their records, and they its header) is inductive for any number of txns, "
               "segments and entries, write records deleted once their txn is decided", KEEP_SECTION,
               lambda: inductive("committed-never-filtered", frozenset()), ("as-written",),
               proves=("committed-never-filtered",)),
    Obligation("pip-473", "committed-never-filtered-inductive", "committed-never-filtered (strengthened: a committed "
               "txn's retained entries keep their records, and they its header) is inductive for any number of txns, "
               "segments and entries, write records kept until retention trims their entry", KEEP_SECTION,
               lambda: inductive("committed-never-filtered", frozenset({KEEP})), with_fix("pip-473", KEEP),
               proves=("committed-never-filtered",)),
]
