"""Spark scaling: distinct states/s in-process, on Spark local[1] and local[2], the speedup over
in-process, and the per-level overhead (the median time of levels that find fewer than 100
states: Spark's fixed cost per level, whatever the model). Each (case, engine) runs in its own
process.

    python bench/spark_scaling.py                                   # every model's largest configuration
    python bench/spark_scaling.py --case pip-373/two-txns --engines local,local[2]
    python bench/spark_scaling.py --nightly v4-txn/two-topics/off-segment-markers --engines local[2]
    python bench/spark_scaling.py --case v4-txn/two-topics/as-written --engines local,floor
    python bench/spark_scaling.py --case v4-txn/two-topics/as-written --no-liveness   # safety only, every engine
    python bench/spark_scaling.py --nightly v4-txn/two-topics/off-segment-markers --set writes=2 \
        --no-liveness --engines local[2] --partitions 8                              # the 10M-state nightly

``local-all`` is the in-process explorer on every core (``explore --workers``), what Spark on the
same machine competes with; ``resident[N]`` the Spark engine's resident search (``--spark-search
resident``) on local[N].
``floor`` is the Spark engine's own Python work per state, in one process without Spark (see
``floor()``): twice its rate bounds what local[2] can reach on this machine.

A case is MODEL/BOUNDS[/VARIANT]; the variant defaults to the model's fix of every finding (a
variant with violations stops expanding at its bad states, which would measure less work).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


CASES = ["pip-473/two-segments", "v4-txn/two-topics/off-segment-markers", "pip-373/two-txns",
         "pip-468/two-consumers-failover", "pip-477/cursor"]
ENGINES = ["local", "local-all", "local[1]", "local[2]", "resident[2]"]


def parse_case(case: str) -> tuple[str, str, str]:
    name, bounds, *rest = case.split("/")
    return name, bounds, rest[0] if rest else "all-fixes"


def one(case: str, engine: str, liveness: bool = True, values: dict | None = None,
        partitions: int | None = None) -> dict:
    from pulsar_verify import registry
    from pulsar_verify.explorer import explore
    name, bounds, variant = parse_case(case)
    model = registry.build(name, variant, values or {}, preset=bounds)
    started = time.perf_counter()
    sizes = None
    if engine in ("local", "local-all"):
        workers = (os.cpu_count() or 1) if engine == "local-all" else 1
        result, _ = explore(model, check_liveness=liveness, workers=workers)
        overhead = None
    elif engine == "floor":
        return floor(case, model, liveness)
    else:
        from pulsar_verify.spark_checks.bfs import explore_spark
        from pulsar_verify.spark_checks.session import spark_session
        search = "resident" if engine.startswith("resident") else "levels"
        master = "local" + engine[len("resident"):] if search == "resident" else engine
        spark = spark_session(master)
        started = time.perf_counter()  # the JVM's start-up is not the search's
        with tempfile.TemporaryDirectory(prefix="spark-scaling-") as out:
            result = explore_spark(model, master=master, out=Path(out), spark=spark, graph=None if liveness else False,
                                   partitions=partitions, search=search,
                                   progress=lambda i: print(f"  level {i['depth']:>3}: {i['states']:>12,} states, "
                                                            f"{i['level_seconds']:.1f}s", file=sys.stderr, flush=True))
            sizes = footprint(Path(out) / "spark", result)
            if (Path(out) / "spark" / "tasks.json").exists():  # the resident search's tasks: where the time went
                sizes["tasks"] = json.loads((Path(out) / "spark" / "tasks.json").read_text())
        small = [s["seconds"] for s in result.level_stats if s["new"] < 100]
        overhead = statistics.median(small) if small else None
    seconds = time.perf_counter() - started
    if sizes is not None:
        sizes["states_per_s_per_core"] = round(result.distinct_states / seconds / spark.sparkContext.defaultParallelism, 1)
    return {"case": case, "engine": engine, "states": result.distinct_states, "transitions": result.transitions,
            "depth": result.depth, "seconds": round(seconds, 2), "rate": round(result.distinct_states / seconds, 1),
            "level_overhead": overhead, "levels": len(result.level_sizes), "footprint": sizes}


def footprint(root: Path, result) -> dict:
    """What docs/scale.md plans with: bytes per state at rest (links, the visited set) and per
    transition (edges), bytes per state on the wire (the shuffle), and the largest level."""
    def size(pattern: str) -> int:
        return sum(f.stat().st_size for f in root.glob(pattern) if f.is_file())
    stats = result.level_stats
    states = result.distinct_states
    shipped = sum(s.get("shipped_bytes", 0) for s in stats)
    records = sum(s.get("shipped_records", 0) for s in stats)
    return {"links_bytes_per_state": round(size("level-*/links.parquet/*") / states, 1),
            "visited_bytes_per_state": round(size(f"level-{result.depth:05d}/visited-*.npy") / states, 1),
            "edge_bytes_per_transition": round(size("edges/*/*") / max(result.transitions, 1), 1),
            "shuffle_bytes_per_state": round(shipped / states, 1),
            "shuffle_bytes_per_record": round(shipped / max(records, 1), 1),
            "records_per_state": round(records / states, 2),
            "largest_level": max(result.level_sizes),
            "largest_level_shuffle_mb": round(max(s.get("shipped_bytes", 0) for s in stats) / 2**20, 1)}


def floor(case: str, model, liveness: bool = True) -> dict:
    """The Python work the Spark engine does per state, in one process with no JVM: the
    engine's own level task (``_advance``) on one partition, with its output pickled and
    unpickled as the shuffle would. Twice this rate is what local[2] could reach with perfect parallelism and
    a free shuffle."""
    import pickle
    from pulsar_verify.spark_checks.bfs import SparkExplorer, _advance, _prime
    from pulsar_verify.spark_checks.checkpoint import read_summaries

    class NoSpark:  # what SparkExplorer reads of a session, for its level-0 files
        class sparkContext:
            defaultParallelism, master = 1, "none"

    with tempfile.TemporaryDirectory(prefix="spark-floor-") as out:
        engine = SparkExplorer(model, out=Path(out), fresh=True, spark=NoSpark, partitions=1,
                               graph=None if liveness else False)
        started = time.perf_counter()
        engine.ckpt.start(True)
        manifest = engine._initial()
        states, level = manifest["level_sizes"][0], 0
        engine.ckpt.prime_dir(0).mkdir()
        shipped = list(_prime(engine._job(0, True, states), 0))
        while True:
            level += 1
            here = engine.ckpt.level_dir(level)
            here.mkdir()
            shipped = pickle.loads(pickle.dumps(shipped, 5))  # what the shuffle carries
            shipped = list(_advance(engine._job(level, True, states), 0, shipped))
            new = read_summaries(here, 1)[0]["new"]
            if not new:
                break
            states += new
    seconds = time.perf_counter() - started
    return {"case": case, "engine": "floor", "states": states, "transitions": None, "depth": level - 1,
            "seconds": round(seconds, 2), "rate": round(states / seconds, 1), "level_overhead": None,
            "levels": level}


def run(case: str, engine: str, extra: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--one", case, engine, *extra], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{case} on {engine} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", help="MODEL/BOUNDS[/VARIANT] (default: every model's largest)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma-separated: local, local-all, local[N], resident[N], floor")
    p.add_argument("--nightly", metavar="CASE", help="one case, to completion, on each engine: the nightly run")
    p.add_argument("--no-liveness", action="store_true",
                   help="safety properties only, on every engine (no state graph, no transition files)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a bound, for every case")
    p.add_argument("--partitions", type=int, help="Spark partitions (default: the master's parallelism)")
    p.add_argument("--one", nargs=2, metavar=("CASE", "ENGINE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        from pulsar_verify.cli import _settings
        print(json.dumps(one(*args.one, liveness=not args.no_liveness, values=_settings(args.set),
                             partitions=args.partitions)))
        return
    cases = [args.nightly] if args.nightly else (args.case or CASES)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    extra = ([] if not args.no_liveness else ["--no-liveness"]) + [f"--set={kv}" for kv in args.set] + (
        [f"--partitions={args.partitions}"] if args.partitions else [])
    print(f"{'case':<44} {'engine':<9} {'states':>12} {'levels':>6} {'seconds':>9} {'states/s':>9} "
          f"{'vs in-process':>13} {'s/level':>8}")
    for case in cases:
        base = None
        for engine in engines:
            r = run(case, engine, extra)
            if engine == "local":
                base = r["rate"]
            ratio = f"{r['rate'] / base:.2f}x" if base and engine != "local" else "-"
            if engine == "floor" and base:
                ratio = f"{r['rate'] / base:.2f}x (x2: {2 * r['rate'] / base:.2f}x)"
            overhead = f"{r['level_overhead']:.2f}" if r["level_overhead"] is not None else "-"
            label = case + "".join(f" {kv}" for kv in args.set)
            print(f"{label:<44} {engine:<9} {r['states']:>12,} {r['levels']:>6} {r['seconds']:>9.1f} "
                  f"{r['rate']:>9,.0f} {ratio:>13} {overhead:>8}", flush=True)
            if r.get("footprint"):
                print(f"  {engine} footprint: " + json.dumps(r["footprint"]), flush=True)


if __name__ == "__main__":
    main()
