"""Level-synchronous breadth-first search on Apache Spark.

The frontier and the visited set are RDDs partitioned by fingerprint (the
fingerprint is the partition number's hash: never ``portable_hash``). The
executors build the same model from the registry as the in-process explorer
(one source of truth). Each level is two steps:

1. **expand**: each frontier partition decodes its states, computes their
   successors, checks action properties and deadlocks (where parent, action and
   successor meet), and keeps one record per distinct successor: the smallest
   ``(parent, action)`` reaching it (so runs are deterministic), its encoding
   (the bytes its fingerprint hashed: no extra serialisation), the invariants
   it breaks and its liveness labels.
2. **dedupe**: the records are shuffled by fingerprint; each visited partition
   (one set of fingerprints) keeps the smallest record per fingerprint, drops
   what it already holds, and grows in the same pass. The new states are the
   next frontier, already on their own partition.

A violating state is not expanded further, as in-process. Counts, depth,
coverage, verdicts and counterexample lengths equal the in-process explorer's;
each level is checkpointed (``checkpoint.py``) so an interrupted run continues
where it stopped; ``(fingerprint, parent, action)`` links on disk rebuild the
shortest counterexamples; for liveness properties every transition is written
too, and the in-process liveness check runs on that graph (``graph.py``).
"""
from __future__ import annotations

import gc
import json
import marshal
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from pulsar_verify import registry
from pulsar_verify.explorer import DEADLOCK, Result, Violation, peak_rss_mb, states_along
from pulsar_verify.fingerprint import decode, encode, fingerprint, fingerprint_encoded
from pulsar_verify.itf import trace_document
from pulsar_verify.model import Action, Model, UsageError

from .checkpoint import Checkpoint
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


def dump_action(action: Action) -> bytes:
    """Actions are plain data (a label and primitive parameters): ``marshal`` is stable and
    executes no code when read back."""
    return marshal.dumps((action.name, action.params), 2)


def load_action(blob: bytes) -> Action:
    name, params = marshal.loads(blob)
    return Action(name, params)


# -- the two steps, run on the executors --------------------------------------------------------
def _without_gc(fn):
    """Run a partition function with the cyclic collector paused, as the in-process explorer
    does: states are acyclic, and the collector's rescans of the live states and the
    fingerprint memo cost several times the model's own work."""
    def run(*args):
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield from fn(*args)
        finally:
            if enabled:
                gc.enable()
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


@_without_gc
def _expand(spec, graph, rows):
    """A frontier partition's successors, one record per distinct one:
    (fp, ("S", parent, action bytes, encoding, broken invariants, labels)); transitions as
    (fp, ("E", action bytes, succ fp)) when the graph is kept; then (0, ("T", stats))."""
    model = _model(spec)
    symmetric = _symmetric(model)
    action_props = model.action_properties
    invariants = model.invariants
    transitions = 0
    coverage: Counter = Counter()
    deadlocks, action_bad = [], []
    best: dict = {}
    for fp, blob in rows:
        s = decode(blob)
        succ = model.successors(s)
        if not succ and not model.is_terminal(s):
            deadlocks.append(fp)
        for a, t in succ:
            transitions += 1
            coverage[a.name] += 1
            key = dump_action(a)
            for prop in action_props:
                if not prop.check(model, s, a, t):
                    action_bad.append((prop.id, fp, key))
            if symmetric:
                tf, data = fingerprint(model.canonicalize(t)), encode(t)
            else:
                tf, data = fingerprint_encoded(t)
            if graph:
                yield fp, ("E", key, tf)
            known = best.get(tf)
            if known is None:
                broken = tuple(p.id for p in invariants if not p.check(model, t))
                best[tf] = ("S", fp, key, data, broken, _labels(model, t))
            elif (fp, key) < (known[1], known[2]):
                best[tf] = ("S", fp, key, data, known[4], known[5])
    yield from best.items()
    yield 0, ("T", transitions, dict(coverage), deadlocks, action_bad)


@_without_gc
def _dedupe(rows):
    """One partition of ``visited`` (None, set of fingerprints) with the records shuffled to it:
    the smallest record of each fingerprint not visited as ("N", fp, record), the grown set as
    (None, set), transitions and stats passed on, then ("C", new count, [(fp, broken)])."""
    seen: set = set()
    best: dict = {}
    for key, value in rows:
        if key is None:
            seen = value
        elif value[0] == "S":
            known = best.get(key)
            if known is None or (value[1], value[2]) < (known[1], known[2]):
                best[key] = value
        elif value[0] == "E":
            yield "E", key, value[1], value[2]
        else:
            yield value
    # The set was unpickled from the cache for this task alone: it grows in place (each candidate
    # fingerprint is distinct, so a fingerprint added here is never tested again).
    found, count = [], 0
    for fp, record in best.items():
        if fp not in seen:
            seen.add(fp)
            count += 1
            if record[4]:
                found.append((fp, record[4]))
            yield "N", fp, record
    yield None, seen
    yield "C", count, found


def _link_row(row):
    _, fp, (_, parent, action, data, broken, labels) = row
    return fp, parent, action, labels, bool(broken), None if broken else data


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


def _unreadable(what: str, path: Path, exc: Exception) -> UsageError:
    return UsageError(f"corrupted checkpoint: cannot read {what} at {path}: "
                      f"{str(exc).strip().splitlines()[0][:200]}")


def _read(spark, path: Path, what: str):
    try:
        return spark.read.parquet(path.as_uri())
    except Exception as exc:  # AnalysisException / Py4JJavaError: a damaged or missing file
        raise _unreadable(what, path, exc) from None


def _count(df, path: Path, what: str) -> int:
    try:
        return df.count()
    except Exception as exc:  # a damaged file is found when its rows are read
        raise _unreadable(what, path, exc) from None


# -- the search ------------------------------------------------------------------------------------
class SparkExplorer:
    def __init__(self, model: Model, *, master="local[*]", out: Path | None = None, fresh=False,
                 max_depth=None, max_states=None, stop_at_first=False, progress=None, graph=None,
                 spark=None, partitions: int | None = None):
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
        self.parts = partitions or max(2, self.sc.defaultParallelism)
        from pyspark import StorageLevel
        self.storage = StorageLevel.MEMORY_AND_DISK
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
            rows.append((fp, None, None, _labels(model, s), bool(broken), None if broken else encode(s)))
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
                   .persist(self.storage))
        frontier = (last.where("NOT bad").select("fp", "state").rdd.map(lambda r: (r[0], bytes(r[1])))
                    .partitionBy(self.parts, by_fingerprint).persist(self.storage))
        return visited, frontier

    # -- one level -------------------------------------------------------------------------------
    def _level(self, depth: int, visited, frontier, manifest: dict):
        spec, parts, graph = self.spec, self.parts, self.graph
        partial = self.ckpt.partial_dir(depth + 1)
        partial.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()

        shuffled = (frontier.mapPartitions(lambda rows: _expand(spec, graph, rows))
                    .partitionBy(parts, by_fingerprint))
        # Co-partitioned with ``visited``: the union lines up partition by partition, no shuffle.
        deduped = (visited.union(shuffled).mapPartitions(_dedupe, preservesPartitioning=True)
                   .persist(self.storage))
        # One job for every figure of the level; the files and the next level read the cache.
        summary = deduped.filter(lambda r: r[0] in ("T", "C")).collect()
        new = deduped.filter(lambda r: r[0] == "N")
        _write(self.spark, new.map(_link_row), _schemas()[0], partial / "links.parquet")
        if graph:
            _write(self.spark, deduped.filter(lambda r: r[0] == "E").map(lambda r: r[1:]), _schemas()[1],
                   self.ckpt.edges_path(depth))
        next_frontier = new.filter(lambda r: not r[2][4]).map(lambda r: (r[1], r[2][3]), preservesPartitioning=True)
        next_visited = deduped.filter(lambda r: r[0] is None)
        if (depth + 1) % 16 == 0:  # cut the lineage that grows by one union per level
            next_visited = next_visited.persist(self.storage)
            next_visited.localCheckpoint()

        transitions, count, coverage = 0, 0, Counter(manifest["coverage"])
        violated = manifest["violated"]
        known = {v[0] for v in violated}

        def note(pid, level, fp, action=None):
            if pid not in known:
                known.add(pid)
                violated.append([pid, level, fp, action])

        found = []
        for record in summary:
            if record[0] == "C":
                count += record[1]
                found += record[2]
                continue
            _, part_transitions, cov, deadlocks, action_bad = record
            transitions += part_transitions
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
        return manifest, next_visited, next_frontier, deduped, partial

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
            manifest, visited_next, frontier_next, deduped, partial = self._level(
                depth, visited, frontier, manifest)
            if manifest["done"]:
                shutil.rmtree(partial)
            else:
                self.ckpt.commit(depth + 1)
            self.ckpt.save(manifest)
            for rdd in held:  # the next level reads only this level's cache
                rdd.unpersist()
            visited, frontier = visited_next, frontier_next
            held = [deduped, visited]
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
        return states_along(self.model, self.init_by_fp[path[-1]], actions), actions

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
