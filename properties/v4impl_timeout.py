"""v4-impl ``open-txn-ends``: an open transaction eventually ends, if only by the coordinator's timeout, for any
number of txns, topics and consumers and any finite number of TC crashes (the fix ``pr-19201``: apache/pulsar PR
#19201, issue #19200).

A liveness claim, proved by a ranking argument (``obligations.ranked``) under the model's weak fairness (``SYSTEM``
in ``invariants/v4impl.py``: the TC's timeout and reload are fair, its crash is not). The encoding keeps, for one
txn: whether the TC holds it (none, open, ended), whether the TC serves, whether the reloaded TC lost the txn's
timeout (``untimed``), and the crashes left. Its steps, from ``models/v4impl`` (``timeout``,
``coordinator_restart``) and ``models/v4txn/coordinator.py``: ``new_txn``; the txn's end (its client's END_TXN, as
sent or resent, or the timeout's abort); the TC's crash and its reload, which as written may lose the timeout of
an open txn (its timer fired while the TC was down). ``simulation`` checks on every reachable state, for each
txn, that each model step is one of these, the fair ones as themselves, and that each fair step is enabled in the
model wherever the encoding says it is (in every state with a step: one with none is the explorer's deadlock).

The measure: the crashes left, then whether the TC is down. Proved, for an open txn: no step raises the measure;
the timeout is enabled while the TC serves and the reload while it is down; the timeout ends the txn and the
reload lowers the measure. Since the measure is well-founded and a txn never opens again, with finitely many txns
every open one ends: the model's property. As written, the reload's lost timeout is a counterexample to the
invariant (no open txn's timeout is lost).
"""
from __future__ import annotations

import z3

from pulsar_verify.invariants.v4impl import SYSTEM
from pulsar_verify.models.v4impl.coordinator_restart import FIX_RECOVERY
from pulsar_verify.models.v4impl.model import BASELINE
from pulsar_verify.models.v4txn.state import OPEN

from .obligations import (Obligation, Verdict, all_of, fixes_of, not_simulated, one_of, ranked, simulated,
                          with_fix)

Tc, (T_NONE, T_OPEN, T_ENDED) = z3.EnumSort("TimeoutTc", ("none", "open", "ended"))
FIXED = with_fix("v4-impl", FIX_RECOVERY)
ENDS = ("end_txn", "end_resend", "txn_timeout")  # the steps that end an open txn
SECTION = ("apache/pulsar #19200 'Timeout transaction do not end', PR #19201; the Pulsar documentation, "
           "transactions: a transaction 'is aborted' once its timeout expires")


class Vars:
    NAMES = ("tc", "up", "untimed", "crashes")

    def __init__(self, tag: str):
        self.tc = z3.Const(f"to_tc{tag}", Tc)  # the TC's record of the txn
        self.up = z3.Bool(f"to_up{tag}")  # the TC serves
        self.untimed = z3.Bool(f"to_untimed{tag}")  # the reloaded TC lost the txn's timeout
        self.crashes = z3.Int(f"to_crashes{tag}")  # TC crashes left

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, lost) -> dict:
    """Each step from ``v`` to ``w`` for the txn; ``lost``: the reload loses its timeout (a free constant in a
    proof; as written only). The labels are the model's."""
    loses = z3.BoolVal(False) if FIX_RECOVERY in fixes else z3.And(lost, v.tc == T_OPEN)
    ended = z3.And(v.up, v.tc == T_OPEN, w.tc == T_ENDED, *v.keep(w, "tc"))
    return {
        "new_txn": z3.And(v.up, v.tc == T_NONE, w.tc == T_OPEN, *v.keep(w, "tc")),
        **{label: ended for label in ENDS},
        "tc_crash": z3.And(v.up, v.crashes > 0, z3.Not(w.up), w.crashes == v.crashes - 1,
                           *v.keep(w, "up", "crashes")),
        "tc_reload": z3.And(z3.Not(v.up), w.up, w.untimed == z3.Or(v.untimed, loses), *v.keep(w, "up", "untimed")),
    }


def helpers(v: Vars) -> dict:
    """The fair step to take, by label: when it is the one, and its guard."""
    return {"txn_timeout": (v.up, z3.And(v.up, v.tc == T_OPEN, z3.Not(v.untimed))),
            "tc_reload": (z3.Not(v.up), z3.Not(v.up))}


def no_worse(v: Vars, w: Vars, strictly: bool = False) -> z3.BoolRef:
    """``w``'s measure is at most ``v``'s (below it, if ``strictly``): fewer crashes left, or as many and the TC no
    more down than before (up from down)."""
    down, down2 = z3.If(v.up, 0, 1), z3.If(w.up, 0, 1)
    return z3.Or(w.crashes < v.crashes, z3.And(w.crashes == v.crashes, down2 < down if strictly else down2 <= down))


def invariant(v: Vars) -> z3.BoolRef:
    """The crashes left are not negative, and no timeout is lost of a txn not yet ended."""
    return z3.And(v.crashes >= 0, z3.Implies(v.tc != T_ENDED, z3.Not(v.untimed)))


def ends(variant: str, invariant_of=invariant, helpers_of=helpers, steps_of=steps) -> Verdict:
    """The ranking argument for an open txn, from the invariant (``obligations.ranked`` proves it inductive)."""
    v, w = Vars(""), Vars("'")
    init = z3.And(v.tc == T_NONE, v.up, z3.Not(v.untimed), v.crashes >= 0)
    return ranked(init, invariant_of(v), invariant_of(w), v.tc == T_OPEN, w.tc == T_OPEN, w.tc != T_OPEN,
                  steps_of(v, w, fixes_of("v4-impl", variant), z3.Bool("lost")), helpers_of(v),
                  z3.Or(*[when for when, _ in helpers_of(v).values()]), no_worse(v, w), no_worse(v, w, strictly=True),
                  SYSTEM, before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The TC's record of the txn, whether it serves, whether the txn's timeout is lost, the crashes left."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    timer = "; its timeout lost" if z3.is_true(e(v.untimed)) else ""
    return (f"{{TC {'serving' if z3.is_true(e(v.up)) else 'down'}, txn {e(v.tc)}{timer}; {e(v.crashes)} crashes "
            f"left}}")


def _view(model, s, t: int) -> tuple:
    state = s.tc.get(t)
    return ("none" if state is None else "open" if state == OPEN else "ended", s.tc_up, t in s.untimed,
            model.config.tc_crashes - s.tc_crashes)


def _concrete(v: Vars, view) -> list:
    tc, up, untimed, crashes = view
    return [v.tc == {"none": T_NONE, "open": T_OPEN, "ended": T_ENDED}[tc], v.up == up, v.untimed == untimed,
            v.crashes == crashes]


def simulation(model, pairs, steps_of=steps, helpers_of=helpers) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some txn is one of its steps,
    for that txn, a fair helper as itself; and in each state, a helper the encoding enables for a txn is enabled in
    the model for it (a fair step the argument waits for must be one the model can take)."""
    v, w = Vars(""), Vars("'")
    candidates = steps_of(v, w, model.fixes, z3.Bool("lost"))
    txns = range(1, model.config.txns + 1)
    out = simulated((((s, x), a, (t, x)) for s, a, t in pairs for x in txns), lambda sx: _view(model, *sx),
                    lambda sx, _, before, after: [*_concrete(v, before), *_concrete(w, after)], candidates,
                    tuple(helpers_of(v)), lambda sx, before, after: f"txn {sx[1]} from {before} to {after}")
    taken, enabled, reported = {}, {}, set()
    for s, a, _ in pairs:
        taken.setdefault(id(s), (s, set()))[1].add((a.name, dict(a.params).get("txn")))
    for s, names in taken.values():
        for x in txns:
            view = _view(model, s, x)
            for label, (_, guard) in helpers_of(v).items():
                if (view, label) not in enabled:  # the guard decided once per view
                    enabled[view, label] = one_of(_concrete(v, view), [guard]) == z3.sat
                if enabled[view, label] and (label, x if label == "txn_timeout" else None) not in names \
                        and (view, label) not in reported:
                    reported.add((view, label))
                    out += not_simulated(label, f"enabled for txn {x} in the encoding, not in the model, at {view}",
                                         z3.unsat)
    return out


OBLIGATIONS = [
    Obligation("v4-impl", "open-txn-ends-ranked", "An open transaction eventually ends, for any number of txns and "
               "any finite number of TC crashes: the reloaded TC may lose a timeout that fell due while it was down",
               SECTION, lambda: ends(BASELINE), (BASELINE,), proves=("open-txn-ends",)),
    Obligation("v4-impl", "open-txn-ends-ranked", "An open transaction eventually ends, for any number of txns and "
               "any finite number of TC crashes, the reloaded TC arming its timeouts once it serves (ranked by the "
               "crashes left, then whether the TC is down)", SECTION, lambda: all_of(ends(x) for x in FIXED), FIXED,
               proves=("open-txn-ends",)),
]
