"""v4-impl: a transaction the subscription has ended holds no pending ack there, for any number of txns, topics,
positions, consumers and crashes (the fix ``ack-after-end-rejected``).

This is the part of ``first-ack-never-conflicts`` the fix is about. Before it, an ack that reaches the broker after
the subscription processed its transaction's end (the TC's timeout aborted it while the ack was on its way) is
stored and held pending for a transaction that will never end again: the message is neither redelivered nor
acknowledgeable (the finding ``ack-after-timeout-leaks-pending-ack``). The rest of the property, that a conflict is
never with a position the dispatcher skipped, is the dispatcher's and is not claimed here.

The encoding keeps one txn and one topic: whether the pending-ack store holds a marker of the txn (the
subscription ended it), whether it holds an ack record of the txn after the last such marker, whether the
handle's memory holds a position pending for the txn, and whether an ack of the txn is on its way to the topic. Its
steps, from ``models/v4impl/consumers.py`` and ``recovery.py``: the TC's acceptance of the ack (``txn_ack``), the
ack stored and pending (``ack_pending``), stored and refused as a conflict (``ack_conflict``), refused before it
is stored (``ack_rejected``, with the fix), END_TXN_ON_SUBSCRIPTION (the marker, the txn's positions no longer
pending), a crash (memory and acks on their way lost), and the handle's recovery from the store (merged into
``tb_recover``), which makes the txn pending only from a record after its last marker, or with none. ``simulation``
checks on every reachable state, for each txn and topic, that each model step is one of these.

The claim: an ended txn has no pending position. Strengthened: with the fix, no ack record follows an ended txn's
marker. As written the counterexample to induction is the late ack stored and pending.
"""
from __future__ import annotations

import z3

from pulsar_verify.models.v4impl.consumers import FIX_ENDED
from pulsar_verify.models.v4impl.model import BASELINE

from .obligations import Obligation, Verdict, all_of, fixes_of, inductive, simulated, with_fix

FIXED = with_fix("v4-impl", FIX_ENDED)
SECTION = ("PendingAckHandleImpl: an ack after the transaction ended on the subscription; the minimal fix: the "
           "handle refuses a transaction's ack once it has ended that transaction")


class Vars:
    NAMES = ("ended", "after", "pending", "acking")

    def __init__(self, tag: str):
        self.ended = z3.Bool(f"pa_ended{tag}")  # the store holds a marker of the txn
        self.after = z3.Bool(f"pa_after{tag}")  # an ack record of the txn follows its last marker
        self.pending = z3.Bool(f"pa_pending{tag}")  # the handle's memory holds a position pending for the txn
        self.acking = z3.Bool(f"pa_acking{tag}")  # an ack of the txn is on its way to the topic

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes) -> dict:
    """Each step from ``v`` to ``w`` for the txn and the topic. The labels are the model's."""
    refused = v.ended if FIX_ENDED in fixes else z3.BoolVal(False)
    # the ack's record appended; another ack of the txn may still be on its way (``acking`` is left free)
    stored = z3.And(v.acking, z3.Not(refused), w.after == z3.Or(v.after, v.ended))
    out = {
        "txn_ack": z3.And(w.acking, *v.keep(w, "acking")),
        "ack_pending": z3.And(stored, w.pending, *v.keep(w, "after", "pending", "acking")),
        "ack_conflict": z3.And(stored, *v.keep(w, "after", "acking")),
        "end_on_subscription": z3.And(w.ended, z3.Not(w.after), z3.Not(w.pending), *v.keep(w, "ended", "after",
                                                                                          "pending")),
        "crash": z3.And(z3.Not(w.pending), z3.Not(w.acking), *v.keep(w, "pending", "acking")),
        "tb_recover": z3.And(z3.Implies(w.pending, z3.Or(z3.Not(v.ended), v.after)), *v.keep(w, "pending")),
    }
    if FIX_ENDED in fixes:
        out["ack_rejected"] = z3.And(v.acking, v.ended, *v.keep(w, "acking"))
    return out


def released(v: Vars) -> z3.BoolRef:
    """The claim: an ended txn has no pending position."""
    return z3.Implies(v.ended, z3.Not(v.pending))


def invariant(v: Vars) -> z3.BoolRef:
    return z3.And(released(v), z3.Implies(v.ended, z3.Not(v.after)))


def proof(variant: str, invariant_of=invariant) -> Verdict:
    """The claim holds initially and is kept by every step, for one txn and one topic (so for any number)."""
    v, w = Vars(""), Vars("'")
    init = z3.And(*[z3.Not(getattr(v, n)) for n in Vars.NAMES])
    return inductive(init, invariant_of(v), invariant_of(w), steps(v, w, fixes_of("v4-impl", variant)),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """What the store, the handle's memory and the network hold of the txn."""
    words = {"ended": "the store has its marker", "after": "an ack record after the marker",
             "pending": "a position pending for it", "acking": "an ack on its way"}
    held = [text for name, text in words.items() if z3.is_true(m.eval(getattr(v, name), model_completion=True))]
    return "{" + ("; ".join(held) or "nothing of the txn") + "}"


def _view(s, t: int, topic: int) -> tuple:
    store = s.pending_logs[topic]
    last = max((i for i, (kind, x, _) in enumerate(store) if kind != "ack" and x == t), default=None)
    after = last is not None and any(kind == "ack" and x == t for kind, x, _ in store[last + 1:])
    return (last is not None, after, t in dict(s.pending[topic]).values(),
            any(x == t and tp == topic for x, tp, *_ in s.acking))


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn and topic is one of
    its steps, for them."""
    v, w = Vars(""), Vars("'")
    candidates = steps_of(v, w, model.fixes)
    keys = [(x, k) for x in range(1, model.config.txns + 1) for k in range(model.config.topics)]

    def facts(sx, _, before, after):
        return [getattr(v, n) == x for n, x in zip(Vars.NAMES, before)] + \
            [getattr(w, n) == x for n, x in zip(Vars.NAMES, after)]
    return simulated((((s, key), a, (t, key)) for s, a, t in pairs for key in keys), lambda sx: _view(sx[0], *sx[1]),
                     facts, candidates, (), lambda sx, before, after: f"txn {sx[1][0]} on topic {sx[1][1]} from "
                                                                      f"{dict(zip(Vars.NAMES, before))} to "
                                                                      f"{dict(zip(Vars.NAMES, after))}")


OBLIGATIONS = [
    Obligation("v4-impl", "ended-txn-releases-acks-inductive", "A transaction the subscription has ended holds no "
               "pending ack there, for any number of txns, positions, consumers and crashes: an ack that arrives "
               "after the end is stored and held pending (the part of first-ack-never-conflicts the fix is about)",
               SECTION, lambda: proof(BASELINE), (BASELINE,)),
    Obligation("v4-impl", "ended-txn-releases-acks-inductive", "A transaction the subscription has ended holds no "
               "pending ack there, for any number of txns, positions, consumers and crashes, the handle refusing "
               "an ack of a transaction it has ended (the part of first-ack-never-conflicts the fix is about)",
               SECTION, lambda: all_of(proof(x) for x in FIXED), FIXED),
]
