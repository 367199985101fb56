"""PIP-473 ``no-write-after-end``: a send is acknowledged to its client only while its txn's header is OPEN, for
any number of txns, segments and sends in flight (the fix ``recheck-before-ack``).

Txns are an uninterpreted sort. The encoding keeps each txn's header state (NONE when never created or deleted
by GC) and whether a send of it waits for its send-ack (appended and its op record put). Its one step that
acknowledges a send is ``pub_ack`` of ``models/pip473``, "The publish ack waits for both": as written it needs
only a send waiting; with the fix, after the op-record put the broker re-reads the header and acknowledges only
if it is OPEN (else ``pub_late``, a TxnConflict). Every other step may change anything the encoding keeps and
acknowledges nothing; ``simulation`` checks on every reachable state that each model step is one of these,
``pub_ack`` as itself.

The claim is about that one step and needs no strengthening: with the fix, the re-read is in the step that
acknowledges, so no other actor (the TC's CAS, the timeout sweep, GC) can end the txn between the check and the
ack, however many txns and sends there are. As written the counterexample is an ack of a send whose header the
timeout sweep aborted after the send's cached check (the finding ``send-acked-after-abort``).
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, inductive as induction, not_simulated, one_of, universe, with_fix
from .pip473_header import HSTATE, NONE, OPEN, HState, Txn

FIX = "recheck-before-ack"
SECTION = ("PIP-473 Flows / Publish (transactional): 'The publish ack waits for both'; Late-write race: 'The "
           "publish-path header check on the participant broker rejects with TxnConflict'")


class Vars:
    def __init__(self, tag: str):
        self.header = z3.Array(f"lw_header{tag}", Txn, HState)
        self.waiting = z3.Array(f"lw_waiting{tag}", Txn, z3.BoolSort())  # a send of it waits for its send-ack


def steps(v: Vars, w: Vars, fixes, t) -> dict:
    """The step that acknowledges a send of ``t``, and every other step."""
    recheck = [v.header[t] == OPEN] if FIX in fixes else []
    return {"pub_ack": z3.And(v.waiting[t], *recheck, w.header == v.header,
                              w.waiting == z3.Store(v.waiting, t, w.waiting[t])),
            "other": z3.BoolVal(True)}


def inductive(fixes) -> Verdict:
    v, w, t = Vars(""), Vars("'"), z3.Const("txn", Txn)
    true = z3.BoolVal(True)
    return induction(true, true, true, steps(v, w, fixes, t), before=lambda m: describe(m, v, t),
                     after=lambda m: describe(m, w, t),
                     also=lambda label: v.header[t] == OPEN if label == "pub_ack" else true)


def describe(m: z3.ModelRef, v: Vars, t) -> str:
    """The acknowledged txn's header and whether a send of it waits, named t1."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    _, names = universe(m, Txn, "t")
    return (f"{{{names.get(str(e(t)), 't')}: header {e(v.header[t])}, "
            f"{'a send waits for its ack' if z3.is_true(e(v.waiting[t])) else 'no send waits'}}}")


def _projection(s) -> tuple:
    """Per txn (by id) its header state and whether a send of it waits for its send-ack."""
    waiting = {p.txn for p in s.publishes if p.stage == "ack"}
    return tuple((s.headers[t].state if t in s.headers else "NONE", t in waiting) for t in range(1, len(s.clients) + 1))


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables or acknowledges a send is one of
    its steps, ``pub_ack`` as itself (decided once per distinct change and label)."""
    out, seen = [], set()
    for s, a, t in pairs:
        change = (_projection(s), _projection(t))
        if a.name != "pub_ack" or (a.param("txn"), change) in seen:
            continue
        seen.add((a.param("txn"), change))
        ts = [z3.Const(f"T{i}", Txn) for i in range(1, len(s.clients) + 1)]
        v, w = Vars(""), Vars("'")
        facts = [*([z3.Distinct(*ts)] if len(ts) > 1 else []), *_concrete(v, change[0], ts),
                 *_concrete(w, change[1], ts)]
        out += not_simulated(a, f"no pub_ack of the encoding takes {change[0]} to {change[1]}",
                             one_of(facts, [steps_of(v, w, model.fixes, ts[a.param("txn") - 1])["pub_ack"]]))
    return out


def _concrete(v: Vars, projection, ts: list) -> list:
    return [z3.And(v.header[t] == (NONE if header == "NONE" else HSTATE[header]), v.waiting[t] == waiting)
            for t, (header, waiting) in zip(ts, projection)]


OBLIGATIONS = [
    Obligation("pip-473", "no-write-after-end-inductive", "A send is acknowledged only while its txn's header is "
               "OPEN, for any number of txns and sends, the ack trusting the header check made before the append",
               SECTION, lambda: inductive(frozenset()), ("as-written",), proves=("no-write-after-end",)),
    Obligation("pip-473", "no-write-after-end-inductive", "A send is acknowledged only while its txn's header is "
               "OPEN, for any number of txns and sends, the ack re-reading the header", SECTION,
               lambda: inductive(frozenset({FIX})), with_fix("pip-473", FIX), proves=("no-write-after-end",)),
]
