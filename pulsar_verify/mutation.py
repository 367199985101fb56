"""Mutation testing of the models: does the property suite notice the slips an implementer makes?

A mutant is one small change to one model module (never to the properties): a comparison off
by one or negated, a guard dropped or always taken, ``and`` for ``or``, an update skipped (a
field left out of a ``replace``; in a crash, a field it resets left as it was: memory that survives
the crash), a version not bumped (``x + 1`` left as ``x``), a call that delivers or records something
removed, an entry, record or message appended twice, a boolean answer inverted; and the mistakes of
distributed code beyond one token: two updates of a step in the other order (its effects reordered;
never a name read before it is bound, which only crashes), and a read of the state as the step received
it after the step updated it (a stale copy). Mutants are enumerated from
the module's syntax tree in a fixed order and named by file, enclosing function, operator and a
digest of the change, so a name stays valid while the code around it moves. Left alone:
- code that selects a variant (``m.fixes``, ``m.config.variant``), the switchboard of the
  deliberate variants, and the code a ``mutant:`` variant alone runs (no run of the plan takes it);
- code that spends the model's bounds (``_spends_bounds``);
- a null or membership check guarding the dereference next to it (``x is None or x.phase``,
  ``k in d and d[k]``, a comprehension's ``if h is not None`` for its ``h[1]``): negated, dropped
  or turned into the other connective, it dereferences the null or the missing key it has just
  found, a crash (an NPE in the broker) on first use, which shows the slip without any property and
  is not the kind of slip the harness measures;
- declarations (``SKIP_FUNCTIONS``): a message schema changed is a compile error, not a slip;
- a target's predicate (``@PROPERTIES.target``): a question a bug report asks, which no run of the
  plan checks.

Each mutant is run in a fresh interpreter that imports the mutated module in place of the
original, at the plan's runs (bound set, variant, safety or liveness), cheapest first. It is
*killed* as soon as a run's verdicts differ from the unmutated model's: a property violated that
was not, or no longer violated, or with another shortest counterexample length. The search of a
run stops at the first level that decides this. A run of the unmutated model that never reaches the
statement holding the change (the baseline runs with a mark there) cannot differ, and is skipped;
a mutant no run reaches is *not-reached* at these bounds. A mutant whose model raises in a run,
and that no other run kills by a verdict, is *killed-by-exception*, counted apart: a crash shows
the mistake, not that a property notices it. One that leaves every verdict unchanged *survived*;
when it also leaves every run's counts (states, transitions, actions taken) unchanged, the change
is not exercised at these bounds (``exercised`` in its record).
A survivor the model's maintainers have examined is listed in ``tests/mutation/accepted.toml``
as ``equivalent`` (no behaviour can differ, with the argument) or ``accepted`` (with the reason
no property is added), and the score is killed / (mutants - equivalent).
"""
from __future__ import annotations

import ast
import copy
import importlib.abc
import importlib.util
import json
import multiprocessing
import os
import sys
import time
import tomllib
import traceback
from hashlib import blake2b
from math import comb
from pathlib import Path
from typing import Callable, Iterator

import attrs

from . import registry
from .explorer import Explorer
from .outdir import write_text

ROOT = Path(__file__).resolve().parent.parent
ACCEPTED = ROOT / "tests" / "mutation" / "accepted.toml"
SCORES = ROOT / "tests" / "mutation" / "scores.json"  # the last full run's score per model: the floor
PER_MODEL = 100  # mutants drawn per model
FLOOR_CONFIDENCE = 0.01  # a score is below its floor when a draw this low has less than 1% chance at the floor's rate
SKIP_FILES = {"__init__.py", "symmetry.py"}  # symmetry.py: the reduction, checked by tests/test_symmetry.py
# the checker's bookkeeping (what a variant declares it can fire, and pip-373's reasoning for it; what a step hands
# or answers, which the declaration tests read), and the PIP's protobuf schema as written (models/pip477/proto.py)
SKIP_FUNCTIONS = {"action_names", "flag_values", "canonicalize", "is_terminal", "handed", "answered", "__repr__",
                  "__str__", "_declare_schema"}
SWITCHBOARD = ("fixes", "variant")  # attributes that select a variant: not protocol logic

# -- the operators ---------------------------------------------------------------------------------

_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_REPLACERS = {"replace", "evolve", "put"}
SWAP = "swap-statements"  # two updates of a step in the other order: its effects reordered
STALE = "stale-read"  # a read of the state as the step received it, after the step updated it: a stale copy
STALE_NAME = "_state_as_received"


def _switchboard(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in SWITCHBOARD for n in ast.walk(node)) or _mutant_only(node)


def _mutant_only(test: ast.AST) -> bool:
    """A condition that names a ``mutant:`` variant."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("mutant:")
               for n in ast.walk(test))


def _is_target(decorator: ast.AST) -> bool:
    """``@PROPERTIES.target(...)``: a target's declaration."""
    return isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
        and decorator.func.attr == "target"


def _mutant_branch(node: ast.AST) -> str | None:
    """The branch (``body`` or ``orelse``) of an ``if`` that only a ``mutant:`` variant takes: the one
    ``variant == "mutant:..."`` selects (no run of the plan takes it)."""
    test = getattr(node, "test", None)
    if isinstance(node, (ast.If, ast.IfExp)) and isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and _mutant_only(test):
        return "body" if isinstance(test.ops[0], (ast.Eq, ast.In)) else "orelse"
    return None


def _guarded(test: ast.AST) -> Callable[[ast.AST], bool] | None:
    """For a null check ``x is None`` (or ``is not``) or a membership check ``k in d`` (or ``not in``):
    whether a node dereferences what it checks (``x.attr``, ``x[i]``; ``d[k]``)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
        x = ast.dump(test.left)
        return lambda n: isinstance(n, (ast.Attribute, ast.Subscript)) and ast.dump(n.value) == x
    if isinstance(op, (ast.In, ast.NotIn)):
        d, k = ast.dump(right), ast.dump(test.left)
        return lambda n: isinstance(n, ast.Subscript) and ast.dump(n.value) == d and ast.dump(n.slice) == k
    return None


def _null_guards(tree: ast.AST) -> set[int]:
    """The ids of each null or membership check that a later operand of its ``and`` or ``or``
    dereferences, and of that ``and``/``or``; and of each comprehension filter that is such a check
    of what the comprehension's result (or a later filter) dereferences: changed or dropped, the
    dereference meets the null (or the missing key) it was guarded from."""
    def guards(check: ast.AST, later: list) -> bool:
        uses = _guarded(check)
        return bool(uses) and any(uses(n) for x in later for n in ast.walk(x))

    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp):
            for i, v in enumerate(node.values):
                if guards(v, node.values[i + 1:]):
                    out.update((id(v), id(node)))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            result = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for g in node.generators:
                out.update(id(f) for i, f in enumerate(g.ifs) if guards(f, result + g.ifs[i + 1:]))
    return out


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _edits(node: ast.AST, guards: set[int]) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST]]]:
    """(operator, edit) for each mutation of ``node``; ``edit`` returns the node to put in its place.
    A comprehension filter among ``guards`` (``_null_guards``) is not dropped."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP:
        yield "negate-or-shift-comparison", lambda n: ast.Compare(n.left, [_SWAP[type(n.ops[0])]()], n.comparators)
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield "and-or", lambda n: ast.BoolOp(other(), n.values)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop-not", lambda n: n.operand
    elif isinstance(node, ast.If):
        yield "guard-always", lambda n: ast.If(ast.Constant(True), n.body, n.orelse)
        yield "guard-never", lambda n: ast.If(ast.Constant(False), n.body, n.orelse)
    elif isinstance(node, ast.comprehension) and node.ifs:
        for i in (i for i, f in enumerate(node.ifs) if id(f) not in guards):
            yield "drop-filter", lambda n, i=i: ast.comprehension(n.target, n.iter, n.ifs[:i] + n.ifs[i + 1:],
                                                                  n.is_async)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) \
            and isinstance(node.right, ast.Constant) and node.right.value == 1:
        yield "no-increment", lambda n: n.left
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Tuple) \
            and len(node.right.elts) == 1:  # an entry, a record or a message appended: appended twice
        yield "append-twice", lambda n: ast.BinOp(ast.BinOp(n.left, ast.Add(), n.right), ast.Add(),
                                                  copy.deepcopy(n.right))
    elif isinstance(node, ast.Call) and _call_name(node) in _REPLACERS and node.keywords:
        for i, kw in enumerate(node.keywords):
            if kw.arg is not None:
                yield "skip-update", lambda n, i=i: ast.Call(n.func, n.args, n.keywords[:i] + n.keywords[i + 1:])
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _call_name(node.value) != "__init__":
        yield "drop-call", lambda n: ast.Pass()
    elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, bool):
        yield "invert-answer", lambda n: ast.Return(ast.Constant(not n.value.value))


@attrs.frozen
class Mutant:
    model: str
    path: str  # relative to the repository, e.g. models/pip473/coordinator.py
    module: str  # pulsar_verify.models.pip473.coordinator
    where: str  # the enclosing function (or <module>)
    op: str
    line: int
    before: str
    after: str
    index: int  # position among the file's mutation points, in enumeration order
    occurrence: int = 0  # among the file's mutants of the same change in the same function

    @property
    def id(self) -> str:
        digest = blake2b(f"{self.where}|{self.before}|{self.after}|{self.occurrence}".encode(),
                         digest_size=3).hexdigest()
        return f"{Path(self.path).stem}:{self.where}:{self.op}:{digest}"

    def describe(self) -> str:
        return f"{self.path}:{self.line} in {self.where}: `{self.before}` -> `{self.after}`"

    def source(self) -> ast.Module:
        """The module's syntax tree with this mutant applied (checked to be the change it names)."""
        tree = ast.parse((ROOT / self.path).read_text(), self.path)
        point = self._point(tree)
        if self.op == SWAP:
            block = getattr(point.parent, point.field)
            block[point.pos], block[point.pos + 1] = block[point.pos + 1], block[point.pos]
            return ast.fix_missing_locations(tree)
        if self.op == STALE:  # the step's state as it came in, kept for the stale read
            point.function.body.insert(0, ast.copy_location(ast.parse(f"{STALE_NAME} = s").body[0],
                                                            point.function.body[0]))
        new = ast.copy_location(point.edit(copy.deepcopy(point.node)), point.node)
        if point.pos is None:
            setattr(point.parent, point.field, new)
        else:
            getattr(point.parent, point.field)[point.pos] = new
        return ast.fix_missing_locations(tree)

    def _point(self, tree: ast.Module) -> "_Point":
        for i, point in enumerate(_points(tree)):
            if i == self.index:
                node = point.node
                if (point.where, point.op, _text(node), _text(point.edit(copy.deepcopy(node)))) != \
                        (self.where, self.op, self.before, self.after):
                    break
                return point
        raise ValueError(f"mutant {self.id} no longer matches {self.path}")


def instrumented(path: str, mutants: list[Mutant]) -> ast.Module:
    """The module at ``path`` unchanged but for a mark, before the statement that holds each mutant's
    change, that adds the mutant's id to ``HITS`` when it runs: a mutant whose mark a run never
    reaches cannot change that run (the code before it is the same), so its run is skipped."""
    tree = ast.parse((ROOT / path).read_text(), path)
    marks: dict[int, tuple[list, ast.stmt, list[str]]] = {}
    for m in mutants:
        point = m._point(tree)
        marks.setdefault(id(point.stmt), (point.block, point.stmt, []))[2].append(m.id)
    for block, stmt, ids in marks.values():
        mark = ast.parse(f"__mutation_hits__.update({ids!r})").body[0]
        block.insert(next(i for i, x in enumerate(block) if x is stmt), ast.copy_location(mark, stmt))
    return ast.fix_missing_locations(tree)


HITS: set[str] = set()  # the ids of the mutants whose marks the instrumented model has reached


def _text(node: ast.AST) -> str:
    """The changed code on one line (an ``if`` by its condition, a comprehension by its clause)."""
    if isinstance(node, ast.If):
        return f"if {_text(node.test)}:"
    if isinstance(node, ast.comprehension):
        return " ".join(ast.unparse(ast.GeneratorExp(ast.Name("_"), [node])).split())[3:-1]
    if isinstance(node, ast.Module):  # two statements swapped (``swap-statements``)
        return "; ".join(_text(x) for x in node.body)
    return " ".join(ast.unparse(node).split())


@attrs.frozen
class _Point:
    parent: ast.AST
    field: str
    pos: int | None  # the index in the field, when the field is a list
    node: ast.AST
    where: str  # the enclosing function
    op: str
    edit: Callable[[ast.AST], ast.AST]
    stmt: ast.stmt  # the statement that holds the node (or is it)
    block: list  # the statement list that holds ``stmt``
    function: ast.AST | None = None  # the enclosing function (for ``stale-read``)


def _simple(stmt: ast.AST) -> bool:
    """A statement that only computes or updates (no control flow, no docstring): two of them in a row can be
    swapped (``swap-statements``)."""
    return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or (
        isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant))


def _swappable(function: ast.AST, first: ast.stmt, second: ast.stmt) -> bool:
    """Two simple statements of a step function (one with the state parameter ``s``) whose order matters and that
    can run in the other: one binds a name the other reads or binds (two independent bindings swapped change
    nothing), and the second reads no name that the first binds for the first time (swapped, it would read an
    unbound name, a crash that shows the slip without any property)."""
    if not (_simple(first) and _simple(second)) or not any(a.arg == "s" for a in function.args.args):
        return False
    earlier = {a.arg for a in function.args.args} | {
        t.id for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and n.lineno < first.lineno for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for t in ast.walk(t) if isinstance(t, ast.Name)}
    def names(stmt, ctx):
        return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}
    bound, read = names(first, ast.Store), names(second, ast.Load)
    touch = bound & (read | names(second, ast.Store)) or names(second, ast.Store) & names(first, ast.Load)
    return bool(touch) and not (bound & read) - earlier


def _rebound_at(function: ast.AST) -> dict[str, int] | None:
    """Per field of the state, the first line where a step function rebinds its state parameter ``s`` with that
    field changed (``s = replace(s, field=...)``): a read of the field after it reads the updated state, which
    ``stale-read`` turns into a read of the state as the step received it (a field no rebinding changed reads
    the same either way; a rebinding only a ``mutant:`` variant's branch makes is not one)."""
    if not any(a.arg == "s" for a in function.args.args):
        return None
    out: dict[str, int] = {}
    mutant_only = {id(x) for n in ast.walk(function) if _mutant_branch(n)
                   for x in ast.walk(ast.Module(getattr(n, _mutant_branch(n)), []))}
    for n in ast.walk(function):
        if isinstance(n, ast.Assign) and id(n) not in mutant_only \
                and any(isinstance(t, ast.Name) and t.id == "s" for t in n.targets):
            for call in ast.walk(n.value):
                if isinstance(call, ast.Call) and _call_name(call) in _REPLACERS:
                    for kw in call.keywords:
                        if kw.arg is not None:
                            out[kw.arg] = min(out.get(kw.arg, n.lineno), n.lineno)
    return out


def _points(tree: ast.Module) -> Iterator[_Point]:
    """Every mutation point of a module, in a fixed order."""
    guards = _null_guards(tree)

    def visit(parent, where, stmt, block, function, rebound):
        for field, value in ast.iter_fields(parent):
            if field == _mutant_branch(parent):
                continue
            items = value if isinstance(value, list) else [value]
            for pos, node in enumerate(items):
                if not isinstance(node, ast.AST):
                    continue
                inner, inner_function, inner_rebound = where, function, rebound
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if node.name in SKIP_FUNCTIONS or any(_is_target(d) for d in node.decorator_list):
                        continue
                    inner, inner_function, inner_rebound = node.name, node, _rebound_at(node)
                elif isinstance(node, ast.ClassDef):
                    inner = node.name
                here, here_block = (node, value) if isinstance(node, ast.stmt) else (stmt, block)
                at = pos if isinstance(value, list) else None
                if not _switchboard(getattr(node, "test", node)) and id(node) not in guards:
                    for op, edit in _edits(node, guards):
                        if op == "skip-update" and "crash" in where.lower():
                            op = "crash-keeps-memory"  # a field a crash resets left as it was: memory survives
                        yield _Point(parent, field, at, node, where, op, edit, here, here_block, function)
                    if function is not None and at is not None and isinstance(node, ast.stmt) \
                            and at + 1 < len(value) and _swappable(function, node, value[at + 1]):
                        yield _Point(parent, field, at, node, where, SWAP,
                                     lambda n, nxt=value[at + 1]: ast.Module([copy.deepcopy(nxt), n], []),
                                     here, here_block, function)
                    if rebound and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                            and node.value.id == "s" and isinstance(node.ctx, ast.Load) \
                            and node.lineno > rebound.get(node.attr, node.lineno):
                        yield _Point(parent, field, at, node, where, STALE,
                                     lambda n: ast.Attribute(ast.Name(STALE_NAME, ast.Load()), n.attr, n.ctx),
                                     here, here_block, function)
                yield from visit(node, inner, here, here_block, inner_function, inner_rebound)
    yield from visit(tree, "<module>", None, None, None, None)


def _module_files(model: str) -> list[tuple[str, Path]]:
    """(module name, file) of the model's own code: its package's modules, or its one module."""
    module = registry.registered()[model].partition(":")[0]
    spec = importlib.util.find_spec(module)
    if not spec.submodule_search_locations:
        return [(module, Path(spec.origin))]
    package = Path(spec.origin).parent
    return [(f"{module}.{p.stem}", p) for p in sorted(package.glob("*.py")) if p.name not in SKIP_FILES]


def _bound_aliases(tree: ast.Module, params: set[str]) -> dict[str, set[str]]:
    """Per function name, the local names bound to a configured bound (``n = c.topics``)."""
    out: dict[str, set[str]] = {}
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(f):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                        and isinstance(n.value, ast.Attribute) and n.value.attr in params:
                    out.setdefault(f.name, set()).add(n.targets[0].id)
    return out


def _spends_bounds(node: ast.AST, op: str, params: set[str], aliases: set[str] = frozenset()) -> bool:
    """Code that bounds the model rather than the protocol: a comparison, condition or guard that
    reads a configured bound or switch (``cfg.crashes``, ``self.config.admin``), or a change to a
    counter named for a bound (``s.crashes + 1``) or to a bound itself (``n - 1`` for ``n = c.topics``,
    ``aliases``). Changing it lifts the checker's bounds or turns off what the bound set enables,
    which no PIP property speaks to."""
    test = node.test if isinstance(node, ast.If) else node
    if isinstance(test, (ast.Compare, ast.BoolOp)) and any(
            (isinstance(n, ast.Name) and n.id == "cfg") or (isinstance(n, ast.Attribute) and n.attr == "config")
            for n in ast.walk(test)):
        return True
    if op == "no-increment":
        return (isinstance(node.left, ast.Attribute) and node.left.attr in params) or \
            (isinstance(node.left, ast.Name) and node.left.id in aliases)
    if op == "skip-update":
        return any(kw.arg in params for kw in node.keywords)
    return False


def all_mutants(model: str) -> list[Mutant]:
    """Every mutant of ``model``'s own modules, but for those of code that bounds the model."""
    params = set(registry.model_class(model).params)
    out = []
    for module, path in _module_files(model):
        path = path.resolve()
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        seen: dict[tuple, int] = {}
        tree = ast.parse(path.read_text(), rel)
        aliases = _bound_aliases(tree, params)
        for i, p in enumerate(_points(tree)):
            if _spends_bounds(p.node, p.op, params, aliases.get(p.where, set())):
                continue
            change = (p.where, _text(p.node), _text(p.edit(copy.deepcopy(p.node))))
            seen[change] = seen.get(change, -1) + 1
            line = getattr(p.node, "lineno", None) or p.node.target.lineno
            out.append(Mutant(model, rel, module, p.where, p.op, line, *change[1:], i, seen[change]))
    return out


def chosen(model: str, count: int = PER_MODEL, seed: int | None = None) -> list[Mutant]:
    """``count`` mutants spread over the model's files and operators: files in turn, and in each
    file the operators in turn, each operator's mutants in the order of a digest of their names and
    ``seed``: each seed draws another sample, the same in every process (no seed: the order of the names'
    own digests, which moves little when code is added, for naming one mutant in a test or a note)."""
    salt = "" if seed is None else f"{seed}|"

    def rank(text: str) -> bytes:
        return blake2b(f"{salt}{text}".encode(), digest_size=8).digest()

    by_file: dict[str, dict[str, list[Mutant]]] = {}
    for m in all_mutants(model):
        by_file.setdefault(m.path, {}).setdefault(m.op, []).append(m)
    queues = []
    for path in sorted(by_file):
        ops = by_file[path]
        for op in ops:
            ops[op].sort(key=lambda m: rank(m.id))
        order = sorted(ops, key=lambda op: rank(f"{path}|{op}"))
        queue = []
        while any(ops[op] for op in order):
            queue.extend(ops[op].pop(0) for op in order if ops[op])
        queues.append(queue)
    out: list[Mutant] = []
    while len(out) < count and any(queues):
        for q in queues:
            if q and len(out) < count:
                out.append(q.pop(0))
    return out


# -- the plan: which runs, and the unmutated model's verdicts ---------------------------------------

@attrs.frozen
class Run:
    preset: str
    variant: str
    liveness: bool = False
    model: str = ""  # another model that runs the mutated model's code (``users``); "" for the model itself

    @property
    def name(self) -> str:
        return (f"{self.model}:" if self.model else "") + f"{self.preset}/{self.variant}" + \
            ("/liveness" if self.liveness else "")

    def built(self, model: str) -> str:
        """The model this run builds, for a plan of ``model``."""
        return self.model or model


def users(model: str) -> list[str]:
    """The other registered models built on ``model``'s class, so running its modules (``v4-impl`` and
    ``pip-373`` run ``v4-txn``'s coordinator, buffer and dispatcher): their properties watch that code too."""
    cls = registry.model_class(model)
    return [name for name in registry.registered()
            if name != model and issubclass(registry.model_class(name), cls)]


def plan(model: str) -> list[Run]:
    """Every in-process bound set against ``as-written``, each single fix and ``all-fixes``, safety
    and action properties; then liveness (the PIP's promises that work eventually happens), at
    every in-process bound set, for ``as-written`` and ``all-fixes``: a fix can make the changed
    code dead, and only the design as written then runs it. Then, for each model that runs this
    model's code (``users``), its baseline and ``all-fixes`` at its in-process bound sets, the same way."""
    runs = _own_plan(model, "", every_variant=True)
    for user in users(model):
        runs += _own_plan(user, user, every_variant=False)
    return runs


def _own_plan(model: str, tag: str, every_variant: bool) -> list[Run]:
    cls = registry.model_class(model)
    ends = list(dict.fromkeys([cls.baseline(), cls.best_variant() or cls.baseline()]))
    variants = [v.name for v in cls.variants if v.kind != "mutant"] if every_variant else ends
    runs = [Run(p, v, model=tag) for p in cls.in_process_presets() for v in variants]
    if any(p.kind == "liveness" for p in cls.declared_properties()):
        runs += [Run(p, v, True, tag) for v in ends for p in cls.in_process_presets()]
    return runs


def verdicts(result) -> dict[str, int]:
    return {v.prop.id: v.length for v in result.violations}


def _explore(model: str, run: Run, until=None, max_states: int | None = None):
    m = registry.build(run.built(model), run.variant, preset=run.preset)
    ex = Explorer(m, check_liveness=run.liveness, until=until, max_states=max_states)
    return ex.run()


def baseline(model: str, runs: list[Run], mutants: list[Mutant]) -> list[dict]:
    """The unmutated model at each run: verdicts, counts, seconds and the ``mutants`` whose marks
    each run reached (in a fresh interpreter)."""
    instrument(mutants)
    return [_baseline_run(model, run) for run in runs]


_AT_IMPORT: set[str] = set()  # marks reached as the modules were imported (module-level code)


def _baseline_run(model: str, run: Run) -> dict:
    """One run of the unmutated model, its modules imported instrumented (``instrument``)."""
    registry.model_class(run.built(model))
    _AT_IMPORT.update(HITS)
    HITS.clear()
    started = time.perf_counter()
    r = _explore(model, run)
    hits = sorted(HITS | _AT_IMPORT)
    HITS.clear()
    return {"run": run.name, "verdicts": verdicts(r), "states": r.distinct_states, "transitions": r.transitions,
            "coverage": dict(r.coverage), "seconds": time.perf_counter() - started, "hits": hits}


# -- running one mutant ----------------------------------------------------------------------------

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules ``trees`` names from the syntax trees it makes (a mutant's, or the
    instrumented original's) in place of their files."""

    def __init__(self, trees: dict[str, tuple[str, Callable[[], ast.Module]]]):
        self.trees = trees  # module name -> (path, the tree to compile)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.trees:
            return None
        return importlib.util.spec_from_file_location(fullname, ROOT / self.trees[fullname][0], loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path, tree = self.trees[module.__name__]
        module.__dict__["__mutation_hits__"] = HITS
        exec(compile(tree(), str(ROOT / path), "exec"), module.__dict__)


def _install(trees: dict) -> None:
    loaded = [name for name in trees if name in sys.modules]
    if loaded:
        raise RuntimeError(f"{loaded[0]} is already imported: a mutant runs in a fresh interpreter")
    sys.meta_path.insert(0, _Finder(trees))


def instrument(mutants: list[Mutant]) -> None:
    """Import the modules of ``mutants`` with their marks (in a fresh interpreter)."""
    paths = {(m.module, m.path) for m in mutants}
    _install({module: (path, lambda path=path: instrumented(path, [m for m in mutants if m.path == path]))
              for module, path in paths})


def _until(model: str, expected: dict[str, int]):
    """Stops a run as soon as its safety verdicts can no longer equal ``expected``: a violation
    found that is not expected, or at another length, or an expected one shorter than the levels
    already complete and not found (liveness and ``sometimes`` are decided only once the search is complete)."""
    live = {p.id for p in registry.model_class(model).declared_properties() if p.kind in ("liveness", "sometimes")}
    safety = {pid: n for pid, n in expected.items() if pid not in live}

    def differs(violated: dict, depth: int) -> bool:
        found = {pid: v.length for pid, v in violated.items()}
        if any(safety.get(pid) != n for pid, n in found.items()):
            return True
        return any(pid not in found and n < depth for pid, n in safety.items())
    return differs


def _cap(states: int) -> int:
    """The most states a mutant's run may visit: a change that lifts one of the model's own bounds
    makes its state space unbounded, and its run is then inconclusive."""
    return max(5 * states, 20_000)


def run_mutant(mutant: Mutant, runs: list[Run], base: list[dict], early: bool = True) -> dict:
    """One mutant at each run, cheapest first, until one kills it. Only in an interpreter that has
    not imported the model yet (``harness`` spawns one per mutant). A run in which the changed model
    raises, or passes the state cap, does not end the mutant's runs: a later one may still kill it
    by a verdict; if none does, the first such run decides (killed-by-exception, or inconclusive).
    ``early``: a run that does not reach the change is skipped and a run stops at the first level
    that decides a kill (without it, every run is searched whole: the same outcome, at the same run)."""
    _install({mutant.module: (mutant.path, mutant.source)})
    out = {"model": mutant.model, "id": mutant.id, "where": mutant.describe(), "op": mutant.op, "runs": 0,
           "reached": 0}
    started = time.perf_counter()
    same, undecided = True, {}
    for i in sorted(range(len(runs)), key=lambda i: (runs[i].liveness, base[i]["seconds"])):
        run, b = runs[i], base[i]
        if mutant.id in b["hits"]:
            out["reached"] += 1
        elif early:
            continue  # the unmutated run never reaches the change: the mutated one is the same run
        out["runs"] += 1
        try:
            r = _explore(mutant.model, run, until=_until(run.built(mutant.model), b["verdicts"]) if early else None,
                         max_states=_cap(b["states"]))
        except Exception as exc:  # the mutated model itself failed
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            undecided.setdefault("killed-by-exception", (run.name, f"{type(exc).__name__}: {exc} "
                                                        f"({Path(frame.filename).name}:{frame.lineno})"))
            continue
        got = verdicts(r)
        if got != b["verdicts"]:
            out.update(status="killed", run=run.name, changed=_difference(b["verdicts"], got))
            break
        if not r.complete:
            undecided.setdefault("inconclusive", (run.name, f"over {_cap(b['states'])} states with the same "
                                                            f"verdicts so far"))
            continue
        same = same and (r.distinct_states, r.transitions, dict(r.coverage)) == \
            (b["states"], b["transitions"], b["coverage"])
    else:
        status = next((k for k in ("killed-by-exception", "inconclusive") if k in undecided), None)
        if status:
            out.update(status=status, run=undecided[status][0], changed=undecided[status][1])
        else:
            out.update(status="survived" if out["reached"] else "not-reached", exercised=not same)
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out


def _difference(before: dict, after: dict) -> str:
    parts = []
    for pid in sorted(set(before) | set(after)):
        if before.get(pid) != after.get(pid):
            show = lambda n: "holds" if n is None else f"violated in {n}"  # noqa: E731
            parts.append(f"{pid}: {show(before.get(pid))} -> {show(after.get(pid))}")
    return "; ".join(parts)


def _job(args):
    return run_mutant(*args)


def _baseline_job(args):
    return _baseline_run(*args)


# -- the harness -----------------------------------------------------------------------------------

def accepted() -> dict[str, dict[str, dict]]:
    """model -> mutant id -> {kind: equivalent | accepted, reason}."""
    return tomllib.loads(ACCEPTED.read_text()) if ACCEPTED.exists() else {}


def score(records: list[dict], notes: dict[str, dict]) -> dict:
    counts = {k: 0 for k in ("killed", "killed-by-exception", "survived", "not-reached", "inconclusive",
                             "equivalent", "accepted")}
    for r in records:
        note = notes.get(r["id"])
        if r["status"] != "killed" and note:
            r["note"] = note
            counts[note["kind"]] += 1
        else:
            counts[r["status"]] += 1
    judged = len(records) - counts["equivalent"]
    counts["mutants"] = len(records)
    counts["score"] = round(100.0 * counts["killed"] / judged, 1) if judged else 100.0
    return counts


def harness(models: list[str], *, count: int = PER_MODEL, workers: int | None = None, seed: int | None = None,
            progress: Callable[[str], None] = lambda line: None, only: frozenset = frozenset()) -> dict:
    """Every mutant ``seed`` draws for each model (or those of them ``only`` names: a partial run, to see what
    a new property kills), over ``workers`` processes (default: every core)."""
    started = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")
    runs = {m: plan(m) for m in models}
    mutants = {m: [mu for mu in all_mutants(m) if mu.id in only] if only else chosen(m, count, seed) for m in models}
    report: dict = {"workers": workers, "per_model": count, "seed": seed, "models": {}}
    if only:
        report["only"] = sorted(only)
    every = [(m, run) for m in models for run in runs[m]]
    with ctx.Pool(workers, instrument, ([mu for m in models for mu in mutants[m]],), maxtasksperchild=1) as pool:
        done = iter(pool.map(_baseline_job, every, chunksize=8))
    base = {m: [next(done) for _ in runs[m]] for m in models}
    progress(f"baseline: {time.perf_counter() - started:.0f} s")
    with ctx.Pool(workers, maxtasksperchild=1) as pool:
        jobs = [(mu, runs[mu.model], base[mu.model]) for m in models for mu in mutants[m]]
        jobs.sort(key=lambda j: -sum(b["seconds"] for b in j[2]))  # the costliest models first
        records: dict[str, list] = {m: [] for m in models}
        for n, rec in enumerate(pool.imap_unordered(_job, jobs), 1):
            records[rec["model"]].append(rec)
            progress(f"[{n}/{len(jobs)}] {rec['model']} {rec['id']}: {rec['status']} ({rec['seconds']} s)"
                     + (f" at {rec['run']}: {rec['changed']}" if rec.get("changed") else "")
                     + (f", {rec['reached']} runs reach it" if rec["status"] == "survived" else ""))
    notes = accepted()
    for m in models:
        order = {mu.id: i for i, mu in enumerate(mutants[m])}
        recs = sorted(records[m], key=lambda r: order[r["id"]])
        report["models"][m] = {"runs": [r.name for r in runs[m]],
                               "baseline_seconds": round(sum(b["seconds"] for b in base[m]), 1),
                               "score": score(recs, notes.get(m, {})), "mutants": recs}
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def recorded(path: Path = SCORES) -> dict[str, dict]:
    """model -> the score and counts of the last full run that was recorded."""
    return json.loads(path.read_text()) if path.exists() else {}


def _at_most(k: int, n: int, rate: float) -> float:
    """The chance of at most ``k`` kills among ``n`` mutants each killed with probability ``rate``."""
    return sum(comb(n, i) * rate ** i * (1 - rate) ** (n - i) for i in range(k + 1))


def below_floor(report: dict, path: Path = SCORES) -> list[str]:
    """The models whose kill rate is below the recorded one beyond chance: a draw of other mutants (another
    seed, another count) is compared by its rate, not by the names of its mutants, and fails when so few
    kills had less than ``FLOOR_CONFIDENCE`` chance at the recorded rate."""
    low = recorded(path)
    out = []
    for m, r in report["models"].items():
        s = r["score"]
        judged = s["mutants"] - s["equivalent"]
        if m in low and judged and _at_most(s["killed"], judged, low[m]["score"] / 100) < FLOOR_CONFIDENCE:
            out.append(f"{m}: {s['score']}% of {judged} < {low[m]['score']}% recorded "
                       f"(p < {FLOOR_CONFIDENCE} at that rate)")
    return out


def record(report: dict, path: Path = SCORES) -> None:
    """Record this run's scores as the floor (deliberately: ``mutation --record``)."""
    scores = {**recorded(path), **{m: r["score"] for m, r in report["models"].items()}}
    write_text(path, json.dumps(scores, indent=1, sort_keys=True) + "\n")


def markdown(report: dict) -> str:
    lines = ["# Mutation score", "",
             (f"Only {', '.join(report['only'])} of the {report['per_model']} mutants chosen per model (a partial "
              f"run: its scores count these alone), run on " if report.get("only") else
              f"{report['per_model']} mutants per model (drawn with seed {report.get('seed')}), run on ")
             + f"{report['workers']} processes in "
             f"{report['seconds']:.0f} s. A mutant is killed when a verdict or a shortest counterexample "
             "length changes; a crash of the mutated model is counted apart (killed-by-exception) and is "
             "not a kill. Score: killed / (mutants - equivalent).", "",
             "| model | mutants | killed | by exception | survived | not reached | inconclusive | equivalent "
             "| accepted | score |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m, r in report["models"].items():
        s = r["score"]
        lines.append(f"| `{m}` | {s['mutants']} | {s['killed']} | {s['killed-by-exception']} | {s['survived']} | "
                     f"{s['not-reached']} | "
                     f"{s['inconclusive']} | {s['equivalent']} | {s['accepted']} | {s['score']}% |")
    for m, r in report["models"].items():
        lines += ["", f"## {m}", "", "Runs: " + ", ".join(f"`{x}`" for x in r["runs"]), "",
                  "| mutant | change | result | how |", "|---|---|---|---|"]
        for rec in r["mutants"]:
            how = rec.get("changed", "")
            if rec.get("note"):
                how = f"{rec['note']['kind']}: {rec['note']['reason']}"
            elif rec["status"] == "not-reached":
                how = "no run at these bounds reaches the change"
            elif rec["status"] == "survived":
                how = "every verdict unchanged" + ("" if rec["exercised"] else "; not exercised at these bounds")
            result = rec["status"] if not rec.get("note") else rec["note"]["kind"]
            lines.append(f"| `{rec['id']}` | {rec['where'].replace('|', '&#124;')} | {result} | "
                         f"{how.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"
