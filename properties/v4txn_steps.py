"""Bounded model checking of the v4 transaction path on one topic, step for step: each action of
``models/v4txn`` (the TC, the client, the transaction buffer and its load, the dispatcher, seals
and crashes) is one transition formula, its guard and its effect, over the whole state at the
model's bounds, so a run here has the explorer's length and breaks the same properties.
``pip373_steps`` extends it with the ``__contains_txn_messages`` property, as ``models/pip373``
extends ``models/v4txn``.

The encoding is written from the PIPs and the primer, not from the Python code: the log is ``L``
entries (kind, txn) and a length, ``L`` the most entries the bounds allow (a pre-upgrade log,
each txn's writes and its markers, the non-transactional sends); the off-segment marker stream
(``off-segment-markers``) holds at most one marker per txn; a rebuild is stated in closed form (a
txn with an entry and no marker is ongoing from its first entry; one with an abort marker is
aborted) and maxReadPosition is the first ongoing position, less one. Bounds with snapshots or
acks are outside it.

Safety properties are formulas over a step (``breaks``); ``k`` is the explorer's depth plus one,
so a run of up to ``k`` steps reaches every transition of the state space and "no run" is the
explorer's "holds". ``end-txn-completes`` is checked for lassos: a run whose last state repeats an
earlier one, every state of the loop with an end-txn unanswered, and every weakly fair action
enabled throughout the loop taken in it (or a state where none is enabled, which may stutter).
"No lasso of up to ``k`` steps" is weaker than the explorer's "holds" (a fair cycle may need a
longer loop); where the explorer finds a stall, the lasso here has its length.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, StateVars, StepEncoding, explorer_depth, finding_bounds, finding_variants

NO, D, C, A = 0, 1, 2, 3  # a log entry's kind (NO: beyond the log's end)
KIND = {"d": D, "c": C, "a": A}
OPEN, COMMITTING, ABORTING, COMMITTED, ABORTED = 1, 2, 3, 4, 5  # the TC's record (0: none)
TC = {"OPEN": OPEN, "COMMITTING": COMMITTING, "ABORTING": ABORTING, "COMMITTED": COMMITTED, "ABORTED": ABORTED}
ENDING = {COMMITTED: COMMITTING, ABORTED: ABORTING}
NEXT = {OPEN: (COMMITTING, ABORTING), COMMITTING: (COMMITTED,), ABORTING: (ABORTED,)}
IDLE, OPENED, ENDED, DONE = 0, 1, 2, 3  # the client's phase
PHASE = {"idle": IDLE, "open": OPENED, "ending": ENDED, "done": DONE}
SENT, FAILED, ANSWERED, WRITTEN = 1, 2, 3, 4  # END_TXN_ON_PARTITION (0: none; WRITTEN: marker, no reply yet)
RPC = {"sent": SENT, "failed": FAILED, "done": ANSWERED, "written": WRITTEN}
SECTION = ("PIP-473 Background (the v4 TC, transaction buffer and dispatcher); How the two interact: "
           "'End-of-transaction stalls on sealed segments'")


class Steps(StepEncoding):
    """The v4 encoding at one configuration of ``models/v4txn``: state variables, actions,
    property formulas, and the Python state each variable stands for."""

    model = "v4-txn"
    properties = ("read-committed", "committed-never-filtered", "tc-state-machine")
    liveness = ("end-txn-completes",)
    # weakly fair: every step of the TC, the brokers and the dispatcher (invariants/v4txn SYSTEM)
    fair = ("append", "append_rejected", "deliver", "end_on_partition", "marker_rejected", "partition_reply",
            "skip_aborted", "skip_marker", "tb_recover", "tc_end", "tc_retry")

    def __init__(self, config):
        if config.snapshots or config.acks or config.topics != 1:
            raise ValueError("the step-for-step encoding covers one topic without snapshots or acks")
        self.variant = config.variant
        self.fixes = self.fixes_of(config.variant)
        self.txns = tuple(range(1, config.txns + 1))
        self.legacy = self.legacy_log(config)
        self.ids = self.txns + tuple(sorted({t for _, t in self.legacy if t} - set(self.txns)))
        self.writes, self.nontxn, self.crashes = config.writes, config.nontxn, config.crashes
        self.seals = config.seals
        # a second end-txn sends the RPC again; each crash can lose a written marker's reply, and the retry
        # writes the marker again
        markers = (2 if self.variant == "mutant:end-any-state" else 1) + config.crashes
        self.size = len(self.legacy) + config.txns * (config.writes + markers) + config.nontxn

    # -- hooks pip373_steps overrides ------------------------------------------------------------
    def legacy_log(self, config) -> tuple:
        return ()

    def extra(self) -> tuple[list, list]:
        """Further (int, bool) state variables."""
        return [], []

    def loads(self, v, unloaded) -> dict:
        return {"tb_recover": (unloaded, self.rebuilt(v))}

    def may_append(self, v):
        return z3.BoolVal(True)

    def on_append(self, v) -> dict:
        return {}

    def more(self, v) -> dict:
        return {}

    def init_extra(self, v) -> list:
        return []

    def concrete_extra(self, v, s) -> list:
        return []

    # -- the state -------------------------------------------------------------------------------
    def vars(self, tag: str) -> "Vars":
        ints = ["n", "read", "crashes", "nontxn", "seals"]
        bools = ["ready", "sealed"]
        for t in self.txns:
            ints += [f"tc{t}", f"phase{t}", f"sends{t}", f"outcome{t}", f"rpc{t}"]
            bools += [f"parts{t}", f"pub{t}", f"failed{t}"]
        for t in self.ids:
            ints += [f"ongoing{t}", f"decided{t}", f"side{t}"]
            bools += [f"aborted{t}"]
        for i in range(self.size):
            ints += [f"kind{i}", f"txn{i}"]
            bools += [f"received{i}", f"filtered{i}"]
        more_ints, more_bools = self.extra()
        return Vars(self, ints + more_ints, bools + more_bools, tag)

    def emptied(self) -> dict:
        """A buffer with nothing in memory."""
        return {"ready": False, **{f"ongoing{t}": -1 for t in self.ids}, **{f"aborted{t}": False for t in self.ids}}

    def rebuilt(self, v) -> dict:
        """The buffer a read of the log and the marker stream builds: a txn with an entry and no
        marker is ongoing from its first entry; a txn with an abort marker is aborted."""
        out = {"ready": True}
        for t in self.ids:
            marks = [z3.And(v[f"txn{i}"] == t, v[f"kind{i}"] == k) for i in range(self.size) for k in (C, A)]
            ended = z3.Or(v[f"side{t}"] != NO, *marks)
            first = z3.IntVal(-1)
            for i in reversed(range(self.size)):
                first = z3.If(z3.And(v[f"kind{i}"] == D, v[f"txn{i}"] == t), i, first)
            out[f"ongoing{t}"] = z3.If(ended, -1, first)
            out[f"aborted{t}"] = z3.Or(v[f"side{t}"] == A,
                                       *[z3.And(v[f"txn{i}"] == t, v[f"kind{i}"] == A) for i in range(self.size)])
        return out

    # -- the actions -----------------------------------------------------------------------------
    def actions(self, v) -> dict:
        """Action label -> (guard over ``v``, changes: variable name -> new value)."""
        out = {}
        blocked = v["sealed"] if "off-segment-markers" not in self.fixes else z3.BoolVal(False)
        for t in self.txns:
            phase, pub, tc, decided = v[f"phase{t}"], v[f"pub{t}"], v[f"tc{t}"], v[f"decided{t}"]
            out[f"new_txn({t})"] = (phase == IDLE, {f"tc{t}": OPEN, f"phase{t}": OPENED})
            out[f"add_partition({t})"] = (z3.And(phase == OPENED, z3.Not(pub), v[f"sends{t}"] < self.writes),
                                          {f"parts{t}": True, f"pub{t}": True, f"sends{t}": v[f"sends{t}"] + 1})
            for want, word, other in ((COMMITTED, "COMMITTED", ABORTED), (ABORTED, "ABORTED", COMMITTED)):
                may = z3.And(phase == OPENED, z3.Not(pub), z3.Not(v[f"failed{t}"]) if want == COMMITTED else True)
                if self.variant == "mutant:end-any-state":  # a second end-txn with the other outcome
                    again = z3.And(phase == ENDED, decided == other, tc == ENDING[other])
                    may = z3.Or(may, again)
                out[f"end_txn({t},{word})"] = (may, {
                    f"rpc{t}": z3.If(v[f"parts{t}"], SENT, v[f"rpc{t}"]), f"tc{t}": ENDING[want], f"phase{t}": ENDED,
                    f"decided{t}": z3.If(decided == 0, want, decided)})
            out[f"tc_retry({t})"] = (v[f"rpc{t}"] == FAILED, {f"rpc{t}": SENT})
            final = z3.If(tc == COMMITTING, COMMITTED, ABORTED)
            others_done = z3.BoolVal(True)
            if self.variant == "mutant:tc-ends-one-at-a-time":  # no other txn open or ending meanwhile
                others_done = z3.And(True, *[z3.Not(z3.Or(v[f"phase{x}"] == OPENED, v[f"phase{x}"] == ENDED))
                                             for x in self.txns if x != t])
            out[f"tc_end({t})"] = (z3.And(z3.Or(tc == COMMITTING, tc == ABORTING), others_done,
                                          z3.Or(v[f"rpc{t}"] == 0, v[f"rpc{t}"] == ANSWERED)),
                                   {f"tc{t}": final, f"rpc{t}": 0, f"phase{t}": DONE, f"outcome{t}": final})
            ongoing = v[f"ongoing{t}"]
            rejected = z3.And(v["sealed"], self.variant != "mutant:append-to-sealed")
            out[f"append({t})"] = (z3.And(pub, v["ready"], z3.Not(rejected), self.may_append(v), _room(v, self)), {
                **_append(v, self, D, t), f"ongoing{t}": z3.If(ongoing != -1, ongoing, v["n"]), f"pub{t}": False,
                **self.on_append(v)})
            out[f"append_rejected({t})"] = (z3.And(pub, v["ready"], rejected), {f"pub{t}": False,
                                                                                   f"failed{t}": True})
            commit = decided == COMMITTED if self.variant != "mutant:commit-marks-aborted" else z3.BoolVal(False)
            marker = z3.If(commit, C, A)
            written = {f"side{t}": marker} if "off-segment-markers" in self.fixes else _append(v, self, marker, t)
            room = _room(v, self) if "off-segment-markers" not in self.fixes else z3.BoolVal(True)
            out[f"end_on_partition({t})"] = (z3.And(v[f"rpc{t}"] == SENT, v["ready"], z3.Not(blocked), room), {
                **written, f"ongoing{t}": -1, f"rpc{t}": WRITTEN, f"aborted{t}": z3.Or(v[f"aborted{t}"],
                                                                                        z3.Not(commit))})
            out[f"partition_reply({t})"] = (v[f"rpc{t}"] == WRITTEN, {f"rpc{t}": ANSWERED})
            out[f"marker_rejected({t})"] = (z3.And(v[f"rpc{t}"] == SENT, v["ready"], blocked), {f"rpc{t}": FAILED})
        writable = z3.And(v["ready"], z3.Not(v["sealed"]))
        out["send_nontxn"] = (z3.And(writable, v["nontxn"] < self.nontxn, _room(v, self)),
                              {**_append(v, self, D, 0), "nontxn": v["nontxn"] + 1})
        out["seal"] = (z3.And(writable, v["seals"] < self.seals), {"sealed": True, "seals": v["seals"] + 1})
        out["crash"] = (z3.And(v["ready"], v["crashes"] < self.crashes), {
            **self.emptied(), "read": 0, "crashes": v["crashes"] + 1,
            **{f"rpc{t}": z3.If(z3.Or(v[f"rpc{t}"] == SENT, v[f"rpc{t}"] == WRITTEN), FAILED, v[f"rpc{t}"])
               for t in self.txns},
            **{f"failed{t}": z3.Or(v[f"failed{t}"], v[f"pub{t}"]) for t in self.txns},
            **{f"pub{t}": False for t in self.txns}})
        out.update(self.loads(v, z3.Not(v["ready"])))
        read = v["read"]
        kind, txn = v.at("kind", read), v.at("txn", read)
        aborted = z3.Or(False, *[z3.And(txn == t, v[f"aborted{t}"]) for t in self.ids])
        if self.variant == "mutant:deliver-aborted":
            aborted = z3.BoolVal(False)
        readable = z3.And(v["ready"], read <= v.max_read_position())
        seen = {p: {f"{p}{i}": z3.Or(v[f"{p}{i}"], read == i) for i in range(self.size)}
                for p in ("received", "filtered")}
        out["skip_marker"] = (z3.And(readable, kind != D), {"read": read + 1})
        out["skip_aborted"] = (z3.And(readable, kind == D, aborted), {"read": read + 1, **seen["filtered"]})
        out["deliver"] = (z3.And(readable, kind == D, z3.Not(aborted)), {"read": read + 1, **seen["received"]})
        out.update(self.more(v))
        return out

    # -- the properties --------------------------------------------------------------------------
    def breaks(self, prop: str, v, label: str, w):
        """The step ``label`` from ``v`` to ``w`` breaks ``prop``."""
        read_txn = v.at("txn", v["read"])
        if prop == "read-committed" and label == "deliver":
            return z3.And(read_txn != 0, z3.Not(v.decided_is(read_txn, COMMITTED)))
        if prop == "committed-never-filtered" and label == "skip_aborted":
            return v.decided_is(read_txn, COMMITTED)
        if prop == "tc-state-machine":
            return z3.Or(False, *[z3.And(v[f"tc{t}"] == before, w[f"tc{t}"] != before,
                                         *[w[f"tc{t}"] != after for after in NEXT.get(before, ())])
                                  for t in self.txns for before in TC.values()])
        return z3.BoolVal(False)

    def stuck(self, prop: str, v):
        """``end-txn-completes``'s trigger (an end-txn unanswered); its goal is the negation."""
        return z3.Or(False, *[v[f"phase{t}"] == ENDED for t in self.txns])

    def init(self, v):
        out = [v["n"] == len(self.legacy), v["read"] == 0, v["crashes"] == 0, v["nontxn"] == 0, v["seals"] == 0,
               z3.Not(v["sealed"]), *[v[k] == x for k, x in self.emptied().items()], *self.init_extra(v)]
        for t in self.txns:
            out += [v[f"{k}{t}"] == 0 for k in ("tc", "phase", "sends", "outcome", "rpc")]
            out += [z3.Not(v[f"{k}{t}"]) for k in ("parts", "pub", "failed")]
        for t in self.ids:
            out += [v[f"decided{t}"] == (ABORTED if (A, t) in self.legacy else 0), v[f"side{t}"] == NO]
        for i in range(self.size):
            kind, txn = self.legacy[i] if i < len(self.legacy) else (NO, 0)
            out += [v[f"kind{i}"] == kind, v[f"txn{i}"] == txn, z3.Not(v[f"received{i}"]),
                    z3.Not(v[f"filtered{i}"])]
        return z3.And(*out)

    # -- agreement with the Python model ---------------------------------------------------------
    def concrete(self, v, s) -> z3.BoolRef:
        """``v`` fixed to a Python state."""
        buf, sub, log = s.buffers[0], s.subs[0], s.logs[0]
        side = {t: KIND[kind] for kind, t in s.side[0]}
        out = [v["n"] == len(log), v["read"] == sub.read, v["crashes"] == s.crashes, v["nontxn"] == s.nontxn,
               v["seals"] == s.seals, v["sealed"] == s.sealed[0], v["ready"] == buf.ready,
               *self.concrete_extra(v, s)]
        for t in self.txns:
            c = s.clients[t]
            out += [v[f"tc{t}"] == TC.get(s.tc.get(t), 0), v[f"phase{t}"] == PHASE[c.phase],
                    v[f"sends{t}"] == c.sends, v[f"outcome{t}"] == TC.get(c.outcome, 0),
                    v[f"rpc{t}"] == RPC.get(s.rpcs.get((t, "partition", 0)), 0),
                    v[f"parts{t}"] == (0 in s.parts.get(t, ())), v[f"pub{t}"] == ((t, 0) in s.publishes),
                    v[f"failed{t}"] == c.failed]
        for t in self.ids:
            out += [v[f"ongoing{t}"] == buf.ongoing.get(t, -1), v[f"decided{t}"] == TC.get(s.decided.get(t), 0),
                    v[f"aborted{t}"] == (t in buf.aborted), v[f"side{t}"] == side.get(t, NO)]
        for i in range(self.size):
            kind, txn = (KIND[log[i][0]], log[i][1]) if i < len(log) else (NO, 0)
            out += [v[f"kind{i}"] == kind, v[f"txn{i}"] == txn, v[f"received{i}"] == (i in sub.received),
                    v[f"filtered{i}"] == (i in sub.filtered)]
        return self.conjunction(out)

    @staticmethod
    def label(a) -> str:
        """The encoding's label for a Python action."""
        params = dict(a.params)
        shown = [str(params[k]) for k in ("txn", "want") if k in params]
        if a.name == "admin_update":
            shown.append(params["value"])
        return a.name + (f"({','.join(shown)})" if shown else "")


class Vars(StateVars):
    """One state, with the log's helpers."""

    def __init__(self, steps: Steps, ints: list, bools: list, tag: str):
        super().__init__(ints, bools, tag)
        self.steps = steps

    def at(self, prefix: str, index):
        """``prefix{index}`` for a symbolic index into the log (0 beyond it)."""
        return self.select(prefix + "{}", index, range(self.steps.size), z3.IntVal(0))

    def holds_txn_entry(self):
        return z3.Or(False, *[z3.And(self[f"kind{i}"] == D, self[f"txn{i}"] != 0) for i in range(self.steps.size)])

    def decided_is(self, txn, outcome):
        return z3.Or(False, *[z3.And(txn == t, self[f"decided{t}"] == outcome) for t in self.steps.ids])

    def max_read_position(self):
        """Just before the first entry of the oldest open txn, or the last entry."""
        first = self["n"]
        for t in self.steps.ids:
            ongoing = self[f"ongoing{t}"]
            first = z3.If(z3.And(ongoing != -1, ongoing < first), ongoing, first)
        return first - 1


def _append(v: Vars, steps: Steps, kind, txn) -> dict:
    """The changes an append to the log makes (its guard: the log has room, ``_room``)."""
    out = {"n": v["n"] + 1}
    for i in range(steps.size):
        out[f"kind{i}"] = z3.If(v["n"] == i, kind, v[f"kind{i}"])
        out[f"txn{i}"] = z3.If(v["n"] == i, txn, v[f"txn{i}"])
    return out


def _room(v: Vars, steps: Steps):
    return v["n"] < steps.size


encoding, disagreements = Steps.at, Steps.disagreements_of


PRESETS = finding_bounds("v4-txn") + ("default",)  # the findings' bounds, and the model's default
VARIANTS = finding_variants("v4-txn", PRESETS)


def verdict(variant: str, preset: str):
    return encoding(variant, preset).verdict(explorer_depth("v4-txn", preset, VARIANTS) + 1)


OBLIGATIONS = [
    Obligation("v4-txn", f"steps-bounded-{preset}", f"each property's shortest breaking run (a lasso for "
               f"end-txn-completes) of the whole model at the {preset} bounds, step for step (up to the explorer's "
               f"depth there plus one)", SECTION, lambda variant=variant, preset=preset: verdict(variant, preset),
               (variant,))
    for variant in VARIANTS for preset in PRESETS
]
