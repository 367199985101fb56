"""Exhaustive breadth-first exploration, in-process, on one core or several.

Every state reached is checked against every invariant when it is first
discovered, every transition against every action property, and the
shortest counterexample of each violated property is kept. A state that
violates a property is expanded like any other (as TLC's ``-continue``), so
each verdict speaks of the whole reachable space at the bounds: a property
whose violations lie only beyond another property's violation is still found
violated, its counterexample shortest among its own. A ``sometimes`` property
is checked on each state that breaks no invariant: its first (shortest)
example is kept, and a complete search without one breaks it.

With ``workers`` > 1 the search is the same level-synchronous BFS with the
expansion done by forked worker processes (``_run_workers``): each worker expands
the frontier states it owns and keeps what it finds, and the parent merges their
results in frontier order, so parents, counts, verdicts and counterexamples are
those of the one-process run.
"""
from __future__ import annotations

import gc
import queue
import resource
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable

from .fingerprint import decode, encode, fingerprint
from .liveness import check_liveness, prepare
from .model import DEADLOCK, Action, Model, Released, StepChecks
from .results import Result, Violation



def new_result(model: Model, **kw) -> Result:
    """The result a run of ``model`` fills: the properties it checks (all declared, or the one ``only``
    kept, and deadlock freedom) and the symmetry it reduces by."""
    kept = {p.id for p in (*model.invariants, *model.action_properties, *model.liveness, *model.sometimes)}
    return Result(model.name, model.config.variant_name, model.config.as_dict(), reduction=model.reduction,
                  properties=[(p.id, p.kind) for p in model.props if p.id in kept]
                  + ([(DEADLOCK.id, DEADLOCK.kind)] if model.checks_deadlock else []),
                  **kw)


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


def state_key(model: Model) -> Callable[[Any], int]:
    """The fingerprint a search files a state under: that of its symmetry representative when the
    model reduces by a symmetry (``model.reduction``), else its own."""
    if not model.reduction:
        return fingerprint
    canonicalize = model.canonicalize
    return lambda s: fingerprint(canonicalize(s))


def goal_flags(model: Model, goals: list, s) -> tuple:
    """A state's liveness label: (trigger holds, goal holds) per liveness property; a goal that is the
    trigger released costs no second evaluation."""
    flags = []
    for trig, goal in goals:
        t = trig is None or bool(trig(model, s))
        flags.append((t, not t) if type(goal) is Released and goal.trigger is trig else (t, bool(goal(model, s))))
    return tuple(flags)


def examples_of(model: Model, sometimes: list, s) -> tuple:
    """``-1 - i`` for each ``sometimes`` check ``i`` that state ``s`` (which breaks no invariant) is an
    example of: a worker's row carries them where it carries the indices of broken invariants."""
    return tuple(-1 - i for i, check in enumerate(sometimes) if check(model, s)) if sometimes else ()


_EXPLORER = None  # the explorer whose worker processes are being forked: they inherit it
CHUNK = 256  # frontier states per message from a worker


class _Worker:
    """One forked worker: it expands the frontier states it owns, in frontier order, and keeps the
    successors it found: a new state is owned by the worker that found it first, unless that worker
    has more than its share of the next level (then its encoding goes to one that has less). Other
    states never leave the process that made them: what goes to the parent is, per state, the
    indices of the invariants it breaks, followed (when it breaks none) by the ``sometimes`` properties it
    is an example of, as ``-1 - index``, its liveness label, whether it is a deadlock, its number of
    successors, its successors as (action number, fingerprint) and the steps that break an action
    property as (action number, property index); an action is sent once, then named by its number.

    Without a liveness graph, a successor the worker has met before (``seen``: at an earlier level, or
    earlier in this one) is neither kept nor sent. Everything a worker sent at an earlier level is in
    the parent's visited set, and its earlier mention in this level comes first in frontier order,
    so the parent would file it under the same parent either way; dropping it frees the duplicate at
    once, as the one-process search does, instead of holding it to the end of the level."""

    def __init__(self, ex: "Explorer", conn, mine: list):
        self.ex, self.conn, self.mine = ex, conn, mine
        self.found: dict[int, Any] = {}
        self.seen: set[int] | None = None if ex.graph is not None else set()
        self.numbers: dict[Action, int] = {}

    def serve(self) -> None:
        while True:
            job = self.conn.recv()
            if job is None:
                return
            if job[0] == "give":
                self.conn.send(("ok", [encode(self.found[fp]) for fp in job[1]]))
            elif job[0] == "keep":
                found = self.found
                found.update((fp, decode(data)) for fp, data in job[2])
                self.mine = [found[fp] for fp in job[1]]
                self.found = {}
            else:
                self.expand(job[1])

    def expand(self, expand: bool) -> None:
        ex, model, send = self.ex, self.ex.model, self.conn.send
        key = state_key(model)
        invariants = [p.check for p in model.invariants]
        checks_on = StepChecks(model.action_properties)
        sometimes = [p.check for p in model.sometimes]
        goals = [(p.trigger, p.goal) for p in model.liveness] if ex.graph is not None else None
        found, numbers, seen = self.found, self.numbers, self.seen
        for lo in range(0, len(self.mine), CHUNK):
            rows, new_actions, coverage = [], [], Counter()
            for s in self.mine[lo:lo + CHUNK]:
                broken = tuple(i for i, check in enumerate(invariants) if not check(model, s))
                label = None if goals is None else goal_flags(model, goals, s)
                flags = broken or examples_of(model, sometimes, s)
                if not expand:
                    rows.append((flags, label, False, 0, (), (), ()))
                    continue
                succ = model.successors(s)
                aids, fps, failed = [], [], []
                for a, t in succ:
                    n = numbers.get(a)
                    if n is None:
                        n = numbers[a] = len(numbers)
                        new_actions.append(a)
                    for i, prop in checks_on[a.name]:
                        if not prop.check(model, s, a, t):
                            failed.append((n, i))
                    coverage[a.name] += 1
                    tf = key(t)
                    if seen is not None:
                        if tf in seen:
                            continue
                        seen.add(tf)
                    if tf not in found:
                        found[tf] = t
                    aids.append(n)
                    fps.append(tf)
                rows.append((flags, label, not succ and not model.is_terminal(s), len(succ), aids, fps, failed))
            send(("ok", rows, new_actions, coverage))


def _read(pipe, n: int, inbox) -> None:
    """Moves ``n`` messages from a worker's pipe to its inbox (a dead worker's end of file as an error)."""
    for _ in range(n):
        try:
            msg = pipe.recv()
        except (EOFError, OSError) as exc:
            msg = ("error", f"the worker's pipe closed: {exc!r}")
        inbox.put(msg)
        if msg[0] != "ok":
            return


def _worker(conn, index: int) -> None:
    try:
        ex = _EXPLORER
        _Worker(ex, conn, ex._initial[index]).serve()
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        import traceback
        conn.send(("error", traceback.format_exc()))


class Explorer:
    def __init__(self, model: Model, *, max_depth: int | None = None, max_states: int | None = None,
                 stop_at_first: bool = False, check_liveness: bool = True,
                 progress: Callable[[dict], None] | None = None, workers: int = 1,
                 until: Callable[[dict, int], bool] | None = None):
        """``workers`` > 1 expands each level in that many forked processes; a run that may stop within
        a level (``max_states``, ``stop_at_first``) uses one, so that where it stops is the same.
        ``until(violated, depth)``, asked as each level is complete, stops the search when true."""
        self.model = model
        self.workers = 1 if max_states is not None or stop_at_first or until is not None else workers
        self.until = until
        self.max_depth = max_depth
        self.max_states = max_states
        self.stop_at_first = stop_at_first
        self.check_liveness = check_liveness and bool(model.liveness)
        self.progress = progress
        self.parents: dict[int, tuple[int | None, Action | None]] = {}
        self.init_by_fp: dict[int, Any] = {}
        self.graph: dict[int, list[tuple[Action, int]]] | None = {} if self.check_liveness else None
        self.labels: dict[int, tuple] = {}  # fp -> (BFS depth, (trigger, goal) per liveness property)
        self.coverage: Counter = Counter()  # the workers' run: what the workers have counted
        self.transitions = 0
        self.examples: dict[str, tuple[int, int]] = {}  # sometimes property -> (fp, length) of its first example

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
            return self._run() if self.workers <= 1 else self._run_workers()
        finally:
            if enabled:
                gc.enable()

    def _run(self) -> Result:
        model = self.model
        result = new_result(model)
        started = time.perf_counter()
        key = state_key(model)
        invariants = [(p, p.check) for p in model.invariants]
        checks_on = StepChecks(model.action_properties)
        sometimes = [(p, p.check) for p in model.sometimes]
        successors = model.successors
        is_terminal = model.is_terminal
        parents = self.parents
        graph = self.graph
        coverage: Counter = Counter()
        violated: dict[str, Violation] = {}
        report = self._reporter(violated)

        goals = [(p.trigger, p.goal) for p in model.liveness] if graph is not None else None
        labels = self.labels

        def label(s, depth):
            return depth, goal_flags(model, goals, s)

        frontier = []
        for s in model.init_states():
            fp = key(s)
            if fp in parents:
                continue
            parents[fp] = (None, None)
            self.init_by_fp[fp] = s
            if goals is not None:
                labels[fp] = label(s, 0)
            clean = True
            for prop, check in invariants:
                if not check(model, s):
                    report(prop, fp)
                    clean = False
            if sometimes and clean:
                sometimes = self._example(sometimes, s, fp, 0)
            frontier.append((s, fp))

        depth = 0
        transitions = 0
        result.level_sizes.append(len(frontier))
        stop = False
        last_tick, next_look = started, 0
        while frontier and not stop:
            if self.max_depth is not None and depth >= self.max_depth:
                result.complete, result.stopped = False, f"max depth {self.max_depth}"
                break
            nxt = []
            for s, fp in frontier:
                succ = successors(s)
                if graph is not None:
                    graph[fp] = edges = []
                if not succ and not is_terminal(s):
                    report(DEADLOCK, fp)
                transitions += len(succ)
                for a, t in succ:
                    name = a.name
                    coverage[name] += 1
                    for _, prop in checks_on[name]:
                        if not prop.check(model, s, a, t):
                            report(prop, fp, (a, t))
                    tf = key(t)
                    if graph is not None:
                        edges.append((a, tf))
                    if tf in parents:
                        continue
                    parents[tf] = (fp, a)
                    if goals is not None:
                        labels[tf] = label(t, depth + 1)
                    clean = True
                    for prop, check in invariants:
                        if not check(model, t):
                            report(prop, tf)
                            clean = False
                    if sometimes and clean:
                        sometimes = self._example(sometimes, t, tf, depth + 1)
                    nxt.append((t, tf))
                if self.stop_at_first and violated:
                    stop = True
                    break
                if self.max_states is not None and len(parents) >= self.max_states:
                    result.complete, result.stopped = False, f"max states {self.max_states:,}"
                    stop = True
                    break
                if self.progress is not None and transitions >= next_look:  # the clock read every 4096 steps
                    next_look = transitions + 4096
                    now = time.perf_counter()
                    if now - last_tick >= 1.0:
                        last_tick = now
                        self.progress({"depth": depth + 1, "states": len(parents),
                                       "rate": len(parents) / (now - started), "frontier": len(frontier)})
            frontier = nxt
            depth = self._level_found(result, nxt, depth, started)
            if self.until is not None and frontier and self.until(violated, depth):
                result.complete = False
                break
        if stop and self.stop_at_first and violated:
            result.complete, result.stopped = False, "stopped at the first violation"
        return self._finish(result, violated, coverage, transitions, depth, started)

    def _example(self, sometimes: list, s, fp: int, depth: int) -> list:
        """Notes ``s`` as the first example of each ``sometimes`` property it is one of; returns those
        still without one."""
        left = []
        for prop, check in sometimes:
            if check(self.model, s):
                self.examples[prop.id] = (fp, depth)
            else:
                left.append((prop, check))
        return left

    def _level_found(self, result: Result, nxt: list, depth: int, started: float) -> int:
        """Records the level just found (if any) and reports progress; returns the depth reached."""
        if nxt:
            depth += 1
            result.level_sizes.append(len(nxt))
        if self.progress is not None:
            now = time.perf_counter()
            self.progress({"depth": depth, "states": len(self.parents), "level_done": True,
                           "rate": len(self.parents) / max(now - started, 1e-9), "frontier": len(nxt)})
        return depth

    def _reporter(self, violated: dict):
        """``report(prop, fp, extra)``: keeps the first violation of each property, with the path to the
        state ``fp`` (and, for an action property, the step ``extra`` = (action, successor or None))."""
        def report(prop, fp, extra=None):
            if prop.id in violated:
                return
            states, actions = self.path_to(fp)
            if extra is not None:
                a, t = extra
                actions.append(a)
                states.append(t if t is not None else self.model.next_state(states[-1], a))
            violated[prop.id] = Violation(prop, states, actions)
        return report

    def _run_workers(self) -> Result:
        """The level-synchronous search of ``_run`` with each level expanded by ``self.workers`` forked
        processes (``_Worker``). A state's invariants and liveness label are evaluated when its level is
        expanded rather than when it is found; the parent walks each level in frontier order, taking
        each state's row from the worker that owns it, so parents, counts and the first violation of
        each property are those of the one-process run."""
        global _EXPLORER
        import multiprocessing
        model = self.model
        result = new_result(model)
        started = time.perf_counter()
        key = state_key(model)
        parents = self.parents
        violated: dict[str, Violation] = {}
        report = self._reporter(violated)
        workers = self.workers
        frontier: list[tuple[int, int]] = []  # (fingerprint, owning worker), in frontier order
        self._initial = [[] for _ in range(workers)]
        for s in model.init_states():
            fp = key(s)
            if fp not in parents:
                parents[fp] = (None, None)
                self.init_by_fp[fp] = s
                w = len(frontier) % workers
                self._initial[w].append(s)
                frontier.append((fp, w))
        context = multiprocessing.get_context("fork")
        _EXPLORER = self
        pipes, procs = [], []
        try:
            for w in range(workers):
                here, there = context.Pipe()
                proc = context.Process(target=_worker, args=(there, w), daemon=True)
                proc.start()
                there.close()
                pipes.append(here)
                procs.append(proc)
            del self._initial
            depth = 0
            result.level_sizes.append(len(frontier))
            actions: list[list[Action]] = [[] for _ in range(workers)]
            while frontier:
                expand = self.max_depth is None or depth < self.max_depth
                for pipe in pipes:
                    pipe.send(("expand", expand))
                nxt = self._merge(frontier, pipes, actions, depth, expand, report)
                if not expand:
                    result.complete, result.stopped = False, f"max depth {self.max_depth}"
                    break
                nxt = self._share(nxt, pipes)
                frontier = nxt
                depth = self._level_found(result, nxt, depth, started)
        finally:
            _EXPLORER = None
            for pipe in pipes:
                try:
                    pipe.send(None)
                except OSError:
                    pass
            for proc in procs:
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
        return self._finish(result, violated, self.coverage, self.transitions, depth, started)

    @staticmethod
    def _share(nxt: list, pipes: list) -> list:
        """The next frontier with each worker owning at most its share: a worker with more gives the
        last of its states (their encodings) to the workers with less. Returns it with the new owners."""
        workers = len(pipes)
        share = -(-len(nxt) // workers)
        counts = Counter(w for _, w in nxt)
        short = [w for w in range(workers) for _ in range(share - counts[w])]
        moves: dict[int, list] = {}  # giver -> [(index in nxt, taker)]
        for i in range(len(nxt) - 1, -1, -1):
            fp, w = nxt[i]
            if counts[w] > share:
                counts[w] -= 1
                moves.setdefault(w, []).append((i, short.pop()))
        gifts: list[list] = [[] for _ in pipes]
        for w, moved in moves.items():
            pipes[w].send(("give", [nxt[i][0] for i, _ in moved]))
        for w, moved in moves.items():
            msg = pipes[w].recv()
            if msg[0] != "ok":
                raise RuntimeError(f"an exploration worker failed:\n{msg[1]}")
            for (i, taker), data in zip(moved, msg[1]):
                gifts[taker].append((nxt[i][0], data))
                nxt[i] = (nxt[i][0], taker)
        for w, pipe in enumerate(pipes):
            pipe.send(("keep", [fp for fp, owner in nxt if owner == w], gifts[w]))
        return nxt

    def _merge(self, frontier: list, pipes: list, actions: list, depth: int, expand: bool, report) -> list:
        """One level, walked in frontier order with each state's row taken from its owner's messages
        (read by one thread per worker as they come, so that no worker waits for the parent to need
        them): the next frontier, each new state owned by the worker that found it."""
        model, parents, graph, labels, coverage = self.model, self.parents, self.graph, self.labels, self.coverage
        invariants, action_props, sometimes = model.invariants, model.action_properties, model.sometimes
        examples = self.examples
        owned = Counter(w for _, w in frontier)
        inboxes = [queue.SimpleQueue() for _ in pipes]
        readers = [threading.Thread(target=_read, args=(pipes[w], -(-owned[w] // CHUNK), inboxes[w]), daemon=True)
                   for w in range(len(pipes))]
        for reader in readers:
            reader.start()
        rows_of: list[list] = [[] for _ in pipes]
        taken = [0] * len(pipes)
        transitions = 0
        nxt = []
        for fp, w in frontier:
            rows = rows_of[w]
            if taken[w] == len(rows):
                msg = inboxes[w].get()
                if msg[0] != "ok":
                    raise RuntimeError(f"an exploration worker failed:\n{msg[1]}")
                _, rows, new_actions, counts = msg
                rows_of[w], taken[w] = rows, 0
                actions[w] += new_actions
                coverage.update(counts)
            broken, label, dead, out, aids, fps, failed = rows[taken[w]]
            taken[w] += 1
            if label is not None:
                labels[fp] = (depth, label)
            for i in broken:
                if i >= 0:
                    report(invariants[i], fp)
                elif sometimes[-1 - i].id not in examples:
                    examples[sometimes[-1 - i].id] = (fp, depth)
            if not expand:
                continue
            if dead:
                report(DEADLOCK, fp)
            named = actions[w]
            for n, i in failed:
                report(action_props[i], fp, (named[n], None))
            transitions += out
            if graph is not None:
                graph[fp] = [(named[n], tf) for n, tf in zip(aids, fps)]
            for n, tf in zip(aids, fps):
                if tf not in parents:
                    parents[tf] = (fp, named[n])
                    nxt.append((tf, w))
        for reader in readers:
            reader.join()
        self.transitions += transitions
        return nxt

    def _finish(self, result: Result, violated: dict, coverage: Counter, transitions: int, depth: int,
                started: float) -> Result:
        model = self.model
        parents = self.parents
        result.distinct_states = len(parents)
        result.transitions = transitions
        result.depth = depth
        result.coverage = dict(sorted(coverage.items()))
        result.never_fired, system = model.never_fired(coverage)
        result.unfired_system = system if result.complete else []
        for prop in model.sometimes:
            if prop.id in self.examples:
                result.examples[prop.id] = self.examples[prop.id][1]
            elif result.complete:
                violated[prop.id] = Violation(prop, [], [])
        if self.check_liveness and result.complete:
            result.liveness_checked = True
            search = prepare(self)
            for prop in model.liveness:
                lasso, unreachable = check_liveness(self, prop, search)
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
