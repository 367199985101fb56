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
    """Strongly connected components of a graph given as ``adj`` (node -> successors, without
    repeats), visiting ``nodes`` in order: networkx's ``strongly_connected_components`` (Nuutila's
    variant of Tarjan's algorithm, iterative) over plain adjacency lists, so the components, their
    order and each set's iteration order are what networkx gives, without building its graph."""
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


def check_liveness(ex: StateGraph, prop: Property, reverse: dict | None = None) -> tuple[Violation | None, int]:
    """Returns the lasso of the shortest fair cycle (or None) and the number of
    states, reachable from a trigger, from which the goal can never be reached.
    ``reverse`` is ``reverse_graph(ex.graph)``, when the caller checks several properties."""
    index = ex.model.liveness.index(prop)
    labels = ex.labels
    graph = ex.graph
    fair = set(prop.fair)
    not_goal = {fp for fp in graph if not labels[fp][1][index][1]}
    starts = [fp for fp in not_goal if labels[fp][1][index][0]]

    # States reachable from a trigger state through non-goal states.
    reach: set[int] = set(starts)
    queue = deque(starts)
    while queue:
        u = queue.popleft()
        for _, v in graph[u]:
            if v in not_goal and v not in reach:
                reach.add(v)
                queue.append(v)

    # States that can still reach the goal (backwards over the whole graph).
    if reverse is None:
        reverse = reverse_graph(graph)
    can_reach = {fp for fp in graph if labels[fp][1][index][1]}
    queue = deque(can_reach)
    while queue:
        v = queue.popleft()
        for u in reverse.get(v, ()):
            if u not in can_reach:
                can_reach.add(u)
                queue.append(u)
    unreachable = sum(1 for fp in reach if fp not in can_reach)

    adj = {u: list(dict.fromkeys(v for _, v in graph[u] if v in reach)) for u in reach}
    fair_sccs = [({u}, []) for u in reach if not any(a.name in fair for a, _ in graph[u])]  # stutters
    for comp in _components(reach, adj):
        node = next(iter(comp))
        if len(comp) == 1 and node not in adj[node]:
            continue
        inside = [(u, a, v) for u in comp for a, v in graph[u] if v in comp]
        taken = {a for _, a, _ in inside}
        always_enabled = None
        for u in comp:
            enabled = {a for a, _ in graph[u] if a.name in fair}
            always_enabled = enabled if always_enabled is None else always_enabled & enabled
        if always_enabled - taken:
            continue  # some fair action stays enabled and is never taken: not a fair run
        must_take = [next(e for e in inside if e[1] == a) for a in sorted(always_enabled, key=str)]
        if not must_take:
            must_take = [inside[0]]
        fair_sccs.append((comp, must_take))
    if not fair_sccs:
        return None, unreachable

    # Shortest prefix: initial state -> trigger state (BFS tree) -> non-goal path to the cycle.
    depth = {fp: labels[fp][0] for fp in starts}
    best: dict[int, int] = {}
    prev: dict[int, tuple[int, Action] | None] = {}
    heap = [(d, fp) for fp, d in depth.items()]
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
    comp, must_take = min(fair_sccs, key=lambda c: (min(best[fp] for fp in c[0]), len(c[1]) > 0))
    entry = min(comp, key=lambda fp: best[fp])

    tail: list[Action] = []
    node = entry
    while prev[node] is not None:
        node, a = prev[node]
        tail.append(a)
    tail.reverse()
    states, actions = ex.path_to(node)
    actions = actions + tail

    loop_actions: list[Action] = []
    at = entry
    for u, a, v in must_take:
        loop_actions += [x for x, _ in _path_within(graph, comp, at, u)] + [a]
        at = v
    if must_take:
        loop_actions += [x for x, _ in _path_within(graph, comp, at, entry)]

    state = states[0]
    states = [state]
    for a in actions + loop_actions:
        state = ex.model.next_state(state, a)
        states.append(state)
    return Violation(prop, states, actions + loop_actions, loop=len(actions)), unreachable
