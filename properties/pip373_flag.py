"""PIP-373 ``__contains_txn_messages``: a topic that holds a transactional entry never skips the
transaction buffer's rebuild (``txn-topic-never-skips``), for every upgrade case at once.

The encoding keeps what the skip decision reads and what writes it: whether the log holds a
transactional entry, the persisted property (value, and whether the broker wrote it), the
write queued in broker memory, and whether the buffer is loaded. Each action of
``models/pip373`` that changes them is a transition formula; the others are stutters. The
initial states are the five upgrade cases of "Upgrade" with any pre-upgrade log.

The property's logic is not written here: which load the broker takes, when the property is set,
what the property's write and its request change, and what a first transactional append queues
are read off the model's own functions (``tabulated``: run on every value of the fields they read), and
so is the claim, from the model's check of ``txn-topic-never-skips``. What is written here is the
abstraction (a log is whether it holds a transactional entry), what a rebuild and a crash leave, the
initial states, and the claim's strengthening.

As written, the claim is not inductive: the counterexample to induction is a crash between
the first transactional append and the property write (the explorer's finding
``crash-before-flag-skips-rebuild``), and a bounded search reaches a skip over a transactional
entry. With ``persist-before-append`` alone, an initial state breaks it (a user's ``false``
before the upgrade); with ``confirm-unmarked`` alone, the crash of the design as written; with both
fixes the strengthened claim is inductive.
"""
from __future__ import annotations

from functools import lru_cache
from operator import attrgetter

import z3

from pulsar_verify.model import act
from pulsar_verify.models.pip373.model import APPLY, FIXES as MODEL_FIXES
from pulsar_verify.models.v4txn.state import DATA, Buffer, State
from pulsar_verify.values import replace

from .obligations import (PROVED, VIOLATED, Obligation, Verdict, agreement, fixes_of, inductive as induction,
                          shortest_run)
from .tabulated import Table, taking, tripwired

Value, (ABSENT, TRUE, FALSE, JUNK) = z3.EnumSort("FlagValue", ("absent", "true", "false", "junk"))
Queued, (Q_NONE, Q_TRUE, Q_FALSE) = z3.EnumSort("Queued", ("none", "true", "false"))
VALUE = {"absent": ABSENT, "true": TRUE, "false": FALSE, "junk": JUNK}
QUEUED = {None: Q_NONE, "true": Q_TRUE, "false": Q_FALSE}
BOOL = {False: False, True: True}
SECTION = "PIP-373: 'set to true when the first TXN message is publishing'; 'skip ... if the property is false'; Upgrade"
FIXES = tuple(MODEL_FIXES)
NEVER_SKIPS = ("txn-topic-never-skips",)  # the property the inductive claims prove for any log
# what this encoding keeps, as the model's fields: the log (one holding a transactional entry or none), the
# property, the queued write, the buffer loaded; and the variable each is
FIELDS = {"log": {(): False, ((DATA, 1),): True}, "value": VALUE, "by_broker": BOOL, "flag": QUEUED, "ready": BOOL}
VARIABLE = {"log": "has_txn", "flag": "queued"}
# how a step's result is read back, for the fields a step of the model writes
WRITES = {"value": lambda s: s.prop[0], "by_broker": lambda s: s.prop[1], "flag": lambda s: s.buffers[0].flag,
          "ready": lambda s: s.buffers[0].ready}
NAME = attrgetter("name")


class Vars:
    def __init__(self, tag: str):
        self.has_txn = z3.Bool(f"has_txn{tag}")  # the log holds a transactional entry
        self.value = z3.Const(f"value{tag}", Value)  # the persisted property
        self.by_broker = z3.Bool(f"by_broker{tag}")  # ... written by the broker
        self.queued = z3.Const(f"queued{tag}", Queued)  # a property write queued in broker memory
        self.ready = z3.Bool(f"ready{tag}")  # the buffer is loaded

    def same(self, other, *keep) -> list:
        return [getattr(other, k) == getattr(self, k) for k in ("has_txn", "value", "by_broker", "queued", "ready")
                if k not in keep]


def stand_in(value):
    """A state of ``models/pip373`` whose log, property, queued write, buffer readiness and crashes are
    ``value``'s (a field's name -> its value, or its tripwire): what the PIP-373 encodings read the model on."""
    buffer = tripwired(Buffer, ready=value("ready"), flag=value("flag"), wire=value)
    return tripwired(State, prop=(value("value"), value("by_broker")), crashes=value("crashes"),
                     logs=(value("log"),), buffers=(buffer,), wire=value)


@lru_cache(maxsize=None)
def read_off(fixes: tuple):
    """The model with ``fixes`` (its variant found by its fix set), and the table that reads it."""
    from pulsar_verify import registry
    cls = registry.model_class("pip-373")
    variant = next(n for n in cls.variant_names() if fixes_of("pip-373", n) == frozenset(fixes))
    return registry.build("pip-373", variant), Table(FIELDS, lambda v, name: getattr(v, VARIABLE.get(name, name)),
                                                     stand_in)


def flag_set(v: Vars, fixes):
    """``Pip373.flag_set``."""
    m, table = read_off(tuple(fixes))
    return table.holds(m.flag_set, v, key="flag_set")


def loads(v: Vars, fixes) -> dict:
    """Which load ``Pip373.loads`` takes: label -> where."""
    m, table = read_off(tuple(fixes))
    return table.enabled(lambda s: m.loads(s, 0), NAME, v, key="loads", labels=m.load_labels())


def skippable(v: Vars, fixes):
    """A load now would skip the rebuild."""
    return loads(v, fixes)["load_skip"]


def init(v: Vars, upgrades=True):
    """A new topic (false, by the broker, empty log) and, with ``upgrades``, the four upgrade
    cases: a property absent, false, true or not a boolean, set before the upgrade, any log."""
    new_topic = z3.And(v.value == FALSE, v.by_broker, z3.Not(v.has_txn))
    cases = z3.Or(new_topic, z3.Not(v.by_broker)) if upgrades else new_topic
    return z3.And(cases, v.queued == Q_NONE, z3.Not(v.ready))


def transitions(v: Vars, w: Vars, fixes) -> dict:
    """Read off the model: which load, the load that skips, the property's write (``flag_actions``), the
    append's guard (``may_append``) and what it queues (``on_txn_append``), the request of the write. What a
    rebuild or a confirming scan leaves, and a crash, are written here (a rebuild reads the whole log)."""
    m, table = read_off(tuple(fixes))

    def step(guard, changes: dict):
        return z3.And(guard, *[getattr(w, VARIABLE.get(k, k)) == changes.get(k, getattr(v, VARIABLE.get(k, k)))
                               for k in FIELDS])

    def applied(name: str, **params):
        return lambda s: APPLY[name](m, s, act(name, topic=0, **params))
    unloaded, load, may = z3.Not(v.ready), loads(v, fixes), table.holds(m.may_append, v, key="may_append")
    persist = taking(m.flag_actions, NAME, "persist_flag", lambda s, a: APPLY[a.name](m, s, a))
    written = table.enabled(m.flag_actions, NAME, v, key="flag_actions", labels=["persist_flag"])["persist_flag"]
    return {
        "crash": z3.And(z3.Not(w.ready), w.queued == Q_NONE, *v.same(w, "ready", "queued")),
        "persist_flag": step(written, table.effect(persist, WRITES, v, key="persist_flag")),
        "load_skip": step(z3.And(unloaded, load["load_skip"]),
                          table.effect(applied("load_skip"), WRITES, v, key="load_skip")),
        "load_rebuild": step(z3.And(unloaded, load["load_rebuild"]), {"ready": True}),
        "load_confirm": step(z3.And(unloaded, load["load_confirm"]),
                             {"ready": True, "flag": z3.If(v.has_txn, Q_TRUE, Q_FALSE)}),
        "append": step(z3.And(v.ready, may), {
            **table.effect(lambda s: replace(s, buffers=(m.on_txn_append(s, 0, s.buffers[0]),)), WRITES, v,
                           key="on_append"), "log": True}),
        "request_flag": step(z3.And(v.ready, z3.Not(may), table.holds(m.asks_flag, v, key="asks_flag")),
                             table.effect(applied("request_flag", txn=1), WRITES, v, key="request_flag")),
    }


def safe(v: Vars, fixes):
    """No load from here breaks ``txn-topic-never-skips``: an unloaded topic whose load would skip, and
    the model's own check of that step (``invariants/pip373``) fails."""
    m, table = read_off(tuple(fixes))
    prop = next(p for p in m.props if p.id == NEVER_SKIPS[0])
    skip = act("load_skip", topic=0)
    broken = table.holds(lambda s, t: not prop.check(m, s, skip, t), v, v, key=NEVER_SKIPS)
    return z3.Not(z3.And(z3.Not(v.ready), skippable(v, fixes), broken))


def invariant(v: Vars, fixes):
    """The claim; with the fix that persists before appending, strengthened: a topic with a txn
    entry is never skippable and never has ``false`` queued, and ``false`` is queued only where
    an append must wait for the property."""
    if "persist-before-append" in fixes:
        return z3.And(z3.Implies(v.has_txn, z3.And(z3.Not(skippable(v, fixes)), v.queued != Q_FALSE)),
                      z3.Implies(v.queued == Q_FALSE, z3.And(v.value != JUNK, z3.Not(flag_set(v, fixes)))))
    return z3.And(safe(v, fixes), z3.Implies(v.has_txn, v.queued != Q_FALSE))


def describe(m, v: Vars) -> str:
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    return (f"{{log has txn entry={e(v.has_txn)}, property={e(v.value)} (by broker={e(v.by_broker)}), "
            f"queued={e(v.queued)}, loaded={e(v.ready)}}}")


def inductive(fixes, upgrades=True) -> Verdict:
    v, w = Vars(""), Vars("'")
    return induction(init(v, upgrades), invariant(v, fixes), invariant(w, fixes), transitions(v, w, fixes),
                     lambda m: describe(m, v), lambda m: describe(m, w))


def bounded(fixes, k: int = 6, upgrades=True) -> Verdict:
    states = [Vars(f"@{i}") for i in range(k + 1)]
    solver = z3.Solver()
    solver.add(init(states[0], upgrades))
    found = shortest_run(solver, states, lambda i: transitions(states[i], states[i + 1], fixes),
                         lambda v: z3.Not(safe(v, fixes)))
    if found is None:
        return Verdict(PROVED, f"no violation within {k} steps")
    m, labels = found
    run = "".join(f" --{label}--> {describe(m, states[j + 1])}" for j, label in enumerate(labels))
    return Verdict(VIOLATED, f"reachable in {len(labels)} steps: {describe(m, states[0])}{run}")


def concrete(v: Vars, state) -> z3.BoolRef:
    """``v`` fixed to a Python pip-373 state."""
    from pulsar_verify.models.pip373.model import holds_txn_entry
    b = state.buffers[0]
    return z3.And(v.has_txn == holds_txn_entry(state.logs[0]), v.value == VALUE[state.prop[0]],
                  v.by_broker == bool(state.prop[1]), v.queued == QUEUED[b.flag], v.ready == bool(b.ready))


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """As in ``pip477_registry.disagreements``: each Python transition is admitted by its action's
    formula (an unlisted action leaves every encoded variable alone), and nothing else is."""
    v, w = Vars(""), Vars("'")
    steps = transitions_of(v, w, model.fixes)
    return [f"{a}: {problem}" for s, a, t in pairs
            for problem in agreement(concrete(v, s), steps.get(a.name, z3.And(*v.same(w))), concrete(w, t),
                                     show=lambda m: describe(m, w))]


OBLIGATIONS = [
    Obligation("pip-373", "never-skips-inductive-new-topic", "txn-topic-never-skips is inductive on a new topic",
               SECTION, lambda: inductive((), upgrades=False), ("as-written",)),
    Obligation("pip-373", "never-skips-bounded-new-topic", "No run of up to 6 steps from a new topic skips the "
               "rebuild over a txn entry", SECTION, lambda: bounded((), upgrades=False), ("as-written",)),
    Obligation("pip-373", "never-skips-inductive", "txn-topic-never-skips is inductive over every upgrade case",
               SECTION, lambda: inductive(()), ("as-written",), proves=NEVER_SKIPS),
    Obligation("pip-373", "never-skips-inductive-new-topic", "txn-topic-never-skips is inductive on a new topic",
               SECTION, lambda: inductive(("persist-before-append",), upgrades=False), ("persist-before-append",)),
    Obligation("pip-373", "never-skips-inductive", "txn-topic-never-skips is inductive over every upgrade case",
               SECTION, lambda: inductive(("persist-before-append",)), ("persist-before-append",),
               proves=NEVER_SKIPS),
    Obligation("pip-373", "never-skips-inductive", "txn-topic-never-skips is inductive over every upgrade case "
               "with an unmarked topic confirmed (and the property still written after the append)", SECTION,
               lambda: inductive(("confirm-unmarked",)), ("confirm-unmarked",), proves=NEVER_SKIPS),
    Obligation("pip-373", "never-skips-inductive", "txn-topic-never-skips, strengthened, is inductive over every "
               "upgrade case", SECTION, lambda: inductive(FIXES), ("all-fixes",), proves=NEVER_SKIPS),
]
