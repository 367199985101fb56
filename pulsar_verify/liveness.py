"""Liveness over the explored state graph: ``trigger ~> goal`` under weak fairness.

A violation is a *fair cycle*: a strongly connected set of states, reachable
from a trigger state without passing a goal state, in which the goal never
holds and every weakly fair action instance that stays enabled throughout is
also taken. (For weak fairness, a strongly connected component that is unfair
has no fair sub-cycle, so checking components suffices.) A state in which no
weakly fair action is enabled may also stutter forever (nothing obliges the
system to take an unfair action), so it is a violation on its own. Each violation comes
with a lasso: a shortest prefix from an initial state and the loop.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Protocol

from .model import Action, Model, Property
from .results import Violation

try:
    from . import _liveness
except ImportError:  # built by pip install where a C compiler is present; else the search in Python
    _liveness = None


class StateGraph(Protocol):
    """What the check reads of an exploration, in-process (``Explorer``) or from a Spark run's files."""

    model: Model
    graph: dict  # fingerprint -> [(action, successor fingerprint)]
    labels: dict  # fingerprint -> (invariant-broken flag, per liveness property (trigger, goal))

    def path_to(self, fp: int) -> tuple[list, list]: ...


def _path_within(graph, nodes: set, src: int, dst: int) -> list[tuple[Action, int]]:
    """Shortest non-empty-if-needed path src -> dst inside ``nodes`` as (action, node) steps."""
    if src == dst:
        return []
    prev = {src: None}
    queue = deque([src])
    while queue:
        u = queue.popleft()
        for a, v in graph.get(u, ()):
            if v in nodes and v not in prev:
                prev[v] = (u, a)
                if v == dst:
                    steps = []
                    while prev[v] is not None:
                        u, a = prev[v]
                        steps.append((a, v))
                        v = u
                    steps.reverse()
                    return steps
                queue.append(v)
    raise AssertionError("nodes of one SCC must be mutually reachable")


def reverse_graph(graph: dict) -> dict[int, list[int]]:
    """Predecessors of each state (built once per graph, shared by the properties)."""
    reverse: dict[int, list[int]] = {}
    for u, edges in graph.items():
        for _, v in edges:
            reverse.setdefault(v, []).append(u)
    return reverse


def _components(nodes, adj: dict) -> list[set]:
    """Strongly connected components of a graph given as ``adj`` (node -> successors), visiting
    ``nodes`` in order: networkx's ``strongly_connected_components`` (Nuutila's variant of Tarjan's
    algorithm, iterative) over plain adjacency lists, without building networkx's graph."""
    preorder: dict = {}
    lowlink: dict = {}
    found: set = set()
    pending: list = []
    i = 0
    out = []
    neighbors = {v: iter(adj[v]) for v in nodes}
    for source in nodes:
        if source in found:
            continue
        queue = [source]
        while queue:
            v = queue[-1]
            if v not in preorder:
                i += 1
                preorder[v] = i
            done = True
            for w in neighbors[v]:
                if w not in preorder:
                    queue.append(w)
                    done = False
                    break
            if done:
                low = preorder[v]
                for w in adj[v]:
                    if w not in found:
                        low = min(low, lowlink[w] if preorder[w] > preorder[v] else preorder[w])
                lowlink[v] = low
                queue.pop()
                if low == preorder[v]:
                    scc = {v}
                    while pending and preorder[pending[-1]] > preorder[v]:
                        scc.add(pending.pop())
                    found.update(scc)
                    out.append(scc)
                else:
                    pending.append(v)
    return out


class _Search:
    """The search ``_liveness.c`` compiles, in Python (the reference, and the fallback where the
    extension was not built). ``search(index)`` returns, for the ``index``-th liveness property, the
    number of states reachable from a trigger state from which the goal can never be reached, and
    ``None`` or the chosen candidate: its states (ascending fingerprints), its entry, the trigger
    state its shortest prefix starts from, the prefix's actions from there, the first edge inside it
    of each weakly fair action enabled in all its states (any order), and its first inside edge.

    A candidate is a state with no weakly fair action enabled (it may stutter), or a fair cycle: a
    strongly connected set of the states reachable from a trigger through non-goal states, in which
    every weakly fair action instance enabled throughout is also taken. The one chosen has the
    shortest prefix, then is a stutter, then has the least fingerprint; its entry is its state with the
    shortest prefix (then least fingerprint); edges are taken in the order of their states'
    fingerprints, then in the order the model lists them; shortest prefixes break ties by fingerprint.
    So the lasso depends on the graph alone, not on the order it was recorded in."""

    def __init__(self, graph: dict, labels: dict, fairs: list):
        self.graph, self.labels, self.fairs = graph, labels, fairs
        self.reverse = reverse_graph(graph)

    def search(self, index: int):
        graph, labels, fair = self.graph, self.labels, self.fairs[index]
        not_goal = {fp for fp in graph if not labels[fp][1][index][1]}
        starts = sorted(fp for fp in not_goal if labels[fp][1][index][0])
        reach: set[int] = set(starts)
        queue = deque(starts)
        while queue:
            u = queue.popleft()
            for _, v in graph[u]:
                if v in not_goal and v not in reach:
                    reach.add(v)
                    queue.append(v)
        can_reach = {fp for fp in graph if labels[fp][1][index][1]}
        queue = deque(can_reach)
        while queue:
            v = queue.popleft()
            for u in self.reverse.get(v, ()):
                if u not in can_reach:
                    can_reach.add(u)
                    queue.append(u)
        unreachable = sum(1 for fp in reach if fp not in can_reach)

        best: dict[int, int] = {}
        prev: dict[int, tuple[int, Action] | None] = {}
        heap = [(labels[fp][0], fp) for fp in starts]
        heapq.heapify(heap)
        for d, fp in heap:
            best[fp], prev[fp] = d, None
        while heap:
            d, u = heapq.heappop(heap)
            if d > best[u]:
                continue
            for a, v in graph[u]:
                if v in reach and d + 1 < best.get(v, 1 << 60):
                    best[v], prev[v] = d + 1, (u, a)
                    heapq.heappush(heap, (d + 1, v))

        ordered = sorted(reach)
        candidates = [((best[u], 0, u), [u], [], None) for u in ordered
                      if not any(a.name in fair for a, _ in graph[u])]  # stutters
        adj = {u: [v for _, v in graph[u] if v in reach] for u in ordered}
        for comp in _components(ordered, adj):
            nodes = sorted(comp)
            if len(nodes) == 1 and nodes[0] not in adj[nodes[0]]:
                continue
            inside = [(a, u, v) for u in nodes for a, v in graph[u] if v in comp]
            always_enabled = set.intersection(*({a for a, _ in graph[u] if a.name in fair} for u in nodes))
            if always_enabled - {a for a, _, _ in inside}:
                continue  # some fair action stays enabled and is never taken: not a fair run
            must = [next(e for e in inside if e[0] == a) for a in always_enabled]
            candidates.append(((min(best[u] for u in nodes), 1, nodes[0]), nodes, must, inside[0]))
        if not candidates:
            return unreachable, None
        _, nodes, must, first = min(candidates, key=lambda c: c[0])
        entry = min(nodes, key=lambda fp: (best[fp], fp))
        tail: list[Action] = []
        root = entry
        while prev[root] is not None:
            root, a = prev[root]
            tail.append(a)
        tail.reverse()
        return unreachable, (nodes, entry, root, tail, must, first)


def prepare(ex: StateGraph):
    """``search(index)`` over ``ex``'s graph, for each of its model's liveness properties: compiled
    when ``_liveness`` was built, else ``_Search``'s."""
    fairs = [frozenset(p.fair) for p in ex.model.liveness]
    if _liveness is None:
        return _Search(ex.graph, ex.labels, fairs).search
    prepared = _liveness.prepare(ex.graph, ex.labels, fairs)
    return lambda index: _liveness.search(prepared, index)


def check_liveness(ex: StateGraph, prop: Property, search=None) -> tuple[Violation | None, int]:
    """Returns the lasso of the fair cycle (or stutter) with the shortest prefix (or None) and the
    number of states, reachable from a trigger, from which the goal can never be reached.
    ``search`` is ``prepare(ex)``, when the caller checks several properties."""
    unreachable, found = (search or prepare(ex))(ex.model.liveness.index(prop))
    if found is None:
        return None, unreachable
    nodes, entry, root, tail, must, first = found
    states, actions = ex.path_to(root)
    actions = actions + tail
    # Around the cycle: through an edge of each fair action enabled throughout, then back to the entry.
    must_take = sorted(must, key=lambda e: str(e[0])) or ([first] if first else [])
    comp = set(nodes)
    loop_actions: list[Action] = []
    at = entry
    for a, u, v in must_take:
        loop_actions += [x for x, _ in _path_within(ex.graph, comp, at, u)] + [a]
        at = v
    if must_take:
        loop_actions += [x for x, _ in _path_within(ex.graph, comp, at, entry)]

    state = states[0]
    states = [state]
    for a in actions + loop_actions:
        state = ex.model.next_state(state, a)
        states.append(state)
    return Violation(prop, states, actions + loop_actions, loop=len(actions)), unreachable
