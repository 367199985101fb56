"""Breadth-first search in Spark tasks that keep their states (``--spark-search resident``).

The stage-per-level search (``bfs.py``) moves every new state out of the process that found it:
encoded, shuffled to its fingerprint's partition, decoded there. Encoding and decoding alone bound it
below the in-process explorer on the same cores (README, "Spark"). Here one Spark barrier stage of P
tasks (one per slot, started together) runs the whole search, and a state stays in the task that found
it, as in the in-process workers (``explorer._Worker``). Each level, task ``q``:

1. **check**: checks the new states it keeps (invariants, ``sometimes``, liveness labels) and writes
   their links (``level-L/links.parquet/part-q``), with the states encoded at checkpoint levels only;
2. **expand**: computes their successors, counting transitions and coverage and checking action
   properties and deadlocks, and keeps per fingerprint not visited the smallest (parent, action) it
   found;
3. **exchange**: sends those fingerprints with their parents to the task each hashes to (``fp % P``),
   which holds that part of the visited set; that task keeps the new ones, names for each the finder
   of the smallest parent, and the finder keeps the state;
4. **balance**: a task keeping more than its share of the next level encodes the excess and hands it
   to one with less: between checkpoints, the only states encoded.

So each state is filed under the smallest (parent, action), as ``bfs.py`` does, and counts, depth,
coverage, verdicts and counterexample lengths equal the in-process explorer's. The tasks meet at steps 3
and 4 through marker files in ``spark/resident/`` (Spark's own ``barrier()`` took about a second a call
on this machine). The driver follows the levels as the tasks' summaries appear, as the stage-per-level
driver does, and commits the manifest at checkpoint levels: where the states are written, at least every
``checkpoint_seconds``, at the last level of a bounded run and at the end. An interrupted run resumes from
the last checkpoint, with either search; a barrier stage is not retried (a retry would repeat levels the
driver has read), so a failed task fails the run, which the same command then resumes.
"""
from __future__ import annotations

import fcntl
import gc
import json
import marshal
import threading
import time
from collections import Counter
from functools import partial

from pulsar_verify.explorer import peak_rss_mb, state_key
from pulsar_verify.fingerprint import decode, encode
from pulsar_verify.model import StepChecks, UsageError

from .bfs import SparkExplorer, _labels, _lookup, _model, _smallest_parent, dump_action, spark_failure
from .checkpoint import Checkpoint, edges_schema, links_schema, read_summaries, read_visited, rows, \
    write_summary, write_table, write_visited

POLL = 0.0005  # seconds between the first looks for the other tasks' markers
CHECKPOINT_SECONDS = 300.0  # at most this long between levels whose states are written
LINGER = 60.0  # seconds a driver waits for the tasks of an earlier run of its checkpoint to end


class _Aborted(Exception):
    """Another task failed: this one stops too (Spark reports the first failure)."""


class _Task:
    """One barrier task for the whole search: its states, its part of the visited set (``owned``,
    sorted) and every fingerprint it has met (``met``: visited, or found earlier in this level, where
    ``expand`` keeps the smallest parent; either way not sent again)."""

    def __init__(self, job, q: int):
        (spec, root, self.start, self.parts, self.max_depth, self.max_states, self.stop_at_first, self.graph,
         self.states, self.every) = job
        self.model = _model(spec)
        self.ckpt = Checkpoint(root)
        self.hub = self.ckpt.root / "resident"
        self.q = q
        self.keys: dict = {}  # action -> its bytes in the links and edges
        self.wrote = 0  # bytes of fingerprints and states this task sent to the others this level
        self.spent: Counter = Counter()  # seconds per step, and waiting for the others (``figures``)

    def key(self, action) -> bytes:
        k = self.keys.get(action)
        if k is None:
            k = self.keys[action] = dump_action(action)
        return k

    def meet(self, tag: str, payload: bytes = b"") -> list[bytes]:
        """Wait until every task has reached ``tag``; the payloads they left there, by task."""
        (self.hub / f"{tag}-{self.q}").write_bytes(payload)
        marks = [self.hub / f"{tag}-{d}" for d in range(self.parts)]
        abort = self.hub / "abort"
        waiting, clock, pause = list(marks), time.perf_counter(), POLL
        while waiting:
            waiting = [m for m in waiting if not m.exists()]
            if waiting:
                if abort.exists():
                    raise _Aborted()
                time.sleep(pause)
                pause = min(2 * pause, 0.004)  # a long wait polls less
        self.spent["waiting"] += time.perf_counter() - clock
        return [m.read_bytes() for m in marks]

    def figures(self) -> dict:
        """Where the task's time went (the exchange's includes its waiting), and its peak memory."""
        return {"task": self.q, **{k: round(v, 1) for k, v in sorted(self.spent.items())},
                "peak_rss_mb": round(peak_rss_mb())}

    def take(self, name: str) -> bytes:
        """A file another task left here for this one, removed once read."""
        where = self.hub / name
        data = where.read_bytes()
        where.unlink()
        return data

    # -- the steps ---------------------------------------------------------------------------------
    def check(self, level: int, frontier: list, checkpoint: bool):
        """Step 1 on ``frontier`` [(fp, parent, action bytes, state)]: the states to expand [(fp, state)]
        (every one: a violating state is expanded too) and the summary's counts; the links written."""
        model, invariants, sometimes = self.model, self.model.invariants, self.model.sometimes
        to_expand, bads, first, examples = [], [], {}, {}
        for fp, _, _, s in frontier:
            broken = [p.id for p in invariants if not p.check(model, s)]
            bads.append(bool(broken))
            to_expand.append((fp, s))
            if broken:
                for pid in broken:
                    first[pid] = min(fp, first.get(pid, fp))
                continue
            for p in sometimes:
                if p.check(model, s):
                    examples[p.id] = min(fp, examples.get(p.id, fp))
        fps, parents, keys, states = zip(*frontier) if frontier else ((), (), (), ())
        cols = {"fp": fps, "parent": parents, "action": keys,
                "labels": [_labels(model, s) for s in states] if self.graph else [None] * len(frontier), "bad": bads,
                "state": [encode(s) for s in states] if checkpoint else [None] * len(frontier)}
        write_table(self.ckpt.links(self.ckpt.level_dir(level), self.q), cols, links_schema())
        return to_expand, {"new": len(frontier), "found": first, "examples": examples, "checkpoint": checkpoint}

    def expand(self, level: int, to_expand: list, met: set) -> tuple[dict, dict]:
        """Step 2: the successors met here first, fp -> (parent, action, state), and the expansion's
        figures for the summary."""
        model, fp_of, key = self.model, state_key(self.model), self.key
        checks_on = StepChecks(model.action_properties)
        found: dict = {}
        coverage: Counter = Counter()
        transitions, deadlocks, action_bad = 0, [], {}
        edges = ([], [], []) if self.graph else None
        for fp, s in to_expand:
            succ = model.successors(s)
            if not succ and not model.is_terminal(s):
                deadlocks.append(fp)
            for a, t in succ:
                transitions += 1
                coverage[a.name] += 1
                for _, prop in checks_on[a.name]:
                    if not prop.check(model, s, a, t) and (fp, key(a)) < action_bad.get(prop.id, (fp + 1,)):
                        action_bad[prop.id] = (fp, key(a))
                tf = fp_of(t)
                if edges is not None:
                    edges[0].append(fp)
                    edges[1].append(key(a))
                    edges[2].append(tf)
                if tf not in met:
                    met.add(tf)
                    found[tf] = (fp, a, t)
                else:  # met before: visited, or found in this level, where the smallest (parent, action) stays
                    held = found.get(tf)
                    if held is not None and (fp < held[0] or fp == held[0] and key(a) < key(held[1])):
                        found[tf] = (fp, a, t)
        if edges is not None:
            write_table(self.ckpt.edges_file(level, self.q), dict(zip(("fp", "action", "succ"), edges)),
                        edges_schema())
        return found, {"expanded": len(to_expand), "transitions": transitions, "coverage": dict(coverage),
                       "deadlock": min(deadlocks, default=None), "action_bad": action_bad}

    def send(self, level: int, found: dict) -> int:
        """Step 3, the finder's half: the fingerprints met first here, with their parents, to their
        owners; how many."""
        import numpy as np
        fps = np.fromiter(found, dtype=np.int64, count=len(found))
        parents = np.fromiter((f[0] for f in found.values()), dtype=np.int64, count=len(found))
        dest = fps % self.parts
        for d in range(self.parts):
            mine = dest == d
            data = fps[mine].tobytes() + parents[mine].tobytes()
            self.wrote += len(data)
            (self.hub / f"fps-{level}-{self.q}-{d}").write_bytes(data)
        return len(fps)

    def own(self, level: int, owned):
        """Step 3, the owner's half: of the fingerprints sent here, those not visited, each kept by the
        finder of its smallest parent (its list written for it); the visited part grown, and how many
        each finder keeps."""
        import numpy as np
        sent = [np.frombuffer(self.take(f"fps-{level}-{d}-{self.q}"), dtype=np.int64) for d in range(self.parts)]
        halves = [len(a) // 2 for a in sent]
        fps = np.concatenate([a[:h] for a, h in zip(sent, halves)])
        parents = np.concatenate([a[h:] for a, h in zip(sent, halves)])
        finders = np.repeat(np.arange(self.parts), halves)
        fresh = ~_lookup(owned, fps)[1]
        fps, parents, finders = fps[fresh], parents[fresh], finders[fresh]
        new, _, finders = _smallest_parent(fps, parents, finders)
        counts = []
        for d in range(self.parts):
            theirs = new[finders == d]
            counts.append(len(theirs))
            (self.hub / f"keep-{level}-{self.q}-{d}").write_bytes(theirs.tobytes())
        return np.insert(owned, np.searchsorted(owned, new), new), counts  # ``new`` is sorted

    def kept(self, level: int, found: dict) -> list:
        """The states the owners named this task the finder of: [(fp, parent, action bytes, state)], in the
        order it found them (successors of one state together: they share most of their parts, which keeps
        the next expansion's memory reads and fingerprint memo local)."""
        import numpy as np
        keep = set()
        for d in range(self.parts):
            keep.update(np.frombuffer(self.take(f"keep-{level}-{d}-{self.q}"), dtype=np.int64).tolist())
        key = self.key
        return [(fp, parent, key(a), t) for fp, (parent, a, t) in found.items() if fp in keep]

    def primed(self) -> tuple[list, object]:
        """The states of the committed level this task expands first (its links file's), and its
        partition's visited set."""
        import pyarrow.parquet as pq
        here = self.ckpt.level_dir(self.start)
        links = self.ckpt.links(here, self.q)
        table = pq.read_table(links.path, filesystem=links.fs, columns=["fp", "state"])
        to_expand = [(fp, decode(data)) for fp, data in rows(table, table.column_names)]
        return to_expand, read_visited(self.ckpt.visited(here, self.q))

    def run(self) -> None:
        ckpt, q = self.ckpt, self.q
        level = self.start
        to_expand, owned = self.primed()
        met = set(owned.tolist())
        total, since = self.states, time.perf_counter()
        summary, where = {"new": 0, "found": {}, "examples": {}}, ckpt.prime_dir(level)
        while True:
            if self.max_depth is not None and level >= self.max_depth:  # checked, not expanded
                return write_summary(ckpt.summary(where, q), summary)
            clock = time.perf_counter()
            found, figures = self.expand(level, to_expand, met)
            del to_expand
            self.spent["expand"] += time.perf_counter() - clock
            summary.update(figures)
            broke = bool(summary["found"] or figures["deadlock"] is not None or figures["action_bad"])
            flags = self.meet(f"expanded-{level}", b"1" if broke else b"0")
            if (self.stop_at_first and b"1" in flags) or (self.max_states is not None and total >= self.max_states):
                return write_summary(ckpt.summary(where, q), summary)
            clock = time.perf_counter()
            summary["shipped_records"] = self.send(level, found)
            self.meet(f"sent-{level}")
            owned, counts = self.own(level, owned)
            due = time.perf_counter() - since >= self.every
            told = [marshal.loads(p) for p in self.meet(f"kept-{level}", marshal.dumps((counts, due)))]
            held = [sum(t[0][d] for t in told) for d in range(self.parts)]  # the next level's states, by finder
            frontier = self.kept(level, found)
            del found
            count = sum(held)
            total += count
            level += 1
            checkpoint = (count == 0 or any(t[1] for t in told)
                          or (self.max_depth is not None and level >= self.max_depth)
                          or (self.max_states is not None and total >= self.max_states))
            if checkpoint:  # the visited part of the level the manifest will then commit
                since = time.perf_counter()
                write_visited(ckpt.visited(ckpt.level_dir(level if count else level - 1), q), owned)
            frontier = self.balance(level, frontier, _moves(held))
            summary["shipped_bytes"], self.wrote = self.wrote, 0
            write_summary(ckpt.summary(where, q), summary)
            where = ckpt.level_dir(level)
            if count == 0:  # nothing new: the search is complete
                return write_summary(ckpt.summary(where, q), {"new": 0, "found": {}, "examples": {}})
            self.spent["exchange"] += time.perf_counter() - clock
            clock = time.perf_counter()
            to_expand, summary = self.check(level, frontier, checkpoint)
            del frontier
            self.spent["check"] += time.perf_counter() - clock

    def balance(self, level: int, frontier: list, moves: list) -> list:
        """Step 4: the frontier of the next level after ``moves`` (``_moves``)."""
        for giver, taker, n in moves:
            if giver == self.q:
                frontier, out = frontier[:-n], frontier[-n:]
                data = marshal.dumps([(fp, parent, key, encode(t)) for fp, parent, key, t in out])
                self.wrote += len(data)
                (self.hub / f"move-{level}-{giver}-{taker}").write_bytes(data)
        if not moves:
            return frontier
        self.meet(f"moved-{level}")
        for giver, taker, _ in moves:
            if taker == self.q:
                given = marshal.loads(self.take(f"move-{level}-{giver}-{taker}"))
                frontier += [(fp, parent, key, decode(data)) for fp, parent, key, data in given]
        return frontier


def _moves(held: list) -> list:
    """(giver, taker, states) that even out the next level's states between the tasks, ``held[d]`` of
    them kept by task d. Only counts: a moved state is decoded into new objects that share no parts with
    the taker's states, so its successors cost more to fingerprint (balancing by measured cost instead
    moved more states each level and made v4-txn ``two-topics`` 0.70x of in-process, against 0.86-0.91x)."""
    share = -(-sum(held) // len(held))
    give, take = [max(0, k - share) for k in held], [max(0, share - k) for k in held]
    moves, taker = [], 0
    for giver in range(len(held)):
        while give[giver]:
            while not take[taker]:
                taker += 1
            n = min(give[giver], take[taker])
            moves.append((giver, taker, n))
            give[giver], take[taker] = give[giver] - n, take[taker] - n
    return moves


def _search(job, _):
    """The barrier stage's partition function (with ``job`` bound by ``functools.partial``, so that it pickles
    by reference when this module is compiled): the whole search in one task."""
    from pyspark import BarrierTaskContext
    task = _Task(job, BarrierTaskContext.get().partitionId())
    held = _hold(task.ckpt.root, fcntl.LOCK_SH) if task.ckpt.root.fs.type_name == "local" else None
    try:
        started = task.hub / f"started-{task.q}"
        if started.exists():  # Spark retries a failed barrier stage whole; the driver has read its levels
            raise UsageError("a resident search is not retried: run the same command again to resume it")
        started.write_bytes(b"")
        gc.disable()  # states are acyclic: the collector's rescans would cost more than the search
        task.run()
    except _Aborted:
        pass
    except BaseException:
        (task.hub / "abort").write_bytes(b"")
        raise
    finally:
        gc.freeze()
        gc.enable()
        if held is not None:
            held.close()
    return [task.figures()]


def _hold(root, kind: int, wait: float | None = None):
    """``root``'s lock file, open and locked: shared by each task while it runs; exclusive for a driver
    starting tasks, which so waits until the tasks of an earlier run of this checkpoint have ended (a killed
    driver's tasks outlive it briefly, and would take the new run's files). None if ``wait`` ran out."""
    lock = open(f"{root.path}/resident.lock", "a")
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        try:
            fcntl.flock(lock, kind | (fcntl.LOCK_NB if deadline is not None else 0))
            return lock
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                return None
            time.sleep(0.05)


class ResidentExplorer(SparkExplorer):
    """``SparkExplorer`` whose levels are run by resident barrier tasks; the same checkpoint, manifest
    and results."""

    def __init__(self, model, *, checkpoint_seconds: float = CHECKPOINT_SECONDS, **kw):
        super().__init__(model, **kw)
        self.every = checkpoint_seconds
        self.tasks: list[dict] = []  # each task's figures, once the search has ended (``_Task.figures``)
        if kw.get("partitions") is None:
            self.parts = self.sc.defaultParallelism  # a task per slot
        self._slots()

    def _slots(self) -> None:
        """Refuse more partitions than the master has slots: a barrier stage starts all its tasks at once."""
        slots = self.sc.defaultParallelism
        if self.parts > slots:
            raise UsageError(f"a resident search runs its {self.parts} partitions as tasks started together, "
                             f"and this Spark master has {slots} slots: use --partitions {slots} or fewer "
                             f"(with --fresh if a checkpoint has more), or --spark-search levels")

    def _levels(self, manifest: dict) -> dict:
        self._slots()  # the checkpoint's partitions, when resumed
        if self.ckpt.root.fs.type_name == "local":
            lock = _hold(self.ckpt.root, fcntl.LOCK_EX, wait=LINGER)
            if lock is None:
                raise UsageError(f"tasks of an earlier run still hold {self.ckpt.root}/resident.lock after "
                                 f"{LINGER:.0f} s: stop them, or use another --out")
            lock.close()
        hub = self.ckpt.root / "resident"
        hub.rmtree()
        hub.mkdir()
        start = manifest["levels"]
        job = (self.spec, self.ckpt.root, start, self.parts, self.max_depth, self.max_states, self.stop_at_first,
               self.graph, sum(manifest["level_sizes"]), self.every)
        failed: list = []

        def search():
            try:
                self.tasks = self.sc.parallelize(range(self.parts), self.parts).barrier().mapPartitions(
                    partial(_search, job)).collect()
            except Exception as exc:  # Py4JJavaError: a task failed (a model error, memory, a lost executor)
                failed.append(exc)

        worker = threading.Thread(target=search, name="resident-search", daemon=True)
        worker.start()
        clock = time.perf_counter()
        manifest = self._primed(manifest, self._await(self.ckpt.prime_dir(start), worker, failed),
                                time.perf_counter() - clock)
        self.ckpt.prime_dir(start).rmtree()
        level = start
        while not manifest["done"] and not self._halted(manifest):
            level += 1
            clock = time.perf_counter()
            where = self.ckpt.level_dir(level)
            summaries = self._await(where, worker, failed)
            expand = self.max_depth is None or level < self.max_depth
            manifest = self._commit(level, expand, summaries, manifest, time.perf_counter() - clock)
            if manifest["done"]:
                where.rmtree()
            if manifest["done"] or summaries[0]["checkpoint"]:
                self.ckpt.save(manifest)
                self.ckpt.drop_visited_before(manifest["levels"])
            self._report(manifest)
        worker.join()
        if failed:
            self._failed(failed[0])
        hub.rmtree()
        (self.ckpt.root / "tasks.json").write_text(json.dumps(self.tasks, indent=1) + "\n")
        return manifest

    def _await(self, where, worker: threading.Thread, failed: list) -> list:
        """The tasks' summaries in ``where``, once all are there."""
        marks = [self.ckpt.summary(where, q) for q in range(self.parts)]
        while not all(m.exists() for m in marks):
            if not worker.is_alive():  # ended: failed, or wrote these summaries just before it ended
                worker.join()
                if failed or not all(m.exists() for m in marks):
                    self._failed(failed[0] if failed else None)
                break
            time.sleep(0.02)
        return read_summaries(where, self.parts)

    def _failed(self, exc) -> None:
        why = spark_failure(exc) if exc is not None else "the tasks ended before the search did"
        raise UsageError(f"the Spark job failed ({why}); {self.ckpt.root} holds every level up to the last "
                         f"checkpoint: run the same command again to continue") from None
