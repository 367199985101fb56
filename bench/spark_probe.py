"""The premise of a Spark engine without a shuffle of states, measured (``spark_scaling.py --engines probe``).

The Spark engine (``spark_checks/bfs.py``) runs a stage per level, so every new state leaves the process
that found it: encoded, shuffled to the partition its fingerprint hashes to, decoded there. This probe
runs the breadth-first search instead in Spark barrier tasks that live for the whole search (one per
core, started together) and keep their states in memory, as the in-process workers do
(``explorer._Worker``):

1. each task expands its frontier and sends only the fingerprints (and parents) of the successors it has
   not met before, each to the task its fingerprint hashes to, which holds that part of the visited set;
2. that task names, for each new state, the finder of the smallest parent; the finder keeps it;
3. a task keeping more than its share of the next level encodes the excess and gives it to one with
   less (the only states encoded).

Tasks meet at each step through files in one directory (a barrier: each writes a marker and waits for
the others'), as Spark's own ``barrier()`` took about a second a call here. It checks the invariants
and counts states, nothing more: no counterexamples, checkpoints or liveness, so it bounds from above
what an engine of this design could reach.
"""
from __future__ import annotations

import marshal
import os
import tempfile
import time
from pathlib import Path


def _search(args):
    def run(_):
        import gc

        import numpy as np
        from pyspark import BarrierTaskContext

        from pulsar_verify import registry
        from pulsar_verify.explorer import state_key
        from pulsar_verify.fingerprint import decode, encode

        name, variant, values, preset, root = args
        gc.disable()
        ctx = BarrierTaskContext.get()
        q, parts = ctx.partitionId(), len(ctx.getTaskInfos())
        root = Path(root)

        def meet(tag: str, payload: bytes = b"") -> list[bytes]:
            """Wait until every task reached ``tag``; the payloads they left there."""
            tmp = root / f"{tag}-{q}.tmp"
            tmp.write_bytes(payload)
            os.replace(tmp, root / f"{tag}-{q}")
            marks = [root / f"{tag}-{d}" for d in range(parts)]
            while not all(m.exists() for m in marks):
                time.sleep(0.0002)
            return [m.read_bytes() for m in marks]

        def read(file: str):
            return np.frombuffer((root / file).read_bytes(), dtype=np.int64)

        model = registry.build(name, variant, values, preset=preset)
        fp_of = state_key(model)
        owned, met = set(), set()  # the visited fingerprints that hash here; every fingerprint met here
        frontier = []
        for s in model.init_states():
            fp = fp_of(s)
            if fp % parts == q and fp not in owned:
                owned.add(fp)
                frontier.append((fp, s))
        met |= owned
        states, level, moved, spent = len(owned), 0, 0, {"expand": 0.0, "exchange": 0.0}
        while True:
            level += 1
            clock = time.perf_counter()
            found = {}  # fingerprint -> (parent, state): successors met here for the first time
            for fp, s in frontier:
                if any(not p.check(model, s) for p in model.invariants):
                    continue
                for _, t in model.successors(s):
                    tf = fp_of(t)
                    if tf not in met:
                        met.add(tf)
                        found[tf] = (fp, t)
            spent["expand"] += time.perf_counter() - clock
            clock = time.perf_counter()
            fps = np.fromiter(found, dtype=np.int64, count=len(found))
            parents = np.fromiter((f[0] for f in found.values()), dtype=np.int64, count=len(found))
            for d in range(parts):
                mine = fps % parts == d
                (root / f"{level}-{q}-{d}.fps").write_bytes(fps[mine].tobytes() + parents[mine].tobytes())
            meet(f"found-{level}")
            best: dict = {}  # new fingerprint -> (smallest parent, its finder)
            for d in range(parts):
                sent = read(f"{level}-{d}-{q}.fps")
                half = len(sent) // 2
                for tf, parent in zip(sent[:half].tolist(), sent[half:].tolist()):
                    if tf not in owned and (tf not in best or parent < best[tf][0]):
                        best[tf] = (parent, d)
            owned.update(best)
            for d in range(parts):
                kept = [tf for tf, (_, finder) in best.items() if finder == d]
                (root / f"{level}-{q}-{d}.keep").write_bytes(np.array(kept, dtype=np.int64).tobytes())
            new = sum(int(x) for x in meet(f"kept-{level}", str(len(best)).encode()))
            states += len(best)
            frontier = sorted((tf, found[tf][1]) for d in range(parts) for tf in read(f"{level}-{d}-{q}.keep").tolist())
            counts = [sum(len(read(f"{level}-{o}-{d}.keep")) for o in range(parts)) for d in range(parts)]
            share = -(-new // parts)
            give, take = [max(0, k - share) for k in counts], [max(0, share - k) for k in counts]
            moves, taker = [], 0
            for giver in range(parts):
                while give[giver]:
                    while not take[taker]:
                        taker += 1
                    n = min(give[giver], take[taker])
                    moves.append((giver, taker, n))
                    give[giver], take[taker] = give[giver] - n, take[taker] - n
            for giver, taker, n in moves:
                if giver == q:
                    frontier, out = frontier[:-n], frontier[-n:]
                    moved += n
                    (root / f"{level}-{q}-{taker}.move").write_bytes(marshal.dumps([(f, encode(s)) for f, s in out]))
            if moves:
                meet(f"moved-{level}")
            for giver, taker, n in moves:
                if taker == q:
                    given = marshal.loads((root / f"{level}-{giver}-{q}.move").read_bytes())
                    frontier += [(f, decode(b)) for f, b in given]
            spent["exchange"] += time.perf_counter() - clock
            if not new:
                break
        yield {"task": q, "states": states, "levels": level, "moved": moved,
               **{k: round(v, 1) for k, v in spent.items()}}
    return run


def probe(model, values: dict, preset: str) -> dict:
    """Run the probe on ``model``'s name, variant, ``values`` and ``preset`` on local[*]; its figures."""
    from pulsar_verify.spark_checks.session import spark_session
    spark = spark_session("local[*]")
    sc = spark.sparkContext
    parts = sc.defaultParallelism
    sc.parallelize(range(parts), parts).count()  # the Python workers started, as for the other engines
    with tempfile.TemporaryDirectory(prefix="spark-probe-") as root:
        started = time.perf_counter()
        args = (model.name, model.config.variant_name, values, preset, root)
        tasks = sc.parallelize(range(parts), parts).barrier().mapPartitions(_search(args)).collect()
        seconds = time.perf_counter() - started
    states = sum(t["states"] for t in tasks)
    return {"states": states, "seconds": seconds, "levels": tasks[0]["levels"], "tasks": tasks}
