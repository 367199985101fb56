"""Explorer throughput: distinct states per second and peak memory, one case per process, on one
core and on every core (``Explorer(workers=N)``: the speed-up over one core, and states/s per core).

Cases: the kernel's toy model; ``registers``, a state of 36 integer fields with cheap
transitions (what the explorer itself costs per state on a wide state); ``registers-floor``,
the same state space searched with nothing but successor generation and a set of the state
values (no fingerprint, parents, coverage or checks: what CPython allows at best); and every
protocol model at each of its in-process bound sets (what checking a real model costs). Where a bound set has
interchangeable actors, the run is the reduced one, and the full search of the same bound set follows:
the reduction factor is its states over the reduced run's, with its seconds.

The explorer and the models run compiled (``pulsar-verify compile``, done first; ``--source``: from source);
``--both`` runs each case from source, then compiled, and prints the speed-up compiling gives.

With ``spin`` installed (``apt-get install spin``), the Spin reference run of PIP-473
(``../shared/anchors/spin/run.sh``: a compiled explicit-state checker on a Promela model of the same
protocol, reachability only, one core) runs last, and its states/s is compared with pip-473
``faults`` on one core. The two models abstract differently, so the ratio compares checkers
per state explored, not state spaces.

    python bench/explore_speed.py            # all cases, then Spin
    python bench/explore_speed.py --case pip-473/faults [--json]
    python bench/explore_speed.py --spin-only
    python bench/explore_speed.py --case pip-473/faults --repeat 5   # the fastest of 5 (wall time is noisy here)
    python bench/explore_speed.py --both --case pip-473/faults       # from source, then compiled
"""
from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs


from pulsar_verify import compiled, registry
from pulsar_verify.explorer import Explorer
from pulsar_verify.model import Config, Model, PropertySet, act

PROPERTIES = PropertySet()  # the registers model checks nothing: what is timed is the explorer itself

WIDTH = 36
Registers = attrs.make_class("Registers", [f"r{i}" for i in range(WIDTH)], frozen=True, slots=True)


class RegistersModel(Model):
    """36 integer fields; four of them count up to a bound, the rest ride along. The model
    does as little as a model can, so the figure is the explorer's own cost per state."""

    name = "registers"
    action_labels = ("inc",)
    LIMIT = 30
    INC = tuple(act("inc", reg=i) for i in range(4))
    _values = operator.attrgetter(*(f"r{i}" for i in range(WIDTH)))

    def init_states(self):
        return [Registers(*range(WIDTH))]

    def actions(self, s):
        v = self._values(s)
        return [self.INC[i] for i in range(4) if v[i] < i + self.LIMIT]

    def next_state(self, s, a):
        i = a.params[0][1]
        v = self._values(s)
        return Registers(*v[:i], v[i] + 1, *v[i + 1:])


def floor(model) -> dict:
    """Breadth-first search with exact deduplication on the attrs values themselves."""
    init = model.init_states()
    seen, frontier, transitions = set(init), list(init), 0
    started = time.perf_counter()
    while frontier:
        nxt = []
        for s in frontier:
            for a in model.actions(s):
                t = model.next_state(s, a)
                transitions += 1
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
    seconds = time.perf_counter() - started
    return {"states": len(seen), "transitions": transitions, "seconds": round(seconds, 2),
            "states_per_s": round(len(seen) / seconds),
            "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def cases() -> list[str]:
    names = ["toy-lock", "registers", "registers-floor"]
    for cls in registry.all_models():
        if cls.name == "toy-lock":
            continue
        names += [f"{cls.name}/{p}" for p in cls.in_process_presets()]
    return names


def fastest(model, repeat: int, **kw):
    """The fastest of ``repeat`` identical searches: wall time on a shared VM varies by a fifth from run to run,
    and the fastest is the one least disturbed."""
    runs = [Explorer(model, check_liveness=False, **kw).run() for _ in range(repeat)]
    assert len({(r.distinct_states, r.transitions) for r in runs}) == 1
    return min(runs, key=lambda r: r.seconds)


def run_case(case: str, repeat: int = 1) -> dict:
    liveness = True
    if case == "registers-floor":
        gc.disable()
        return {"case": case, **floor(RegistersModel(Config("as-written", {})))}
    if case == "registers":
        model, liveness = RegistersModel(Config("as-written", {})), False
    elif case == "toy-lock":
        model = registry.build("toy-lock", "atomic-acquire", values={"procs": 6})
    else:
        name, preset = case.split("/")
        model = registry.build(name, registry.model_class(name).variant_names()[0], preset=preset)  # as written
    # Exploration alone (on every core first, forked from a process that holds no states yet, then on one),
    # then (separately timed) with the state graph kept for liveness.
    cores = os.cpu_count() or 1
    rw = fastest(model, repeat, workers=cores) if cores > 1 and case != "registers" else None
    r = fastest(model, repeat)
    out = {"case": case, "compiled": not sys.modules[Explorer.__module__].__file__.endswith(".py"),
           "states": r.distinct_states, "transitions": r.transitions,
           "seconds": round(r.seconds, 2), "states_per_s": round(r.states_per_second),
           "peak_mb": round(r.peak_rss_mb)}
    if rw is not None:  # the search on every core: the same run, in less time
        assert (rw.distinct_states, rw.transitions) == (r.distinct_states, r.transitions)
        out.update(cores=cores, all_cores_s=round(rw.seconds, 2), speedup=round(r.seconds / rw.seconds, 2),
                   per_core=round(rw.states_per_second / cores),
                   worker_peak_mb=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
    if liveness and model.liveness:
        rl = Explorer(model, check_liveness=True).run()
        out["with_liveness_s"] = round(rl.seconds, 2)
    if model.reduction:  # the full search of the same bound set: what the symmetry saves
        rf = Explorer(model.full_search(), check_liveness=False).run()
        out.update(full_states=rf.distinct_states, full_s=round(rf.seconds, 2),
                   reduction=round(rf.distinct_states / r.distinct_states, 2))
    return out


SPIN_ANCHOR = Path(os.environ.get("SPIN_ANCHOR", Path(__file__).resolve().parents[2] / "shared/anchors/spin"))


def spin_reference() -> dict | None:
    """The anchor's reachability run as written (2 txns x 2 segments, a crash per participant), in this
    process tree: states, seconds and states/s as pan reports them; None without spin or the anchor."""
    if shutil.which("spin") is None or not (SPIN_ANCHOR / "run.sh").is_file():
        return None
    with tempfile.TemporaryDirectory() as results:
        proc = subprocess.run(["bash", str(SPIN_ANCHOR / "run.sh"), "aswritten"], capture_output=True, text=True,
                              env={**os.environ, "ONLY_REACH": "1", "TMO": "300", "RESULTS": results})
    m = re.search(r"^reach\s+DONE\s+states=(\d+)\s.*\bt=([\d.]+)\s*s\s+rate=([\d.]+)", proc.stdout, re.M)
    if not m:
        return {"error": (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]}
    return {"states": int(m[1]), "seconds": float(m[2]), "states_per_s": round(float(m[3]))}


def print_spin(ours: dict | None) -> None:
    spin = spin_reference()
    if spin is None:
        print("spin: not installed (apt-get install spin) or no anchor at", SPIN_ANCHOR)
    elif "error" in spin:
        print("spin: the anchor run failed:", spin["error"][0])
    else:
        line = f"spin (pan, one core, PIP-473 anchor as written): {spin['states']:,} states in {spin['seconds']} s, " \
               f"{spin['states_per_s']:,} states/s"
        if ours:
            line += f"; pip-473/faults on one core: {ours['states_per_s']:,} states/s, " \
                    f"Spin/ours = {spin['states_per_s'] / ours['states_per_s']:.1f}"
        print(line, flush=True)


def measure(case: str, repeat: int, source: bool) -> dict:
    env = {**os.environ, "PULSAR_VERIFY_COMPILED": "0" if source else "1"}
    proc = subprocess.run([sys.executable, __file__, "--case", case, "--repeat", str(repeat), "--json"],
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        return {"case": case, "error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout)


def row(r: dict, source_s: float | None) -> str:
    if "error" in r:
        return f"{r['case']:<34} failed: {r['error']}"
    vs = f"{source_s / r['seconds']:.2f}" if source_s else "-"
    return (f"{r['case']:<34} {'yes' if r['compiled'] else 'no':>8} {r['states']:>9,} {r['transitions']:>12,} "
            f"{r['seconds']:>8} {r['states_per_s']:>9,} {r['peak_mb']:>8} {r.get('all_cores_s', '-'):>11} "
            f"{r.get('speedup', '-'):>8} {r.get('per_core', '-'):>8} {r.get('with_liveness_s', '-'):>11} "
            f"{r.get('reduction', 1):>9} {r.get('full_s', '-'):>7} {vs:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case")
    ap.add_argument("--spin-only", action="store_true",
                    help="only the Spin reference (and pip-473/faults for the ratio)")
    ap.add_argument("--repeat", type=int, default=1, help="time each search this many times and keep the fastest")
    ap.add_argument("--source", action="store_true", help="run the models from source, not compiled")
    ap.add_argument("--both", action="store_true", help="each case from source, then compiled")
    ap.add_argument("--json", action="store_true", help="with --case: the figures as one JSON object")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.case and args.json:
        print(json.dumps(run_case(args.case, args.repeat)))
        return
    if not args.source:
        built, why = compiled.build(say=lambda line: print(line, flush=True))
        if why:
            print(f"running from source: {why}")
    faults = None
    print(f"{'case':<34} {'compiled':>8} {'states':>9} {'transitions':>12} {'seconds':>8} {'states/s':>9} "
          f"{'peak MB':>8} {'all cores s':>11} {'speed-up':>8} {'/s/core':>8} {'+liveness s':>11} {'reduction':>9} "
          f"{'full s':>7} {'vs source':>10}")
    chosen = [args.case] if args.case else ["pip-473/faults"] if args.spin_only else cases()
    for case in chosen:
        source = measure(case, args.repeat, True) if args.both or args.source else None
        if source is not None:
            print(row(source, None), flush=True)
        r = source if args.source else measure(case, args.repeat, False)
        if r is not source:
            print(row(r, source.get("seconds") if source else None), flush=True)
        if case == "pip-473/faults":
            faults = r
    if not args.case:
        print_spin(faults)


if __name__ == "__main__":
    main()
