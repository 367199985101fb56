"""Bounded model checking of PIP-468's controller and consumer sessions at the explorer's
``consumer-failover`` bounds (2 brokers, 1 stream consumer, 1 segment, 1 split, 1 failover), step
for step: each action of ``models/pip468`` is one transition formula with its guard, so a run
here has the explorer's length.

Unlike ``pip468_sessions`` (any number of brokers and consumers, the registration writers only),
the encoding keeps what decides when those writers can run: each broker's operation and its step
(discover, create per child, terminate, CAS, notify: "Split Protocol" 1-5), its grace timers and
connections, the consumer's connection, and the split and failover budgets. The data plane
(publish, delivery, DAG updates, assignment pushes) writes none of it: those actions are
stutters, which never make a run shorter. With one split in all, the CAS never conflicts.

As written, the shortest run breaking ``sessions-durable`` has 11 steps, the length of the
explorer's ``deposed-leader-erases-consumer-session``; with ``fenced-registrations`` no run of up
to the explorer's depth (17) breaks it, which covers every reachable state.
"""
from __future__ import annotations

import z3

from .obligations import PROVED, VIOLATED, Obligation, Verdict, agreement, shortest_run

BROKERS = (0, 1)
NONE, DISCOVER, CREATE, TERMINATE, CAS, NOTIFY = range(6)
STEP = {None: NONE, "discover": DISCOVER, "create": CREATE, "terminate": TERMINATE, "cas": CAS, "notify": NOTIFY}
CHILDREN = 2  # a split creates two children (and terminates one parent)
SECTION = ("PIP-468 Split Protocol 1-5; Leader Election and Failover; Consumer Session Lifecycle: 'this entry is "
           "durable and outlives ... controller leader failovers'")
VARIANTS = ("as-written", "fenced-registrations")


class Vars:
    """One state: the lock (-1: free), per broker (leader belief, the consumer among its members,
    timers and connections, its operation's step and progress), the consumer's broker (-1: none),
    its registration and session, and the budgets used."""

    def __init__(self, tag: str):
        self.lock = z3.Int(f"lock{tag}")
        self.leader = [z3.Bool(f"leader{b}{tag}") for b in BROKERS]
        self.member = [z3.Bool(f"member{b}{tag}") for b in BROKERS]
        self.timer = [z3.Bool(f"timer{b}{tag}") for b in BROKERS]
        self.conn = [z3.Bool(f"conn{b}{tag}") for b in BROKERS]
        self.op = [z3.Int(f"op{b}{tag}") for b in BROKERS]
        self.progress = [z3.Int(f"progress{b}{tag}") for b in BROKERS]
        self.at = z3.Int(f"at{tag}")
        self.reg = z3.Bool(f"reg{tag}")
        self.sess = z3.Bool(f"sess{tag}")
        self.splits = z3.Int(f"splits{tag}")
        self.failovers = z3.Int(f"failovers{tag}")

    def flat(self) -> dict:
        out = {"lock": self.lock, "at": self.at, "reg": self.reg, "sess": self.sess, "splits": self.splits,
               "failovers": self.failovers}
        for b in BROKERS:
            for k in ("leader", "member", "timer", "conn", "op", "progress"):
                out[f"{k}{b}"] = getattr(self, k)[b]
        return out


def _same(v: Vars, w: Vars, changes: dict) -> z3.BoolRef:
    """``w`` is ``v`` with ``changes`` (name -> new value) made."""
    new, old = w.flat(), v.flat()
    return z3.And(*[new[k] == changes.get(k, old[k]) for k in old])


def _rebalanced(v: Vars, b: int, fenced: bool, members) -> object:
    """The registration a rebalance on broker ``b`` leaves: its members, unless fenced and not the lock's."""
    return z3.If(v.lock == b, members, v.reg) if fenced else members


def transitions(v: Vars, w: Vars, fenced: bool) -> dict:
    """Action label (with its broker) -> formula; labels not listed are stutters."""
    t = {}
    for b in BROKERS:
        reset = {f"leader{b}": False, f"member{b}": False, f"timer{b}": False, f"conn{b}": False, f"op{b}": NONE,
                 f"progress{b}": 0}
        t[f"elect({b})"] = z3.And(v.lock == -1, z3.Not(v.leader[b]), _same(v, w, {
            "lock": b, f"leader{b}": True, f"member{b}": v.reg, f"conn{b}": z3.And(v.reg, v.at == b),
            f"timer{b}": z3.And(v.reg, v.at != b)}))
        t[f"learn_deposed({b})"] = z3.And(v.leader[b], v.lock != b,
                                          _same(v, w, {f"leader{b}": False, f"timer{b}": False}))
        t[f"lose_session({b})"] = z3.And(v.failovers < 1, v.lock == b,
                                         _same(v, w, {"lock": -1, "failovers": v.failovers + 1}))
        t[f"crash({b})"] = z3.And(v.failovers < 1, z3.Or(v.leader[b], v.op[b] != NONE), _same(v, w, {
            **reset, "lock": z3.If(v.lock == b, -1, v.lock), "failovers": v.failovers + 1,
            "at": z3.If(v.at == b, -1, v.at)}))
        t[f"request_split({b})"] = z3.And(v.leader[b], v.splits < 1, _same(v, w, {
            f"op{b}": DISCOVER, f"progress{b}": 0, "splits": v.splits + 1}))
        t[f"discover({b})"] = z3.And(v.op[b] == DISCOVER, _same(v, w, {f"op{b}": CREATE}))
        last = v.progress[b] + 1 == CHILDREN
        t[f"create({b})"] = z3.And(v.op[b] == CREATE, _same(v, w, {
            f"op{b}": z3.If(last, TERMINATE, CREATE), f"progress{b}": z3.If(last, 0, v.progress[b] + 1)}))
        t[f"terminate({b})"] = z3.And(v.op[b] == TERMINATE, _same(v, w, {f"op{b}": CAS}))  # its one parent
        t[f"cas({b})"] = z3.And(v.op[b] == CAS, _same(v, w, {f"op{b}": NOTIFY}))
        t[f"notify({b})"] = z3.And(v.op[b] == NOTIFY, _same(v, w, {
            f"op{b}": NONE, "reg": _rebalanced(v, b, fenced, v.member[b])}))
        t[f"grace_expire({b})"] = z3.And(v.leader[b], v.timer[b], _same(v, w, {
            f"member{b}": False, f"timer{b}": False, "sess": z3.And(v.sess, v.lock != b),
            "reg": _rebalanced(v, b, fenced, z3.BoolVal(False))}))
    lock_leads = z3.Or(*[z3.And(v.lock == b, v.leader[b]) for b in BROKERS])
    known = z3.Or(*[z3.And(v.lock == b, v.member[b]) for b in BROKERS])
    joins = {}
    for b in BROKERS:  # the changes a connect makes when ``b`` holds the lock
        joins[b] = z3.If(known, _same(v, w, {"at": b, f"conn{b}": True, f"timer{b}": False}),
                         _same(v, w, {"at": b, f"conn{b}": True, f"member{b}": True, "sess": True, "reg": True}))
    t["connect"] = z3.And(lock_leads, v.at != v.lock, *[z3.Implies(v.lock == b, joins[b]) for b in BROKERS])
    return t


def init(v: Vars):
    return z3.And(v.lock == -1, v.at == -1, z3.Not(v.reg), z3.Not(v.sess), v.splits == 0, v.failovers == 0,
                  *[z3.And(z3.Not(v.leader[b]), z3.Not(v.member[b]), z3.Not(v.timer[b]), z3.Not(v.conn[b]),
                           v.op[b] == NONE, v.progress[b] == 0) for b in BROKERS])


def sessions_durable(v: Vars):
    return z3.Implies(v.sess, v.reg)


def bounded(variant: str = "as-written", k: int = 17) -> Verdict:
    """The shortest run (at most ``k`` steps) that breaks ``sessions-durable``, or proved within ``k``."""
    fenced = variant == "fenced-registrations"
    states = [Vars(f"@{i}") for i in range(k + 1)]
    solver = z3.Solver()
    solver.add(init(states[0]))
    found = shortest_run(solver, states, lambda i: transitions(states[i], states[i + 1], fenced),
                         lambda v: z3.Not(sessions_durable(v)))
    if found is None:
        return Verdict(PROVED, f"no run of up to {k} steps breaks it")
    return Verdict(VIOLATED, f"reachable in {len(found[1])} steps: " + ", ".join(found[1]))


def concrete(v: Vars, s) -> z3.BoolRef:
    """The formula fixing ``v`` to a Python model state at these bounds."""
    name = "c1"
    x = s.consumers[0]
    out = [v.lock == (-1 if s.lock is None else s.lock), v.at == (-1 if x.broker is None else x.broker),
           v.reg == (name in s.registrations.keys()), v.sess == (name in s.sessions), v.splits == s.splits,
           v.failovers == s.failovers]
    for b, c in enumerate(s.ctrls):
        op = c.ops[0] if c.ops else None
        out += [v.leader[b] == c.leader, v.member[b] == (name in c.members), v.timer[b] == (name in c.timers),
                v.conn[b] == (name in c.connected), v.op[b] == STEP[op.step if op else None],
                v.progress[b] == (op.progress if op else 0)]
    return z3.And(*out)


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """For Python transitions ``(s, a, t)``: the formula of ``a`` admits ``t`` from ``s``, and nothing else."""
    v, w = Vars(""), Vars("'")
    steps = transitions_of(v, w, "fenced-registrations" in model.fixes)
    out = []
    for s, a, t in pairs:
        label = a.name if "broker" not in dict(a.params) else f"{a.name}({a.param('broker')})"
        step = steps.get(label, _same(v, w, {}))
        out += [f"{a}: {problem}" for problem in agreement(concrete(v, s), step, concrete(w, t))]
    return out


OBLIGATIONS = [
    Obligation("pip-468", "sessions-durable-bounded", "the shortest run of the controller and sessions at the "
               "consumer-failover bounds that breaks sessions-durable (up to 17 steps)", SECTION,
               lambda variant=variant: bounded(variant), (variant,))
    for variant in VARIANTS
]
