"""Mutation testing of the models: does the property suite notice the slips an implementer makes?

A mutant is one small change to one model module (never to the properties): a comparison off
by one or negated, a guard dropped or always taken, ``and`` for ``or``, an update skipped (a
field left out of a ``replace``), a version not bumped (``x + 1`` left as ``x``), a call that
delivers or records something removed, a boolean answer inverted. Mutants are enumerated from
the module's syntax tree in a fixed order and named by file, enclosing function, operator and a
digest of the change, so a name stays valid while the code around it moves. Code that selects a
variant (``m.fixes``, ``m.config.variant``) is left alone: it is the switchboard of the
deliberate variants, not protocol logic.

Each mutant is run in a fresh interpreter that imports the mutated module in place of the
original, at the plan's runs (bound set, variant, safety or liveness), cheapest first. It is
*killed* as soon as a run's verdicts differ from the unmutated model's: a property violated that
was not, or no longer violated, or with another shortest counterexample length. The search of a
run stops at the first level that decides this. A mutant whose model raises is
*killed-by-exception*, counted apart: a crash shows the mistake, not that a property notices
it. One that leaves every verdict unchanged *survived*; when it also leaves every run's counts
(states, transitions, actions taken) unchanged, the change is not exercised at these bounds.
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
from pathlib import Path
from typing import Callable, Iterator

import attrs

from . import registry
from .explorer import Explorer
from .outdir import write_text

ROOT = Path(__file__).resolve().parent.parent
ACCEPTED = ROOT / "tests" / "mutation" / "accepted.toml"
SCORES = ROOT / "tests" / "mutation" / "scores.json"  # the last full run's score per model: the floor
PER_MODEL = 30  # mutants chosen per model
SKIP_FILES = {"__init__.py", "symmetry.py"}  # symmetry.py: the reduction, checked by tests/test_symmetry.py
SKIP_FUNCTIONS = {"action_names", "canonicalize", "__repr__", "__str__"}
SWITCHBOARD = ("fixes", "variant")  # attributes that select a variant: not protocol logic

# -- the operators ---------------------------------------------------------------------------------

_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_REPLACERS = {"replace", "evolve", "put"}


def _switchboard(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in SWITCHBOARD for n in ast.walk(node)) or any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("mutant:")
        for n in ast.walk(node))


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _edits(node: ast.AST) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST]]]:
    """(operator, edit) for each mutation of ``node``; ``edit`` returns the node to put in its place."""
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
        for i in range(len(node.ifs)):
            yield "drop-filter", lambda n, i=i: ast.comprehension(n.target, n.iter, n.ifs[:i] + n.ifs[i + 1:],
                                                                  n.is_async)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) \
            and isinstance(node.right, ast.Constant) and node.right.value == 1:
        yield "no-increment", lambda n: n.left
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
        for i, (parent, field, pos, node, where, op, edit) in enumerate(_points(tree)):
            if i == self.index:
                new = edit(copy.deepcopy(node))
                if (where, op, _text(node), _text(new)) != (self.where, self.op, self.before, self.after):
                    raise ValueError(f"mutant {self.id} no longer matches {self.path}")
                ast.copy_location(new, node)
                if pos is None:
                    setattr(parent, field, new)
                else:
                    getattr(parent, field)[pos] = new
                return ast.fix_missing_locations(tree)
        raise ValueError(f"mutant {self.id} no longer matches {self.path}")


def _text(node: ast.AST) -> str:
    """The changed code on one line (an ``if`` by its condition, a comprehension by its clause)."""
    if isinstance(node, ast.If):
        return f"if {_text(node.test)}:"
    if isinstance(node, ast.comprehension):
        return " ".join(ast.unparse(ast.GeneratorExp(ast.Name("_"), [node])).split())[3:-1]
    return " ".join(ast.unparse(node).split())


def _points(tree: ast.Module):
    """Every mutation point of a module, in a fixed order: (parent, field, index in the field or
    None, node, enclosing function, operator, edit)."""
    def visit(parent, where):
        for field, value in ast.iter_fields(parent):
            items = value if isinstance(value, list) else [value]
            for pos, node in enumerate(items):
                if not isinstance(node, ast.AST):
                    continue
                inner = where
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if node.name in SKIP_FUNCTIONS:
                        continue
                    inner = node.name
                elif isinstance(node, ast.ClassDef):
                    inner = node.name
                if not _switchboard(getattr(node, "test", node)):
                    for op, edit in _edits(node):
                        yield parent, field, pos if isinstance(value, list) else None, node, where, op, edit
                yield from visit(node, inner)
    yield from visit(tree, "<module>")


def _module_files(model: str) -> list[tuple[str, Path]]:
    """(module name, file) of the model's own code: its package's modules, or its one module."""
    module = registry.registered()[model].partition(":")[0]
    spec = importlib.util.find_spec(module)
    if not spec.submodule_search_locations:
        return [(module, Path(spec.origin))]
    package = Path(spec.origin).parent
    return [(f"{module}.{p.stem}", p) for p in sorted(package.glob("*.py")) if p.name not in SKIP_FILES]


def all_mutants(model: str) -> list[Mutant]:
    """Every mutant of ``model``'s own modules."""
    out = []
    for module, path in _module_files(model):
        path = path.resolve()
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        seen: dict[tuple, int] = {}
        for i, (_, _, _, node, where, op, edit) in enumerate(_points(ast.parse(path.read_text(), rel))):
            change = (where, _text(node), _text(edit(copy.deepcopy(node))))
            seen[change] = seen.get(change, -1) + 1
            line = getattr(node, "lineno", None) or node.target.lineno
            out.append(Mutant(model, rel, module, where, op, line, *change[1:], i, seen[change]))
    return out


def chosen(model: str, count: int = PER_MODEL) -> list[Mutant]:
    """``count`` mutants spread over the model's files and operators: files in turn, and in each
    file the operators in turn, each operator's mutants in the order of a stable digest of their
    names (so the choice is the same in every process and moves little when code is added)."""
    by_file: dict[str, dict[str, list[Mutant]]] = {}
    for m in all_mutants(model):
        by_file.setdefault(m.path, {}).setdefault(m.op, []).append(m)
    queues = []
    for path in sorted(by_file):
        ops = by_file[path]
        for op in ops:
            ops[op].sort(key=lambda m: blake2b(m.id.encode(), digest_size=8).digest())
        order = sorted(ops, key=lambda op: blake2b(f"{path}|{op}".encode(), digest_size=8).digest())
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

    @property
    def name(self) -> str:
        return f"{self.preset}/{self.variant}" + ("/liveness" if self.liveness else "")


def plan(model: str) -> list[Run]:
    """Every in-process bound set against ``as-written``, each single fix and ``all-fixes``, safety
    and action properties; then liveness, at every in-process bound set, for ``all-fixes`` (or
    ``as-written`` for a model without fixes), where the PIP's promises that work eventually
    happens are checked."""
    cls = registry.model_class(model)
    variants = [v.name for v in cls.variants if v.kind != "mutant"]
    runs = [Run(p, v) for p in cls.in_process_presets() for v in variants]
    if any(p.kind == "liveness" for p in cls.declared_properties()):
        best = cls.best_variant() or "as-written"
        runs += [Run(p, best, True) for p in cls.in_process_presets()]
    return runs


def verdicts(result) -> dict[str, int]:
    return {v.prop.id: v.length for v in result.violations}


def _explore(model: str, run: Run, until=None, max_states: int | None = None):
    m = registry.build(model, run.variant, preset=run.preset)
    ex = Explorer(m, check_liveness=run.liveness, until=until, max_states=max_states)
    return ex.run()


def baseline(model: str, runs: list[Run]) -> list[dict]:
    """The unmutated model at each run: verdicts, counts and seconds."""
    out = []
    for run in runs:
        started = time.perf_counter()
        r = _explore(model, run)
        out.append({"run": run.name, "verdicts": verdicts(r), "states": r.distinct_states,
                    "transitions": r.transitions, "coverage": dict(r.coverage),
                    "seconds": time.perf_counter() - started})
    return out


# -- running one mutant ----------------------------------------------------------------------------

class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the mutated module in place of the original."""

    def __init__(self, mutant: Mutant):
        self.mutant = mutant

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.mutant.module:
            return None
        return importlib.util.spec_from_file_location(fullname, ROOT / self.mutant.path, loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(self.mutant.source(), str(ROOT / self.mutant.path), "exec"), module.__dict__)


def _until(model: str, expected: dict[str, int]):
    """Stops a run as soon as its safety verdicts can no longer equal ``expected``: a violation
    found that is not expected, or at another length, or an expected one shorter than the levels
    already complete and not found (liveness is decided only once the search is complete)."""
    live = {p.id for p in registry.model_class(model).declared_properties() if p.kind == "liveness"}
    safety = {pid: n for pid, n in expected.items() if pid not in live}

    def differs(violated: dict, depth: int) -> bool:
        found = {pid: v.length for pid, v in violated.items()}
        if any(safety.get(pid) != n for pid, n in found.items()):
            return True
        return any(pid not in found and n < depth for pid, n in safety.items())
    return differs


def _cap(states: int) -> int:
    return max(20 * states, 20_000)


def run_mutant(mutant: Mutant, runs: list[Run], base: list[dict], early: bool = True) -> dict:
    """One mutant at each run, cheapest first, until one kills it. Only in an interpreter that has
    not imported the model yet (``harness`` spawns one per mutant). ``early``: a run stops at the
    first level that decides a kill (without it, each run is searched whole: the same outcome)."""
    if mutant.module in sys.modules:
        raise RuntimeError(f"{mutant.module} is already imported: a mutant runs in a fresh interpreter")
    sys.meta_path.insert(0, _MutantFinder(mutant))
    out = {"model": mutant.model, "id": mutant.id, "where": mutant.describe(), "op": mutant.op, "runs": 0}
    started = time.perf_counter()
    same = True
    try:
        for i in sorted(range(len(runs)), key=lambda i: (runs[i].liveness, base[i]["seconds"])):
            run, b = runs[i], base[i]
            r = _explore(mutant.model, run, until=_until(mutant.model, b["verdicts"]) if early else None,
                         max_states=_cap(b["states"]))
            out["runs"] += 1
            got = verdicts(r)
            if got != b["verdicts"]:
                out.update(status="killed", run=run.name, changed=_difference(b["verdicts"], got))
                break
            if not r.complete:
                out.update(status="inconclusive", run=run.name,
                           changed=f"over {_cap(b['states'])} states with the same verdicts so far")
                break
            same = same and (r.distinct_states, r.transitions, dict(r.coverage)) == \
                (b["states"], b["transitions"], b["coverage"])
        else:
            out.update(status="survived", exercised=not same)
    except Exception as exc:  # the mutated model itself failed
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        out.update(status="killed-by-exception", run=run.name,
                   changed=f"{type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})")
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
    return baseline(*args)


# -- the harness -----------------------------------------------------------------------------------

def accepted() -> dict[str, dict[str, dict]]:
    """model -> mutant id -> {kind: equivalent | accepted, reason}."""
    return tomllib.loads(ACCEPTED.read_text()) if ACCEPTED.exists() else {}


def score(records: list[dict], notes: dict[str, dict]) -> dict:
    counts = {k: 0 for k in ("killed", "killed-by-exception", "survived", "inconclusive", "equivalent",
                             "accepted")}
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


def harness(models: list[str], *, count: int = PER_MODEL, workers: int | None = None,
            progress: Callable[[str], None] = lambda line: None) -> dict:
    """Every chosen mutant of each model, over ``workers`` processes (default: every core)."""
    started = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")
    runs = {m: plan(m) for m in models}
    mutants = {m: chosen(m, count) for m in models}
    report: dict = {"workers": workers, "per_model": count, "models": {}}
    with ctx.Pool(workers, maxtasksperchild=1) as pool:
        base = dict(zip(models, pool.map(_baseline_job, [(m, runs[m]) for m in models], chunksize=1)))
        progress(f"baseline: {time.perf_counter() - started:.0f} s")
        jobs = [(mu, runs[mu.model], base[mu.model]) for m in models for mu in mutants[m]]
        jobs.sort(key=lambda j: -sum(b["seconds"] for b in j[2]))  # the costliest models first
        records: dict[str, list] = {m: [] for m in models}
        for n, rec in enumerate(pool.imap_unordered(_job, jobs), 1):
            records[rec["model"]].append(rec)
            progress(f"[{n}/{len(jobs)}] {rec['model']} {rec['id']}: {rec['status']} ({rec['seconds']} s)"
                     + (f" at {rec['run']}: {rec['changed']}" if rec.get("changed") else ""))
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


def below_floor(report: dict, path: Path = SCORES) -> list[str]:
    """The models whose score dropped below the one recorded for as many mutants."""
    low = recorded(path)
    return [f"{m}: {r['score']['score']}% < {low[m]['score']}% recorded" for m, r in report["models"].items()
            if m in low and low[m]["mutants"] == r["score"]["mutants"] and r["score"]["score"] < low[m]["score"]]


def record(report: dict, path: Path = SCORES) -> None:
    """Record this run's scores as the floor (deliberately: ``mutation --record``)."""
    scores = {**recorded(path), **{m: r["score"] for m, r in report["models"].items()}}
    write_text(path, json.dumps(scores, indent=1, sort_keys=True) + "\n")


def markdown(report: dict) -> str:
    lines = ["# Mutation score", "",
             f"{report['per_model']} mutants per model, run on {report['workers']} processes in "
             f"{report['seconds']:.0f} s. A mutant is killed when a verdict or a shortest counterexample "
             "length changes; a crash of the mutated model is counted apart (killed-by-exception) and is "
             "not a kill. Score: killed / (mutants - equivalent).", "",
             "| model | mutants | killed | by exception | survived | inconclusive | equivalent | accepted | score |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m, r in report["models"].items():
        s = r["score"]
        lines.append(f"| `{m}` | {s['mutants']} | {s['killed']} | {s['killed-by-exception']} | {s['survived']} | "
                     f"{s['inconclusive']} | {s['equivalent']} | {s['accepted']} | {s['score']}% |")
    for m, r in report["models"].items():
        lines += ["", f"## {m}", "", "Runs: " + ", ".join(f"`{x}`" for x in r["runs"]), "",
                  "| mutant | change | result | how |", "|---|---|---|---|"]
        for rec in r["mutants"]:
            how = rec.get("changed", "")
            if rec.get("note"):
                how = f"{rec['note']['kind']}: {rec['note']['reason']}"
            elif rec["status"] == "survived":
                how = "every verdict unchanged" + ("" if rec["exercised"] else "; not exercised at these bounds")
            result = rec["status"] if not rec.get("note") else rec["note"]["kind"]
            lines.append(f"| `{rec['id']}` | {rec['where'].replace('|', '&#124;')} | {result} | "
                         f"{how.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"
