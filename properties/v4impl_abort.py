"""v4-impl: every abort a topic acknowledged to the coordinator is recorded in the topic's log, for any number of
txns and topics and any number of crashes, retries and re-drives (the fix ``abort-marker-always``).

This is the part of ``plain-message-delivered`` and ``committed-entries-delivered`` the fix is about. Before it, a
buffer without a snapshot acknowledges an abort and writes no marker (``abort_without_marker``), so nothing durable
says the txn aborted: a send of it that lands later makes it ongoing for good (the findings
``late-send-after-markerless-abort-blocks-topic`` and ``late-send-after-markerless-abort-hides-committed-txn``).
With the marker, every recovery finds the abort (``buffer.rebuild``). The claim proves neither property on its own:
they also need every txn to end and the dispatcher to move on.

The encoding keeps one txn and one topic: the TC's decision, the status of its END_TXN_ON_PARTITION to the topic
(none, sent, written, failed, done), whether the TC finished the txn with the topic among its partitions (its RPC
then gone), and whether the topic's log holds an abort marker of the txn. Its steps, from ``models/v4txn`` (the
coordinator and the buffer), ``models/v4impl`` (``coordinator_restart``, ``timeout``, ``first_snapshot``,
``low_water``): the decision logged and the RPC sent (``end_txn``, ``txn_timeout``, a resent END_TXN of an open
txn), a re-drive (``end_resend``, ``tc_reload``: the RPC sent anew), the TC's retry of a failed RPC, the marker
(``end_on_partition``), the abort without one (as written), the reply, a crash (the RPC in flight fails), the
TC's final record, and the buffer's own abort below the low water mark. ``simulation`` checks on every reachable
state, for each txn and topic, that each model step is one of these.

The claim: an acknowledged abort (the RPC written or done, or the txn finished with the topic) has its marker. It
is inductive as it stands with the fix; as written the counterexample to induction is the abort without a
marker.
"""
from __future__ import annotations

import z3

from pulsar_verify.models.v4impl.first_snapshot import FIX
from pulsar_verify.models.v4impl.model import BASELINE
from pulsar_verify.models.v4txn.state import ABORT_MARKER, ABORTED, COMMITTED, PARTITION

from .obligations import Obligation, Verdict, all_of, fixes_of, inductive, simulated, with_fix

Status, (NONE, SENT, WRITTEN, FAILED, DONE) = z3.EnumSort("AbortRpc", ("none", "sent", "written", "failed", "done"))
Decision, (UNDECIDED, D_COMMIT, D_ABORT) = z3.EnumSort("AbortDecision", ("undecided", "commit", "abort"))
STATUS = {None: NONE, "sent": SENT, "written": WRITTEN, "failed": FAILED, "done": DONE}
DECISION = {None: UNDECIDED, COMMITTED: D_COMMIT, ABORTED: D_ABORT}
FIXED = with_fix("v4-impl", FIX)
SECTION = ("TopicTransactionBuffer.abortTxn: 'no message sent, need not to add abort mark by txn timeout' in a "
           "buffer without a snapshot; the minimal fix: the abort marker in every recovered state, as commitTxn")


class Vars:
    NAMES = ("decided", "status", "finished", "marked")

    def __init__(self, tag: str):
        self.decided = z3.Const(f"ab_decided{tag}", Decision)
        self.status = z3.Const(f"ab_status{tag}", Status)  # the END_TXN_ON_PARTITION to the topic
        self.finished = z3.Bool(f"ab_finished{tag}")  # the TC finished the txn, the topic among its partitions
        self.marked = z3.Bool(f"ab_marked{tag}")  # the topic's log holds an abort marker of the txn

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes) -> dict:
    """Each step from ``v`` to ``w`` for the txn and the topic. The labels are the model's."""
    logged = z3.And(v.status == NONE, z3.Not(v.finished), z3.Or(v.decided == UNDECIDED, w.decided == v.decided),
                    w.decided != UNDECIDED, z3.Or(w.status == NONE, w.status == SENT), *v.keep(w, "decided", "status"))
    redriven = z3.And(v.status != NONE, w.status == SENT, *v.keep(w, "status"))
    out = {
        "end_txn": logged,
        "txn_timeout": logged,
        "end_resend": z3.Or(logged, redriven),
        "tc_reload": redriven,
        "tc_retry": z3.And(v.status == FAILED, w.status == SENT, *v.keep(w, "status")),
        "end_on_partition": z3.And(v.status == SENT, w.status == WRITTEN,
                                   w.marked == z3.Or(v.marked, v.decided != D_COMMIT), *v.keep(w, "status", "marked")),
        "partition_reply": z3.And(v.status == WRITTEN, w.status == DONE, *v.keep(w, "status")),
        "crash": z3.And(z3.Or(v.status == SENT, v.status == WRITTEN), w.status == FAILED, *v.keep(w, "status")),
        "tc_end": z3.And(z3.Or(v.status == NONE, v.status == DONE), w.status == NONE,
                         w.finished == z3.Or(v.finished, v.status == DONE), *v.keep(w, "status", "finished")),
        "lwm_abort": z3.And(w.marked, *v.keep(w, "marked")),
    }
    if FIX not in fixes:
        out["abort_without_marker"] = z3.And(v.status == SENT, v.decided != D_COMMIT, w.status == WRITTEN,
                                             *v.keep(w, "status"))
    return out


def recorded(v: Vars) -> z3.BoolRef:
    """The claim: an abort the topic acknowledged has its marker in the log."""
    acknowledged = z3.Or(v.status == WRITTEN, v.status == DONE, v.finished)
    return z3.Implies(z3.And(acknowledged, v.decided == D_ABORT), v.marked)


def proof(variant: str, invariant_of=recorded) -> Verdict:
    """The claim holds initially and is kept by every step, for one txn and one topic (so for any number)."""
    v, w = Vars(""), Vars("'")
    init = z3.And(v.decided == UNDECIDED, v.status == NONE, z3.Not(v.finished), z3.Not(v.marked))
    return inductive(init, invariant_of(v), invariant_of(w), steps(v, w, fixes_of("v4-impl", variant)),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The decision, the RPC to the topic, whether the TC finished the txn, and the topic's abort marker."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    finished = "; the TC finished it" if z3.is_true(e(v.finished)) else ""
    marker = "an abort marker" if z3.is_true(e(v.marked)) else "no abort marker"
    return f"{{decided {e(v.decided)}; END_TXN_ON_PARTITION {e(v.status)}{finished}; the topic's log has {marker}}}"


def _view(s, t: int, topic: int) -> tuple:
    status = s.rpcs.get((t, PARTITION, topic))
    finished = status is None and s.tc.get(t) in (COMMITTED, ABORTED) and topic in s.parts.get(t, ())
    return s.decided.get(t), status, finished, (ABORT_MARKER, t) in s.logs[topic]


def _concrete(v: Vars, view) -> list:
    decided, status, finished, marked = view
    return [v.decided == DECISION[decided], v.status == STATUS[status], v.finished == finished, v.marked == marked]


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn and topic is one of
    its steps, for them."""
    v, w = Vars(""), Vars("'")
    candidates = steps_of(v, w, model.fixes)
    keys = [(x, k) for x in range(1, model.config.txns + 1) for k in range(model.config.topics)]
    return simulated((((s, key), a, (t, key)) for s, a, t in pairs for key in keys), lambda sx: _view(sx[0], *sx[1]),
                     lambda sx, _, before, after: [*_concrete(v, before), *_concrete(w, after)], candidates, (),
                     lambda sx, before, after: f"txn {sx[1][0]} on topic {sx[1][1]} from {before} to {after}")


OBLIGATIONS = [
    Obligation("v4-impl", "abort-recorded-inductive", "Every abort a topic acknowledged to the TC is in the topic's "
               "log, for any number of txns, topics, crashes and retries: a buffer without a snapshot acknowledges "
               "an abort without a marker (the part of plain-message-delivered the fix is about)", SECTION,
               lambda: proof(BASELINE), (BASELINE,)),
    Obligation("v4-impl", "abort-recorded-inductive", "Every abort a topic acknowledged to the TC is in the topic's "
               "log, for any number of txns, topics, crashes and retries, the buffer appending the abort marker in "
               "every state (the part of plain-message-delivered the fix is about)", SECTION,
               lambda: all_of(proof(x) for x in FIXED), FIXED),
]
