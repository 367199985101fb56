"""Z3 formulas read off the model's own Python code, where what the code reads is a few state
fields with small finite domains: one description, the model, for the explorer and the encoding.

A function of the model is run on every combination of its fields' values, on stand-in states: real
states of the model whose every other field is a tripwire, which raises when it is compared, hashed,
iterated or tested for truth. A tripwire that fires adds its field to what the function reads and the
tabulation starts again, so what a function reads is found by running it, not declared. The formula is
the table of its answers as a decision tree over those fields, built once and renamed for each step.
It is exact where each variable holds one of its field's values, which every state an encoding reaches
from its initial states does (and an enumeration sort's variable always does).

Identity tests (``x is None``) do not fire a tripwire, so each field the encoding keeps and the run did
not read is then varied over its values, and counted as read if that changes an answer. A field the
encoding does not keep, read only by identity, would be missed; the agreement check, on every state the
explorer reaches, catches that as it catches any other disagreement of encoding and model.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable

import attrs
import z3

KEPT = object()  # a step's answer for a field it leaves as it was


class Unread(Exception):
    """A stand-in's field outside what is being tabulated was read."""

    def __init__(self, state: int, field: str):
        super().__init__(f"state {state} field {field}")
        self.key = (state, field)


class Tripwire:
    """A field's value in a stand-in state: any use of it but identity raises ``Unread``."""

    __slots__ = ("key",)

    def __init__(self, state: int, field: str):
        self.key = (state, field)

    def _fire(self, *_):
        raise Unread(*self.key)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __hash__ = __len__ = __iter__ = _fire
    __getitem__ = __contains__ = __getattr__ = __add__ = __radd__ = __sub__ = __rsub__ = __index__ = _fire


def tripwired(cls, **given):
    """An ``attrs`` value of ``cls`` with the ``given`` fields; every other field is passed through
    ``given["wire"]`` (a field name -> its value, a tripwire where it is not tabulated)."""
    wire = given.pop("wire")
    return cls(**{name: given[name] if name in given else wire(name) for name in _names(cls)})


@lru_cache(maxsize=None)
def _names(cls) -> tuple:
    return tuple(f.name for f in attrs.fields(cls))


class Table:
    """The fields an encoding can tabulate over: ``fields`` maps a field's name to its values, each a
    Python value -> the Z3 value its variable holds for it; ``terms(v, name)`` is the field's variable in
    ``v``; ``stand_in(value)`` builds a state of the model from ``value(name)``, a field's value."""

    def __init__(self, fields: dict, terms: Callable, stand_in: Callable):
        self.fields, self.terms, self.stand_in = fields, terms, stand_in
        self.tables: dict = {}  # key -> (the fields read, combination -> answer)
        self.formulas: dict = {}  # (kind, key) -> (the states they were built over, name -> formula)

    def table(self, fn: Callable, n: int, key) -> tuple:
        if key is None or key not in self.tables:
            read = self.footprint(fn, n)
            self.tables[key] = read, self.run(fn, read, n)
        return self.tables[key]

    def built(self, kind: str, key, states: tuple, build: Callable) -> dict:
        """``build(states)`` (name -> formula over ``states``), built once per ``key`` and then renamed."""
        if key is None:
            return build(states)
        if (kind, key) not in self.formulas:
            self.formulas[kind, key] = states, build(states)
        first, out = self.formulas[kind, key]
        pairs = [(self.terms(a, name), self.terms(b, name)) for a, b in zip(first, states) for name in self.fields]
        return {k: z3.substitute(f, *pairs) for k, f in out.items()}

    def tree(self, read: list, leaves: dict, states: tuple):
        """The formula that is ``leaves[combo]`` where the fields ``read`` hold ``combo``: a decision tree,
        a field at a time, its last value the default (and what a combination not in ``leaves`` gets)."""
        if not read:
            return next(iter(leaves.values()))
        (i, name), branches = read[0], {}
        for combo, leaf in leaves.items():
            branches.setdefault(combo[0], {})[combo[1:]] = leaf
        subtrees = [(x, self.tree(read[1:], b, states)) for x, b in branches.items()]
        out = subtrees[-1][1]
        for x, sub in reversed(subtrees[:-1]):
            if not z3.eq(sub, out):
                out = z3.If(self.terms(states[i], name) == self.fields[name][x], sub, out)
        return out

    def answers(self, fn: Callable, *states, key=None) -> dict:
        """``fn``'s answer -> the formula over ``states`` (variables of one state each; ``fn`` takes one
        stand-in per state) under which ``fn`` gives it. An answer must be hashable. ``key`` names ``fn``
        for its table and formulas to be kept (an encoding asks for the same function at every step)."""
        read, table = self.table(fn, len(states), key)
        return self.built("answers", key, states, lambda states: {
            answer: z3.simplify(self.tree(read, {c: z3.BoolVal(a == answer) for c, a in table.items()}, states))
            for answer in set(table.values())})

    def run(self, fn: Callable, read: list, n: int) -> dict:
        """``fn``'s answer for each combination of the values of the fields ``read`` ((state, field)
        pairs); ``Unread`` if it reads another."""
        out = {}
        for combo in itertools.product(*(self.fields[name] for _, name in read)):
            given = dict(zip(read, combo))
            out[combo] = fn(*[self.stand_in(lambda name, i=i: given.get((i, name), Tripwire(i, name)))
                              for i in range(n)])
            hash(out[combo])  # an answer holding a stand-in's field reads it
        return out

    def footprint(self, fn: Callable, n: int) -> list:
        """The fields ``fn`` reads: those whose tripwire fires, then any other whose value changes an
        answer (a field read only by identity, ``is None``)."""
        read: list = []
        while True:
            try:
                self.run(fn, read, n)
            except Unread as e:
                if e.key in read or e.key[1] not in self.fields:
                    raise ValueError(f"{getattr(fn, '__qualname__', fn)} reads field {e.key[1]} of state {e.key[0]}, "
                                     "which the encoding does not tabulate") from None
                read.append(e.key)
                continue
            missed = [key for key in itertools.product(range(n), self.fields)
                      if key not in read and self.depends(fn, read, key, n)]
            if not missed:
                return read
            read.append(missed[0])

    def depends(self, fn: Callable, read: list, key: tuple, n: int) -> bool:
        try:
            table = self.run(fn, read + [key], n)
        except Unread:  # reading another field once ``key`` is given: ``key`` is read
            return True
        answers: dict = {}
        for combo, answer in table.items():
            answers.setdefault(combo[:-1], set()).add(answer)
        return any(len(a) > 1 for a in answers.values())

    def holds(self, fn: Callable, *states, key=None) -> z3.BoolRef:
        """Where the predicate ``fn`` holds."""
        return self.answers(lambda *s: bool(fn(*s)), *states, key=key).get(True, z3.BoolVal(False))

    def enabled(self, actions: Callable, label: Callable, v, key=None, labels=()) -> dict:
        """Label -> where ``actions`` (a stand-in -> the model's actions there) yields one with that label:
        each label it ever yields, and each in ``labels`` (false where it never does)."""
        answers = self.answers(lambda s: frozenset(label(a) for a in actions(s)), v, key=key)
        return {x: z3.simplify(z3.Or(False, *[f for names, f in answers.items() if x in names]))
                for x in sorted(set(labels).union(*answers))}

    def effect(self, fn: Callable, getters: dict, v, key=None) -> dict:
        """The changes (variable -> new value) of the step ``fn`` takes from a stand-in of ``v`` (None
        where it is not enabled) to the fields ``getters`` names (a field -> how to read it from a state),
        each where some step changes it. A field the step leaves as it was (the same object) is kept."""
        def step(s):
            t = fn(s)
            return None if t is None else tuple(KEPT if get(t) is get(s) else get(t) for get in getters.values())
        read, table = self.table(step, 1, key)

        def build(states):
            out = {}
            for j, name in enumerate(getters):
                taken = {c: a[j] for c, a in table.items() if a is not None}
                if set(taken.values()) <= {KEPT}:
                    continue
                out[name] = self.tree(read, {c: self.terms(states[0], name) if x is KEPT else _z3(self.fields[name][x])
                                             for c, x in taken.items()}, states)
            return out
        return self.built("effect", key, (v,), build)


def taking(actions: Callable, label: Callable, chosen: str, apply: Callable) -> Callable:
    """A stand-in -> the state ``apply(s, a)`` for the action ``a`` labelled ``chosen`` among ``actions(s)``
    (None where there is none): a step of the model to tabulate with ``Table.effect``."""
    return lambda s: next((apply(s, a) for a in actions(s) if label(a) == chosen), None)


def _z3(x):
    return z3.BoolVal(x) if isinstance(x, bool) else z3.IntVal(x) if isinstance(x, int) else x
