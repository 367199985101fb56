"""Exhaustive breadth-first exploration, in-process.

Every state reached is checked against every invariant when it is first
discovered, every transition against every action property, and the
shortest counterexample of each violated property is kept. A violating state
is not expanded further (what lies beyond a broken state is not evidence).
"""
from __future__ import annotations

import gc
import resource
import sys
import time
from collections import Counter
from typing import Any, Callable

from .fingerprint import fingerprint
from .liveness import check_liveness
from .model import DEADLOCK, Action, Model
from .results import Result, Violation



def run_with(model: Model) -> list[tuple[str, str]]:
    """(id, kind) of the properties a run of ``model`` checks: all declared (or the one ``only`` kept),
    and deadlock freedom."""
    kept = {p.id for p in (*model.invariants, *model.action_properties, *model.liveness)}
    return [(p.id, p.kind) for p in (*model.props, DEADLOCK) if p.id in kept or p is DEADLOCK]


def states_along(model: Model, state, actions) -> list:
    """``state`` and the states ``actions`` lead to from it, re-executed."""
    states = [state]
    for a in actions:
        state = model.next_state(state, a)
        states.append(state)
    return states


def path_to(model: Model, parents: dict, init_by_fp: dict, fp: int) -> tuple[list, list]:
    """Shortest path to a discovered state: ``parents`` maps a fingerprint to (parent, action),
    (None, None) at an initial state; the path is re-executed from that state."""
    actions = []
    while True:
        parent, action = parents[fp]
        if parent is None:
            break
        actions.append(action)
        fp = parent
    actions.reverse()
    return states_along(model, init_by_fp[fp], actions), actions


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Explorer:
    def __init__(self, model: Model, *, max_depth: int | None = None, max_states: int | None = None,
                 stop_at_first: bool = False, check_liveness: bool = True,
                 progress: Callable[[dict], None] | None = None):
        self.model = model
        self.max_depth = max_depth
        self.max_states = max_states
        self.stop_at_first = stop_at_first
        self.check_liveness = check_liveness and bool(model.liveness)
        self.progress = progress
        self.parents: dict[int, tuple[int | None, Action | None]] = {}
        self.init_by_fp: dict[int, Any] = {}
        self.graph: dict[int, list[tuple[Action, int]]] | None = {} if self.check_liveness else None
        self.labels: dict[int, tuple] = {}  # fp -> (BFS depth, (trigger, goal) per liveness property)

    # -- counterexamples ----------------------------------------------------
    def path_to(self, fp: int) -> tuple[list, list]:
        return path_to(self.model, self.parents, self.init_by_fp, fp)

    # -- the search ---------------------------------------------------------
    def run(self) -> Result:
        # States are acyclic immutable values: the cyclic collector would only rescan the
        # ever-growing visited set (quadratic slow-down), so it is paused during the search.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if enabled:
                gc.enable()

    def _run(self) -> Result:
        model = self.model
        result = Result(model.name, model.config.variant, model.config.as_dict(), properties=run_with(model))
        started = time.perf_counter()
        canonicalize = model.canonicalize
        symmetric = type(model).canonicalize is not Model.canonicalize
        invariants = [(p, p.check) for p in model.invariants]
        action_props = [(p, p.check) for p in model.action_properties]
        successors = model.successors
        is_terminal = model.is_terminal
        parents = self.parents
        graph = self.graph
        coverage: Counter = Counter()
        violated: dict[str, Violation] = {}
        bad: set[int] = set()

        def report(prop, fp, extra=None):
            if prop.id in violated:
                return
            states, actions = self.path_to(fp)
            if extra is not None:
                actions.append(extra[0])
                states.append(extra[1])
            violated[prop.id] = Violation(prop, states, actions)

        goals = [(p.trigger, p.goal) for p in model.liveness] if graph is not None else None
        labels = self.labels

        def label(s, depth):
            return depth, tuple((trig is None or bool(trig(model, s)), bool(goal(model, s))) for trig, goal in goals)

        frontier = []
        for s in model.init_states():
            fp = fingerprint(canonicalize(s) if symmetric else s)
            if fp in parents:
                continue
            parents[fp] = (None, None)
            self.init_by_fp[fp] = s
            if goals is not None:
                labels[fp] = label(s, 0)
            for prop, check in invariants:
                if not check(model, s):
                    report(prop, fp)
                    bad.add(fp)
            frontier.append((s, fp))

        depth = 0
        transitions = 0
        result.level_sizes.append(len(frontier))
        stop = False
        last_tick = started
        while frontier and not stop:
            if self.max_depth is not None and depth >= self.max_depth:
                result.complete = False
                break
            nxt = []
            for s, fp in frontier:
                if fp in bad:
                    continue
                succ = successors(s)
                if graph is not None:
                    graph[fp] = edges = []
                if not succ and not is_terminal(s):
                    report(DEADLOCK, fp)
                for a, t in succ:
                    transitions += 1
                    coverage[a.name] += 1
                    for prop, check in action_props:
                        if not check(model, s, a, t):
                            report(prop, fp, (a, t))
                    tf = fingerprint(canonicalize(t) if symmetric else t)
                    if graph is not None:
                        edges.append((a, tf))
                    if tf in parents:
                        continue
                    parents[tf] = (fp, a)
                    if goals is not None:
                        labels[tf] = label(t, depth + 1)
                    for prop, check in invariants:
                        if not check(model, t):
                            report(prop, tf)
                            bad.add(tf)
                    nxt.append((t, tf))
                if self.stop_at_first and violated:
                    stop = True
                    break
                if self.max_states is not None and len(parents) >= self.max_states:
                    result.complete = False
                    stop = True
                    break
                if self.progress is not None and transitions % 4096 == 0:
                    now = time.perf_counter()
                    if now - last_tick >= 1.0:
                        last_tick = now
                        self.progress({"depth": depth + 1, "states": len(parents),
                                       "rate": len(parents) / (now - started), "frontier": len(frontier)})
            frontier = nxt
            if nxt:
                depth += 1
                result.level_sizes.append(len(nxt))
            if self.progress is not None:
                now = time.perf_counter()
                self.progress({"depth": depth, "states": len(parents), "level_done": True,
                               "rate": len(parents) / max(now - started, 1e-9), "frontier": len(nxt)})
        if stop and self.stop_at_first and violated:
            result.complete = False

        result.distinct_states = len(parents)
        result.transitions = transitions
        result.depth = depth
        result.coverage = dict(sorted(coverage.items()))
        result.never_fired = sorted(set(model.action_names()) - set(coverage))
        if self.check_liveness and result.complete:
            result.liveness_checked = True
            for prop in model.liveness:
                lasso, unreachable = check_liveness(self, prop)
                result.unreachable_goal[prop.id] = unreachable
                if lasso is not None:
                    violated[prop.id] = lasso
        result.violations = sorted(violated.values(), key=lambda v: (v.length, v.prop.id))
        result.seconds = time.perf_counter() - started
        result.peak_rss_mb = peak_rss_mb()
        return result



def explore(model: Model, **kw) -> tuple[Result, Explorer]:
    ex = Explorer(model, **kw)
    return ex.run(), ex


def stderr_progress(info: dict) -> None:
    end = "\n" if info.get("level_done") and not sys.stderr.isatty() else ""
    sys.stderr.write(f"\r  depth {info['depth']:>4}  states {info['states']:>12,}  "
                     f"frontier {info['frontier']:>10,}  {info['rate']:>10,.0f} states/s{end}")
    sys.stderr.flush()
