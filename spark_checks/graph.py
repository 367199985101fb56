"""Liveness on the state graph a Spark run wrote: the in-process check, run on the files.

The run's links (every state with its parent, action and liveness labels) and edges (every transition out of an expanded
state) are read back into the shape ``pulsar_verify.liveness`` works on, so
both engines share one liveness check and give the same lassos.
"""
from __future__ import annotations

import marshal

from pulsar_verify.explorer import path_to
from pulsar_verify.liveness import check_liveness, prepare

from .checkpoint import load_action, read_parts, rows


class DiskGraph:
    """What ``check_liveness`` reads from an explorer: model, graph, labels, path_to."""

    def __init__(self, explorer, manifest: dict):
        self.model = explorer.model
        self.init_by_fp = explorer.init_by_fp
        self.parents: dict = {}
        self.labels: dict = {}
        self.graph: dict = {}
        ckpt, parts = explorer.ckpt, manifest["partitions"]
        # Millions of edges carry a few hundred distinct actions and label tuples: decode each once.
        actions: dict = {}
        labelled: dict = {}
        columns = ["fp", "parent", "action", "labels"]
        for level in range(manifest["levels"] + 1):
            table = read_parts(ckpt.level_dir(level) / "links.parquet", columns, f"level {level}", parts)
            for fp, parent, action, labels in rows(table, columns):
                a = None if action is None else actions.get(action) or actions.setdefault(action, load_action(action))
                self.parents[fp] = (parent, a)
                mark = labelled.get(labels) or labelled.setdefault(labels, marshal.loads(labels))
                self.labels[fp] = (level, mark)
                self.graph[fp] = []  # every state is expanded, a violating one too
        for level in range(manifest["levels"] + 1):
            table = read_parts(ckpt.edges_path(level), ["fp", "action", "succ"],
                               f"the edges out of level {level}", parts)
            graph = self.graph
            for fp, action, succ in rows(table, ["fp", "action", "succ"]):
                a = actions.get(action) or actions.setdefault(action, load_action(action))
                graph[fp].append((a, succ))

    def path_to(self, fp: int) -> tuple[list, list]:
        return path_to(self.model, self.parents, self.init_by_fp, fp)


def check_liveness_on_disk(explorer, manifest: dict):
    """(property, lasso or None, states that can never reach the goal) per liveness property."""
    view = DiskGraph(explorer, manifest)
    search = prepare(view)
    for prop in explorer.model.liveness:
        lasso, unreachable = check_liveness(view, prop, search)
        yield prop, lasso, unreachable
