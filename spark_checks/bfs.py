"""Level-synchronous breadth-first search on Apache Spark.

The states are partitioned by fingerprint (``fp % P``: the fingerprint is already a stable
hash, never ``portable_hash``). The executors build the same model from the registry as the
in-process explorer (one source of truth). Each level is one Spark stage of P tasks, run as the
map side of the shuffle the next level reads (``submitMapStage``: a level's output goes to the
shuffle once, and is neither cached nor read back by the driver, which reads the tasks'
summaries from the checkpoint directory); task ``q`` of level ``d``:

1. **dedupe**: receives the candidate successors that hash to ``q`` (shuffled in blobs of
   compressed records, so the JVM moves a few small byte strings, not millions of objects), keeps the
   smallest ``(parent, action)`` per fingerprint (so runs are deterministic), and drops what
   partition ``q``'s visited set already holds (a sorted ``int64`` array: one binary search per
   candidate, one merge per level);
2. **check**: decodes each new state once, checks the invariants and computes its liveness
   labels, and writes the level's links and the grown visited set for ``q`` (``checkpoint.py``);
3. **expand**: computes the successors of the new states (a violating state is expanded like any
   other, as in-process, so every verdict covers the whole reachable space), checks action
   properties and deadlocks where parent, action and successor meet, and ships the locally
   distinct successors to their partitions:
   the next level's input. It encodes and ships none its receiver would drop: none in the visited
   sets it can read (its own, and the other partitions' of the last committed level), none it
   shipped already from a smaller parent.

Counts, depth, coverage, verdicts and counterexample lengths equal the in-process explorer's;
each level is checkpointed so an interrupted run continues where it stopped (the last level is
expanded again from its files); ``(fingerprint, parent, action)`` links on disk rebuild the
shortest counterexamples; for liveness properties every transition is written too, and the
in-process liveness check runs on that graph (``graph.py``).
"""
from __future__ import annotations

import gc
import json
import marshal
import tempfile
import time
from array import array
from collections import Counter
from pathlib import Path

from pulsar_verify import registry
from pulsar_verify.explorer import goal_flags, new_result, peak_rss_mb, state_key, states_along
from pulsar_verify.fingerprint import decode, encode
from pulsar_verify.itf import trace_document
from pulsar_verify.model import DEADLOCK, Action, Model, UsageError, StepChecks
from pulsar_verify.outdir import is_uri
from pulsar_verify.results import Result, Violation
from pulsar_verify.target import TargetSearch

from .checkpoint import Checkpoint, edges_schema, links_schema, load_action, read_parts, read_summaries, read_visited, \
    rows, write_summary, write_table, write_visited
from .graph import check_liveness_on_disk
from .location import Location
from .session import spark_session

FLUSH = 50_000  # locally distinct successors held by a task before it ships them
# Fingerprints the tasks of a level read in all (states x partitions) to drop successors before shipping them:
# 800 MB of reads per level, 400 MB in each task of two; past it each task reads its own partition's only.
KNOWN_LIMIT = 100_000_000
CHUNK = 10_000  # records per shuffled blob

_models: dict = {}


def model_spec(model: Model) -> tuple:
    """What an executor needs to rebuild ``model``: plain, picklable data (with a target search's aim)."""
    aim = model.aim if isinstance(model, TargetSearch) else None
    return (model.name, model.config.variant_name, tuple(sorted(model.config.as_dict().items())),
            bool(model.reduction), aim)


def _model(spec) -> Model:
    """The model ``spec`` names, built once per executor process."""
    model = _models.get(spec)
    if model is None:
        name, variant, values, reduction, aim = spec
        model = registry.build(name, variant, values=dict(values), reduction=reduction)
        model = _models[spec] = TargetSearch(model, aim) if aim is not None else model
    return model


def _labels(model, state, graph: bool = True) -> bytes | None:
    """The liveness properties' (trigger, goal) values in ``state``, for the liveness check
    (none when no state graph is kept for it)."""
    if not graph or not model.liveness:
        return None
    return marshal.dumps(goal_flags(model, [(p.trigger, p.goal) for p in model.liveness], state), 2)


def dump_action(action: Action) -> bytes:
    """Actions are plain data (a label and primitive parameters): ``marshal`` is stable and
    executes no code when read back."""
    return marshal.dumps((action.name, action.params), 2)


def spark_failure(exc: Exception) -> str:
    """The root cause of a failed Spark job in one line ("java.lang.OutOfMemoryError: Java heap
    space", or the exception a Python worker raised), not the JVM's stack."""
    full = str(exc)
    if "Traceback (most recent call last):" in full:  # raised in a Python worker: its exception line
        tail = full.split("Traceback (most recent call last):")[-1].splitlines()
        found = [line for line in tail if line.strip() and not line.startswith((" ", "\t"))]
        if found:
            return found[0][:300]
    java = getattr(exc, "java_exception", None)
    text = java.toString() if java is not None else full
    text = text.split("most recent failure:")[-1].strip().splitlines()[0]
    if text.startswith("Lost task") and "): " in text:
        text = text.split("): ", 1)[1]
    return text[:300]


def _note(violated: list, pid: str, level: int, fp: int, action: str | None = None) -> None:
    """Record ``pid``'s first violation (the manifest keeps one per property; its ``examples``, a
    ``sometimes`` property's first example, the same way)."""
    if all(v[0] != pid for v in violated):
        violated.append([pid, level, fp, action])


def _shipped(summaries: list) -> dict:
    """The records and bytes a stage's tasks sent to the shuffle (the next level's input)."""
    return {key: sum(s.get(key, 0) for s in summaries) for key in ("shipped_records", "shipped_bytes")}


def _to_partition(dest: int) -> int:
    """Partition function of the shuffle: records are keyed by their partition already."""
    return dest


# -- the level task, run on the executors -------------------------------------------------------
def _without_gc(fn):
    """Run a partition function with the cyclic collector paused, as the in-process explorer
    does: states are acyclic, and the collector's rescans of the live states and the
    fingerprint memo cost several times the model's own work."""
    def run(*args):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return (yield from fn(*args))
        finally:
            gc.freeze()  # what the task left (memo, interned parts) is not rescanned by the next ones
            if enabled:
                gc.enable()
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def _pack(records: list) -> bytes:
    """A blob of shuffled records ``(fp, parent, action, state)``, by column: the fingerprints,
    the parents, each action as an index into the blob's table of actions, the states' lengths,
    then the states; compressed with LZ4 (states found together are alike: a blob shrinks about
    15 times, so the JVM and PySpark's pickling move that much less). A receiver reads the
    numbers as arrays and copies out only the states it has not visited."""
    import pyarrow as pa
    fps, parents, keys, datas = zip(*records)
    table: dict = {}
    index = array("I", [table.setdefault(k, len(table)) for k in keys])
    head = marshal.dumps((len(records), list(table)), 2)
    raw = b"".join([len(head).to_bytes(4, "little"), head, array("q", fps).tobytes(), array("q", parents).tobytes(),
                    index.tobytes(), array("I", map(len, datas)).tobytes(), *datas])
    return len(raw).to_bytes(8, "little") + pa.compress(raw, codec="lz4", asbytes=True)


def _unpack_new(blob: bytes, visited, best: dict) -> None:
    """Add the records of ``blob`` whose state is not in ``visited`` (a sorted array) to ``best``
    (fp -> (parent, action, state)), keeping the smallest (parent, action) per fingerprint."""
    import numpy as np
    import pyarrow as pa
    raw = pa.decompress(blob[8:], decompressed_size=int.from_bytes(blob[:8], "little"), codec="lz4", asbytes=True)
    size = int.from_bytes(raw[:4], "little")
    n, table = marshal.loads(raw[4:4 + size])
    at = 4 + size
    fps = np.frombuffer(raw, np.int64, n, at)
    parents = np.frombuffer(raw, np.int64, n, at + 8 * n)
    index = np.frombuffer(raw, np.uint32, n, at + 16 * n)
    ends = np.cumsum(np.frombuffer(raw, np.uint32, n, at + 20 * n), dtype=np.int64) + (at + 24 * n)
    keep = np.flatnonzero(~_lookup(visited, fps)[1])
    starts = np.concatenate(([at + 24 * n], ends[:-1]))
    for fp, parent, key, start, end in zip(fps[keep].tolist(), parents[keep].tolist(), index[keep].tolist(),
                                           starts[keep].tolist(), ends[keep].tolist()):
        key = table[key]
        known = best.get(fp)
        if known is None or (parent, key) < (known[0], known[1]):
            best[fp] = (parent, key, raw[start:end])


def _known(ckpt: Checkpoint, level: int, parts: int, q: int, own, others: bool) -> list:
    """Per partition, the fingerprints a task can tell are visited before it ships a successor
    there: partition ``q``'s visited set ``own`` and, when ``others``, the other partitions' of
    committed ``level``. A successor in them would be dropped by its receiver (whose visited set
    only grows), so dropping it first changes no count and no choice of parent, and spares
    encoding, shuffling and decoding it: most successors are states visited earlier."""
    import numpy as np
    empty = np.empty(0, dtype=np.int64)
    return [own if p == q else read_visited(ckpt.visited(ckpt.level_dir(level), p)) if others else empty
            for p in range(parts)]


def _lookup(sorted_fps, fps):
    """For each of ``fps``, its position in ``sorted_fps`` and whether it is there."""
    import numpy as np
    pos = np.searchsorted(sorted_fps, fps)
    pos[pos == len(sorted_fps)] = 0
    return pos, (sorted_fps[pos] == fps) if len(sorted_fps) else np.zeros(len(fps), dtype=bool)


def _ship(best: dict, parts: int, shipped: Counter, visited: list, sent: tuple):
    """The held successors, encoded, as (partition, blob) pairs of at most CHUNK records each,
    but for those ``visited`` holds and those shipped earlier in this expansion from a smaller
    parent (``sent``: their fingerprints, sorted, and parents), which their receiver would drop
    or file under that parent. ``shipped`` counts the records and the bytes that go to the
    shuffle. Returns ``sent`` with what it shipped."""
    import numpy as np
    by_part: dict = {}
    for tf, held in best.items():
        by_part.setdefault(tf % parts, []).append((tf, *held))
    sent_fps, sent_parents = sent
    fps_out, parents_out = [sent_fps], [sent_parents]
    for dest, held in sorted(by_part.items()):
        fps = np.fromiter((r[0] for r in held), dtype=np.int64, count=len(held))
        parents = np.fromiter((r[1] for r in held), dtype=np.int64, count=len(held))
        drop = _lookup(visited[dest], fps)[1]
        if len(sent_fps):
            pos, hit = _lookup(sent_fps, fps)
            drop |= hit & (sent_parents[pos] < parents)
        keep = np.flatnonzero(~drop)
        fps_out.append(fps[keep])
        parents_out.append(parents[keep])
        records = [(tf, parent, key, encode(t)) for tf, parent, key, t in map(held.__getitem__, keep.tolist())]
        for i in range(0, len(records), CHUNK):
            blob = _pack(records[i:i + CHUNK])
            shipped.update(shipped_records=len(records[i:i + CHUNK]), shipped_bytes=len(blob))
            yield dest, blob
    return _smallest_parent(np.concatenate(fps_out), np.concatenate(parents_out))


def _smallest_parent(fps, parents, *columns) -> tuple:
    """Per fingerprint of ``fps`` (arrays, one row each), the row with the smallest parent: the
    fingerprints in order, their parents, and the same rows of ``columns``."""
    import numpy as np
    order = np.lexsort((parents, fps))  # by fingerprint, the smallest parent first: the one kept
    fps = fps[order]
    first = np.ones(len(fps), dtype=bool)
    first[1:] = fps[1:] != fps[:-1]
    keep = order[first]
    return (fps[first], parents[keep], *(c[keep] for c in columns))


def _expand(model, states, parts: int, edges: Location | None, visited: list):
    """Successors of ``states`` [(fp, state)] not in ``visited`` (``_known``), shipped to their
    partitions; returns the transitions, coverage, deadlocks and broken action properties of the
    expansion."""
    import numpy as np
    fp_of = state_key(model)
    checks_on = StepChecks(model.action_properties)
    transitions = 0
    coverage: Counter = Counter()
    deadlocks, action_bad = [], []
    edge_cols = ([], [], []) if edges is not None else None
    best: dict = {}
    shipped: Counter = Counter()
    sent = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    expanded = 0
    for fp, s in states:
        expanded += 1
        succ = model.successors(s)
        if not succ and not model.is_terminal(s):
            deadlocks.append(fp)
        for a, t in succ:
            transitions += 1
            coverage[a.name] += 1
            key = dump_action(a)
            for _, prop in checks_on[a.name]:
                if not prop.check(model, s, a, t):
                    action_bad.append((prop.id, fp, key))
            tf = fp_of(t)
            if edge_cols is not None:
                edge_cols[0].append(fp)
                edge_cols[1].append(key)
                edge_cols[2].append(tf)
            known = best.get(tf)
            if known is None or (fp, key) < (known[0], known[1]):
                best[tf] = (fp, key, t)
        if len(best) >= FLUSH:
            sent = yield from _ship(best, parts, shipped, visited, sent)
            best = {}
    yield from _ship(best, parts, shipped, visited, sent)
    if edge_cols is not None:
        write_table(edges, dict(zip(("fp", "action", "succ"), edge_cols)), edges_schema())
    first_bad: dict = {}
    for pid, fp, key in sorted(action_bad):
        first_bad.setdefault(pid, (fp, key))
    return {"expanded": expanded, "transitions": transitions, "coverage": dict(coverage),
            "deadlock": min(deadlocks, default=None), "action_bad": first_bad, **shipped}


@_without_gc
def _advance(job, q: int, shuffled):
    """Level ``level``, partition ``q``: the new states among the shuffled candidates, their
    files, and (when ``expand``) their successors; its figures go to ``summary-q`` beside them."""
    import numpy as np
    spec, root, level, parts, expand, graph, others = job
    model = _model(spec)
    ckpt = Checkpoint(root)
    visited = read_visited(ckpt.visited(ckpt.level_dir(level - 1), q))
    best: dict = {}  # fp -> (parent, action, state) of the candidates not visited
    for _, blob in shuffled:
        _unpack_new(blob, visited, best)
    new = np.fromiter(best, dtype=np.int64, count=len(best))
    new.sort()
    here = ckpt.level_dir(level)
    visited = np.insert(visited, np.searchsorted(visited, new), new)
    write_visited(ckpt.visited(here, q), visited)

    invariants, sometimes = model.invariants, model.sometimes
    cols = {name: [] for name in links_schema().names}
    found = []
    examples: dict = {}  # sometimes property -> the least fingerprint of this partition's examples

    def checked():
        """Each new state decoded once, checked and recorded, and passed on to be expanded
        straight away (so the canonical-form memo its decoding filled is still warm)."""
        for fp in new.tolist():
            parent, key, data = best.pop(fp)
            s = decode(data)
            broken = tuple(p.id for p in invariants if not p.check(model, s))
            for name, value in zip(cols, (fp, parent, key, _labels(model, s, graph), bool(broken), data)):
                cols[name].append(value)
            if broken:
                found.append((fp, broken))
            else:
                for p in sometimes:
                    if p.check(model, s):
                        examples[p.id] = min(fp, examples.get(p.id, fp))
            yield fp, s

    summary = {"new": len(new)}
    if expand:
        known = _known(ckpt, level - 1, parts, q, visited, others)
        del visited
        summary.update((yield from _expand(model, checked(), parts, ckpt.edges_file(level, q) if graph else None,
                                           known)))
    else:
        for _ in checked():
            pass
    write_table(ckpt.links(here, q), cols, links_schema())
    first: dict = {}
    for fp, broken in sorted(found):
        for pid in broken:
            first.setdefault(pid, fp)
    write_summary(ckpt.summary(here, q), {**summary, "found": first, "examples": examples})


@_without_gc
def _prime(job, q: int):
    """Expand again the states of a committed level: the start of a run, or of a resumed one."""
    import pyarrow.parquet as pq
    spec, root, level, parts, _, graph, others = job
    model = _model(spec)
    ckpt = Checkpoint(root)
    links = ckpt.links(ckpt.level_dir(level), q)
    known = _known(ckpt, level, parts, q, read_visited(ckpt.visited(ckpt.level_dir(level), q)), others)
    table = pq.read_table(links.path, filesystem=links.fs, columns=["fp", "state"])
    states = ((fp, decode(data)) for fp, data in rows(table, table.column_names))
    summary = yield from _expand(model, states, parts, ckpt.edges_file(level, q) if graph else None, known)
    write_summary(ckpt.summary(ckpt.prime_dir(level), q), {"new": 0, "found": {}, **summary})


# -- the search ------------------------------------------------------------------------------------
class SparkExplorer:
    def __init__(self, model: Model, *, master="local[*]", out: str | Path | None = None, fresh=False,
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
            out = tempfile.mkdtemp(prefix="pulsar-verify-spark-")
            fresh = True
        self.out = Location(out)  # a local path or a URI (location.py)
        self.ckpt = Checkpoint(self.out / "spark")
        self.fresh = fresh
        self.spec = model_spec(model)
        self.parts = partitions or max(2, self.sc.defaultParallelism)
        self.identity = {"model": model.name, "variant": model.config.variant_name,
                         "config": json.loads(json.dumps(model.config.as_dict())), "graph": self.graph,
                         "reduction": model.reduction,
                         **({"target": self.spec[4].as_dict()} if self.spec[4] else {})}
        self.init_by_fp: dict[int, object] = {}

    # -- level 0, or the last complete level of a checkpoint -------------------------------------
    def _initial(self) -> dict:
        import numpy as np
        model = self.model
        fp_of = state_key(model)
        violated, examples = [], []
        names = links_schema().names
        cols = [{name: [] for name in names} for _ in range(self.parts)]
        for s in model.init_states():
            fp = fp_of(s)
            if fp in self.init_by_fp:
                continue
            self.init_by_fp[fp] = s
            broken = [p.id for p in model.invariants if not p.check(model, s)]
            violated += [[pid, 0, fp, None] for pid in broken]
            for p in model.sometimes if not broken else ():
                if p.check(model, s):
                    examples.append((fp, p.id))
            row = (fp, None, None, _labels(model, s, self.graph), bool(broken), encode(s))
            for name, value in zip(names, row):
                cols[fp % self.parts][name].append(value)
        level0 = self.ckpt.level_dir(0)
        for q, part in enumerate(cols):
            write_table(self.ckpt.links(level0, q), part, links_schema())
            write_visited(self.ckpt.visited(level0, q), np.array(sorted(part["fp"]), dtype=np.int64))
        count = len(self.init_by_fp)
        stats = {"level": 0, "new": count, "expanded": 0, "transitions": 0, "states": count, "seconds": 0.0,
                 "rate": 0.0, "shipped_records": 0, "shipped_bytes": 0}
        manifest = {**self.identity, "partitions": self.parts, "init": sorted(self.init_by_fp), "levels": 0,
                    "level_sizes": [count], "expanded": False, "frontier_size": count,
                    "transitions": 0, "coverage": {}, "violated": violated, "stats": [stats], "seconds": 0.0,
                    "examples": [],
                    "done": False}
        for fp, pid in sorted(examples):
            _note(manifest["examples"], pid, 0, fp)
        self.ckpt.save(manifest)
        return manifest

    def _resume(self) -> dict:
        manifest = self.ckpt.load(self.identity)
        self.ckpt.discard_uncommitted(manifest["levels"])
        self.ckpt.verify(manifest)
        self.parts = manifest["partitions"]  # the files are laid out for these
        model = self.model
        fp_of = state_key(model)
        for s in model.init_states():
            self.init_by_fp.setdefault(fp_of(s), s)
        if sorted(self.init_by_fp) != manifest.get("init"):
            raise UsageError(f"checkpoint {self.ckpt.root} was made by a different version of the model "
                             f"(its initial states differ); use --fresh to discard it")
        return manifest

    # -- the jobs ------------------------------------------------------------------------------
    def _job(self, level: int, expand: bool, states: int) -> tuple:
        """A level's task arguments; with ``states`` visited so far, whether each task reads every
        partition's visited set to drop successors before shipping them (``_known``)."""
        return self.spec, self.ckpt.root, level, self.parts, expand, self.graph, states * self.parts <= KNOWN_LIMIT

    def _stage(self, tasks, where: Location) -> tuple:
        """Run ``tasks`` as the map side of the shuffle the next level reads: Spark's own
        ``submitMapStage``, so a level's output goes to the shuffle once and is never cached or
        read back by the driver. Returns the shuffled RDD (the next level's input), its shuffle
        id, and the task summaries the tasks wrote to ``where``."""
        shuffled = tasks.partitionBy(self.parts, _to_partition)
        # PySpark's partitionBy: valueOfPair(ShuffledRDD(PairwiseRDD)); its dependency is the shuffle.
        dependency = shuffled._jrdd.rdd().dependencies().head().rdd().dependencies().head()
        try:
            self.sc._jsc.sc().submitMapStage(dependency).get()
        except Exception as exc:  # Py4JJavaError: a task failed (out of memory, a lost executor, a model error)
            raise UsageError(f"the Spark job failed ({spark_failure(exc)}); {self.ckpt.root} holds every level "
                             f"up to the last one completed: run the same command again to continue") from None
        return shuffled, dependency.shuffleId(), read_summaries(where, self.parts)

    def _forget(self, shuffle: int | None) -> None:
        """Delete a shuffle the next level has read (Spark would keep it for the lineage's sake)."""
        cleaner = self.sc._jsc.sc().cleaner()
        if shuffle is not None and cleaner.isDefined():
            cleaner.get().doCleanupShuffle(shuffle, True)

    def _prime(self, manifest: dict):
        """The last committed level's successors; its expansion is counted unless it was already."""
        level = manifest["levels"]
        job = self._job(level, True, sum(manifest["level_sizes"]))
        self.ckpt.edges_path(level).mkdir()
        where = self.ckpt.prime_dir(level)
        where.mkdir()
        started = time.perf_counter()
        shuffled, shuffle, summaries = self._stage(
            self.sc.parallelize(range(self.parts), self.parts).mapPartitionsWithIndex(lambda q, _: _prime(job, q)),
            where)
        where.rmtree()
        return shuffled, shuffle, self._primed(manifest, summaries, time.perf_counter() - started)

    def _primed(self, manifest: dict, summaries: list, seconds: float) -> dict:
        """The manifest once the last committed level was expanded again: its expansion counted (and
        committed) unless it was already."""
        if manifest["expanded"]:
            return manifest
        manifest = self._count(manifest, manifest["levels"], summaries)
        manifest["expanded"] = True
        last = manifest["stats"][-1]
        last.update(expanded=manifest["frontier_size"], transitions=sum(s["transitions"] for s in summaries),
                    **_shipped(summaries))
        last["seconds"] = round(last["seconds"] + seconds, 3)
        self.ckpt.save(manifest)
        return manifest

    def _count(self, manifest: dict, level: int, summaries: list) -> dict:
        """Add the expansion of ``level`` (transitions, coverage, deadlocks, action properties)."""
        violated = manifest["violated"]
        coverage = Counter(manifest["coverage"])
        deadlocks, action_bad = [], []
        for s in summaries:
            coverage.update(s.get("coverage", {}))
            if s.get("deadlock") is not None:
                deadlocks.append(s["deadlock"])
            action_bad += [(pid, fp, key) for pid, (fp, key) in s.get("action_bad", {}).items()]
        if deadlocks:
            _note(violated, DEADLOCK.id, level, min(deadlocks))
        for pid, fp, a in sorted(action_bad):
            _note(violated, pid, level, fp, a.hex())
        return {**manifest, "transitions": manifest["transitions"] + sum(s.get("transitions", 0) for s in summaries),
                "coverage": dict(coverage), "violated": violated}

    def _level(self, level: int, incoming, manifest: dict):
        """Level ``level`` from the previous level's shipped successors."""
        expand = self.max_depth is None or level < self.max_depth
        job = self._job(level, expand, sum(manifest["level_sizes"]))
        where = self.ckpt.level_dir(level)
        where.mkdir()
        if expand and self.graph:
            self.ckpt.edges_path(level).mkdir()
        started = time.perf_counter()
        shuffled, shuffle, summaries = self._stage(
            incoming.mapPartitionsWithIndex(lambda q, shuffled: _advance(job, q, shuffled)), where)
        return shuffled, shuffle, self._commit(level, expand, summaries, manifest, time.perf_counter() - started)

    def _commit(self, level: int, expand: bool, summaries: list, manifest: dict, seconds: float) -> dict:
        """The manifest with level ``level`` added from its tasks' summaries (saved by the caller)."""
        count = sum(s["new"] for s in summaries)
        violated = manifest["violated"]
        for fp, pid in sorted((fp, pid) for s in summaries for pid, fp in s["found"].items()):
            _note(violated, pid, level, fp)
        examples = list(manifest.get("examples", []))  # as the violations: the first per property
        for fp, pid in sorted((fp, pid) for s in summaries for pid, fp in s.get("examples", {}).items()):
            _note(examples, pid, level, fp)
        manifest = {**manifest, "examples": examples}
        if count:
            manifest = self._count({**manifest, "violated": violated}, level, summaries)
        total = sum(manifest["level_sizes"]) + count
        stats = {"level": level, "new": count, "expanded": count if expand else 0,
                 "transitions": sum(s.get("transitions", 0) for s in summaries), "states": total,
                 "seconds": round(seconds, 3), "rate": round(count / seconds, 1) if seconds else 0.0,
                 **_shipped(summaries)}
        manifest = {**manifest, "levels": level if count else level - 1,
                    "level_sizes": manifest["level_sizes"] + ([count] if count else []),
                    "frontier_size": count, "expanded": expand,
                    "stats": manifest["stats"] + [stats], "seconds": manifest["seconds"] + seconds,
                    "done": count == 0}
        return manifest

    def run(self) -> Result:
        wall = time.perf_counter()
        self.ckpt.start(self.fresh)
        resumed = self.ckpt.exists()
        manifest = self._resume() if resumed else self._initial()
        if not manifest["done"] and not self._halted(manifest):
            manifest = self._levels(manifest)
        result = self._result(manifest, manifest["done"])
        result.seconds = manifest["seconds"] if resumed else time.perf_counter() - wall
        self._write_results(result, manifest)
        return result

    def _halted(self, manifest: dict) -> bool:
        """Whether the search stops before the next level: the depth or the states asked for, or a
        violation when it stops at the first."""
        return ((self.max_depth is not None and manifest["levels"] >= self.max_depth)
                or (self.stop_at_first and bool(manifest["violated"]))
                or (self.max_states is not None and sum(manifest["level_sizes"]) >= self.max_states))

    def _levels(self, manifest: dict) -> dict:
        """The levels after the last committed one, a stage each, until the search is done or halted."""
        incoming = shuffle = None
        while not manifest["done"] and not self._halted(manifest):
            if incoming is None:
                incoming, shuffle, manifest = self._prime(manifest)
                continue  # its expansion may have found a violation
            depth = manifest["levels"]
            incoming, read, manifest = self._level(depth + 1, incoming, manifest)
            self._forget(shuffle)
            shuffle = read
            if manifest["done"]:  # the level found nothing new: it holds no states
                self.ckpt.level_dir(depth + 1).rmtree()
            self.ckpt.save(manifest)  # the commit of the level
            self.ckpt.drop_visited_before(manifest["levels"])
            self._report(manifest)
        self._forget(shuffle)
        return manifest

    def _report(self, manifest: dict) -> None:
        if self.progress is not None:
            total = sum(manifest["level_sizes"])
            self.progress({"depth": manifest["levels"], "states": total, "frontier": manifest["frontier_size"],
                           "level_done": True, "rate": total / max(manifest["seconds"], 1e-9),
                           "level_seconds": manifest["stats"][-1]["seconds"]})

    # -- results --------------------------------------------------------------------------------
    def _paths(self, wanted: dict[int, int]) -> dict[int, list[int]]:
        """Fingerprint path from an initial state to each wanted (fp -> level)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        paths = {fp: [fp] for fp in wanted}
        at = {fp: fp for fp in wanted}
        for level in range(max(wanted.values(), default=0), 0, -1):
            need = sorted({at[fp] for fp, lv in wanted.items() if lv >= level})
            table = read_parts(self.ckpt.level_dir(level) / "links.parquet", ["fp", "parent", "action"],
                               f"level {level}", self.parts)
            table = table.filter(pc.is_in(table.column("fp"), value_set=pa.array(need, pa.int64())))
            parents = {fp: (parent, action) for fp, parent, action in rows(table, ("fp", "parent", "action"))}
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
        result = new_result(model, engine=f"spark[{self.sc.master}]")
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
        if not complete:
            result.stopped = ("stopped at the first violation" if self.stop_at_first and manifest["violated"]
                              else f"max depth {self.max_depth}" if self.max_depth is not None
                              and manifest["levels"] >= self.max_depth else f"max states {self.max_states:,}"
                              if self.max_states is not None else "")
        result.level_sizes = list(manifest["level_sizes"])
        result.distinct_states = sum(result.level_sizes)
        result.transitions = manifest["transitions"]
        result.depth = manifest["levels"]
        result.coverage = dict(sorted(manifest["coverage"].items()))
        result.never_fired, system = model.never_fired(result.coverage)
        result.unfired_system = system if complete else []
        result.examples = {pid: level for pid, level, _, _ in manifest.get("examples", [])}
        violations += [Violation(p, [], []) for p in model.sometimes if complete and p.id not in result.examples]
        if self.graph and model.liveness and complete:
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
        import pyarrow as pa
        root = self.ckpt.root
        stats = manifest["stats"]
        (root / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
        fields = [("level", pa.int64()), ("expanded", pa.int64()), ("new", pa.int64()),
                  ("transitions", pa.int64()), ("states", pa.int64()), ("seconds", pa.float64()),
                  ("rate", pa.float64()), ("shipped_records", pa.int64()), ("shipped_bytes", pa.int64())]
        write_table(root / "stats.parquet", {name: [s[name] for s in stats] for name, _ in fields},
                    pa.schema(fields))
        docs = [{**v.as_dict(), "itf": trace_document(self.model, v.states, v.actions, v.as_dict(), v.loop)
                 if v.traced else None} for v in result.violations]
        (root / "violations.json").write_text(json.dumps(docs, indent=1) + "\n")
        write_table(root / "violations.parquet",
                    {"property": [d["property"] for d in docs], "kind": [d["kind"] for d in docs],
                     "length": [d["length"] for d in docs], "itf": [json.dumps(d["itf"]) for d in docs]},
                    pa.schema([("property", pa.string()), ("kind", pa.string()), ("length", pa.int64()),
                               ("itf", pa.string())]))


def explore_spark(model: Model, search: str = "levels", **kw) -> Result:
    """A Spark run: a stage per level (``levels``), or one stage of resident tasks (``resident.py``);
    ``auto``, resident on a local master writing to a local directory, else a stage per level."""
    if search == "auto":
        spark = kw.get("spark")
        master = spark.sparkContext.master if spark is not None else kw.get("master", "local[*]")
        local = master.startswith("local") and not is_uri(kw.get("out") or "")
        search = "resident" if local else "levels"
    every = kw.pop("checkpoint_seconds", None)  # the resident search's; a stage per level commits every level
    if search == "resident":
        from .resident import ResidentExplorer
        return ResidentExplorer(model, **kw, **({} if every is None else {"checkpoint_seconds": every})).run()
    return SparkExplorer(model, **kw).run()
