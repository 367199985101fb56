"""PIP-473 ``read-committed`` (no subscription receives an entry of a txn that is not committed), for any number
of txns, segments and entries, with the fix ``open-entry-barrier``.

Txns and segments are uninterpreted sorts. The encoding keeps each txn's header state in the store (NONE: not
created, or deleted by GC) and decided outcome (a ghost, kept after GC), and each segment buffer's header cache
(NONE: not cached) and aborted set, both in memory. Its steps, from ``models/pip473``: a txn is created; the CAS
commits or aborts it; GC deletes a final header; a buffer changes its cache (each entry kept, reloaded from the
store, or dropped: a watch delivery, the index load, a commit's eviction, a crash) and marks aborted txns it has
cached as ABORTED (or forgets them: a crash); the dispatcher delivers an entry of a txn when ``isTxnAborted``
(the aborted set, else the cache, else the store; no header: aborted) lets it pass, which with the fix it does
only for a txn that is not OPEN. Which txn's entry is at the read position, the read positions, the publish
path and the TC's requests are left out, so the encoding is an abstraction: ``simulation`` checks on every
reachable state that each model step is one of these steps (or changes none of their variables), and that each
delivery of a transactional entry passes the encoding's dispatcher check.

Strengthened by what the caches hold: a header or a cache entry that says COMMITTED or ABORTED says the decided
outcome, and so does a buffer's aborted set; an OPEN header is undecided. As written the counterexample to
induction is the delivery of an entry whose txn is OPEN (the finding
``uncommitted-entry-dispatched``).
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, _decide, distinct_changes, inductive as induction, with_fix
from .pip473_header import ABORTED, COMMITTED, HSTATE, NONE, OPEN, HState, Txn

Segment = z3.DeclareSort("TxnSegment")
FIX = "open-entry-barrier"
PROVES = ("read-committed",)
SECTION = ("PIP-473 Subscribe / dispatch: 'polls tb.getMaxReadPosition() and filters by tb.isTxnAborted(msg)'; "
           "Notification mechanism: the header cache 'kept up to date by point-watches'")


class Vars:
    NAMES = ("header", "decided", "cache", "aborted")

    def __init__(self, tag: str):
        self.header = z3.Array(f"rc_header{tag}", Txn, HState)
        self.decided = z3.Array(f"rc_decided{tag}", Txn, HState)  # NONE: undecided
        self.cache = z3.Array(f"rc_cache{tag}", Segment, z3.ArraySort(Txn, HState))  # NONE: not cached
        self.aborted = z3.Array(f"rc_aborted{tag}", Segment, z3.ArraySort(Txn, z3.BoolSort()))

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def status(v: Vars, g, t):
    """What ``isTxnAborted`` reads at segment ``g``: the aborted set, else the cache, else the store."""
    cached = v.cache[g][t]
    return z3.If(v.aborted[g][t], ABORTED, z3.If(cached != NONE, cached, v.header[t]))


def steps(v: Vars, w: Vars, fixes, t, g) -> dict:
    """Each step from ``v`` to ``w`` for the txn ``t`` and the segment ``g``."""
    u = z3.Const("u", Txn)

    def decide(outcome):
        return z3.And(v.header[t] == OPEN, w.header == z3.Store(v.header, t, outcome),
                      w.decided == z3.Store(v.decided, t, outcome), *v.keep(w, "header", "decided"))
    seen = status(v, g, t)
    passes = z3.And(seen != ABORTED, seen != NONE, *([seen != OPEN] if FIX in fixes else []))
    new, old, mark = w.cache[g][u], v.cache[g][u], w.aborted[g][u]
    return {
        "new_txn": z3.And(v.header[t] == NONE, v.decided[t] == NONE, w.header == z3.Store(v.header, t, OPEN),
                          *v.keep(w, "header")),
        "commit": decide(COMMITTED),
        "abort": decide(ABORTED),
        "gc_header": z3.And(z3.Or(v.header[t] == COMMITTED, v.header[t] == ABORTED),
                            w.header == z3.Store(v.header, t, NONE), *v.keep(w, "header")),
        "buffer": z3.And(z3.ForAll([u], z3.And(z3.Or(new == old, new == v.header[u], new == NONE),
                                               z3.Implies(mark, z3.Or(v.aborted[g][u], new == ABORTED)))),
                         w.cache == z3.Store(v.cache, g, w.cache[g]), w.aborted == z3.Store(v.aborted, g, w.aborted[g]),
                         *v.keep(w, "cache", "aborted")),
        "deliver": z3.And(passes, *v.keep(w)),
    }


def plain(v: Vars) -> z3.BoolRef:
    """What the caches and the store say of a decided txn is its outcome (the property is the delivery's)."""
    t, g = z3.Const("t", Txn), z3.Const("g", Segment)
    h, d, c = v.header[t], v.decided[t], v.cache[g][t]
    return z3.And(z3.ForAll([t], z3.And(d != OPEN, z3.Implies(h == OPEN, d == NONE),
                                        z3.Implies(h == COMMITTED, d == COMMITTED),
                                        z3.Implies(h == ABORTED, d == ABORTED))),
                  z3.ForAll([g, t], z3.And(z3.Implies(c == COMMITTED, d == COMMITTED),
                                           z3.Implies(c == ABORTED, d == ABORTED),
                                           z3.Implies(v.aborted[g][t], d == ABORTED))))


def init(v: Vars) -> z3.BoolRef:
    t, g = z3.Const("t", Txn), z3.Const("g", Segment)
    return z3.And(z3.ForAll([t], z3.And(v.header[t] == NONE, v.decided[t] == NONE)),
                  z3.ForAll([g, t], z3.And(v.cache[g][t] == NONE, z3.Not(v.aborted[g][t]))))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    t, g = z3.Const("txn", Txn), z3.Const("segment", Segment)
    return induction(init(v), plain(v), plain(w), steps(v, w, fixes, t, g),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w, (t, g)),
                     also=lambda label: v.decided[t] == COMMITTED if label == "deliver" else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """Each txn's header and decided outcome, and each segment buffer's cache and aborted set, named t1, g1, ...;
    with ``step`` (txn, segment), which of them took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    txns, segments = (m.get_universe(s) or [] for s in (Txn, Segment))
    tn = {str(x): f"t{i + 1}" for i, x in enumerate(txns)}
    gn = {str(x): f"g{i + 1}" for i, x in enumerate(segments)}
    txn_text = ", ".join(f"{tn[str(t)]}: header {e(v.header[t])}, decided {e(v.decided[t])}" for t in txns)

    def buffer(g):
        cached = ", ".join(f"{tn[str(t)]} {e(v.cache[g][t])}" for t in txns if str(e(v.cache[g][t])) != "NONE")
        aborted = ", ".join(tn[str(t)] for t in txns if z3.is_true(e(v.aborted[g][t])))
        return f"{gn[str(g)]} caches {{{cached}}}, aborted {{{aborted}}}"
    took = "" if step is None else f" (taken for {tn[str(e(step[0]))]} at {gn.get(str(e(step[1])), 'a segment')})"
    return f"{{txns {txn_text}; buffers {'; '.join(buffer(g) for g in segments)}}}{took}"


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: per txn (header, decided), per segment buffer
    (its cache, txn -> state, an entry caching no header left out; its aborted set)."""
    txns = tuple((s.headers[t].state if t in s.headers else "NONE", s.decided.get(t, "NONE"))
                 for t in range(1, len(s.clients) + 1))
    buffers = tuple((tuple(sorted((t, c) for t, c in b.hdr if c is not None)), frozenset(b.aborted))
                    for b in s.buffers)
    return txns, buffers


def _concrete(v: Vars, projection, ts: list, gs: list) -> z3.BoolRef:
    state = lambda name: NONE if name == "NONE" else HSTATE[name]  # noqa: E731
    txns, buffers = projection
    out = []
    for t, (header, decided) in zip(ts, txns):
        out += [v.header[t] == state(header), v.decided[t] == state(decided)]
    for g, (cached, aborted) in zip(gs, buffers):
        row, marks = z3.K(Txn, NONE), z3.K(Txn, z3.BoolVal(False))
        for t, c in cached:
            row = z3.Store(row, ts[t - 1], state(c))
        for t in sorted(aborted):
            marks = z3.Store(marks, ts[t - 1], True)
        out += [v.cache[g] == row, v.aborted[g] == marks]
    return z3.And(*out)


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), and each delivery of a transactional entry passes the encoding's dispatcher check
    (once per distinct state and delivered txn), with the acting txn and segment among the named ones."""
    out, delivered = [], set()
    pairs = list(pairs)

    def decide(s, labels, before, after, bind):
        ts = [z3.Const(f"T{i}", Txn) for i in range(1, len(s.clients) + 1)]
        gs = [z3.Const(f"G{i}", Segment) for i in range(len(s.buffers))]
        v, w = Vars(""), Vars("'")
        t, g = z3.Const("txn", Txn), z3.Const("segment", Segment)
        distinct = [z3.Distinct(*group) for group in (ts, gs) if len(group) > 1]
        facts = [*distinct, _concrete(v, before, ts, gs), _concrete(w, after, ts, gs), *bind(t, g, ts, gs)]
        answer = z3.unsat
        for label, step in steps_of(v, w, model.fixes, t, g).items():
            if label not in labels:
                continue
            got = _decide(*facts, step)[0]
            if got == z3.sat:
                return got
            answer = got if got == z3.unknown else answer
        return answer

    def named(t, g, ts, gs):
        return [z3.Or(*[t == c for c in ts]), z3.Or(*[g == c for c in gs])]
    for s, a, t, change in distinct_changes(pairs, _projection):
        answer = decide(s, ("new_txn", "commit", "abort", "gc_header", "buffer"), *change, named)
        if answer != z3.sat:
            out.append(f"{a}: no step of the encoding takes {change[0]} to {change[1]}"
                       + (" (Z3 answered unknown)" if answer == z3.unknown else ""))
    for s, a, _ in pairs:
        txn = s.logs[a.param("seg")][a.param("pos")] if a.name == "deliver" else 0
        key = (_projection(s), txn, a.param("seg") if txn else None)
        if not txn or key in delivered:
            continue
        delivered.add(key)
        answer = decide(s, ("deliver",), key[0], key[0],
                        lambda t, g, ts, gs: [t == ts[txn - 1], g == gs[a.param("seg")]])
        if answer != z3.sat:
            out.append(f"{a}: the encoding's dispatcher does not pass txn {txn} in {key[0]}"
                       + (" (Z3 answered unknown)" if answer == z3.unknown else ""))
    return out


OBLIGATIONS = [
    Obligation("pip-473", "read-committed-inductive", "read-committed (with what the caches say of decided txns) is "
               "inductive for any number of txns, segments and entries, the dispatcher as written", SECTION,
               lambda: inductive(frozenset()), ("as-written",), proves=PROVES),
    Obligation("pip-473", "read-committed-inductive", "read-committed (with what the caches say of decided txns) is "
               "inductive for any number of txns, segments and entries, the dispatcher waiting on an OPEN txn",
               SECTION, lambda: inductive(frozenset({FIX})), with_fix("pip-473", FIX), proves=PROVES),
]
