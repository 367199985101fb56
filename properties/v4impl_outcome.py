"""v4-impl ``client-told-the-outcome``: an application told its commit succeeded has it committed, and one told its
commit or abort failed does not, for any number of txns, topics and consumers and any number of TC crashes and
reloads (the fix ``idempotent-end``: PIP-255, apache/pulsar #19629).

The property is about one txn at a time, so the encoding keeps one txn: the TC's record of it (none, open,
committing, aborting, committed, aborted), the decision (``decided``: undecided, committed, aborted), its client's
phase and outcome, the client's END_TXN request (none, held by the TC, retrying, or a reply on its way; what it
asks for and the answer), and whether the TC serves. Its steps, from ``models/v4impl`` (``coordinator_restart``,
``timeout``) and ``models/v4txn/coordinator.py``: ``new_txn``; the END_TXN reaching the TC (``end_txn``: the
decision logged, the request held) or deferred while the TC is down (``end_deferred``); the timeout's abort
(``txn_timeout``) and the refusal of a timed-out txn's end (``end_refused``); the TC's final record
(``tc_end``: the held request answered, as its own reply with TC crashes, merged without); the resent request
(``end_resend``: ended as by ``end_txn``, driven again, or, with the fix, answered with the outcome it asks for),
answered ``TransactionNotFound`` (``end_not_found``, as written, once the TC has ended the txn) or
``InvalidTxnStatus`` (``end_invalid_status``); the reply reaching the client (``end_reply``) or the client's
operation timeout (``end_timeout``); the TC's crash (held requests and replies lost: the client retries) and
reload. A guard the model has and the claim does not need (the sends in flight, a txn no reloaded TC drives, a
lost timeout) is left out: each step admits at least the model's. ``simulation`` checks on every reachable state,
for each txn, that each model step is one of these.

The claim, strengthened to be inductive: the TC's record and the decision agree (none or open: undecided; ending
or ended: decided so); a request held by the TC is for the way the txn is ending; a request or reply exists only
while the client is ending; a txn decided committed was asked to commit, never to abort; a client still idle or
open has not had its txn committed; a reply answers committed only for a committed txn and a failure only for an
aborted one. Inductive with the fix. As written, the counterexample to induction is the resent END_TXN of a
committed txn answered ``TransactionNotFound`` (the finding ``committed-txn-reported-failed``).
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.v4impl import FAILED as NOT_COMMITTED
from pulsar_verify.models.v4impl.coordinator_restart import (FIX_IDEMPOTENT, HELD, INVALID, NOT_FOUND, REPLY,
                                                               RETRYING, TIMEOUT)
from pulsar_verify.models.v4impl.model import BASELINE
from pulsar_verify.models.v4txn.state import ABORTED, ABORTING, COMMITTED, COMMITTING, OPEN

from .obligations import Obligation, Verdict, all_of, fixes_of, inductive, simulated, with_fix

Tc, (T_NONE, T_OPEN, T_COMMITTING, T_ABORTING, T_COMMITTED, T_ABORTED) = z3.EnumSort(
    "OutcomeTc", ("none", "open", "committing", "aborting", "committed", "aborted"))
Decision, (UNDECIDED, D_COMMITTED, D_ABORTED) = z3.EnumSort("OutcomeDecision", ("undecided", "committed", "aborted"))
Phase, (IDLE, P_OPEN, ENDING, DONE) = z3.EnumSort("OutcomePhase", ("idle", "open", "ending", "done"))
Answer, (A_NONE, A_COMMITTED, A_ABORTED, A_NOT_FOUND, A_INVALID, A_TIMEOUT) = z3.EnumSort(
    "OutcomeAnswer", ("none", "committed", "aborted", "TransactionNotFound", "InvalidTxnStatus", "Timeout"))
Request, (R_NONE, R_HELD, R_RETRYING, R_REPLY) = z3.EnumSort("OutcomeRequest", ("none", "held", "retrying", "reply"))

TC = {None: T_NONE, OPEN: T_OPEN, COMMITTING: T_COMMITTING, ABORTING: T_ABORTING, COMMITTED: T_COMMITTED,
      ABORTED: T_ABORTED}
DECISION = {None: UNDECIDED, COMMITTED: D_COMMITTED, ABORTED: D_ABORTED}
PHASE = {"idle": IDLE, "open": P_OPEN, "ending": ENDING, "done": DONE}
ANSWER = {"": A_NONE, COMMITTED: A_COMMITTED, ABORTED: A_ABORTED, NOT_FOUND: A_NOT_FOUND, INVALID: A_INVALID,
          TIMEOUT: A_TIMEOUT}
REQUEST = {None: R_NONE, HELD: R_HELD, RETRYING: R_RETRYING, REPLY: R_REPLY}
TOLD = ("phase", "outcome", "request", "answer", "want")  # what the client's end being told changes
FAILED = tuple(ANSWER[x] for x in sorted(NOT_COMMITTED))  # what the application takes for "not committed"
FIXED = with_fix("v4-impl", FIX_IDEMPOTENT)
SECTION = ("apache/pulsar #19629 'Throw exception though transaction committed successfully'; PIP-255; the Pulsar "
           "client API: Transaction.commit() completes exceptionally when the transaction did not commit")


class Vars:
    NAMES = ("tc", "decided", "phase", "outcome", "request", "want", "answer", "up")

    def __init__(self, tag: str):
        self.tc = z3.Const(f"oc_tc{tag}", Tc)  # the TC's record of the txn (its log)
        self.decided = z3.Const(f"oc_decided{tag}", Decision)
        self.phase = z3.Const(f"oc_phase{tag}", Phase)  # the txn's client
        self.outcome = z3.Const(f"oc_outcome{tag}", Answer)  # what the application was told
        self.request = z3.Const(f"oc_request{tag}", Request)  # the client's END_TXN
        self.want = z3.Bool(f"oc_want_commit{tag}")  # it asks to commit (else to abort)
        self.answer = z3.Const(f"oc_answer{tag}", Answer)  # the answer of a reply on its way
        self.up = z3.Bool(f"oc_up{tag}")  # the TC serves

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def ending(want) -> z3.ExprRef:
    return z3.If(want, T_COMMITTING, T_ABORTING)


def ended(want) -> z3.ExprRef:
    return z3.If(want, T_COMMITTED, T_ABORTED)


def steps(v: Vars, w: Vars, fixes) -> dict:
    """Each step from ``v`` to ``w`` for the txn. The labels are the model's."""
    fixed = FIX_IDEMPOTENT in fixes
    final = z3.Or(v.tc == T_COMMITTED, v.tc == T_ABORTED)

    def logged(want):  # the TC logs COMMITTING / ABORTING; the first decision stands
        return [w.tc == ending(want), w.decided == z3.If(v.decided == UNDECIDED,
                                                         z3.If(want, D_COMMITTED, D_ABORTED), v.decided)]

    def asked(request, answer=A_NONE):
        return [w.request == request, w.want == v.want, w.answer == answer]

    def told(outcome):  # the client's end completes with ``outcome``, its request gone (what it asked, too)
        return [w.phase == DONE, w.outcome == outcome, w.request == R_NONE, w.answer == A_NONE]

    final_answer = z3.If(v.tc == T_COMMITTING, A_COMMITTED, A_ABORTED)
    out = {
        "new_txn": z3.And(v.up, v.phase == IDLE, w.phase == P_OPEN, w.tc == T_OPEN, *v.keep(w, "phase", "tc")),
        "end_txn": z3.And(v.up, v.phase == P_OPEN, v.tc == T_OPEN, w.phase == ENDING, *logged(w.want),
                          w.request == R_HELD, w.answer == A_NONE,
                          *v.keep(w, "phase", "tc", "decided", "request", "want", "answer")),
        "end_deferred": z3.And(z3.Not(v.up), v.phase == P_OPEN, w.phase == ENDING, w.request == R_RETRYING,
                               w.answer == A_NONE, *v.keep(w, "phase", "request", "want", "answer")),
        "txn_timeout": z3.And(v.up, v.tc == T_OPEN, *logged(False), *v.keep(w, "tc", "decided")),
        "end_refused": z3.And(v.up, v.phase == P_OPEN, v.tc != T_OPEN, v.tc != T_NONE, *told(A_ABORTED),
                              *v.keep(w, *TOLD)),
        "tc_end": z3.And(v.up, z3.Or(v.tc == T_COMMITTING, v.tc == T_ABORTING),
                         w.tc == z3.If(v.tc == T_COMMITTING, T_COMMITTED, T_ABORTED),
                         z3.If(v.request == R_HELD,
                               z3.Or(z3.And(*asked(R_REPLY, final_answer), *v.keep(w, "tc", "request", "answer")),
                                     z3.And(*told(final_answer), *v.keep(w, "tc", *TOLD))),
                               z3.And(*v.keep(w, "tc")))),
        "end_resend": z3.And(v.up, v.request == R_RETRYING, z3.Or(
            z3.And(v.tc == T_OPEN, *logged(v.want), *asked(R_HELD), *v.keep(w, "tc", "decided", "request", "answer")),
            z3.And(v.tc == ending(v.want), *asked(R_HELD), *v.keep(w, "request", "answer")),
            *([z3.And(v.tc == ended(v.want), *asked(R_REPLY, z3.If(v.want, A_COMMITTED, A_ABORTED)),
                      *v.keep(w, "request", "answer"))] if fixed else []))),
        "end_invalid_status": z3.And(v.up, v.request == R_RETRYING,
                                     z3.Or(v.tc == ending(z3.Not(v.want)),
                                           *([v.tc == ended(z3.Not(v.want))] if fixed else [])),
                                     *asked(R_REPLY, A_INVALID), *v.keep(w, "request", "answer")),
        "end_reply": z3.And(v.request == R_REPLY, *told(v.answer), *v.keep(w, *TOLD)),
        "end_timeout": z3.And(v.request == R_RETRYING, *told(A_TIMEOUT), *v.keep(w, *TOLD)),
        "tc_crash": z3.And(v.up, z3.Not(w.up), w.want == v.want,
                           z3.If(v.request == R_NONE, z3.And(w.request == R_NONE, w.answer == v.answer),
                                 z3.And(w.request == R_RETRYING, w.answer == A_NONE)),
                           *v.keep(w, "up", "request", "answer")),
        "tc_reload": z3.And(z3.Not(v.up), w.up, *v.keep(w, "up")),
    }
    if not fixed:
        out["end_not_found"] = z3.And(v.up, v.request == R_RETRYING, final, *asked(R_REPLY, A_NOT_FOUND),
                                      *v.keep(w, "request", "answer"))
    return out


def told_the_outcome(v: Vars) -> z3.BoolRef:
    """The model's property: told committed, the txn is committed; told it failed, it is not."""
    return z3.And(z3.Implies(v.outcome == A_COMMITTED, v.decided == D_COMMITTED),
                  z3.Implies(z3.Or(*[v.outcome == a for a in FAILED]), v.decided != D_COMMITTED))


def invariant(v: Vars) -> z3.BoolRef:
    """The property, and what makes it inductive (the module's docstring)."""
    return z3.And(
        told_the_outcome(v),
        z3.Implies(z3.Or(v.tc == T_NONE, v.tc == T_OPEN), v.decided == UNDECIDED),
        z3.Implies(z3.Or(v.tc == T_COMMITTING, v.tc == T_COMMITTED), v.decided == D_COMMITTED),
        z3.Implies(z3.Or(v.tc == T_ABORTING, v.tc == T_ABORTED), v.decided == D_ABORTED),
        z3.Implies(v.request == R_HELD, v.tc == ending(v.want)),
        z3.Implies(v.request != R_NONE, v.phase == ENDING),
        z3.Implies(z3.And(v.request != R_NONE, z3.Not(v.want)), v.decided != D_COMMITTED),
        z3.Implies(z3.Or(v.phase == IDLE, v.phase == P_OPEN), v.decided != D_COMMITTED),
        z3.Implies(v.phase == IDLE, v.tc == T_NONE),
        z3.Implies(v.outcome != A_NONE, v.phase == DONE),
        z3.Implies(z3.And(v.request == R_REPLY, v.answer == A_COMMITTED), v.decided == D_COMMITTED),
        z3.Implies(z3.And(v.request == R_REPLY, z3.Or(*[v.answer == a for a in FAILED])), v.decided == D_ABORTED))


def proof(variant: str, invariant_of=invariant, steps_of=steps) -> Verdict:
    """The invariant holds initially and is kept by every step, for one txn (so for any number of them)."""
    v, w = Vars(""), Vars("'")
    init = z3.And(v.tc == T_NONE, v.decided == UNDECIDED, v.phase == IDLE, v.outcome == A_NONE, v.request == R_NONE,
                  v.answer == A_NONE, v.up)
    return inductive(init, invariant_of(v), invariant_of(w), steps_of(v, w, fixes_of("v4-impl", variant)),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The TC's record and the decision, the client's phase and outcome, its END_TXN, whether the TC serves."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    request = str(e(v.request))
    if request != "none":
        request += f" (asks to {'commit' if z3.is_true(e(v.want)) else 'abort'}" + (
            f", answer {e(v.answer)})" if request == "reply" else ")")
    told = "not told" if z3.eq(e(v.outcome), A_NONE) else f"told {e(v.outcome)}"
    return (f"{{TC: {e(v.tc)}, decided {e(v.decided)}; client {e(v.phase)}, {told}; END_TXN {request}; TC "
            f"{'serving' if z3.is_true(e(v.up)) else 'down'}}}")


def _view(s, t: int) -> tuple:
    """The model state's values of the encoding's variables for the txn ``t``."""
    c = s.clients[t]
    status, want, answer = s.ends.get(t, (None, COMMITTED, ""))
    return s.tc.get(t), s.decided.get(t), c.phase, c.outcome, status, want == COMMITTED, answer, s.tc_up


def _concrete(v: Vars, view) -> list:
    tc, decided, phase, outcome, status, want, answer, up = view
    return [v.tc == TC[tc], v.decided == DECISION[decided], v.phase == PHASE[phase], v.outcome == ANSWER[outcome],
            v.request == REQUEST[status], v.want == want, v.answer == ANSWER[answer], v.up == up]


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn is one of its steps,
    for that txn."""
    v, w = Vars(""), Vars("'")
    candidates = steps_of(v, w, model.fixes)
    txns = range(1, model.config.txns + 1)
    return simulated((((s, x), a, (t, x)) for s, a, t in pairs for x in txns), lambda sx: _view(*sx),
                     lambda sx, _, before, after: [*_concrete(v, before), *_concrete(w, after)], candidates, (),
                     lambda sx, before, after: f"txn {sx[1]} from {before} to {after}")


OBLIGATIONS = [
    Obligation("v4-impl", "told-the-outcome-inductive", "An application told its commit succeeded has it committed, "
               "and one told its end failed does not, for any number of txns and TC crashes: a resent END_TXN of an "
               "ended txn answered TransactionNotFound", SECTION, lambda: proof(BASELINE), (BASELINE,),
               proves=("client-told-the-outcome",)),
    Obligation("v4-impl", "told-the-outcome-inductive", "An application told its commit succeeded has it committed, "
               "and one told its end failed does not, for any number of txns and TC crashes, the TC keeping an "
               "ended txn's outcome for a resent END_TXN", SECTION,
               lambda: all_of(proof(x) for x in FIXED), FIXED,
               proves=("client-told-the-outcome",)),
]
