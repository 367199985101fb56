"""v4-txn ``end-txn-completes``: a txn whose client asked to end it is answered, for any number of topics, other
txns and seals, and any finite number of broker crashes (the fix ``off-segment-markers``: PIP-473 Alternative B).

A liveness claim, proved by a ranking argument under the model's weak fairness (every step of the TC, the brokers
and the dispatcher, ``SYSTEM`` in ``invariants/v4txn.py``). Topics are an uninterpreted sort. The encoding keeps,
for one txn: its client's phase and whether the TC logged it ending; per topic, the status of its
END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION RPCs (none, sent, written, failed, done), whether the topic's
buffer is ready and whether the topic is sealed; and the crashes left. Its steps, from ``models/v4txn``: the
client's ``new_txn`` and ``end_txn`` (the TC logs the decision and sends the RPCs); the TC's retry of a failed RPC,
the topic's marker append (rejected on a sealed topic without the fix), its reply, the subscription's end; the
topic load; a crash (RPCs sent or written to the topic fail, its buffer is lost); a seal; the TC's final record
and answer once every RPC is done. Other txns' steps change none of these. ``simulation`` checks on every
reachable state, for each txn, that each model step is one of these, the fair ones as themselves.

The measure: the crashes left, then each topic's rank (failed, sent to a topic not loaded, sent to a loaded one,
written, done: 4, 3, 2, 1, 0 for the marker; 3, 2, 1, 0 for the subscription), ordered pointwise. It is
well-founded: a txn's RPCs are to the finitely many topics it wrote to or acknowledged on. Proved: while the txn
is ending and unanswered, (1) no step increases the measure, (2) each topic of nonzero rank has a fair step
enabled, and the TC's answer is enabled when every rank is zero, and (3) each of those steps lowers the measure or
answers the txn. Since a step that leaves the measure as it is leaves each rank, hence each such step, enabled, a
run that never answers would keep one enabled forever without taking it. So every ending txn is answered: with
finitely many txns, the model's property (no client is left ending). As written, (1) fails: a sealed topic
rejects the marker, and the RPC goes from sent back to failed (the finding ``end-txn-stalls-on-sealed-segment``).
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.v4txn import SYSTEM
from pulsar_verify.models.v4txn.state import COMMITTING, ABORTING, PARTITION, SUBSCRIPTION

from .obligations import Obligation, Verdict, ranked, simulated, universe, with_fix

Topic = z3.DeclareSort("EndTopic")
Phase, (IDLE, OPEN, ENDING, DONE) = z3.EnumSort("EndPhase", ("idle", "open", "ending", "done"))
Status, (NONE, SENT, WRITTEN, FAILED, FINISHED) = z3.EnumSort("EndStatus", ("none", "sent", "written", "failed",
                                                                           "done"))
PHASE = {"idle": IDLE, "open": OPEN, "ending": ENDING, "done": DONE}
STATUS = {None: NONE, "sent": SENT, "written": WRITTEN, "failed": FAILED, "done": FINISHED}
FIX = "off-segment-markers"
SECTION = ("PIP-473 How the two interact: 'End-of-transaction stalls on sealed segments ... The end-txn RPC times "
           "out'; Alternatives considered, B: markers in a separate stream")


class Vars:
    NAMES = ("phase", "tc_ending", "marker", "sub", "ready", "sealed", "crashes")

    def __init__(self, tag: str):
        self.phase = z3.Const(f"et_phase{tag}", Phase)  # the txn's client
        self.tc_ending = z3.Bool(f"et_tc_ending{tag}")  # the TC logged COMMITTING or ABORTING
        self.marker = z3.Array(f"et_marker{tag}", Topic, Status)  # END_TXN_ON_PARTITION to the topic
        self.sub = z3.Array(f"et_sub{tag}", Topic, Status)  # END_TXN_ON_SUBSCRIPTION to the topic
        self.ready = z3.Array(f"et_ready{tag}", Topic, z3.BoolSort())  # the topic's buffer is loaded
        self.sealed = z3.Array(f"et_sealed{tag}", Topic, z3.BoolSort())
        self.crashes = z3.Int(f"et_crashes{tag}")  # crashes left

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, k) -> dict:
    """Each step from ``v`` to ``w``, at the topic ``k``. The labels are the model's."""
    x = z3.Const("x", Topic)
    fixed = FIX in fixes
    lose = lambda st: z3.If(z3.Or(st == SENT, st == WRITTEN), FAILED, st)  # noqa: E731
    sent = lambda arr: z3.ForAll([x], z3.Or(arr[x] == NONE, arr[x] == SENT))  # noqa: E731
    answered = z3.ForAll([x], z3.And(z3.Or(v.marker[x] == NONE, v.marker[x] == FINISHED),
                                     z3.Or(v.sub[x] == NONE, v.sub[x] == FINISHED)))
    out = {
        "new_txn": z3.And(v.phase == IDLE, w.phase == OPEN, *v.keep(w, "phase")),
        "end_txn": z3.And(v.phase == OPEN, w.phase == ENDING, w.tc_ending, sent(w.marker), sent(w.sub),
                          *v.keep(w, "phase", "tc_ending", "marker", "sub")),
        "tc_retry": z3.And(z3.Or(z3.And(v.marker[k] == FAILED, w.marker == z3.Store(v.marker, k, SENT), w.sub == v.sub),
                                 z3.And(v.sub[k] == FAILED, w.sub == z3.Store(v.sub, k, SENT), w.marker == v.marker)),
                           *v.keep(w, "marker", "sub")),
        "end_on_partition": z3.And(v.marker[k] == SENT, v.ready[k], *([] if fixed else [z3.Not(v.sealed[k])]),
                                   w.marker == z3.Store(v.marker, k, WRITTEN), *v.keep(w, "marker")),
        "partition_reply": z3.And(v.marker[k] == WRITTEN, w.marker == z3.Store(v.marker, k, FINISHED),
                                  *v.keep(w, "marker")),
        "end_on_subscription": z3.And(v.sub[k] == SENT, v.ready[k], w.sub == z3.Store(v.sub, k, FINISHED),
                                      *v.keep(w, "sub")),
        "tb_recover": z3.And(z3.Not(v.ready[k]), w.ready == z3.Store(v.ready, k, True), *v.keep(w, "ready")),
        "crash": z3.And(v.crashes > 0, w.crashes == v.crashes - 1, w.ready == z3.Store(v.ready, k, False),
                        w.marker == z3.Store(v.marker, k, lose(v.marker[k])),
                        w.sub == z3.Store(v.sub, k, lose(v.sub[k])),
                        *v.keep(w, "crashes", "ready", "marker", "sub")),
        "seal": z3.And(w.sealed == z3.Store(v.sealed, k, True), *v.keep(w, "sealed")),
        "tc_end": z3.And(v.tc_ending, answered, w.phase == DONE, z3.Not(w.tc_ending),
                         w.marker == z3.K(Topic, NONE), w.sub == z3.K(Topic, NONE),
                         *v.keep(w, "phase", "tc_ending", "marker", "sub")),
    }
    if not fixed:  # a sealed topic rejects the marker (the model has no such step with the fix)
        out["marker_rejected"] = z3.And(v.marker[k] == SENT, v.ready[k], v.sealed[k],
                                        w.marker == z3.Store(v.marker, k, FAILED), *v.keep(w, "marker"))
    return out


def ranks(v: Vars, k) -> tuple:
    """The topic's rank for the marker RPC and for the subscription's."""
    marker = z3.If(v.marker[k] == FAILED, 4, z3.If(v.marker[k] == SENT, z3.If(v.ready[k], 2, 3),
                                                   z3.If(v.marker[k] == WRITTEN, 1, 0)))
    sub = z3.If(v.sub[k] == FAILED, 3, z3.If(v.sub[k] == SENT, z3.If(v.ready[k], 1, 2), 0))
    return marker, sub


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    """``w``'s measure is at most ``v``'s (below it, if ``strictly``): fewer crashes left, or as many and no topic's
    rank above ``v``'s (and one below)."""
    x = z3.Const("x", Topic)
    (m, s), (m2, s2) = ranks(v, x), ranks(w, x)
    pointwise = z3.ForAll([x], z3.And(m2 <= m, s2 <= s))
    lower = z3.Exists([x], z3.Or(m2 < m, s2 < s)) if strictly else z3.BoolVal(True)
    return z3.Or(w.crashes < v.crashes, z3.And(w.crashes == v.crashes, pointwise, lower))


def helpers(v: Vars, fixes, k) -> dict:
    """The fair step to take at the topic ``k``, by label: when it is the one, and its guard."""
    fixed = FIX in fixes
    x = z3.Const("x", Topic)
    zero = z3.ForAll([x], z3.And(*[r == 0 for r in ranks(v, x)]))
    failed = z3.Or(v.marker[k] == FAILED, v.sub[k] == FAILED)
    return {
        "tc_retry": (failed, failed),
        "tb_recover": (z3.And(z3.Or(v.marker[k] == SENT, v.sub[k] == SENT), z3.Not(v.ready[k])), z3.Not(v.ready[k])),
        "end_on_partition": (z3.And(v.marker[k] == SENT, v.ready[k]),
                             z3.And(v.marker[k] == SENT, v.ready[k], *([] if fixed else [z3.Not(v.sealed[k])]))),
        "partition_reply": (v.marker[k] == WRITTEN, v.marker[k] == WRITTEN),
        "end_on_subscription": (z3.And(v.sub[k] == SENT, v.ready[k]), z3.And(v.sub[k] == SENT, v.ready[k])),
        "tc_end": (zero, z3.And(v.tc_ending, _answered(v))),
    }


def _answered(v: Vars) -> z3.BoolRef:
    x = z3.Const("x", Topic)
    return z3.ForAll([x], z3.And(z3.Or(v.marker[x] == NONE, v.marker[x] == FINISHED),
                                 z3.Or(v.sub[x] == NONE, v.sub[x] == FINISHED)))


def invariant(v: Vars) -> z3.BoolRef:
    """The crashes left are not negative, an ending client's txn is logged ending, and no subscription RPC is ever
    written (its end is one step)."""
    x = z3.Const("x", Topic)
    return z3.And(v.crashes >= 0, z3.Implies(v.phase == ENDING, v.tc_ending), z3.ForAll([x], v.sub[x] != WRITTEN))


def completes(fixes, invariant_of=invariant, helpers_of=helpers) -> Verdict:
    """The ranking argument for an ending txn, from the invariant (``obligations.ranked`` proves it inductive)."""
    v, w, k = Vars(""), Vars("'"), z3.Const("topic", Topic)
    x = z3.Const("x", Topic)
    init = z3.And(v.phase == IDLE, z3.Not(v.tc_ending), v.marker == z3.K(Topic, NONE), v.sub == z3.K(Topic, NONE),
                  v.crashes >= 0)
    covers = z3.ForAll([x], z3.Implies(z3.Or(*[r > 0 for r in ranks(v, x)]), z3.Or(
        *[when for label, (when, _) in helpers_of(v, fixes, x).items() if label != "tc_end"])))
    return ranked(init, invariant_of(v), invariant_of(w), v.phase == ENDING, w.phase == ENDING, w.phase == DONE,
                  steps(v, w, fixes, k), helpers_of(v, fixes, k), covers, no_worse(v, w),
                  no_worse(v, w, strictly=True), SYSTEM, before=lambda m: describe(m, v),
                  after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The client and the TC, each topic's RPCs and buffer, the crashes left."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    topics, names = universe(m, Topic, "topic ", first=0)

    def one(x):
        held = [f"marker {e(v.marker[x])}", f"subscription {e(v.sub[x])}",
                "loaded" if z3.is_true(e(v.ready[x])) else "not loaded", *(["sealed"] if z3.is_true(e(v.sealed[x]))
                                                                             else [])]
        return f"{names[str(x)]}: {', '.join(held)}"
    tc = "TC logged it ending" if z3.is_true(e(v.tc_ending)) else "TC not ending it"
    return "{" + "; ".join([f"client {e(v.phase)}", tc, *(one(x) for x in topics),
                            f"{e(v.crashes)} crashes left"]) + "}"


def _views(s, t: int) -> tuple:
    """The model state's values of the encoding's variables for the txn ``t``: its client's phase, whether the TC
    logged it ending, and per topic its two RPCs' statuses, whether the buffer is ready and the topic sealed."""
    rpcs = dict(s.rpcs)
    topics = tuple((rpcs.get((t, PARTITION, topic)), rpcs.get((t, SUBSCRIPTION, topic)), s.buffers[topic].ready,
                    s.sealed[topic]) for topic in range(len(s.buffers)))
    return s.clients[t].phase, s.tc.get(t) in (COMMITTING, ABORTING), topics


def _concrete(v: Vars, view, crashes: int, ks: list) -> list:
    phase, ending, topics = view
    out = [v.phase == PHASE[phase], v.tc_ending == ending, v.crashes == crashes]
    for k, (marker, sub, ready, sealed) in zip(ks, topics):
        out += [v.marker[k] == STATUS[marker], v.sub[k] == STATUS[sub], v.ready[k] == ready, v.sealed[k] == sealed]
    return out


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn is one of its steps,
    for that txn; a fair helper as itself (the label the ranking argument takes as fair must be the model's)."""
    v, w, k = Vars(""), Vars("'"), z3.Const("topic", Topic)
    candidates = steps_of(v, w, model.fixes, k)
    own = tuple(set(helpers(v, model.fixes, k)) & set(candidates))
    txns = range(1, model.config.txns + 1)

    def view(sx):  # the txn's view, and the crashes left
        return _views(*sx), model.config.crashes - sx[0].crashes

    def facts(sx, _, before, after):
        ks = [z3.Const(f"K{i}", Topic) for i in range(len(sx[0].buffers))]
        return [*([z3.Distinct(*ks)] if len(ks) > 1 else []), z3.Or(*[k == y for y in ks]),
                *_concrete(v, before[0], before[1], ks), *_concrete(w, after[0], after[1], ks)]
    return simulated((((s, x), a, (t, x)) for s, a, t in pairs for x in txns), view, facts, candidates, own,
                     lambda sx, before, after: f"txn {sx[1]} from {before[0]} ({before[1]} crashes left) to "
                                               f"{after[0]} ({after[1]})")


OBLIGATIONS = [
    Obligation("v4-txn", "end-txn-completes-ranked", "A txn whose client asked to end it is answered, for any number "
               "of topics, txns and seals and any finite number of crashes, the markers in the topic's own stream "
               "(the TC retries a rejected marker)", SECTION, lambda: completes(frozenset()), ("as-written",),
               proves=("end-txn-completes",)),
    Obligation("v4-txn", "end-txn-completes-ranked", "A txn whose client asked to end it is answered, for any number "
               "of topics, txns and seals and any finite number of crashes, the markers in a separate stream sealing "
               "does not close (ranked by the crashes left, then each topic's RPC statuses pointwise)", SECTION,
               lambda: completes(frozenset({FIX})), with_fix("v4-txn", FIX), proves=("end-txn-completes",)),
]
