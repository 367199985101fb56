"""PIP-468 ``assignment-exclusive`` (no segment is in two consumers' persisted assignments), for any number of
brokers, consumers and segments, with the fix ``atomic-registrations``.

Brokers, consumers and segments are uninterpreted sorts. The encoding keeps the persisted registrations (each
consumer's set of segments; a deleted registration is the empty set) and each broker's issued, not yet landed
writes: one per consumer as written, or one of every registration (``atomic-registrations``). Its steps: a
rebalance on a broker issues writes from one assignment it computes, which gives each segment to at most one
consumer (the round robin of ``models/pip468/assignment.py``, here any such assignment), for the consumers whose
registration changed, keeping or dropping the writes it had issued; a write lands (as written, one consumer's;
with the fix, the whole set, replacing every registration); writes are dropped (a crash, or a fenced write that
fails). Which model step issues, lands or drops which write depends on state the encoding leaves out (layout,
members, the lock, connections), so the encoding is an abstraction: ``simulation`` checks on every reachable
state that each step of the model is one of these steps (or changes none of their variables), which keeps a
proof over them sound for the model. Writes are not fenced here: the claim holds for stale leaders' writes too.

As written the claim is not inductive: the counterexample to induction is one consumer's write landing while
another consumer's registration still holds the segment (the store's side of the explorer's finding
``segment-granted-before-revoked``). With the fix it is, strengthened: every whole write issued is
exclusive, and no write of one registration is issued.
"""
from __future__ import annotations

import z3

from .obligations import (Obligation, Verdict, distinct_changes, inductive as induction, not_simulated, one_of,
                          universe, with_fix)
from .pip468_sessions import Broker, Consumer

Segment = z3.DeclareSort("Segment")
SEGS = z3.ArraySort(Segment, z3.BoolSort())
NO_SEGS = z3.K(Segment, z3.BoolVal(False))
NO_REGS = z3.K(Consumer, NO_SEGS)
NOBODY = z3.K(Consumer, z3.BoolVal(False))
EXCLUSIVE = ("assignment-exclusive",)  # the property the inductive claim proves for any size
SECTION = ("PIP-468 Consumer Assignment: 'Each active segment is owned by exactly one consumer at any time'; "
           "Metadata Store Paths: 'ConsumerRegistration' keyed by consumerName")
FIX = "atomic-registrations"


class Vars:
    NAMES = ("reg", "one", "one_value", "whole", "whole_value")

    def __init__(self, tag: str):
        self.reg = z3.Array(f"reg{tag}", Consumer, SEGS)  # the persisted registrations
        self.one = z3.Array(f"one{tag}", Broker, z3.ArraySort(Consumer, z3.BoolSort()))  # a write of one issued
        self.one_value = z3.Array(f"one_value{tag}", Broker, z3.ArraySort(Consumer, SEGS))  # ... and its value
        self.whole = z3.Array(f"whole{tag}", Broker, z3.BoolSort())  # a write of every registration issued
        self.whole_value = z3.Array(f"whole_value{tag}", Broker, z3.ArraySort(Consumer, SEGS))  # ... its value

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


class Choice:
    """A rebalance's free choices: its ``assignment`` (consumer -> segments; a step requires it exclusive), the
    consumers whose registration ``changed`` and the issued writes it ``kept``; ``each(body)`` is the array of
    ``body(x)`` over consumers. For a proof all are free (``each`` a lambda); ``Choice.at`` restricts them to
    values at named consumers, the others unchosen (``apart``: the spare consumer is none of them)."""

    def __init__(self):
        self.assignment = z3.Array("assignment", Consumer, SEGS)
        self.changed = z3.Array("changed", Consumer, z3.BoolSort())
        self.kept = z3.Array("kept", Consumer, z3.BoolSort())

    @staticmethod
    def each(body):
        x = z3.Const("x", Consumer)
        return z3.Lambda([x], body(x))

    @classmethod
    def at(cls, named: list):
        """The choices made at ``named`` consumers only: a restriction (a step admitted with it is admitted
        with free choices) that is quantifier-free, which Z3 decides at once where a lambda can leave it
        unknown. Every other consumer has the values of one more, ``spare``, in every array."""
        spare = z3.Const("spare", Consumer)
        out = cls()

        def chain(default, value):
            array = z3.K(Consumer, default)
            for k in named:
                array = z3.Store(array, k, value(k))
            return array
        out.assignment = chain(NO_SEGS, lambda k: z3.Array(f"assignment_{k}", Segment, z3.BoolSort()))
        out.changed = chain(z3.BoolVal(False), lambda k: z3.Bool(f"changed_{k}"))
        out.kept = chain(z3.BoolVal(False), lambda k: z3.Bool(f"kept_{k}"))
        out.each = lambda body: chain(body(spare), body)
        out.apart = z3.Distinct(*named, spare)
        return out


def steps(v: Vars, w: Vars, fixes, b, c, choice: Choice | None = None) -> dict:
    """Each step from ``v`` to ``w``, for broker ``b`` and consumer ``c``, a rebalance making ``choice``."""
    ch = choice or Choice()
    kept_ones = ch.each(lambda x: z3.And(v.one[b][x], ch.kept[x]))
    if FIX in fixes:
        issue = z3.And(exclusive(ch.assignment), w.whole == z3.Store(v.whole, b, True),
                       w.whole_value == z3.Store(v.whole_value, b, ch.assignment), *v.keep(w, "whole", "whole_value"))
    else:
        issue = z3.And(exclusive(ch.assignment),
                       w.one == z3.Store(v.one, b, ch.each(lambda x: z3.Or(ch.changed[x], kept_ones[x]))),
                       w.one_value == z3.Store(v.one_value, b, ch.each(
                           lambda x: z3.If(ch.changed[x], ch.assignment[x], v.one_value[b][x]))),
                       *v.keep(w, "one", "one_value"))
    return {
        "issue": issue,
        "land_one": z3.And(v.one[b][c], w.reg == z3.Store(v.reg, c, v.one_value[b][c]),
                           w.one == z3.Store(v.one, b, z3.Store(v.one[b], c, False)), *v.keep(w, "reg", "one")),
        "land_whole": z3.And(v.whole[b], w.reg == v.whole_value[b], w.whole == z3.Store(v.whole, b, False),
                             *v.keep(w, "reg", "whole")),
        "drop": z3.And(w.one == z3.Store(v.one, b, kept_ones), z3.Implies(w.whole[b], v.whole[b]),
                       w.whole == z3.Store(v.whole, b, w.whole[b]), *v.keep(w, "one", "whole")),
    }


def exclusive(regs) -> z3.BoolRef:
    """No segment in two consumers' sets."""
    x, y, g = z3.Const("x", Consumer), z3.Const("y", Consumer), z3.Const("g", Segment)
    return z3.ForAll([x, y, g], z3.Implies(z3.And(regs[x][g], regs[y][g]), x == y))


def plain(v: Vars) -> z3.BoolRef:
    return exclusive(v.reg)


def strengthened(v: Vars) -> z3.BoolRef:
    b, x = z3.Const("b", Broker), z3.Const("x", Consumer)
    return z3.And(plain(v), z3.ForAll([b], z3.Implies(v.whole[b], exclusive(v.whole_value[b]))),
                  z3.ForAll([b, x], z3.Not(v.one[b][x])))


def init(v: Vars) -> z3.BoolRef:
    b = z3.Const("b", Broker)
    return z3.And(v.reg == NO_REGS, z3.ForAll([b], z3.And(v.one[b] == NOBODY, z3.Not(v.whole[b]))))


def inductive(fixes) -> Verdict:
    v, w = Vars(""), Vars("'")
    b, c = z3.Const("broker", Broker), z3.Const("consumer", Consumer)
    claim = strengthened if FIX in fixes else plain  # as written there is nothing to strengthen it with
    return induction(init(v), claim(v), claim(w), steps(v, w, fixes, b, c),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w, (b, c)))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """Each consumer's persisted segments and each broker's issued writes, named c1, g1, b0, ...; with
    ``step`` (the action's broker and consumer), which of them took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    (consumers, name), (segments, seg), (brokers, bname) = (universe(m, *x) for x in (
        (Consumer, "c"), (Segment, "g"), (Broker, "b", 0)))

    def segs(value):
        return "{" + ", ".join(seg[str(g)] for g in segments if z3.is_true(e(value[g]))) + "}"

    def regs(value, only=None):
        return "{" + ", ".join(f"{name[str(x)]}: {segs(value[x])}" for x in consumers
                               if only is None or z3.is_true(e(only[x]))) + "}"
    writes = "; ".join(f"{bname[str(k)]} writes {regs(v.one_value[k], v.one[k])}"
                       + (f" and all of {regs(v.whole_value[k])}" if z3.is_true(e(v.whole[k])) else "")
                       for k in brokers)
    took = "" if step is None else f" (taken by {bname[str(e(step[0]))]} for {name[str(e(step[1]))]})"
    return f"{{registered {regs(v.reg)}; {writes}}}{took}"


def _projection(s, names) -> tuple:
    """The model state's values of the encoding's variables: registrations, then per broker its writes of one
    (consumer -> segments), whether it has a whole write, and that write's value."""
    from pulsar_verify.models.pip468.state import ALL
    regs = {n: frozenset(s.registrations.get(n, ())) for n in names}
    ctrls = tuple((tuple((n, frozenset(c.writes[n] or ())) for n in names if n in c.writes), ALL in c.writes,
                   tuple((n, frozenset(c.writes[ALL].get(n, ()) if ALL in c.writes else ())) for n in names))
                  for c in s.ctrls)
    return tuple(sorted(regs.items())), ctrls


def _concrete(v: Vars, projection, cs: dict, gs: dict, bs: list) -> z3.BoolRef:
    def segs(ids):
        value = NO_SEGS
        for g in sorted(ids):
            value = z3.Store(value, gs[g], True)
        return value

    def regs(pairs):
        value = NO_REGS
        for n, ids in pairs:
            value = z3.Store(value, cs[n], segs(ids))
        return value
    registered, ctrls = projection
    out = [v.reg == regs(registered)]
    for k, (ones, has_whole, whole) in zip(bs, ctrls):
        flags = NOBODY
        for n, _ in ones:
            flags = z3.Store(flags, cs[n], True)
        out += [v.one[k] == flags, *[v.one_value[k][cs[n]] == segs(ids) for n, ids in ones],
                v.whole[k] == has_whole]
        if has_whole:
            out.append(v.whole_value[k] == regs(whole))
    return z3.And(*out)


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change: the variables' values before and after)."""
    out = []
    for s, a, t, change in distinct_changes(pairs, lambda x: _projection(x, _names(x))):
        names = _names(s)
        ids = sorted(set().union(*_segment_sets(change)))
        cs = {n: z3.Const(n, Consumer) for n in names}
        gs = {i: z3.Const(f"g{i}", Segment) for i in ids}
        bs = [z3.Const(f"B{i}", Broker) for i in range(len(s.ctrls))]
        v, w = Vars(""), Vars("'")
        b, c = z3.Const("broker", Broker), z3.Const("consumer", Consumer)
        distinct = [z3.Distinct(*xs) for xs in (list(cs.values()), list(gs.values()), bs) if len(xs) > 1]
        pre, post = _concrete(v, change[0], cs, gs, bs), _concrete(w, change[1], cs, gs, bs)
        choice = Choice.at(list(cs.values()))
        named = z3.Or(*[b == k for k in bs])  # a step of a broker the state leaves unstated could change anything
        answer = one_of([*distinct, choice.apart, named, pre, post], steps_of(v, w, model.fixes, b, c, choice).values())
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}", answer)
    return out


def _names(s) -> list:
    from pulsar_verify.models.pip468.assignment import consumer_name
    return [consumer_name(i) for i in range(len(s.consumers))]


def _segment_sets(value):
    """Every set of segment ids in a projection (or a pair of them)."""
    if isinstance(value, frozenset):
        yield value
    elif isinstance(value, tuple):
        for x in value:
            yield from _segment_sets(x)


OBLIGATIONS = [
    Obligation("pip-468", "assignment-exclusive-inductive", "assignment-exclusive is inductive, for any number of "
               "brokers, consumers and segments, with each registration written on its own", SECTION,
               lambda: inductive(frozenset()), ("as-written",), proves=EXCLUSIVE),
    Obligation("pip-468", "assignment-exclusive-inductive", "assignment-exclusive, strengthened (every whole write "
               "issued is exclusive), is inductive with the registrations written as one, for any number of brokers, "
               "consumers and segments, stale leaders' writes included", SECTION,
               lambda: inductive(frozenset({FIX})), with_fix("pip-468", FIX), proves=EXCLUSIVE),
]
