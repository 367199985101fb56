"""PIP-473 txn header CAS (End-txn: "The CAS on the header is the linearization point"), for
any number of transactions and of end-txn requests in flight.

Transactions and requests are uninterpreted sorts. The state is the header of each txn (state,
``finalized_ms`` set, version; NONE when never created or deleted by GC), the outcome decided
for it (a ghost, kept after GC), and each request's txn, wanted outcome, stage (``read`` ->
``cas`` -> ``finalize`` -> ``reply``) and the version it read. Each TC action of
``models/pip473/coordinator.py`` is a transition formula with its parameters free (so a proof
covers every choice of them); GC's check that no op record is left is not encoded, which only
adds behaviours.

``one-outcome`` (commit and abort never both win) is proved inductive, strengthened by what
makes the CAS safe: a request past its read never holds a version newer than the header's;
if the header still has that version, it is still OPEN (at the CAS stage) or holds the
request's outcome (at the finalize stage). The mutant that CASes without
comparing versions (``mutant:blind-cas``) breaks it, with a counterexample to induction.
"""
from __future__ import annotations

import z3

from .obligations import PROVED, Obligation, Verdict, agreement, inductive as induction, valid, with_fix

Txn = z3.DeclareSort("Txn")
Req = z3.DeclareSort("Req")
HState, (NONE, OPEN, COMMITTED, ABORTED) = z3.EnumSort("HState", ("NONE", "OPEN", "COMMITTED", "ABORTED"))
Stage, (IDLE, READ, CAS, FINALIZE, REPLY) = z3.EnumSort("Stage", ("idle", "read", "cas", "finalize", "reply"))
HSTATE = {"OPEN": OPEN, "COMMITTED": COMMITTED, "ABORTED": ABORTED}
STAGE = {"read": READ, "cas": CAS, "finalize": FINALIZE, "reply": REPLY}
SECTION = ("PIP-473 End-txn: 'A single CAS on /txn/<txnId>.state ... the linearization point'; Data Model / "
           "Header: 'OPEN -> COMMITTED and OPEN -> ABORTED are the only allowed transitions'")


class Vars:
    def __init__(self, tag: str):
        a = z3.Array
        self.hstate = a(f"hstate{tag}", Txn, HState)
        self.hfin = a(f"hfin{tag}", Txn, z3.BoolSort())
        self.hver = a(f"hver{tag}", Txn, z3.IntSort())
        self.created = a(f"created{tag}", Txn, z3.BoolSort())
        self.decided = a(f"decided{tag}", Txn, HState)  # NONE: undecided
        self.rtxn = a(f"rtxn{tag}", Req, Txn)
        self.rwant = a(f"rwant{tag}", Req, HState)
        self.rstage = a(f"rstage{tag}", Req, Stage)
        self.rver = a(f"rver{tag}", Req, z3.IntSort())

    NAMES = ("hstate", "hfin", "hver", "created", "decided", "rtxn", "rwant", "rstage", "rver")

    def keep(self, w, *changed) -> list:
        return [getattr(w, n) == getattr(self, n) for n in self.NAMES if n not in changed]


def transitions(v: Vars, w: Vars, t, r, want, variant: str = "as-written") -> dict:
    """Action label -> transition formula, for the txn ``t``, request ``r`` and outcome ``want``
    (free constants: the action's parameters)."""
    fic = variant in with_fix("pip-473", "finalize-in-cas") or variant.startswith("mutant:")  # mutants carry every fix
    rt = v.rtxn[r]
    h, ver = v.hstate[rt], v.hver[rt]
    matches = z3.And(h != NONE, ver == v.rver[r])
    # the version check of the CAS and of the finalize put (the blind mutant's: only that the header exists)
    put_ok = h != NONE if variant == "mutant:blind-cas" else matches

    def request():
        return z3.And(v.rstage[r] == IDLE, v.created[t], z3.Or(want == COMMITTED, want == ABORTED),
                      w.rstage == z3.Store(v.rstage, r, READ), w.rtxn == z3.Store(v.rtxn, r, t),
                      w.rwant == z3.Store(v.rwant, r, want), w.rver == z3.Store(v.rver, r, -1),
                      *v.keep(w, "rstage", "rtxn", "rwant", "rver"))

    reads_version = z3.Or(h == OPEN, z3.And(h == v.rwant[r], z3.Not(v.hfin[rt])))
    return {
        "new_txn": z3.And(z3.Not(v.created[t]), w.hstate == z3.Store(v.hstate, t, OPEN),
                          w.hver == z3.Store(v.hver, t, 0), w.hfin == z3.Store(v.hfin, t, False),
                          w.created == z3.Store(v.created, t, True), *v.keep(w, "hstate", "hver", "hfin", "created")),
        "request": request(),  # end_txn, retry_end, timeout_sweep
        "tc_read": z3.And(v.rstage[r] == READ,
                          w.rstage == z3.Store(v.rstage, r, z3.If(h == OPEN, CAS, z3.If(reads_version, FINALIZE,
                                                                                         REPLY))),
                          w.rver == z3.Store(v.rver, r, z3.If(reads_version, ver, v.rver[r])),
                          *v.keep(w, "rstage", "rver")),
        "tc_cas": z3.And(v.rstage[r] == CAS, put_ok, h != NONE,
                         w.hstate == z3.Store(v.hstate, rt, v.rwant[r]), w.hfin == z3.Store(v.hfin, rt, fic),
                         w.hver == z3.Store(v.hver, rt, ver + 1), w.decided == z3.Store(v.decided, rt, v.rwant[r]),
                         w.rstage == z3.Store(v.rstage, r, REPLY if fic else FINALIZE),
                         w.rver == z3.Store(v.rver, r, ver + 1),
                         *v.keep(w, "hstate", "hfin", "hver", "decided", "rstage", "rver")),
        "tc_bad_version": z3.And(z3.Or(z3.And(v.rstage[r] == CAS, z3.Not(put_ok)),
                                       z3.And(v.rstage[r] == FINALIZE, z3.Not(put_ok))),
                                 w.rstage == z3.Store(v.rstage, r, READ), w.rver == z3.Store(v.rver, r, -1),
                                 *v.keep(w, "rstage", "rver")),
        "tc_finalize": z3.And(v.rstage[r] == FINALIZE, put_ok, w.hfin == z3.Store(v.hfin, rt, True),
                              w.hver == z3.Store(v.hver, rt, ver + 1), w.rstage == z3.Store(v.rstage, r, REPLY),
                              *v.keep(w, "hfin", "hver", "rstage")),
        "tc_reply": z3.And(v.rstage[r] == REPLY, w.rstage == z3.Store(v.rstage, r, IDLE), *v.keep(w, "rstage")),
        "tc_crash": z3.And(w.rstage == z3.K(Req, IDLE), *v.keep(w, "rstage")),
        "gc_delete_header": z3.And(z3.Or(v.hstate[t] == COMMITTED, v.hstate[t] == ABORTED), v.hfin[t],
                                   w.hstate == z3.Store(v.hstate, t, NONE), *v.keep(w, "hstate")),
    }


def one_outcome(v: Vars):
    """The header's final state is the decided outcome, and an OPEN header has none."""
    t = z3.Const("t", Txn)
    return z3.ForAll([t], z3.And(
        z3.Implies(z3.Or(v.hstate[t] == COMMITTED, v.hstate[t] == ABORTED), v.decided[t] == v.hstate[t]),
        z3.Implies(v.hstate[t] == OPEN, v.decided[t] == NONE)))


def invariant(v: Vars):
    t, r = z3.Const("t", Txn), z3.Const("r", Req)
    rt = v.rtxn[r]
    return z3.And(one_outcome(v), z3.ForAll([t], z3.And(
        z3.Implies(z3.Not(v.created[t]), z3.And(v.hstate[t] == NONE, v.decided[t] == NONE)),
        z3.Implies(z3.And(v.created[t], v.hstate[t] == NONE), v.decided[t] != NONE),
        z3.Implies(v.hstate[t] == OPEN, z3.Not(v.hfin[t])),
        z3.Implies(v.created[t], v.hver[t] >= 0))),
        z3.ForAll([r], z3.Implies(v.rstage[r] != IDLE, z3.And(
            v.created[rt], z3.Or(v.rwant[r] == COMMITTED, v.rwant[r] == ABORTED)))),
        z3.ForAll([r], z3.Implies(z3.Or(v.rstage[r] == CAS, v.rstage[r] == FINALIZE), z3.And(
            v.rver[r] <= v.hver[rt], v.rver[r] >= 0,
            z3.Implies(z3.And(v.rstage[r] == CAS, v.hstate[rt] != NONE, v.hver[rt] == v.rver[r]),
                       v.hstate[rt] == OPEN),
            z3.Implies(z3.And(v.rstage[r] == FINALIZE, v.hstate[rt] != NONE, v.hver[rt] == v.rver[r]),
                       v.hstate[rt] == v.rwant[r])))))


def init(v: Vars):
    t, r = z3.Const("t", Txn), z3.Const("r", Req)
    return z3.And(z3.ForAll([t], z3.And(z3.Not(v.created[t]), v.hstate[t] == NONE, v.decided[t] == NONE)),
                  z3.ForAll([r], v.rstage[r] == IDLE))


def params():
    return z3.Const("txn", Txn), z3.Const("req", Req), z3.Const("want", HState)


def describe(m, v: Vars, t, r) -> str:
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    rt = e(v.rtxn[r])
    same = " (the same txn)" if z3.is_true(e(rt == t)) else ""
    return (f"{{request: txn{same}, want={e(v.rwant[r])}, stage={e(v.rstage[r])}, read version={e(v.rver[r])}; "
            f"its header: {e(v.hstate[rt])}, finalized={e(v.hfin[rt])}, version={e(v.hver[rt])}, "
            f"decided={e(v.decided[rt])}}}")


def inductive(variant: str = "as-written") -> Verdict:
    v, w = Vars(""), Vars("'")
    t, r, want = params()
    return induction(init(v), invariant(v), invariant(w), transitions(v, w, t, r, want, variant),
                     lambda m: describe(m, v, t, r), lambda m: describe(m, w, t, r))


def state_machine(variant: str = "as-written") -> Verdict:
    """header-state-machine, from the invariant: a decided outcome never changes, and a final
    header only stays as it is or is deleted."""
    v, w = Vars(""), Vars("'")
    t, r, want = params()
    x = z3.Const("x", Txn)
    claim = z3.ForAll([x], z3.And(z3.Implies(v.decided[x] != NONE, w.decided[x] == v.decided[x]),
                                  z3.Implies(z3.Or(v.hstate[x] == COMMITTED, v.hstate[x] == ABORTED),
                                             z3.Or(w.hstate[x] == v.hstate[x], w.hstate[x] == NONE))))
    for label, step in transitions(v, w, t, r, want, variant).items():
        verdict = valid(z3.Implies(z3.And(invariant(v), step), claim),
                        show=lambda m, label=label: f"{label} changes a final header or a decided outcome: "
                                                    f"{describe(m, v, t, r)} --> {describe(m, w, t, r)}")
        if verdict.status != PROVED:
            return verdict
    return Verdict(PROVED)


def concrete(v: Vars, state, txns: int):
    """``v`` fixed to a Python pip-473 state: txn i is the i-th Txn constant, the request of
    (txn, origin) a Req constant. Other txns and requests are left free: the transition
    formulas carry them over unchanged, so they cannot make a successor differ (and leaving
    them free keeps the check quantifier-free, where Z3 always answers)."""
    ts = [z3.Const(f"T{i}", Txn) for i in range(1, txns + 1)]
    keys = [(i, o) for i in range(1, txns + 1) for o in ("client", "timeout")]
    rs = {k: z3.Const(f"R{k[0]}{k[1]}", Req) for k in keys}
    out = [z3.Distinct(*ts), z3.Distinct(*rs.values())]
    for i, c in enumerate(ts, start=1):
        h = state.headers.get(i)
        out += [v.created[c] == (state.clients[i - 1].phase != "idle"), v.decided[c] == HSTATE.get(
            state.decided.get(i), NONE), v.hstate[c] == (NONE if h is None else HSTATE[h.state])]
        if h is not None:
            out += [v.hfin[c] == h.finalized, v.hver[c] == h.version]
    ends = {(e.txn, e.origin): e for e in state.ends}
    for key, c in rs.items():
        e = ends.get(key)
        if e is None:
            out.append(v.rstage[c] == IDLE)
        else:
            out += [v.rstage[c] == STAGE[e.stage], v.rtxn[c] == ts[e.txn - 1], v.rwant[c] == HSTATE[e.want],
                    v.rver[c] == e.version]
    return z3.And(*out), ts, rs


def bind(a, ts, rs) -> tuple:
    """The Z3 label and parameter values of a Python action (None: it writes nothing encoded)."""
    name = {"end_txn": "request", "retry_end": "request", "timeout_sweep": "request"}.get(a.name, a.name)
    p = dict(a.params)
    txn = ts[p["txn"] - 1] if "txn" in p else None
    origin = "timeout" if a.name == "timeout_sweep" else p.get("origin", "client")
    req = rs[(p["txn"], origin)] if "txn" in p else None
    want = HSTATE[p["want"]] if "want" in p else ABORTED
    return name, txn, req, want


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """Each Python TC transition is admitted by its action's formula, with the action's txn,
    request and outcome as parameters (an unlisted action leaves the encoded variables alone),
    and nothing else is."""
    out = []
    txns = model.config.txns
    v, w = Vars(""), Vars("'")
    t, r, want = params()
    steps = transitions_of(v, w, t, r, want, model.config.variant)
    for s, a, nxt in pairs:
        pre, ts, rs = concrete(v, s, txns)
        post, _, _ = concrete(w, nxt, txns)
        name, txn, req, wanted = bind(a, ts, rs)
        if a.name == "retry_end":
            wanted = HSTATE[s.clients[a.param("txn") - 1].want]
        binding = [c == val for c, val in ((t, txn), (r, req), (want, wanted)) if val is not None]
        step = z3.And(steps.get(name, z3.And(*v.keep(w))), *binding)
        out += [f"{a}: {problem}" for problem in agreement(pre, step, post)]
    return out


OBLIGATIONS = [
    Obligation("pip-473", "one-outcome-inductive", "one-outcome (with the CAS's version argument) is inductive, for "
               "any number of txns and end-txn requests", SECTION, lambda: inductive("as-written"),
               ("as-written",), proves=("one-outcome",)),
    Obligation("pip-473", "header-state-machine", "A decided outcome never changes; a final header stays or is "
               "deleted", SECTION, lambda: state_machine("as-written"), ("as-written",)),
    Obligation("pip-473", "one-outcome-inductive", "one-outcome is inductive with the finalize in the CAS", SECTION,
               lambda: inductive("finalize-in-cas"), with_fix("pip-473", "finalize-in-cas"),
               proves=("one-outcome",)),
    Obligation("pip-473", "header-state-machine", "A decided outcome never changes; a final header stays or is "
               "deleted", SECTION, lambda: state_machine("mutant:blind-cas"), ("mutant:blind-cas",)),
]
