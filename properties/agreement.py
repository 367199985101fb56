"""Agreement of a step-for-step encoding with its Python model on every reachable state.

Each formula of an encoding (an action's guard and changes, a safety property's ``breaks``, a
leads-to's ``stuck``) is compiled once into a Python function of its variables' values
(``compiled``), so a state's successors under the encoding are computed rather than searched for.
For every state the model reaches at a bound set (expanded as the explorer expands them: a state
that breaks an invariant is not), the encoding must
- enable exactly the actions the model takes there (by the encoding's label of each);
- reach each successor the model reaches, on every variable the encoding keeps (``concrete``
  states which those are: the encoding is the model projected onto them);
- agree with the model on each safety property over each of those steps, and on each leads-to's
  trigger in the state.
A disagreement names the state (its depth and the model's rendering), the action and the variable.
"""
from __future__ import annotations

import operator
from typing import Callable

import attrs
import z3

from pulsar_verify import registry

from .obligations import Pins

Env = dict  # a variable's name (as Z3 knows it) -> its value, a Python int or bool
PINS = Pins()

_NARY = {z3.Z3_OP_AND: all, z3.Z3_OP_OR: any}
_BINARY = {z3.Z3_OP_LE: operator.le, z3.Z3_OP_LT: operator.lt, z3.Z3_OP_GE: operator.ge, z3.Z3_OP_GT: operator.gt,
           z3.Z3_OP_SUB: operator.sub, z3.Z3_OP_MOD: operator.mod, z3.Z3_OP_IDIV: operator.floordiv,
           z3.Z3_OP_IMPLIES: lambda a, b: (not a) or b, z3.Z3_OP_EQ: operator.eq}


def compiled(e, cache: dict) -> Callable[[Env], object]:
    """``e`` (a Z3 term over named Int and Bool constants, or a Python int or bool) as a function of
    an environment: one Python expression (``_source``), or, for a term too large or deep for that,
    a function per subterm (``cache`` shares both among common subterms)."""
    if not z3.is_expr(e):
        return lambda env: e
    try:
        return eval(f"lambda env: {_source(e, cache)}")  # noqa: S307 (the term's own operators and names)
    except (_TooLong, RecursionError, SyntaxError):
        return _function(e, cache)


class _TooLong(Exception):
    """A term whose source would exceed ``_LONGEST`` characters (a shared subterm repeated in it)."""


_LONGEST = 200_000
_INFIX = {z3.Z3_OP_LE: "<=", z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=", z3.Z3_OP_GT: ">", z3.Z3_OP_SUB: "-",
          z3.Z3_OP_MOD: "%", z3.Z3_OP_IDIV: "//", z3.Z3_OP_EQ: "==", z3.Z3_OP_ADD: "+", z3.Z3_OP_MUL: "*",
          z3.Z3_OP_AND: "and", z3.Z3_OP_OR: "or"}


def _source(e, cache: dict) -> str:
    """``e`` as Python source over ``env``, every subterm parenthesized."""
    key = ("source", e.get_id())
    if key in cache:
        return cache[key][1]
    if z3.is_int_value(e):
        text = str(e.as_long())
    elif z3.is_true(e) or z3.is_false(e):
        text = str(z3.is_true(e))
    else:
        kind = e.decl().kind()
        if kind == z3.Z3_OP_UNINTERPRETED and e.num_args() == 0:
            text = f"env[{e.decl().name()!r}]"
        else:
            args = [_source(a, cache) for a in e.children()]
            if kind == z3.Z3_OP_NOT:
                text = f"(not {args[0]})"
            elif kind == z3.Z3_OP_ITE:
                text = f"({args[1]} if {args[0]} else {args[2]})"
            elif kind == z3.Z3_OP_IMPLIES:
                text = f"((not {args[0]}) or {args[1]})"
            elif kind == z3.Z3_OP_DISTINCT:
                text = f"(len({{{', '.join(args)}}}) == {len(args)})"
            elif kind == z3.Z3_OP_UMINUS:
                text = f"(-{args[0]})"
            elif kind in _INFIX and args and (len(args) == 2 or kind in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_ADD,
                                                                          z3.Z3_OP_MUL)):
                text = "(" + f" {_INFIX[kind]} ".join(args) + ")"
            else:
                raise NotImplementedError(f"agreement: no evaluation of {e.decl()} (in {e})")
    if len(text) > _LONGEST:
        raise _TooLong
    cache[key] = (e, text)
    return text


def _function(e, cache: dict) -> Callable[[Env], object]:
    key = e.get_id()  # unique while the term lives, so the cache holds the term too
    if key not in cache:
        cache[key] = (e, _compile(e, cache))
    return cache[key][1]


def _compile(e, cache: dict) -> Callable[[Env], object]:
    if z3.is_int_value(e):
        n = e.as_long()
        return lambda env: n
    if z3.is_true(e) or z3.is_false(e):
        b = z3.is_true(e)
        return lambda env: b
    kind = e.decl().kind()
    if kind == z3.Z3_OP_UNINTERPRETED and e.num_args() == 0:
        name = e.decl().name()
        return lambda env: env[name]
    args = [_function(a, cache) for a in e.children()]
    if kind in _NARY:
        fold = _NARY[kind]
        return lambda env: fold(a(env) for a in args)
    if kind == z3.Z3_OP_NOT:
        return lambda env: not args[0](env)
    if kind == z3.Z3_OP_ITE:
        c, a, b = args
        return lambda env: a(env) if c(env) else b(env)
    if kind == z3.Z3_OP_DISTINCT:
        return lambda env: len({a(env) for a in args}) == len(args)
    if kind == z3.Z3_OP_ADD:
        return lambda env: sum(a(env) for a in args)
    if kind == z3.Z3_OP_UMINUS:
        return lambda env: -args[0](env)
    if kind == z3.Z3_OP_MUL:
        def product(env):
            out = 1
            for a in args:
                out *= a(env)
            return out
        return product
    if kind in _BINARY and len(args) == 2:
        op, (a, b) = _BINARY[kind], args
        return lambda env: op(a(env), b(env))
    raise NotImplementedError(f"agreement: no evaluation of {e.decl()} (in {e})")


@attrs.frozen
class Agreement:
    model: str
    variant: str
    preset: str
    states: int  # states compared
    steps: int  # the model's transitions compared
    problems: tuple  # the first disagreements found, each naming its state, action and variable
    disagreements: int  # how many in all


class _Step(dict):
    """A state's values, and its successor's (``post``) under the next state's names, read from ``post`` when
    a formula of the step asks for them."""

    __slots__ = ("post", "unprimed")

    def __missing__(self, name: str):
        return self.post[self.unprimed[name]]


class Compiled:
    """An encoding's formulas, compiled once."""

    def __init__(self, enc):
        self.enc = enc
        self.v, self.w = enc.vars(""), enc.vars("'")
        self.cache: dict = {}
        self.names = {k: (self.v[k].decl().name(), self.w[k].decl().name()) for k in self.v.vars}
        self.unprimed = {w: v for v, w in self.names.values()}  # a variable's name in ``w`` -> its name in ``v``
        self.actions = {label: (compiled(guard, self.cache), {k: compiled(x, self.cache) for k, x in changes.items()})
                        for label, (guard, changes) in enc.actions(self.v).items()}
        self._breaks: dict = {}
        self.stuck = {p: compiled(enc.stuck(p, self.v), self.cache) for p in enc.liveness}

    def successors(self, env: Env) -> dict:
        """Label -> the variables its step changes and their new values (named as ``v``'s), for each enabled
        action: the successor is ``env`` updated with them."""
        return {label: {self.names[k][0]: x(env) for k, x in changes.items()}
                for label, (guard, changes) in self.actions.items() if guard(env)}

    def breaks(self, prop: str, label: str) -> Callable[[Env], object]:
        if (prop, label) not in self._breaks:
            self._breaks[prop, label] = compiled(self.enc.breaks(prop, self.v, label, self.w), self.cache)
        return self._breaks[prop, label]


def reachable(model) -> list:
    """(depth, state, its transitions) of every state the model reaches, breadth first; a state that breaks an
    invariant is expanded like any other, as the explorer does."""
    seen = set(model.init_states())
    out, frontier, depth = [], list(seen), 0
    while frontier:
        nxt = []
        for s in frontier:
            transitions = list(model.successors(s))
            out.append((depth, s, transitions))
            for _, t in transitions:
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier, depth = nxt, depth + 1
    return out


def check(encoding_class, variant: str, preset: str, show: int = 5) -> Agreement:
    """The encoding of ``variant`` at ``preset`` against the model on every state it reaches there."""
    model = registry.build(encoding_class.model, variant, preset=preset)
    enc = encoding_class(model.config)
    f = Compiled(enc)
    props = {p.id: p for p in model.props}
    problems, count, steps = [], 0, 0

    def say(depth, s, what):
        nonlocal count
        count += 1
        if len(problems) < show:
            problems.append(f"{what}; in the state at depth {depth}: {s}")

    envs: dict = {}

    def env_of(s) -> Env:  # a state's values, read once
        if s not in envs:
            envs[s] = enc.concrete(PINS, s)
        return envs[s]

    states = reachable(model)
    for depth, s, theirs in states:
        env = env_of(s)
        ours = f.successors(env)
        steps += len(theirs)
        for label in sorted(set(ours) - {enc.label(a) for a, _ in theirs}):
            say(depth, s, f"{label} is enabled in the encoding only")
        for name in enc.liveness:
            trigger = props[name].trigger
            expected = trigger is None or bool(trigger(model, s))
            if bool(f.stuck[name](env)) != expected:
                say(depth, s, f"the trigger of {name} is {expected} in the model, not in the encoding")
        for a, t in theirs:
            label = enc.label(a)
            if label not in ours:
                say(depth, s, f"{a}: {label} is not enabled in the encoding")
                continue
            post, expected = env_of(t), {**env, **ours[label]}
            if post != expected:
                for var in sorted(k for k in post if post[k] != expected.get(k)):
                    say(depth, s, f"{a}: {var} is {post[var]} in the model, {expected.get(var)} in the encoding")
            both = _Step(env)
            both.post, both.unprimed = post, f.unprimed
            for name in enc.properties:
                p = props[name]
                fails = not (p.check(model, t) if p.kind == "invariant" else p.check(model, s, a, t))
                if bool(f.breaks(name, label)(both)) != fails:
                    say(depth, s, f"{a}: {name} {'fails' if fails else 'holds'} in the model, not in the encoding")
    return Agreement(encoding_class.model, variant, preset, len(states), steps, tuple(problems), count)


def cases(encoding_class) -> tuple[list, dict]:
    """The model's (variant, in-process bound set) pairs the encoding covers, and those it does not,
    each with the encoding's reason (most encode a few actors; some leave a mutant out)."""
    cls = registry.model_class(encoding_class.model)
    covered, not_covered = [], {}
    for preset in cls.in_process_presets():
        for variant in cls.variant_names():
            try:
                encoding_class.at(variant, preset)
            except ValueError as exc:
                not_covered[variant, preset] = str(exc)
            else:
                covered.append((variant, preset))
    return covered, not_covered
