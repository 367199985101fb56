"""Level-synchronous breadth-first search on Apache Spark.

The frontier and the visited set are RDDs partitioned by fingerprint (the
fingerprint is the partition number's hash: never ``portable_hash``). The
executors build the same model from the registry as the in-process explorer
(one source of truth). Each level runs in three steps:

1. **expand**: each frontier partition computes its states' successors and
   sends on only ``(fingerprint, parent, action)``; action properties and
   deadlocks are checked here, where the parent, action and successor meet.
2. **dedupe**: the small records are shuffled by fingerprint, one parent kept
   per fingerprint (the smallest ``(parent, action)``, so runs are
   deterministic), and each visited partition (one set of fingerprints) removes
   what it already holds, in the same pass that adds the new fingerprints.
3. **materialise**: the new fingerprints go back to their parents' partitions,
   which rebuild each new state with ``next_state`` (one per new state, not one
   per transition), check the invariants, and send the state on to its own
   partition as the next frontier.

A violating state is not expanded further, as in-process. Counts, depth,
coverage, verdicts and counterexample lengths equal the in-process
explorer's; each level is checkpointed (``checkpoint.py``) so an interrupted
run continues where it stopped; ``(fingerprint, parent, action)`` links on
disk rebuild the shortest counterexamples; for liveness properties every
transition is written too, and the in-process liveness check runs on that
graph.
"""
from __future__ import annotations

import json
import marshal
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from pulsar_verify import registry
from pulsar_verify.explorer import DEADLOCK, Result, Violation, peak_rss_mb
from pulsar_verify.fingerprint import canon, fingerprint
from pulsar_verify.itf import trace_document
from pulsar_verify.model import Model, UsageError

from .checkpoint import Checkpoint
from .codec import dump_action, dump_state, load_action, load_state
from .session import spark_session

_models: dict = {}


def _model(spec) -> Model:
    model = _models.get(spec)
    if model is None:
        name, variant, values = spec
        model = _models[spec] = registry.build(name, variant, values=dict(values))
    return model


def _symmetric(model) -> bool:
    return type(model).canonicalize is not Model.canonicalize


def _labels(model, state) -> bytes | None:
    if not model.liveness:
        return None
    return marshal.dumps(tuple((p.trigger is None or bool(p.trigger(model, state)), bool(p.goal(model, state)))
                               for p in model.liveness), 2)


def by_fingerprint(fp: int) -> int:
    """Partition function: the fingerprint is already a stable hash."""
    return fp


def _pick(a, b):
    return a if (a[0], a[1]) <= (b[0], b[1]) else b


# -- the three steps, run on the executors -----------------------------------------------------
def _expand(spec, graph, rows):
    """Successors of a partition's states as ("S", succ fp, (fp, action)); transitions as
    ("E", fp, action bytes, succ fp) when the graph is kept; then one ("T", stats) record."""
    model = _model(spec)
    symmetric = _symmetric(model)
    action_props = model.action_properties
    transitions = 0
    coverage: Counter = Counter()
    deadlocks, action_bad = [], []
    for fp, blob in rows:
        s = load_state(blob)
        canon(s)  # memoises the parent's sub-values, which its successors share: as in-process
        succ = model.successors(s)
        if not succ and not model.is_terminal(s):
            deadlocks.append(fp)
        for a, t in succ:
            transitions += 1
            coverage[a.name] += 1
            for prop in action_props:
                if not prop.check(model, s, a, t):
                    action_bad.append((prop.id, fp, dump_action(a)))
            tf = fingerprint(model.canonicalize(t) if symmetric else t)
            key = dump_action(a)
            yield "S", tf, (fp, key)
            if graph:
                yield "E", fp, key, tf
    yield "T", transitions, (dict(coverage), deadlocks, action_bad)


def _dedupe(rows):
    """One partition of ``visited`` (a set of fingerprints) with the level's candidates for
    it: the candidates not visited as ("N", fp, (parent, action)), then the grown set as ("V", set)."""
    seen: set = set()
    fresh = []
    for key, value in rows:
        if key is None:
            seen = value
        else:
            fresh.append((key, value))
    grown = set(seen)
    for fp, link in fresh:
        if fp not in seen:
            grown.add(fp)
            yield "N", fp, link
    yield None, grown


def _materialise(spec, rows):
    """One frontier partition (fp, state bytes) with the new states whose parent it holds
    (parent fp, (fp, action)): each new state rebuilt, checked, and sent on as
    (fp, (state bytes, broken invariants, parent, action, labels))."""
    model = _model(spec)
    invariants = model.invariants
    blobs, children = {}, defaultdict(list)
    for key, value in rows:
        if type(value) is bytes:
            blobs[key] = value
        else:
            children[key].append(value)
    for parent, kids in children.items():
        s = load_state(blobs[parent])
        for fp, action in kids:
            t = model.next_state(s, load_action(action))
            broken = tuple(p.id for p in invariants if not p.check(model, t))
            yield fp, (dump_state(t), broken, parent, action, _labels(model, t))


def _summary(rows):
    """("C", number of new states, [(fp, broken invariants)] of those that broke one)."""
    count, found = 0, []
    for fp, value in rows:
        count += 1
        if value[1]:
            found.append((fp, value[1]))
    yield "C", count, found


def _link_row(row):
    fp, (blob, broken, parent, action, labels) = row
    return fp, parent, action, labels, bool(broken), None if broken else blob


# -- Parquet -------------------------------------------------------------------------------------
def _schemas():
    from pyspark.sql.types import BinaryType, BooleanType, LongType, StructField, StructType
    links = StructType([StructField("fp", LongType(), False), StructField("parent", LongType(), True),
                        StructField("action", BinaryType(), True), StructField("labels", BinaryType(), True),
                        StructField("bad", BooleanType(), False), StructField("state", BinaryType(), True)])
    edges = StructType([StructField("fp", LongType(), False), StructField("action", BinaryType(), False),
                        StructField("succ", LongType(), False)])
    return links, edges


def _write(spark, rdd, schema, path: Path) -> None:
    spark.createDataFrame(rdd, schema, verifySchema=False).write.mode("overwrite").parquet(path.as_uri())


def _read(spark, path: Path, what: str):
    try:
        return spark.read.parquet(path.as_uri())
    except Exception as exc:  # AnalysisException / Py4JJavaError: a damaged or missing file
        raise UsageError(f"corrupted checkpoint: cannot read {what} at {path}: "
                         f"{str(exc).strip().splitlines()[0][:200]}") from None


def _count(df, path: Path, what: str) -> int:
    try:
        return df.count()
    except Exception as exc:
        raise UsageError(f"corrupted checkpoint: cannot read {what} at {path}: "
                         f"{str(exc).strip().splitlines()[0][:200]}") from None


# -- the search ------------------------------------------------------------------------------------
class SparkExplorer:
    def __init__(self, model: Model, *, master="local[*]", out: Path | None = None, fresh=False,
                 max_depth=None, max_states=None, stop_at_first=False, progress=None, graph=None,
                 spark=None):
        self.model = model
        self.master = master
        self.max_depth = max_depth
        self.max_states = max_states
        self.stop_at_first = stop_at_first
        self.progress = progress
        self.graph = bool(model.liveness) if graph is None else graph
        self.spark = spark or spark_session(master)
        self.sc = self.spark.sparkContext
        if out is None:
            out = Path(tempfile.mkdtemp(prefix="pulsar-verify-spark-"))
            fresh = True
        self.out = Path(out)
        self.ckpt = Checkpoint(self.out / "spark")
        self.fresh = fresh
        self.spec = (model.name, model.config.variant, tuple(sorted(model.config.as_dict().items())))
        self.parts = max(2, self.sc.defaultParallelism)
        self.identity = {"model": model.name, "variant": model.config.variant,
                         "config": json.loads(json.dumps(model.config.as_dict())), "graph": self.graph}
        self.init_by_fp: dict[int, object] = {}

    # -- level 0, or the last complete level of a checkpoint -------------------------------------
    def _initial(self) -> dict:
        model = self.model
        symmetric = _symmetric(model)
        violated, rows = [], []
        for s in model.init_states():
            fp = fingerprint(model.canonicalize(s) if symmetric else s)
            if fp in self.init_by_fp:
                continue
            self.init_by_fp[fp] = s
            broken = [p.id for p in model.invariants if not p.check(model, s)]
            violated += [[pid, 0, fp, None] for pid in broken]
            rows.append((fp, None, None, _labels(model, s), bool(broken), None if broken else dump_state(s)))
        self.ckpt.partial_dir(0).mkdir(parents=True, exist_ok=True)
        _write(self.spark, self.sc.parallelize(rows, 1), _schemas()[0], self.ckpt.partial_dir(0) / "links.parquet")
        self.ckpt.commit(0)
        manifest = {**self.identity, "init": sorted(self.init_by_fp), "levels": 0,
                    "level_sizes": [len(rows)], "frontier_size": sum(1 for r in rows if not r[4]),
                    "transitions": 0, "coverage": {}, "violated": violated, "stats": [], "seconds": 0.0,
                    "done": False}
        self.ckpt.save(manifest)
        return manifest

    def _resume(self) -> dict:
        manifest = self.ckpt.load(self.identity)
        self.ckpt.discard_uncommitted(manifest["levels"])
        model = self.model
        symmetric = _symmetric(model)
        for s in model.init_states():
            self.init_by_fp.setdefault(fingerprint(model.canonicalize(s) if symmetric else s), s)
        if sorted(self.init_by_fp) != manifest.get("init"):
            raise UsageError(f"checkpoint {self.ckpt.root} was made by a different version of the model "
                             f"(its initial states differ); use --fresh to discard it")
        return manifest

    def _load_sets(self, manifest: dict):
        """The visited set and the frontier (the last level's states that broke no invariant),
        read back from the files and checked against the manifest."""
        fps = None
        for level, size in enumerate(manifest["level_sizes"]):
            path = self.ckpt.level_dir(level) / "links.parquet"
            df = _read(self.spark, path, f"level {level}")
            if _count(df, path, f"level {level}") != size:
                raise UsageError(f"corrupted checkpoint: level {level} at {path} does not hold the "
                                 f"{size:,} states its manifest records")
            fps = df.select("fp") if fps is None else fps.union(df.select("fp"))
            last = df
        visited = (fps.rdd.map(lambda r: (r[0], None)).partitionBy(self.parts, by_fingerprint)
                   .mapPartitions(lambda rows: [(None, {fp for fp, _ in rows})], preservesPartitioning=True)
                   .persist())
        frontier = (last.where("NOT bad").select("fp", "state").rdd.map(lambda r: (r[0], bytes(r[1])))
                    .partitionBy(self.parts, by_fingerprint).persist())
        return visited, frontier

    # -- one level -------------------------------------------------------------------------------
    def _level(self, depth: int, visited, frontier, manifest: dict):
        spec, parts, graph = self.spec, self.parts, self.graph
        partial = self.ckpt.partial_dir(depth + 1)
        partial.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()

        expanded = frontier.mapPartitions(lambda rows: _expand(spec, graph, rows)).persist()
        best = (expanded.filter(lambda r: r[0] == "S").map(lambda r: (r[1], r[2]))
                .reduceByKey(_pick, parts, by_fingerprint))
        # Co-partitioned with ``visited``: the union lines up partition by partition, no shuffle.
        deduped = visited.union(best).mapPartitions(_dedupe, preservesPartitioning=True).persist()
        to_parents = (deduped.filter(lambda r: r[0] == "N").map(lambda r: (r[2][0], (r[1], r[2][1])))
                      .partitionBy(parts, by_fingerprint))
        children = (frontier.union(to_parents).mapPartitions(lambda rows: _materialise(spec, rows))
                    .persist())
        # One job for every figure of the level: the expansion's and the new states'.
        summary = (expanded.filter(lambda r: r[0] == "T").map(lambda r: ("T", r[1], r[2]))
                   .union(children.mapPartitions(_summary)).collect())
        _write(self.spark, children.map(_link_row), _schemas()[0], partial / "links.parquet")
        if graph:
            _write(self.spark, expanded.filter(lambda r: r[0] == "E").map(lambda r: (r[1], r[2], r[3])),
                   _schemas()[1], self.ckpt.edges_path(depth))
        next_frontier = (children.filter(lambda r: not r[1][1]).map(lambda r: (r[0], r[1][0]))
                         .partitionBy(parts, by_fingerprint).persist())
        new_visited = deduped.filter(lambda r: r[0] is None)
        if (depth + 1) % 16 == 0:  # cut the lineage that grows by one union per level
            new_visited.persist()
            new_visited.localCheckpoint()

        transitions, count, coverage = 0, 0, Counter(manifest["coverage"])
        violated = manifest["violated"]
        known = {v[0] for v in violated}

        def note(pid, level, fp, action=None):
            if pid not in known:
                known.add(pid)
                violated.append([pid, level, fp, action])

        found = []
        for kind, number, detail in summary:
            if kind == "C":
                count += number
                found += detail
                continue
            cov, deadlocks, action_bad = detail
            transitions += number
            coverage.update(cov)
            if deadlocks:
                note(DEADLOCK.id, depth, min(deadlocks))
            for pid, fp, a in sorted(action_bad):
                note(pid, depth, fp, a.hex())
        for fp, broken in sorted(found):
            for pid in broken:
                note(pid, depth + 1, fp)
        seconds = time.perf_counter() - started
        stats = {"level": depth + 1, "expanded": manifest["frontier_size"], "new": count,
                 "transitions": transitions, "states": sum(manifest["level_sizes"]) + count,
                 "seconds": round(seconds, 3), "rate": round(count / seconds, 1) if seconds else 0.0}
        manifest = {**manifest, "levels": depth + 1 if count else depth,
                    "level_sizes": manifest["level_sizes"] + ([count] if count else []),
                    "frontier_size": count - len(found) if count else 0,
                    "transitions": manifest["transitions"] + transitions, "coverage": dict(coverage),
                    "violated": violated, "stats": manifest["stats"] + [stats],
                    "seconds": manifest["seconds"] + seconds, "done": count == 0}
        return manifest, new_visited, next_frontier, [expanded, children, deduped], partial

    def run(self) -> Result:
        wall = time.perf_counter()
        self.ckpt.start(self.fresh)
        resumed = self.ckpt.exists()
        manifest = self._resume() if resumed else self._initial()
        visited, frontier = self._load_sets(manifest)
        held = [visited, frontier]
        complete = True
        while not manifest["done"]:
            depth = manifest["levels"]
            if ((self.max_depth is not None and depth >= self.max_depth)
                    or (self.stop_at_first and manifest["violated"])
                    or (self.max_states is not None and sum(manifest["level_sizes"]) >= self.max_states)):
                complete = False
                break
            manifest, visited_next, frontier_next, level_rdds, partial = self._level(
                depth, visited, frontier, manifest)
            if manifest["done"]:
                shutil.rmtree(partial)
            else:
                self.ckpt.commit(depth + 1)
            self.ckpt.save(manifest)
            for rdd in held + level_rdds[:2]:
                rdd.unpersist()
            visited, frontier = visited_next, frontier_next
            held = [level_rdds[2], frontier]
            if self.progress is not None:
                total = sum(manifest["level_sizes"])
                self.progress({"depth": manifest["levels"], "states": total, "frontier": manifest["frontier_size"],
                               "level_done": True, "rate": total / max(manifest["seconds"], 1e-9),
                               "level_seconds": manifest["stats"][-1]["seconds"]})
        for rdd in held:
            rdd.unpersist()
        result = self._result(manifest, complete)
        result.seconds = manifest["seconds"] if resumed else time.perf_counter() - wall
        self._write_results(result, manifest)
        return result

    # -- results --------------------------------------------------------------------------------
    def _paths(self, wanted: dict[int, int]) -> dict[int, list[int]]:
        """Fingerprint path from an initial state to each wanted (fp -> level)."""
        paths = {fp: [fp] for fp in wanted}
        at = {fp: fp for fp in wanted}
        for level in range(max(wanted.values(), default=0), 0, -1):
            need = {at[fp] for fp, lv in wanted.items() if lv >= level}
            df = _read(self.spark, self.ckpt.level_dir(level) / "links.parquet", f"level {level}")
            from pyspark.sql.functions import col
            parents = {r[0]: (r[1], bytes(r[2])) for r in
                       df.where(col("fp").isin(list(need))).select("fp", "parent", "action").collect()}
            for fp, lv in wanted.items():
                if lv >= level:
                    parent, action = parents[at[fp]]
                    paths[fp].append(action)
                    paths[fp].append(parent)
                    at[fp] = parent
        return paths

    def _trace(self, path: list) -> tuple[list, list]:
        """States and actions along a [fp, action, parent, action, parent, ..., init fp] path."""
        actions = [load_action(a) for a in path[1::2]][::-1]
        state = self.init_by_fp[path[-1]]
        states = [state]
        for a in actions:
            state = self.model.next_state(state, a)
            states.append(state)
        return states, actions

    def _result(self, manifest: dict, complete: bool) -> Result:
        model = self.model
        result = Result(model.name, model.config.variant, model.config.as_dict(), engine=f"spark[{self.sc.master}]")
        wanted = {fp: level for _, level, fp, _ in manifest["violated"]}
        paths = self._paths(wanted)
        violations = []
        for pid, level, fp, action in manifest["violated"]:
            prop = DEADLOCK if pid == DEADLOCK.id else model.property(pid)
            states, actions = self._trace(paths[fp])
            if action is not None:
                a = load_action(bytes.fromhex(action))
                actions.append(a)
                states.append(model.next_state(states[-1], a))
            violations.append(Violation(prop, states, actions))
        result.complete = complete
        result.level_sizes = list(manifest["level_sizes"])
        result.distinct_states = sum(result.level_sizes)
        result.transitions = manifest["transitions"]
        result.depth = manifest["levels"]
        result.coverage = dict(sorted(manifest["coverage"].items()))
        result.never_fired = sorted(set(model.action_names()) - set(result.coverage))
        if self.graph and model.liveness and complete:
            from .graph import check_liveness_on_disk
            result.liveness_checked = True
            for prop, lasso, unreachable in check_liveness_on_disk(self, manifest):
                result.unreachable_goal[prop.id] = unreachable
                if lasso is not None:
                    violations.append(lasso)
        result.violations = sorted(violations, key=lambda v: (v.length, v.prop.id))
        result.peak_rss_mb = peak_rss_mb()
        result.level_stats = manifest["stats"]
        return result

    def _write_results(self, result: Result, manifest: dict) -> None:
        from pyspark.sql.types import (DoubleType, LongType, StringType, StructField, StructType)
        root = self.ckpt.root
        stats = manifest["stats"]
        (root / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
        schema = StructType([StructField("level", LongType()), StructField("expanded", LongType()),
                             StructField("new", LongType()), StructField("transitions", LongType()),
                             StructField("states", LongType()), StructField("seconds", DoubleType()),
                             StructField("rate", DoubleType())])
        rows = [(s["level"], s["expanded"], s["new"], s["transitions"], s["states"], float(s["seconds"]),
                 float(s["rate"])) for s in stats]
        self.spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(
            (root / "stats.parquet").as_uri())
        docs = [{**v.as_dict(), "itf": trace_document(self.model, v.states, v.actions, v.as_dict(), v.loop)}
                for v in result.violations]
        (root / "violations.json").write_text(json.dumps(docs, indent=1) + "\n")
        vschema = StructType([StructField("property", StringType()), StructField("kind", StringType()),
                              StructField("length", LongType()), StructField("itf", StringType())])
        self.spark.createDataFrame([(d["property"], d["kind"], d["length"], json.dumps(d["itf"])) for d in docs],
                                   vschema).coalesce(1).write.mode("overwrite").parquet(
            (root / "violations.parquet").as_uri())


def explore_spark(model: Model, **kw) -> Result:
    return SparkExplorer(model, **kw).run()
