"""PIP-468 consumer sessions (``sessions-durable``: a registered consumer's registration stays
persisted until the leader evicts it), for any number of brokers and consumers.

Brokers and consumers are uninterpreted sorts. The encoding keeps what the registration writers
read and write: the persisted registrations (which consumers have one), the sessions (ghost:
registered and not evicted by the leader), the leader lock, and each broker's controller in
memory (whether it believes it leads, its coordinator's members). Every write of the
registrations is a rebalance, which persists the round-robin over the coordinator's members:
its keys are exactly the members, whatever the layout. Each action of ``models/pip468`` is a
transition formula over these variables; an action that writes none of them is a stutter.

The claim is strengthened by: the lock holder's members are exactly the persisted
registrations. As written ("all mutating operations ... throw ``IllegalStateException`` after a
``checkLeader()`` guard": at their start only), it is not inductive: the counterexample to
induction is a broker that is not the lock holder persisting its own members over the
registrations (the explorer's finding ``deposed-leader-erases-consumer-session``: a deposed
leader's notify step). With ``fenced-registrations`` it is inductive.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, agreement, inductive as induction

Broker = z3.DeclareSort("Broker")
Consumer = z3.DeclareSort("Consumer")
SET = z3.ArraySort(Consumer, z3.BoolSort())
NOBODY = z3.K(Consumer, z3.BoolVal(False))
SECTION = ("PIP-468 Consumer Session Lifecycle: 'this entry is durable and outlives TCP disconnects, client "
           "restarts, and controller leader failovers'; Leader Election and Failover: 'checkLeader()' guard")
REBALANCES = ("layout_changed", "notify")  # a rebalance on the broker's own members, nothing else encoded


class Vars:
    def __init__(self, tag: str):
        self.reg = z3.Array(f"reg{tag}", Consumer, z3.BoolSort())  # has a persisted registration
        self.sess = z3.Array(f"sess{tag}", Consumer, z3.BoolSort())  # ghost: a live session
        self.held = z3.Bool(f"held{tag}")  # the leader lock is held ...
        self.lock = z3.Const(f"lock{tag}", Broker)  # ... by this broker
        self.leader = z3.Array(f"leader{tag}", Broker, z3.BoolSort())  # the broker believes it leads
        self.members = z3.Array(f"members{tag}", Broker, SET)  # its coordinator's members

    NAMES = ("reg", "sess", "held", "lock", "leader", "members")

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def transitions(v: Vars, w: Vars, b, c, fixes=frozenset(), variant: str = "as-written") -> dict:
    """Action label -> formula, for broker ``b`` and consumer ``c`` (the action's parameters, free)."""
    owns = z3.And(v.held, v.lock == b)
    may_write = owns if "fenced-registrations" in fixes else z3.BoolVal(True)

    def rebalanced(members):  # the registrations a rebalance on ``b`` leaves, its members being ``members``
        return z3.If(may_write, members, v.reg)
    joined = z3.Store(v.members[v.lock], c, True)
    if variant == "mutant:no-rebalance-on-join":
        join_reg = z3.Store(v.reg, c, True)
    else:
        join_reg = joined
    known = v.members[v.lock][c]
    reconnect_reg = v.members[v.lock] if variant == "mutant:rebalance-on-reconnect" else v.reg
    expired = z3.Store(v.members[b], c, False)
    t = {
        "elect": z3.And(z3.Not(v.held), z3.Not(v.leader[b]), w.held, w.lock == b,
                        w.leader == z3.Store(v.leader, b, True), w.members == z3.Store(v.members, b, v.reg),
                        *v.keep(w, "held", "lock", "leader", "members")),
        "learn_deposed": z3.And(v.leader[b], z3.Not(owns), w.leader == z3.Store(v.leader, b, False),
                                *v.keep(w, "leader")),
        "lose_session": z3.And(owns, z3.Not(w.held), *v.keep(w, "held", "lock")),
        "crash": z3.And(w.held == z3.And(v.held, v.lock != b), w.leader == z3.Store(v.leader, b, False),
                        w.members == z3.Store(v.members, b, NOBODY), *v.keep(w, "held", "leader", "members")),
        "connect": z3.And(v.held, v.leader[v.lock], z3.If(
            known, z3.And(w.reg == reconnect_reg, *v.keep(w, "reg")),
            z3.And(w.members == z3.Store(v.members, v.lock, joined), w.sess == z3.Store(v.sess, c, True),
                   w.reg == join_reg, *v.keep(w, "members", "sess", "reg")))),
        "grace_expire": z3.And(v.leader[b], w.members == z3.Store(v.members, b, expired),
                               w.sess == z3.If(owns, z3.Store(v.sess, c, False), v.sess),
                               w.reg == rebalanced(expired), *v.keep(w, "members", "sess", "reg")),
        "cas_conflict": z3.And(w.reg == z3.If(v.leader[b], rebalanced(v.members[b]), v.reg)
                               if "leader-watches-layout" in fixes else w.reg == v.reg, *v.keep(w, "reg")),
    }
    for label in REBALANCES:
        t[label] = z3.And(w.reg == rebalanced(v.members[b]), *v.keep(w, "reg"))
    return t


def sessions_durable(v: Vars):
    c = z3.Const("c", Consumer)
    return z3.ForAll([c], z3.Implies(v.sess[c], v.reg[c]))


def invariant(v: Vars):
    """``sessions-durable``, strengthened: the lock holder's members are exactly the persisted
    registrations (it loaded them when elected, and each of its writes persists its members)."""
    return z3.And(sessions_durable(v), z3.Implies(v.held, v.members[v.lock] == v.reg))


def init(v: Vars):
    b = z3.Const("b", Broker)
    return z3.And(v.reg == NOBODY, v.sess == NOBODY, z3.Not(v.held),
                  z3.ForAll([b], z3.And(z3.Not(v.leader[b]), v.members[b] == NOBODY)))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """Each consumer's registration and session, the lock, and each broker's belief and members."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    consumers = m.get_universe(Consumer) or []
    brokers = m.get_universe(Broker) or []
    name = {str(x): f"c{i + 1}" for i, x in enumerate(consumers)}
    bname = {str(x): f"b{i}" for i, x in enumerate(brokers)}

    def those(s):
        return "{" + ", ".join(name[str(x)] for x in consumers if z3.is_true(e(s[x]))) + "}"
    lock = bname.get(str(e(v.lock)), str(e(v.lock))) if z3.is_true(e(v.held)) else "none"
    ctrls = "; ".join(f"{bname[str(x)]}: {'leader' if z3.is_true(e(v.leader[x])) else 'follower'}, members "
                      f"{those(v.members[x])}" for x in brokers)
    return f"{{registered {those(v.reg)}, sessions {those(v.sess)}, lock {lock}; {ctrls}}}"


def inductive(fixes=frozenset(), variant: str = "as-written") -> Verdict:
    """Init implies Inv, and Inv and any one action imply Inv'."""
    v, w = Vars(""), Vars("'")
    b, c = z3.Const("broker", Broker), z3.Const("consumer", Consumer)
    return induction(init(v), invariant(v), invariant(w), transitions(v, w, b, c, fixes, variant),
                     lambda m: describe(m, v), lambda m: describe(m, w))


def concrete(v: Vars, state, brokers) -> object:
    """The formula fixing ``v`` to a Python model state (models/pip468/state.py); ``brokers`` are
    distinct Broker constants, one per controller, and consumers ``c1``, ``c2``, ... distinct
    Consumer constants (every other consumer unregistered and without a session)."""
    from pulsar_verify.models.pip468.assignment import consumer_name
    names = [consumer_name(i) for i in range(len(state.consumers))]
    cs = [z3.Const(n, Consumer) for n in names]

    def exactly(arr, chosen):  # as one array value, so the formula stays quantifier-free
        value = NOBODY
        for k, n in zip(cs, names):
            if n in chosen:
                value = z3.Store(value, k, True)
        return arr == value
    out = [z3.Distinct(*cs) if len(cs) > 1 else z3.BoolVal(True), z3.Distinct(*brokers) if len(brokers) > 1 else z3.BoolVal(True),
           exactly(v.reg, set(state.registrations.keys())), exactly(v.sess, state.sessions),
           v.held == (state.lock is not None)]
    if state.lock is not None:
        out.append(v.lock == brokers[state.lock])
    for k, ctrl in zip(brokers, state.ctrls):
        out += [v.leader[k] == ctrl.leader, exactly(v.members[k], ctrl.members)]
    return z3.And(*out)


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """For Python transitions ``(s, a, t)``: the formula of ``a`` must admit ``t`` from ``s`` (an
    unlisted action must leave every encoded variable as it was), and nothing else."""
    out = []
    v, w = Vars(""), Vars("'")
    b, c = z3.Const("broker", Broker), z3.Const("consumer", Consumer)
    steps = transitions_of(v, w, b, c, model.fixes, model.config.variant)
    for s, a, t in pairs:
        brokers = [z3.Const(f"B{i}", Broker) for i in range(len(s.ctrls))]
        params = dict(a.params)
        binding = []
        if "broker" in params:
            binding.append(b == brokers[params["broker"]])
        if "consumer" in params:
            binding.append(c == z3.Const(params["consumer"], Consumer))
        step = steps.get(a.name, z3.And(*v.keep(w)))
        out += [f"{a}: {problem}" for problem in agreement(
            concrete(v, s, brokers), z3.And(step, *binding), concrete(w, t, brokers),
            show=lambda m: describe(m, w))]
    return out


FENCED = frozenset({"fenced-registrations"})


def _all_fixes() -> frozenset:
    from pulsar_verify.models.pip468.model import FIXES
    return frozenset(FIXES)


OBLIGATIONS = [
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(), ("as-written",)),
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(FENCED), ("fenced-registrations",)),
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(_all_fixes()), ("all-fixes",)),
]
