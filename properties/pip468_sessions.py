"""PIP-468 consumer sessions (``sessions-durable``: a registered consumer's registration stays
persisted until the leader evicts it), for any number of brokers and consumers.

Brokers and consumers are uninterpreted sorts. The encoding keeps what the registration writers
read and write: the persisted registrations (which consumers have one), the sessions (ghost:
registered and not evicted by the leader), the leader lock, each broker's controller in memory
(whether it believes it leads, its coordinator's members, the registration writes it has issued
and not done: a put or a delete per consumer), and each consumer's connection (to which broker,
and whether it waits for its registration's reply). A rebalance issues a delete for each consumer
it drops, a put for each it adds, and for a consumer it keeps maybe a put (when its segments
changed: the encoding has no layout, so either); variant atomic-registrations: one write of the
whole set. Each action of ``models/pip468`` is a transition formula over these variables; an
action that writes none of them is a stutter.

The claim is strengthened by: the lock holder's members are the persisted registrations as its
issued writes will leave them, a live session is one of its members, and a consumer waiting for
its reply is a member of the broker it waits on, with a put issued there. As written
("all mutating operations ... throw ``IllegalStateException`` after a ``checkLeader()`` guard": at
their start only), it is not inductive: the counterexample to induction is a write issued by a
broker that does not hold the lock landing (the explorer's finding
``deposed-leader-erases-consumer-session``). With ``fenced-registrations`` (the writes are
conditional on the lock's version, so a new term drops the writes of the old) it is inductive.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, agreement, inductive as induction, universe

Broker = z3.DeclareSort("Broker")
Consumer = z3.DeclareSort("Consumer")
SET = z3.ArraySort(Consumer, z3.BoolSort())
NOBODY = z3.K(Consumer, z3.BoolVal(False))
Write, (NONE, PUT, DEL) = z3.EnumSort("Write", ("none", "put", "delete"))  # a broker's issued write of one
NO_WRITES = z3.K(Consumer, NONE)
# array maps (decided by the array theory, unlike lambdas) for one write of every registration:
# the write a membership gives, and a registration once a write lands; their tables are ``TABLES``
WHOLE = z3.Function("whole", z3.BoolSort(), Write)
LANDS = z3.Function("lands", Write, z3.BoolSort(), z3.BoolSort())
TABLES = z3.And(WHOLE(True) == PUT, WHOLE(False) == DEL,
                *[LANDS(k, r) == (r if k is NONE else z3.BoolVal(k is PUT)) for k in (NONE, PUT, DEL)
                  for r in (z3.BoolVal(True), z3.BoolVal(False))])
DURABLE = ("sessions-durable",)  # the property the inductive claims prove for any size
SECTION = ("PIP-468 Consumer Session Lifecycle: 'this entry is durable and outlives TCP disconnects, client "
           "restarts, and controller leader failovers'; Metadata Store Paths: 'ConsumerRegistration' keyed by "
           "consumerName; Leader Election and Failover: 'checkLeader()' guard")
REBALANCES = ("layout_changed", "notify")  # a rebalance on the broker's own members, nothing else encoded


class Vars:
    def __init__(self, tag: str):
        self.reg = z3.Array(f"reg{tag}", Consumer, z3.BoolSort())  # has a persisted registration
        self.sess = z3.Array(f"sess{tag}", Consumer, z3.BoolSort())  # ghost: a live session
        self.held = z3.Bool(f"held{tag}")  # the leader lock is held ...
        self.lock = z3.Const(f"lock{tag}", Broker)  # ... by this broker
        self.leader = z3.Array(f"leader{tag}", Broker, z3.BoolSort())  # the broker believes it leads
        self.members = z3.Array(f"members{tag}", Broker, SET)  # its coordinator's members
        self.pend = z3.Array(f"pend{tag}", Broker, z3.ArraySort(Consumer, Write))  # its issued writes
        self.on = z3.Array(f"on{tag}", Consumer, z3.BoolSort())  # the consumer is connected ...
        self.at = z3.Array(f"at{tag}", Consumer, Broker)  # ... to this broker
        self.joining = z3.Array(f"joining{tag}", Consumer, z3.BoolSort())  # and waits for its reply

    NAMES = ("reg", "sess", "held", "lock", "leader", "members", "pend", "on", "at", "joining")

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def _lambda(body):
    x = z3.Const("x", Consumer)
    return z3.Lambda([x], body(x))


def transitions(v: Vars, w: Vars, b, c, fixes=frozenset(), variant: str = "as-written") -> dict:
    """Action label -> formula, for broker ``b`` and consumer ``c`` (the action's parameters, free);
    ``keeps`` (free) is the rebalance's choice of which kept members' segments changed. Not covered:
    ``mutant:rebalance-on-reconnect``, whose reply depends on whether segments changed."""
    if variant == "mutant:rebalance-on-reconnect":
        raise ValueError("the sessions encoding does not cover mutant:rebalance-on-reconnect")
    owns = z3.And(v.held, v.lock == b)
    fenced = "fenced-registrations" in fixes
    atomic = "atomic-registrations" in fixes
    keeps = z3.Array("keeps", Consumer, z3.BoolSort())

    def issued(k, before, after):
        return issued_from(v.pend[k], before, after, keeps, c, atomic)

    def rebalanced(k, after):
        return z3.Store(v.pend, k, issued(k, v.members[k], after))
    here = _lambda(lambda x: z3.And(v.on[x], v.at[x] == b))
    gone = _lambda(lambda x: z3.And(v.on[x], z3.Not(here[x])))  # connections left after ``b``'s are closed
    lead = v.lock
    member = v.members[lead][c]
    joined = z3.Store(v.members[lead], c, True)
    if variant == "mutant:no-rebalance-on-join":
        join_pend = z3.Store(v.pend, lead, z3.Map(WHOLE, joined) if atomic
                             else z3.Store(v.pend[lead], c, PUT))
    else:
        join_pend = z3.Store(v.pend, lead, issued(lead, v.members[lead], joined))
    waits = z3.Or(z3.Not(member), v.pend[lead][c] != NONE)
    write = v.pend[b][c]  # atomic-registrations: one write of every consumer (``c`` is any of them)
    failed = z3.Not(owns) if fenced else z3.BoolVal(False)
    landed = (z3.Map(LANDS, v.pend[b], v.reg) if atomic
              else z3.Store(v.reg, c, z3.If(write == NONE, v.reg[c], write == PUT)))
    replied = (_lambda(lambda x: z3.And(v.joining[x], here[x])) if atomic
               else z3.Store(NOBODY, c, z3.And(v.joining[c], here[c])))
    t = {
        "learn_deposed": z3.And(v.leader[b], z3.Not(owns), w.leader == z3.Store(v.leader, b, False),
                                *v.keep(w, "leader")),
        "lose_session": z3.And(owns, z3.Not(w.held), *v.keep(w, "held", "lock")),
        "crash": z3.And(w.held == z3.And(v.held, v.lock != b), w.leader == z3.Store(v.leader, b, False),
                        w.members == z3.Store(v.members, b, NOBODY), w.pend == z3.Store(v.pend, b, NO_WRITES),
                        w.on == gone, w.joining == _lambda(lambda x: z3.And(v.joining[x], z3.Not(here[x]))),
                        *v.keep(w, "held", "leader", "members", "pend", "on", "joining")),
        "connect": z3.And(v.held, v.leader[lead], z3.Not(z3.And(v.on[c], v.at[c] == lead)),
                          w.on == z3.Store(v.on, c, True), w.at == z3.Store(v.at, c, lead),
                          w.joining == z3.Store(v.joining, c, waits),
                          z3.If(member, z3.And(*v.keep(w, "on", "at", "joining")),
                                z3.And(w.members == z3.Store(v.members, lead, joined), w.pend == join_pend,
                                       *v.keep(w, "members", "pend", "on", "at", "joining")))),
        "disconnect": z3.And(v.on[c], w.on == z3.Store(v.on, c, False), w.joining == z3.Store(v.joining, c, False),
                             *v.keep(w, "on", "joining")),
        "grace_expire": z3.And(v.leader[b], z3.Not(z3.And(here[c], v.joining[c])),
                               w.members == z3.Store(v.members, b, z3.Store(v.members[b], c, False)),
                               w.sess == z3.If(owns, z3.Store(v.sess, c, False), v.sess),
                               w.pend == rebalanced(b, z3.Store(v.members[b], c, False)),
                               *v.keep(w, "members", "sess", "pend")),
        "persist_registration": z3.And(
            write != NONE, w.pend == z3.Store(v.pend, b, NO_WRITES if atomic else z3.Store(v.pend[b], c, NONE)),
            w.reg == z3.If(failed, v.reg, landed),
            w.sess == _lambda(lambda x: z3.Or(v.sess[x], z3.And(replied[x], z3.Not(failed)))),
            w.joining == _lambda(lambda x: z3.And(v.joining[x], z3.Not(replied[x]))),
            w.on == _lambda(lambda x: z3.And(v.on[x], z3.Not(z3.And(replied[x], failed)))),
            *v.keep(w, "pend", "reg", "sess", "joining", "on")),
        "cas_conflict": z3.And(w.pend == z3.If(v.leader[b], rebalanced(b, v.members[b]), v.pend)
                               if "leader-watches-layout" in fixes else w.pend == v.pend, *v.keep(w, "pend")),
    }
    elected = [z3.Not(v.held), z3.Not(v.leader[b]), w.held, w.lock == b, w.leader == z3.Store(v.leader, b, True)]
    members = z3.Store(v.members, b, v.reg)
    if fenced:  # the writes it issued under an earlier lock fail: dropped, and who waits on them is told
        dropped = _lambda(lambda x: z3.And(v.joining[x], here[x], v.pend[b][x] != NONE))
        pend = z3.Store(v.pend, b, NO_WRITES)
        on = _lambda(lambda x: z3.And(v.on[x], z3.Not(dropped[x])))
        joining = _lambda(lambda x: z3.And(v.joining[x], z3.Not(dropped[x])))
    else:
        pend, on, joining = v.pend, v.on, v.joining
    if "leader-watches-layout" in fixes:  # it rebalances at once on what it loaded, one still connected here joining
        members = z3.Store(v.members, b, _lambda(lambda x: z3.Or(v.reg[x], z3.And(on[x], v.at[x] == b))))
        pend = z3.Store(pend, b, issued_from(pend[b], v.reg, members[b], keeps, c, atomic))
    t["elect"] = z3.And(*elected, w.members == members, w.pend == pend, w.on == on, w.joining == joining,
                        *v.keep(w, "held", "lock", "leader", "members", "pend", "on", "joining"))
    for label in REBALANCES:
        t[label] = z3.And(w.pend == rebalanced(b, v.members[b]), *v.keep(w, "pend"))
    return {label: z3.And(TABLES, f) for label, f in t.items()} if atomic else t


def issued_from(old, before, after, keeps, c, atomic: bool):
    """A broker's writes ``old`` once a rebalance takes its members from ``before`` to ``after``: a
    delete for each it drops, a put for each it adds, and (``keeps``) maybe one for each it keeps;
    atomic-registrations: one write of the whole set, if anything (or, ``keeps[c]``, a kept one's
    segments) changed."""
    if atomic:
        return z3.If(z3.Or(before != after, z3.Select(keeps, c)), z3.Map(WHOLE, after), old)
    return _lambda(lambda x: z3.If(z3.And(before[x], z3.Not(after[x])), DEL, z3.If(
        z3.And(after[x], z3.Or(z3.Not(before[x]), keeps[x])), PUT, old[x])))


def sessions_durable(v: Vars):
    c = z3.Const("c", Consumer)
    return z3.ForAll([c], z3.Implies(v.sess[c], v.reg[c]))


def invariant(v: Vars):
    """``sessions-durable``, strengthened (see the module's text)."""
    x = z3.Const("x", Consumer)
    lead = v.lock
    will = z3.If(v.pend[lead][x] == PUT, True, z3.If(v.pend[lead][x] == DEL, False, v.reg[x]))
    return z3.And(sessions_durable(v), z3.ForAll([x], z3.And(
        z3.Implies(v.held, z3.And(v.members[lead][x] == will, z3.Implies(v.sess[x], v.members[lead][x]))),
        z3.Implies(v.joining[x], z3.And(v.on[x], v.members[v.at[x]][x], v.pend[v.at[x]][x] == PUT)))))


def init(v: Vars):
    b = z3.Const("b", Broker)
    return z3.And(v.reg == NOBODY, v.sess == NOBODY, z3.Not(v.held), v.on == NOBODY, v.joining == NOBODY,
                  z3.ForAll([b], z3.And(z3.Not(v.leader[b]), v.members[b] == NOBODY, v.pend[b] == NO_WRITES)))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """Each consumer's registration and session, the lock, and each broker's belief, members and writes;
    with ``step`` (the action's broker and consumer), which of them took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    (consumers, name), (brokers, bname) = universe(m, Consumer, "c"), universe(m, Broker, "b", 0)

    def those(s):
        return "{" + ", ".join(name[str(x)] for x in consumers if z3.is_true(e(s[x]))) + "}"

    def writes(k):
        return "{" + ", ".join(f"{e(v.pend[k][x])} {name[str(x)]}" for x in consumers
                               if not z3.eq(e(v.pend[k][x]), NONE)) + "}"
    lock = bname.get(str(e(v.lock)), str(e(v.lock))) if z3.is_true(e(v.held)) else "none"
    ctrls = "; ".join(f"{bname[str(x)]}: {'leader' if z3.is_true(e(v.leader[x])) else 'follower'}, members "
                      f"{those(v.members[x])}, writes {writes(x)}" for x in brokers)
    took = "" if step is None else f" (taken by {bname[str(e(step[0]))]} for {name[str(e(step[1]))]})"
    return (f"{{registered {those(v.reg)}, sessions {those(v.sess)}, waiting {those(v.joining)}, lock {lock}; "
            f"{ctrls}}}{took}")


def inductive(fixes=frozenset(), variant: str = "as-written") -> Verdict:
    """Init implies Inv, and Inv and any one action imply Inv'."""
    v, w = Vars(""), Vars("'")
    b, c = z3.Const("broker", Broker), z3.Const("consumer", Consumer)
    return induction(init(v), invariant(v), invariant(w), transitions(v, w, b, c, fixes, variant),
                     lambda m: describe(m, v), lambda m: describe(m, w, step=(b, c)))


def _row(ctrl, cs, names):
    """The controller's issued writes as one array value: one write of them all (ALL) deletes every
    consumer it does not name."""
    from pulsar_verify.models.pip468.state import ALL
    if ALL in ctrl.writes:
        row = z3.K(Consumer, DEL)
        for k, n in zip(cs, names):
            row = z3.Store(row, k, PUT if n in ctrl.writes[ALL] else DEL)
        return row
    row = NO_WRITES
    for k, n in zip(cs, names):
        if n in ctrl.writes:
            row = z3.Store(row, k, DEL if ctrl.writes[n] is None else PUT)
    return row


def concrete(v: Vars, state, brokers, loose=None, before=None, atomic: bool = False):
    """The formula fixing ``v`` to a Python model state (models/pip468/state.py); ``brokers`` are
    distinct Broker constants, one per controller, and consumers ``c1``, ``c2``, ... distinct
    Consumer constants (every other consumer unregistered, without a session or a write). With
    ``loose`` (a broker index) and ``before`` (the state before a rebalance there), that broker's
    writes may also be any the encoding's choice of changed segments gives (``atomic``: under
    atomic-registrations)."""
    from pulsar_verify.models.pip468.assignment import consumer_name
    names = [consumer_name(i) for i in range(len(state.consumers))]
    cs = [z3.Const(n, Consumer) for n in names]

    def exactly(arr, chosen):  # as one array value, so the formula stays quantifier-free
        value = NOBODY
        for k, n in zip(cs, names):
            if n in chosen:
                value = z3.Store(value, k, True)
        return arr == value
    out = [z3.Distinct(*cs) if len(cs) > 1 else z3.BoolVal(True),
           z3.Distinct(*brokers) if len(brokers) > 1 else z3.BoolVal(True),
           exactly(v.reg, set(state.registrations.keys())), exactly(v.sess, state.sessions),
           v.held == (state.lock is not None),
           exactly(v.on, {n for n, x in zip(names, state.consumers) if x.broker is not None}),
           exactly(v.joining, {n for n, x in zip(names, state.consumers) if x.joining})]
    out += [v.at[k] == brokers[x.broker] for k, x in zip(cs, state.consumers) if x.broker is not None]
    if state.lock is not None:
        out.append(v.lock == brokers[state.lock])
    for i, (k, ctrl) in enumerate(zip(brokers, state.ctrls)):
        out += [v.leader[k] == ctrl.leader, exactly(v.members[k], ctrl.members)]
        exact = v.pend[k] == _row(ctrl, cs, names)
        if i != loose:
            out.append(exact)
            continue
        old = before.ctrls[i]
        was = v.pend[k] == _row(old, cs, names)
        if atomic:  # one write of them all: as it was, or all of it now
            whole = z3.K(Consumer, DEL)
            for x, n in zip(cs, names):
                whole = z3.Store(whole, x, PUT if n in ctrl.members else DEL)
            out.append(z3.Or(exact, was, v.pend[k] == whole))
        else:  # each consumer kept may also have a put, or its write as it was
            row = NO_WRITES
            for x in cs:
                row = z3.Store(row, x, v.pend[k][x])
            options = []
            for x, n in zip(cs, names):
                mine = [_row(ctrl, [x], [n])[x]]
                if n in old.members and n in ctrl.members:
                    mine += [PUT, _row(old, [x], [n])[x]]
                options.append(z3.Or(*[v.pend[k][x] == o for o in mine]))
            out += [v.pend[k] == row, *options]
    return z3.And(*out)


REBALANCING = {"elect", "connect", "grace_expire", "cas_conflict", *REBALANCES}


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """For Python transitions ``(s, a, t)``: the formula of ``a`` must admit ``t`` from ``s`` (an
    unlisted action must leave every encoded variable as it was), and nothing else but the writes
    another choice of changed segments gives."""
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
        if "consumer" in params and params["consumer"] != "*":
            binding.append(c == z3.Const(params["consumer"], Consumer))
        step = steps.get(a.name, z3.And(*v.keep(w)))
        acting = params.get("broker", s.lock)
        loose = acting if a.name in REBALANCING and acting is not None else None
        out += [f"{a}: {problem}" for problem in agreement(
            concrete(v, s, brokers), z3.And(step, *binding), concrete(w, t, brokers),
            allowed=concrete(w, t, brokers, loose, s, "atomic-registrations" in model.fixes),
            show=lambda m: describe(m, w))]
    return out


FENCED = frozenset({"fenced-registrations"})


def _all_fixes() -> frozenset:
    from pulsar_verify.models.pip468.model import FIXES
    return frozenset(FIXES)


OBLIGATIONS = [
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(), ("as-written",), proves=DURABLE),
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(FENCED), ("fenced-registrations",), proves=DURABLE),
    Obligation("pip-468", "sessions-durable-inductive", "sessions-durable is inductive, for any number of brokers "
               "and consumers", SECTION, lambda: inductive(_all_fixes()), ("all-fixes",), proves=DURABLE),
]
