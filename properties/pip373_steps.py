"""Bounded model checking of PIP-373 on one topic's v4 transaction path, step for step: each
action of ``models/pip373`` (the TC, the client, the buffer and its loads, the dispatcher, the
property write and the admin API) is one transition formula with its guard, over the whole state
at the model's bounds, so a run here has the explorer's length and breaks the same properties.

The encoding is written from the PIP and the primer, not from the Python code: the log is an
array of ``L`` entries (kind, txn) with its length, where ``L`` is the most entries the bounds
allow (the pre-upgrade log, each txn's writes and its one marker, the non-transactional sends);
a rebuild is stated in closed form ("an ongoing txn has an entry and no marker; its position is
its first entry"; "an aborted txn has an abort marker"), and maxReadPosition is the first ongoing
position, less one. Bounds with snapshots or acks (``two-txns``) are outside it.

The six properties of ``invariants/pip373`` are action properties: each is a formula over a step
(``bad_step``). ``k`` is the explorer's depth plus one, so a run of up to ``k`` steps reaches every
transition of the state space: a verdict of "no run" is the explorer's "holds".
"""
from __future__ import annotations

import z3

from .obligations import PROVED, VIOLATED, Obligation, Verdict, agreement, shortest_run

NO, D, C, A = 0, 1, 2, 3  # a log entry's kind (NO: beyond the log's end)
KIND = {"d": D, "c": C, "a": A}
OPEN, COMMITTING, ABORTING, COMMITTED, ABORTED = 1, 2, 3, 4, 5  # the TC's record (0: none)
TC = {"OPEN": OPEN, "COMMITTING": COMMITTING, "ABORTING": ABORTING, "COMMITTED": COMMITTED, "ABORTED": ABORTED}
ENDING = {COMMITTED: COMMITTING, ABORTED: ABORTING}
IDLE, OPENED, ENDED, DONE = 0, 1, 2, 3  # the client's phase
PHASE = {"idle": IDLE, "open": OPENED, "ending": ENDED, "done": DONE}
SENT, FAILED, ANSWERED = 1, 2, 3  # END_TXN_ON_PARTITION (0: none)
RPC = {"sent": SENT, "failed": FAILED, "done": ANSWERED}
ABSENT, TRUE, FALSE, JUNK = 0, 1, 2, 3  # the persisted property; a queued write is TRUE, FALSE or 0
VALUE = {"absent": ABSENT, "true": TRUE, "false": FALSE, "junk": JUNK}
LOADS = ("load_confirm", "load_rebuild", "load_skip")
ADMIN = ("admin_remove", "admin_update(false)", "admin_update(true)")
PROPERTIES = ("read-committed", "committed-never-filtered", "txn-topic-never-skips", "flag-never-cleared",
              "flag-system-owned", "skip-when-no-txn")
SECTION = ("PIP-373: 'set to true when the first TXN message is publishing'; 'skip ... if the property is false'; "
           "Upgrade; 'NotAllowedException'; PIP-473 Background (the v4 TC, buffer and dispatcher)")
VARIANTS = ("as-written", "persist-before-append", "confirm-unmarked", "all-fixes")
# the bounds the findings are at, with the explorer's greatest depth there over VARIANTS
PRESETS = {"default": 13, "upgrade-user-false": 9}


class Bounds:
    """What the encoding needs of a ``pip-373`` configuration."""

    def __init__(self, config):
        from models.pip373.model import LEGACY, UPGRADES  # the bounds' data, not the model's behaviour
        if config.snapshots or config.acks or config.topics != 1:
            raise ValueError("the step-for-step encoding covers one topic without snapshots or acks")
        self.variant = config.variant
        self.fixes = {"persist-before-append", "confirm-unmarked"} if self.variant == "all-fixes" else {self.variant}
        self.txns = tuple(range(1, config.txns + 1))
        self.legacy = tuple((KIND[kind], t) for kind, t in LEGACY[config.legacy])
        self.ids = self.txns + tuple(sorted({t for _, t in self.legacy if t} - set(self.txns)))
        self.writes, self.nontxn, self.crashes, self.admin = config.writes, config.nontxn, config.crashes, config.admin
        self.upgrade = UPGRADES[config.upgrade]
        self.size = len(self.legacy) + config.txns * (config.writes + 1) + config.nontxn


class Vars:
    """One state, as named Z3 constants (``flat``): the TC, clients and RPCs per txn; the log; the
    buffer; the subscription; the persisted property; the budgets used."""

    def __init__(self, b: Bounds, tag: str):
        ints = ["n", "flag", "value", "read", "crashes", "nontxn"]
        bools = ["ready", "by_broker"]
        for t in b.txns:
            ints += [f"tc{t}", f"phase{t}", f"sends{t}", f"outcome{t}", f"rpc{t}"]
            bools += [f"parts{t}", f"pub{t}", f"failed{t}"]
        for t in b.ids:
            ints += [f"ongoing{t}", f"decided{t}"]
            bools += [f"aborted{t}"]
        for i in range(b.size):
            ints += [f"kind{i}", f"txn{i}"]
            bools += [f"received{i}", f"filtered{i}"]
        self.vars = {**{k: z3.Int(f"{k}{tag}") for k in ints}, **{k: z3.Bool(f"{k}{tag}") for k in bools}}
        self.b = b

    def __getitem__(self, name):
        return self.vars[name]

    def at(self, prefix: str, index):
        """``prefix{index}`` for a symbolic index into the log (0 beyond it)."""
        out = z3.IntVal(0)
        for i in reversed(range(self.b.size)):
            out = z3.If(index == i, self[f"{prefix}{i}"], out)
        return out

    def holds_txn_entry(self):
        return z3.Or(False, *[z3.And(self[f"kind{i}"] == D, self[f"txn{i}"] != 0) for i in range(self.b.size)])

    def decided_is(self, txn, outcome):
        return z3.Or(False, *[z3.And(txn == t, self[f"decided{t}"] == outcome) for t in self.b.ids])

    def max_read_position(self):
        """Just before the first entry of the oldest open txn, or the last entry."""
        first = self["n"]
        for t in self.b.ids:
            ongoing = self[f"ongoing{t}"]
            first = z3.If(z3.And(ongoing != -1, ongoing < first), ongoing, first)
        return first - 1


def _same(v: Vars, w: Vars, changes: dict) -> z3.BoolRef:
    """``w`` is ``v`` with ``changes`` (name -> new value) made."""
    return z3.And(*[w[k] == changes.get(k, v[k]) for k in v.vars])


def _append(v: Vars, kind, txn) -> dict:
    """The changes an append to the log makes (its guard: the log has room, ``_room``)."""
    out = {"n": v["n"] + 1}
    for i in range(v.b.size):
        out[f"kind{i}"] = z3.If(v["n"] == i, kind, v[f"kind{i}"])
        out[f"txn{i}"] = z3.If(v["n"] == i, txn, v[f"txn{i}"])
    return out


def _room(v: Vars):
    return v["n"] < v.b.size


def _emptied(b: Bounds) -> dict:
    """A buffer with nothing in memory."""
    return {"ready": False, "flag": 0, **{f"ongoing{t}": -1 for t in b.ids}, **{f"aborted{t}": False for t in b.ids}}


def _rebuilt(v: Vars) -> dict:
    """The buffer a read of the whole log builds: a txn with an entry and no marker is ongoing from
    its first entry; a txn with an abort marker is aborted."""
    out = {"ready": True, "flag": 0}
    size = v.b.size
    for t in v.b.ids:
        ended = z3.Or(*[z3.And(v[f"txn{i}"] == t, z3.Or(v[f"kind{i}"] == C, v[f"kind{i}"] == A)) for i in range(size)])
        first = z3.IntVal(-1)
        for i in reversed(range(size)):
            first = z3.If(z3.And(v[f"kind{i}"] == D, v[f"txn{i}"] == t), i, first)
        out[f"ongoing{t}"] = z3.If(ended, -1, first)
        out[f"aborted{t}"] = z3.Or(*[z3.And(v[f"txn{i}"] == t, v[f"kind{i}"] == A) for i in range(size)])
    return out


def _trusted(v: Vars):
    return v["by_broker"] if "confirm-unmarked" in v.b.fixes else z3.BoolVal(True)


def _flag_set(v: Vars):
    """The persisted property already says what a first transactional entry must make it say."""
    return z3.Or(v["value"] == JUNK, z3.And(v["value"] == TRUE, _trusted(v), v["flag"] == 0))


def transitions(v: Vars, w: Vars) -> dict:
    """Action label -> formula (guard and effect) from ``v`` to ``w``."""
    b = v.b
    t_ = {}
    for t in b.txns:
        phase, pub = v[f"phase{t}"], v[f"pub{t}"]
        t_[f"new_txn({t})"] = z3.And(phase == IDLE, _same(v, w, {f"tc{t}": OPEN, f"phase{t}": OPENED}))
        t_[f"add_partition({t})"] = z3.And(phase == OPENED, z3.Not(pub), v[f"sends{t}"] < b.writes, _same(v, w, {
            f"parts{t}": True, f"pub{t}": True, f"sends{t}": v[f"sends{t}"] + 1}))
        for want, word in ((COMMITTED, "COMMITTED"), (ABORTED, "ABORTED")):
            may = z3.Not(v[f"failed{t}"]) if want == COMMITTED else z3.BoolVal(True)
            t_[f"end_txn({t},{word})"] = z3.And(phase == OPENED, z3.Not(pub), may, _same(v, w, {
                f"rpc{t}": z3.If(v[f"parts{t}"], SENT, v[f"rpc{t}"]), f"tc{t}": ENDING[want], f"phase{t}": ENDED,
                f"decided{t}": z3.If(v[f"decided{t}"] == 0, want, v[f"decided{t}"])}))
        t_[f"tc_retry({t})"] = z3.And(v[f"rpc{t}"] == FAILED, _same(v, w, {f"rpc{t}": SENT}))
        final = z3.If(v[f"tc{t}"] == COMMITTING, COMMITTED, ABORTED)
        t_[f"tc_end({t})"] = z3.And(z3.Or(v[f"tc{t}"] == COMMITTING, v[f"tc{t}"] == ABORTING),
                                    z3.Or(v[f"rpc{t}"] == 0, v[f"rpc{t}"] == ANSWERED), _same(v, w, {
                                        f"tc{t}": final, f"rpc{t}": 0, f"phase{t}": DONE, f"outcome{t}": final}))
        ongoing = v[f"ongoing{t}"]
        may_append = _flag_set(v) if "persist-before-append" in b.fixes else z3.BoolVal(True)
        t_[f"append({t})"] = z3.And(pub, v["ready"], may_append, _room(v), _same(v, w, {
            **_append(v, D, t), f"ongoing{t}": z3.If(ongoing != -1, ongoing, v["n"]), f"pub{t}": False,
            "flag": z3.If(z3.Or(_flag_set(v), v["flag"] == TRUE), v["flag"], TRUE)}))
        if "persist-before-append" in b.fixes:
            t_[f"request_flag({t})"] = z3.And(pub, v["ready"], z3.Not(_flag_set(v)), v["flag"] != TRUE,
                                              _same(v, w, {"flag": TRUE}))
        commit = v[f"decided{t}"] == COMMITTED if b.variant != "mutant:commit-marks-aborted" else z3.BoolVal(False)
        t_[f"end_on_partition({t})"] = z3.And(v[f"rpc{t}"] == SENT, v["ready"], _room(v), _same(v, w, {
            **_append(v, z3.If(commit, C, A), t), f"ongoing{t}": -1, f"rpc{t}": ANSWERED,
            f"aborted{t}": z3.Or(v[f"aborted{t}"], z3.Not(commit))}))
    t_["send_nontxn"] = z3.And(v["ready"], v["nontxn"] < b.nontxn, _room(v),
                               _same(v, w, {**_append(v, D, 0), "nontxn": v["nontxn"] + 1}))
    t_["crash"] = z3.And(v["ready"], v["crashes"] < b.crashes, _same(v, w, {
        **_emptied(b), "read": 0, "crashes": v["crashes"] + 1,
        **{f"rpc{t}": z3.If(v[f"rpc{t}"] == SENT, FAILED, v[f"rpc{t}"]) for t in b.txns},
        **{f"failed{t}": z3.Or(v[f"failed{t}"], v[f"pub{t}"]) for t in b.txns}, **{f"pub{t}": False for t in b.txns}}))
    value = v["value"]
    confirm = z3.Or(value == ABSENT, z3.And(z3.Or(value == TRUE, value == FALSE), z3.Not(_trusted(v))))
    skip = z3.And(z3.Not(confirm), value == FALSE, b.variant != "mutant:always-rebuild")
    unloaded = z3.Not(v["ready"])
    t_["load_confirm"] = z3.And(unloaded, confirm, _same(v, w, {
        **_rebuilt(v), "flag": z3.If(v.holds_txn_entry(), TRUE, FALSE)}))
    t_["load_skip"] = z3.And(unloaded, skip, _same(v, w, {**_emptied(b), "ready": True}))
    t_["load_rebuild"] = z3.And(unloaded, z3.Not(confirm), z3.Not(skip), _same(v, w, _rebuilt(v)))
    read = v["read"]
    kind, txn = v.at("kind", read), v.at("txn", read)
    aborted = z3.Or(False, *[z3.And(txn == t, v[f"aborted{t}"]) for t in b.ids])
    readable = z3.And(v["ready"], read <= v.max_read_position())
    seen = {f"{prefix}{i}": z3.Or(v[f"{prefix}{i}"], read == i) for prefix in ("received", "filtered")
            for i in range(b.size)}
    t_["skip_marker"] = z3.And(readable, kind != D, _same(v, w, {"read": read + 1}))
    t_["skip_aborted"] = z3.And(readable, kind == D, aborted, _same(v, w, {
        "read": read + 1, **{k: x for k, x in seen.items() if k.startswith("filtered")}}))
    t_["deliver"] = z3.And(readable, kind == D, z3.Not(aborted), _same(v, w, {
        "read": read + 1, **{k: x for k, x in seen.items() if k.startswith("received")}}))
    t_["persist_flag"] = z3.And(v["ready"], v["flag"] != 0, _same(v, w, {"value": v["flag"], "by_broker": True,
                                                                        "flag": 0}))
    if b.admin:
        writes = b.variant == "mutant:admin-can-write"  # as written: NotAllowedException, nothing changes
        for label, new in (("admin_update(true)", TRUE), ("admin_update(false)", FALSE), ("admin_remove", ABSENT)):
            t_[label] = z3.And(v["ready"], _same(v, w, {"value": new, "by_broker": False} if writes else {}))
    return t_


def breaks(prop: str, v: Vars, label: str, w: Vars):
    """The step ``label`` from ``v`` to ``w`` breaks ``prop`` (``invariants/pip373``'s properties)."""
    read_txn = v.at("txn", v["read"])
    if prop == "flag-never-cleared":
        return z3.And(v["value"] == TRUE, v["by_broker"], w["value"] != TRUE)
    if prop == "read-committed" and label == "deliver":
        return z3.And(read_txn != 0, z3.Not(v.decided_is(read_txn, COMMITTED)))
    if prop == "committed-never-filtered" and label == "skip_aborted":
        return v.decided_is(read_txn, COMMITTED)
    if prop == "txn-topic-never-skips" and label == "load_skip":
        return v.holds_txn_entry()
    if prop == "flag-system-owned" and label in ADMIN:
        return z3.Or(w["value"] != v["value"], w["by_broker"] != v["by_broker"])
    if prop == "skip-when-no-txn" and label in LOADS and label != "load_skip":
        legacy_txn = z3.Or(False, *[z3.And(v[f"kind{i}"] != NO, v[f"txn{i}"] == t) for i in range(v.b.size)
                                    for t in v.b.ids if t not in v.b.txns])
        sent = z3.Or(legacy_txn, *[v[f"sends{t}"] > 0 for t in v.b.txns])
        return z3.And(z3.Not(sent), v["value"] == FALSE, v["by_broker"])
    return z3.BoolVal(False)


def init(v: Vars):
    b = v.b
    out = [v["n"] == len(b.legacy), v["read"] == 0, v["crashes"] == 0, v["nontxn"] == 0,
           v["value"] == VALUE[b.upgrade[0]], v["by_broker"] == b.upgrade[1], _same(v, v, {})]
    out += [v[k] == x for k, x in _emptied(b).items()]
    for t in b.txns:
        out += [v[f"{k}{t}"] == 0 for k in ("tc", "phase", "sends", "outcome", "rpc")]
        out += [z3.Not(v[f"{k}{t}"]) for k in ("parts", "pub", "failed")]
    for t in b.ids:
        out.append(v[f"decided{t}"] == (ABORTED if (A, t) in b.legacy else 0))
    for i in range(b.size):
        kind, txn = b.legacy[i] if i < len(b.legacy) else (NO, 0)
        out += [v[f"kind{i}"] == kind, v[f"txn{i}"] == txn, z3.Not(v[f"received{i}"]), z3.Not(v[f"filtered{i}"])]
    return z3.And(*out)


def bounded(config, prop: str, k: int):
    """The shortest run (at most ``k`` steps) through a step that breaks ``prop``, as action labels, or None."""
    b = Bounds(config)
    states = [Vars(b, f"@{i}") for i in range(k + 1)]
    solver = z3.Solver()
    solver.add(init(states[0]))
    found = shortest_run(solver, states, lambda i: transitions(states[i], states[i + 1]), lambda v: z3.BoolVal(False),
                         lambda i, label: breaks(prop, states[i], label, states[i + 1]))
    return None if found is None else found[1]


def verdict(variant: str, preset: str) -> Verdict:
    """Each property's shortest breaking run at ``preset`` within the explorer's depth plus one."""
    from pulsar_verify import registry
    config = registry.build("pip-373", variant, preset=preset).config
    k = PRESETS[preset] + 1
    runs = {prop: bounded(config, prop, k) for prop in PROPERTIES}
    broken = {prop: run for prop, run in runs.items() if run is not None}
    if not broken:
        return Verdict(PROVED, f"no run of up to {k} steps breaks any of: {', '.join(PROPERTIES)}")
    return Verdict(VIOLATED, "; ".join(f"{prop} in {_steps(len(run))}: {', '.join(run)}" for prop, run in broken.items()))


def _steps(n: int) -> str:
    return f"{n} step" + ("s" if n != 1 else "")


def label(a) -> str:
    """The encoding's label for a Python action."""
    params = dict(a.params)
    shown = [str(params[k]) for k in ("txn", "want") if k in params]
    if a.name.startswith("admin_update"):
        shown.append(params["value"])
    return a.name + (f"({','.join(shown)})" if shown else "")


def concrete(v: Vars, s) -> z3.BoolRef:
    """``v`` fixed to a Python pip-373 state."""
    b, buf, sub = v.b, s.buffers[0], s.subs[0]
    log = s.logs[0]
    out = [v["n"] == len(log), v["flag"] == {None: 0, "true": TRUE, "false": FALSE}[buf.flag],
           v["value"] == VALUE[s.prop[0]], v["by_broker"] == bool(s.prop[1]), v["read"] == sub.read,
           v["crashes"] == s.crashes, v["nontxn"] == s.nontxn, v["ready"] == buf.ready]
    for t in b.txns:
        c = s.clients[t - 1]
        out += [v[f"tc{t}"] == TC.get(s.tc.get(t), 0), v[f"phase{t}"] == PHASE[c.phase], v[f"sends{t}"] == c.sends,
                v[f"outcome{t}"] == TC.get(c.outcome, 0), v[f"rpc{t}"] == RPC.get(s.rpcs.get((t, "partition", 0)), 0),
                v[f"parts{t}"] == (0 in s.parts.get(t, ())), v[f"pub{t}"] == ((t, 0) in s.publishes),
                v[f"failed{t}"] == c.failed]
    for t in b.ids:
        out += [v[f"ongoing{t}"] == buf.ongoing.get(t, -1), v[f"decided{t}"] == TC.get(s.decided.get(t), 0),
                v[f"aborted{t}"] == (t in buf.aborted)]
    for i in range(b.size):
        kind, txn = (KIND[log[i][0]], log[i][1]) if i < len(log) else (NO, 0)
        out += [v[f"kind{i}"] == kind, v[f"txn{i}"] == txn, v[f"received{i}"] == (i in sub.received),
                v[f"filtered{i}"] == (i in sub.filtered)]
    return z3.And(*out)


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """For Python transitions ``(s, a, t)``: the formula of ``a`` admits ``t`` from ``s``, and
    nothing else; and each property's ``breaks`` holds exactly when the Python property fails."""
    b = Bounds(model.config)
    v, w = Vars(b, ""), Vars(b, "'")
    steps = transitions_of(v, w)
    checks = {p.id: p.check for p in model.action_properties}
    assert set(checks) == set(PROPERTIES), checks
    out = []
    for s, a, t in pairs:
        step = steps.get(label(a))
        if step is None:
            out.append(f"{a}: the encoding has no formula for {label(a)}")
            continue
        pre, post = concrete(v, s), concrete(w, t)
        out += [f"{a}: {problem}" for problem in agreement(pre, step, post)]
        for prop in PROPERTIES:
            solver = z3.Solver()
            solver.add(pre, post, breaks(prop, v, label(a), w))
            if (solver.check() == z3.sat) == checks[prop](model, s, a, t):
                out.append(f"{a}: {prop} {'holds' if checks[prop](model, s, a, t) else 'fails'} in Python, "
                           f"not in the formula")
    return out


OBLIGATIONS = [
    Obligation("pip-373", f"steps-bounded-{preset}", f"each property's shortest breaking run of the whole model at the "
               f"{preset} bounds, step for step (up to {depth + 1} steps: the explorer's depth plus one)", SECTION,
               lambda variant=variant, preset=preset: verdict(variant, preset), (variant,))
    for variant in VARIANTS for preset, depth in PRESETS.items()
]
