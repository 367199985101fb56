"""Level-synchronous breadth-first search on Apache Spark.

The frontier and the visited set are RDDs partitioned by fingerprint. Each
level expands the frontier's partitions in parallel (the executors build the
same model from the registry: one source of truth), keeps one parent per new
state (the smallest ``(parent fingerprint, action)``, so the run is
deterministic), drops states already visited, and checks every invariant and
action property. Counts and verdicts equal the in-process explorer's; the
kept ``(fingerprint, parent, action)`` links rebuild a shortest counterexample.
"""
from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from collections import Counter

from pulsar_verify import registry
from pulsar_verify.explorer import DEADLOCK, Result, Violation, peak_rss_mb
from pulsar_verify.fingerprint import fingerprint
from pulsar_verify.model import Model, UsageError

_models: dict = {}


def _model(spec) -> Model:
    model = _models.get(spec)
    if model is None:
        name, variant, values = spec
        model = _models[spec] = registry.build(name, variant, values=dict(values))
    return model


def _expand(spec, rows):
    """Successors of a partition's states, then one stats record for the partition."""
    model = _model(spec)
    symmetric = type(model).canonicalize is not Model.canonicalize
    transitions = 0
    coverage: Counter = Counter()
    deadlocks, action_bad = [], []
    for fp, blob in rows:
        s = pickle.loads(blob)
        succ = model.successors(s)
        if not succ and not model.is_terminal(s):
            deadlocks.append(fp)
        for a, t in succ:
            transitions += 1
            coverage[a.name] += 1
            for prop in model.action_properties:
                if not prop.check(model, s, a, t):
                    action_bad.append((prop.id, fp, a))
            tf = fingerprint(model.canonicalize(t) if symmetric else t)
            yield ("S", tf, (fp, a, pickle.dumps(t, 5)))
    yield ("T", 0, (transitions, dict(coverage), deadlocks, action_bad))


def _new_states(spec, rows):
    """Rows of one partition of ``visited`` (value None) union the level's successors:
    the successors not visited, each with the invariants it violates."""
    model = _model(spec)
    seen, fresh = set(), []
    for fp, value in rows:
        if value is None:
            seen.add(fp)
        else:
            fresh.append((fp, value))
    for fp, (parent, action, blob) in fresh:
        if fp in seen:
            continue
        s = pickle.loads(blob)
        broken = tuple(p.id for p in model.invariants if not p.check(model, s))
        yield fp, (parent, action, blob, broken)


def by_fingerprint(fp: int) -> int:
    """Partition function: the fingerprint is already a stable hash (never ``portable_hash``)."""
    return fp


def _pick(a, b):
    return a if (a[0], str(a[1])) <= (b[0], str(b[1])) else b


def spark_session(master: str, app: str = "pulsar-verify", log_path: Path | None = None):
    """A SparkSession whose JVM writes its own log to ``log_path`` (default: a temporary
    file), so the terminal shows pulsar-verify's output only."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    if active is not None and active.master == master:
        return SparkSession(active)
    if active is not None:
        active.stop()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}"
    conf = (SparkConf().setMaster(master).setAppName(app)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.driver.extraJavaOptions", log4j)
            .set("spark.executor.extraJavaOptions", log4j))
    if log_path is None:
        log_path = Path(tempfile.gettempdir()) / "pulsar-verify-spark.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        sc = SparkContext(conf=conf, gateway=gateway)
    except Exception as exc:  # pyspark raises plain Exceptions for a JVM that cannot start
        raise UsageError(f"cannot start Spark with master {master}: {str(exc).splitlines()[0]} "
                         f"(JVM log: {log_path})") from None
    sc.setLogLevel("ERROR")
    return SparkSession(sc)


def explore_spark(model: Model, *, max_depth=None, max_states=None, master="local[*]", progress=None,
                  out=None) -> Result:
    spark = spark_session(master)
    sc = spark.sparkContext
    spec = (model.name, model.config.variant, tuple(sorted(model.config.as_dict().items())))
    parts = max(2, sc.defaultParallelism * 2)
    symmetric = type(model).canonicalize is not Model.canonicalize
    result = Result(model.name, model.config.variant, model.config.as_dict(), engine=f"spark[{master}]")
    started = time.perf_counter()

    violated: dict[str, tuple[int, tuple]] = {}  # property id -> (depth, (fp, action or None))
    init_by_fp: dict[int, object] = {}
    bad: set[int] = set()
    for s in model.init_states():
        fp = fingerprint(model.canonicalize(s) if symmetric else s)
        if fp in init_by_fp:
            continue
        init_by_fp[fp] = s
        for prop in model.invariants:
            if not prop.check(model, s):
                violated.setdefault(prop.id, (0, (fp, None)))
                bad.add(fp)
    frontier = sc.parallelize([(fp, pickle.dumps(s, 5)) for fp, s in init_by_fp.items() if fp not in bad],
                              parts).partitionBy(parts, by_fingerprint).persist()
    visited = sc.parallelize([(fp, None) for fp in init_by_fp], parts).partitionBy(parts, by_fingerprint).persist()
    parent_levels = []  # one RDD per level: fp -> (parent fp, action)
    distinct = len(init_by_fp)
    result.level_sizes.append(distinct)
    coverage: Counter = Counter()
    transitions = depth = 0

    keep: list = []  # RDDs of the previous level, released once the next level is computed
    while True:
        if max_depth is not None and depth >= max_depth:
            result.complete = not frontier.take(1)
            break
        expanded = frontier.mapPartitions(lambda rows: _expand(spec, rows)).persist()
        succ = (expanded.filter(lambda r: r[0] == "S").map(lambda r: (r[1], r[2]))
                .reduceByKey(_pick, parts, by_fingerprint))
        # Co-partitioned with ``visited``, so the union lines up partition by partition: no shuffle.
        new = (visited.union(succ).mapPartitions(lambda rows: _new_states(spec, rows), preservesPartitioning=True)
               .persist())
        found = new.map(lambda r: (r[0], r[1][3])).filter(lambda r: r[1]).collect()
        parents = new.mapValues(lambda v: (v[0], v[1])).persist()
        count = parents.count()  # materialized now, from the cached level: lookups never recompute
        for part_transitions, cov, deadlocks, action_bad in (
                expanded.filter(lambda r: r[0] == "T").map(lambda r: r[2]).collect()):
            transitions += part_transitions
            coverage.update(cov)
            for fp in sorted(deadlocks):
                violated.setdefault(DEADLOCK.id, (depth, (fp, None)))
            for pid, fp, a in sorted(action_bad, key=lambda x: (x[0], x[1], str(x[2]))):
                violated.setdefault(pid, (depth, (fp, a)))
        expanded.unpersist()
        for rdd in keep:
            rdd.unpersist()
        if count == 0:
            new.unpersist()
            parents.unpersist()
            break
        depth += 1
        distinct += count
        result.level_sizes.append(count)
        level_bad = set()
        for fp, broken in sorted(found):
            level_bad.add(fp)
            for pid in broken:
                violated.setdefault(pid, (depth, (fp, None)))
        parent_levels.append(parents)
        keep = [new, visited, frontier]
        visited = visited.union(new.mapValues(lambda v: None)).persist()
        if depth % 16 == 0:
            visited.localCheckpoint()
        bad_b = sc.broadcast(level_bad)
        frontier = new.filter(lambda r: r[0] not in bad_b.value).mapValues(lambda v: v[2]).persist()
        if progress is not None:
            now = time.perf_counter()
            progress({"depth": depth, "states": distinct, "frontier": count, "level_done": True,
                      "rate": distinct / max(now - started, 1e-9)})
        if max_states is not None and distinct >= max_states:
            result.complete = False
            break

    def path_to(fp, level):
        actions = []
        for lv in range(level, 0, -1):
            parent, action = parent_levels[lv - 1].lookup(fp)[0]
            actions.append(action)
            fp = parent
        actions.reverse()
        state = init_by_fp[fp]
        states = [state]
        for a in actions:
            state = model.next_state(state, a)
            states.append(state)
        return states, actions

    violations = []
    for pid, (level, (fp, action)) in violated.items():
        prop = DEADLOCK if pid == DEADLOCK.id else model.property(pid)
        states, actions = path_to(fp, level)
        if action is not None:
            actions.append(action)
            states.append(model.next_state(states[-1], action))
        violations.append(Violation(prop, states, actions))
    result.violations = sorted(violations, key=lambda v: (v.length, v.prop.id))
    result.distinct_states = distinct
    result.transitions = transitions
    result.depth = depth
    result.coverage = dict(sorted(coverage.items()))
    result.never_fired = sorted(set(model.action_names()) - set(coverage))
    result.seconds = time.perf_counter() - started
    result.peak_rss_mb = peak_rss_mb()
    for rdd in parent_levels + keep + [visited, frontier]:
        rdd.unpersist()
    return result
