"""Target search: from a bug report ("after a broker restart, X happens") to the shortest trace
that reaches a state where X holds, or the statement that no state within the bounds does.

A target is a predicate over a model's state: one the model declares (``PROPERTIES.target``, listed
by ``pulsar-verify list``), or a Python expression over the state (``--target-expr``), whose names are
the state's fields, ``s`` (the state), ``m`` (the model) and ``config``. ``via`` asks for a trace that
takes the given steps in this order, with any steps between them: ``crash`` (any crash) or
``crash(topic=0)`` (its parameters as given). The search is the model's own breadth-first search on
``Along`` states (the model's state and how many ``via`` steps the path has taken), with the target
as its only invariant, so the first violation is a shortest trace, on either engine. It searches
without symmetry reduction: a target or a step may name an actor.
"""
from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path
from typing import Any, Callable

import attrs

from . import registry
from .itf import trace_document, write_trace
from .model import Action, Model, Property, UsageError
from .outdir import write_text
from .show import render_trace

REACHED_ID = "target"


@attrs.frozen
class Target:
    """A state a bug report describes, declared with the model: ``holds(model, state)``."""

    name: str
    statement: str
    source: str  # where the symptom is described (an upstream issue, a document)
    holds: Callable = attrs.field(eq=False, repr=False)


@attrs.frozen
class Aim:
    """What one search looks for, as plain data: it travels to Spark executors and into trace files."""

    target: str = ""  # a declared target's name
    expr: str = ""  # or a Python expression over the state
    via: tuple = ()  # steps the trace takes in this order: "name" or "name(key=value, ...)"

    def describe(self) -> str:
        what = self.target or (f"`{self.expr}`" if self.expr else "any state")
        return what + (f", via {' then '.join(self.via)}" if self.via else "")

    def as_dict(self) -> dict:
        return {"target": self.target, "expr": self.expr, "via": list(self.via)}

    @classmethod
    def from_dict(cls, d: Any) -> "Aim":
        if (not isinstance(d, dict) or not isinstance(d.get("target", ""), str)
                or not isinstance(d.get("expr", ""), str) or not isinstance(d.get("via", []), list)
                or not all(isinstance(v, str) for v in d.get("via", []))):
            raise UsageError("a target must be {target: str, expr: str, via: [str]}")
        return cls(d.get("target", ""), d.get("expr", ""), tuple(d.get("via", [])))


@attrs.frozen
class Along:
    """A state of the search: the model's state, and how many of the ``via`` steps its path took."""

    state: Any
    taken: int = 0


def parse_step(text: str, labels) -> tuple[str, tuple]:
    """``crash`` or ``crash(topic=0)`` as (label, ((key, value), ...)); the label must be the model's."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if isinstance(node, ast.Name):
            name, params = node.id, ()
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
            name = node.func.id
            params = tuple((kw.arg, ast.literal_eval(kw.value)) for kw in node.keywords)
            if any(k is None for k, _ in params):
                raise ValueError
        else:
            raise ValueError
    except (SyntaxError, ValueError):
        raise UsageError(f"--via {text!r}: expected an action label, or label(key=value, ...)") from None
    if name not in labels:
        raise UsageError(f"--via {text!r}: the model has no action {name!r} (known: {', '.join(sorted(labels))})")
    return name, params


def matches(step: tuple[str, tuple], action: Action) -> bool:
    name, params = step
    return action.name == name and all(kv in action.params for kv in params)


def _expression(text: str) -> Callable:
    try:
        code = compile(text, "<target-expr>", "eval")
    except SyntaxError as exc:
        raise UsageError(f"--target-expr {text!r}: {exc.msg} (column {exc.offset})") from None

    def holds(m, s) -> bool:
        # the names as globals, not locals: a comprehension's or lambda's own scope sees globals only
        env = {f.name: getattr(s, f.name) for f in attrs.fields(type(s))}
        env.update(s=s, m=m, config=m.config, __builtins__=builtins)
        try:
            return bool(eval(code, env))
        except Exception as exc:  # the user's expression: a bad request, not an internal error
            raise UsageError(f"--target-expr {text!r}: {type(exc).__name__}: {exc}") from None
    return holds


class TargetSearch(Model):
    """``inner`` searched for ``aim``: its actions and successors, on ``Along`` states, with one
    invariant, "the target is not reached", and no deadlock check (a state without successors is
    an end of the search, not its question)."""

    checks_deadlock = False

    def __init__(self, inner: Model, aim: Aim):
        if aim.target and aim.expr:
            raise UsageError("give --target or --target-expr, not both")
        self.inner, self.aim = inner, aim
        self.name, self.config, self.fixes, self.reduction = inner.name, inner.config, inner.fixes, ""
        if aim.target:
            declared = {t.name: t for t in type(inner).declared_targets()}
            if aim.target not in declared:
                raise UsageError(f"model {inner.name} has no target {aim.target!r} "
                                 f"(known: {', '.join(declared) or 'none'})")
            target = declared[aim.target]
            self.holds, statement, source = target.holds, target.statement, target.source
        elif aim.expr:
            self.holds, statement, source = _expression(aim.expr), aim.expr, "--target-expr"
        else:
            self.holds, statement, source = (lambda m, s: True), "any state", "--via"
        self.steps = tuple(parse_step(v, inner.action_labels) for v in aim.via)
        for s in inner.init_states():  # a target that cannot be evaluated fails here, before the search
            self.holds(inner, s)
        self.statement = statement + (f" (via {' then '.join(aim.via)})" if aim.via else "")
        reached = Property(REACHED_ID, f"never: {self.statement}", source, "invariant", check=self._not_reached)
        self.props = self.invariants = [reached]
        self.action_properties, self.liveness, self.sometimes = [], [], []

    def reached_by(self, actions, last) -> bool:
        """Whether a trace with these actions, ending in the model's state ``last``, reaches the target."""
        taken = 0
        for action in actions:
            taken = self._taken(taken, action)
        return not self._not_reached(self, Along(last, taken))

    def _taken(self, k: int, action: Action) -> int:
        """How many ``via`` steps a path has taken after ``action``, when it had taken ``k``."""
        return k + 1 if k < len(self.steps) and matches(self.steps[k], action) else k

    def _not_reached(self, m, a: Along) -> bool:
        return a.taken < len(self.steps) or not self.holds(self.inner, a.state)

    def _along(self, a: Along, action: Action, t) -> Along:
        return Along(t, self._taken(a.taken, action))

    def init_states(self):
        return [Along(s) for s in self.inner.init_states()]

    def never_fired(self, coverage) -> tuple[list[str], list[str]]:
        """What the inner model declares and the search never took; a search for a target asks nothing of the
        system's actions, so none fails it."""
        return self.inner.never_fired(coverage)[0], []

    def actions(self, a: Along):
        return self.inner.actions(a.state)

    def next_state(self, a: Along, action: Action) -> Along:
        return self._along(a, action, self.inner.next_state(a.state, action))

    def successors(self, a: Along):
        return [(action, self._along(a, action, t)) for action, t in self.inner.successors(a.state)]

    def is_terminal(self, a: Along) -> bool:
        return True

    def action_names(self) -> list[str]:
        return self.inner.action_names()


@attrs.frozen
class Reach:
    """A search's answer: the shortest trace to the target (the model's states and actions), or
    none; ``complete`` is false when a depth or state bound cut the search short."""

    reached: bool
    states: tuple
    actions: tuple
    distinct_states: int
    complete: bool
    result: Any = attrs.field(eq=False, repr=False)

    @property
    def length(self) -> int:
        return len(self.actions)

    @property
    def steps(self) -> list[str]:
        return [str(a) for a in self.actions]

    @property
    def labels(self) -> list[str]:
        return [a.name for a in self.actions]


def search(model: TargetSearch, engine: str = "local", **kw) -> Reach:
    """The shortest trace to ``model``'s target on ``engine`` (``run_exploration``'s keywords)."""
    from .engines import run_exploration
    return reach_of(run_exploration(model, engine, stop_at_first=True, liveness=False, **kw))


def reach_of(result) -> Reach:
    """A target search's exploration result, as its answer."""
    hit = next((v for v in result.violations if v.prop.id == REACHED_ID), None)
    states = tuple(a.state for a in hit.states) if hit else ()
    return Reach(hit is not None, states, tuple(hit.actions) if hit else (), result.distinct_states,
                 result.complete, result)


def reach(model: str, *, target: str = "", expr: str = "", via=(), variant: str | None = None,
          bounds: str = "default", settings: dict | None = None, engine: str = "local", **kw) -> Reach:
    """A bug report as a test: can ``model`` at these bounds reach the target, and by which shortest
    trace? ``settings``: bounds beyond the named set (typed values). ``via``: steps, in this order."""
    inner = registry.build(model, variant, values=settings or {}, preset=bounds)
    return search(TargetSearch(inner, Aim(target, expr, tuple(via))), engine, **kw)


def write_reach(model: TargetSearch, r: Reach, into: Path, final: Path) -> dict:
    """The trace (``target.itf.json``, replayable) and its explanation (``target.md``), when reached, then
    ``summary.json``, written ``into`` a staging directory that will become ``final``; returns the summary."""
    files = _write_trace(model, r, into, final) if r.reached else []
    summary = {**r.result.summary(), "target": {**model.aim.as_dict(), "statement": model.statement,
                                                "reached": r.reached, "length": r.length if r.reached else None,
                                                "steps": r.steps, "files": [str(f) for f in files]}}
    write_text(Path(into) / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _write_trace(model: TargetSearch, r: Reach, into: Path, final: Path) -> list[Path]:
    violation = {"property": REACHED_ID, "kind": "target", "statement": model.statement,
                 "section": model.props[0].section, "length": r.length}
    doc = trace_document(model.inner, list(r.states), list(r.actions), violation)
    doc["#meta"]["target"] = model.aim.as_dict()
    doc["#meta"]["description"] = f"target reached: {model.statement}"
    write_trace(Path(into) / "target.itf.json", doc)
    write_text(Path(into) / "target.md", explanation(model, r, final / "target.itf.json"))
    return [final / "target.itf.json", final / "target.md"]


def explanation(model: TargetSearch, r: Reach, trace: Path) -> str:
    c = model.config
    return "\n".join([
        f"# {model.name}: target reached in {r.length} steps",
        "",
        f"- **Target:** {model.statement} ({model.props[0].section})",
        f"- **Model:** {model.name}, variant `{c.variant_name}`, bounds {' '.join(f'{k}={v}' for k, v in c.as_dict().items())}",
        f"- **Shortest trace:** {r.length} steps, found among {r.distinct_states:,} states by breadth-first search",
        f"- **Replay:** `pulsar-verify replay {trace}`; against a fix: `--variant NAME`",
        "",
        "Each step with the state it changes:",
        "",
        "```",
        render_trace(list(r.states), list(r.actions)),
        "```",
        "",
    ])


def verdict_line(model: TargetSearch, r: Reach) -> str:
    if r.reached:
        return f"REACHED {model.statement} in {r.length} steps ({r.distinct_states:,} states searched)"
    if r.complete:
        return (f"UNREACHABLE: no state within these bounds is one where {model.statement} "
                f"({r.distinct_states:,} states, the whole space)")
    return (f"NOT REACHED in the {r.distinct_states:,} states searched; the search stopped at its depth or "
            f"state bound, so it is not shown unreachable")


def report(model: TargetSearch, r: Reach, summary: dict) -> str:
    """What ``explore --target`` prints: the verdict, and a reached target's trace and files."""
    lines = [verdict_line(model, r)]
    if r.reached:
        trace, text = summary["target"]["files"]
        lines += [render_trace(list(r.states), list(r.actions)),
                  f"  trace: {trace}\n  explanation: {text}\n  replay: pulsar-verify replay {trace}"]
    return "\n".join(lines)
