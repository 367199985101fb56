"""What expanding violating states costs: each model's baseline (as written) at each in-process bound set,
searched the way the explorer searches now (every reachable state expanded, as TLC's ``-continue``) and the way
it searched before (a state that breaks an invariant is not expanded), alternated in one process.

The old search is the explorer with the model's successor function refusing a violating state: each invariant
check notes the states it fails (by identity until the state is expanded, and by fingerprint) and
``successors`` returns none for those, which is what the old loop did (``is_terminal`` too, so no deadlock is
reported there); before the liveness check, those states leave the graph, as the old loop never entered them.
Both sides run the same compiled or source code and pay for each invariant once. Printed per case: the states of
both and their ratio, the CPU and wall seconds (median of ``--repeat`` alternated pairs), the verdicts that differ
and the actions that fired only in the whole search (``--json`` adds transitions and liveness edges). The
machine's load (``uptime``) is printed first and last.

    python bench/continue_cost.py                       # every model, every in-process bound set
    python bench/continue_cost.py --case pip-477/cursor --repeat 5
    python bench/continue_cost.py --json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import attrs

from pulsar_verify import registry
from pulsar_verify.explorer import Explorer, state_key


class PrunedExplorer(Explorer):
    """The search as it was: a state that breaks an invariant has no successors, is an end, and is not in the
    liveness graph."""

    def __init__(self, model, **kw):
        self.bad_ids: set[int] = set()
        self.bad_fps: set[int] = set()
        key = state_key(model)

        def noting(check):
            def checked(m, s):
                ok = check(m, s)
                if not ok:
                    self.bad_ids.add(id(s))
                    self.bad_fps.add(key(s))
                return ok
            return checked

        model.invariants = [attrs.evolve(p, check=noting(p.check)) for p in model.invariants]
        successors, is_terminal = model.successors, model.is_terminal
        def pruned_successors(s):
            if id(s) in self.bad_ids:  # expanded once, and alive until then: its id is no other state's
                self.bad_ids.discard(id(s))
                return []
            return successors(s)

        model.successors = pruned_successors
        model.is_terminal = lambda s: key(s) in self.bad_fps or is_terminal(s)
        super().__init__(model, **kw)

    def _finish(self, result, violated, *args):
        if self.graph is not None:
            for fp in self.bad_fps:
                self.graph.pop(fp, None)
        return super()._finish(result, violated, *args)


def timed(name: str, preset: str, old: bool):
    model = registry.build(name, None, preset=preset)
    cpu, wall = time.process_time(), time.perf_counter()
    ex = (PrunedExplorer if old else Explorer)(model)
    result = ex.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    edges = sum(len(e) for e in ex.graph.values()) if ex.graph is not None else 0
    return result, edges, cpu, wall


def verdicts(result) -> dict:
    return {pid: result.verdict(pid) for pid, _ in result.properties}


def case(name: str, preset: str, repeat: int) -> dict:
    runs = {True: [], False: []}
    for _ in range(repeat):
        for old in (True, False):  # alternated: the machine's load falls on both
            runs[old].append(timed(name, preset, old))
    (old, old_edges, _, _), (new, new_edges, _, _) = runs[True][0], runs[False][0]
    before, after = verdicts(old), verdicts(new)
    return {
        "case": f"{name}/{preset}",
        "states": [old.distinct_states, new.distinct_states],
        "transitions": [old.transitions, new.transitions],
        "liveness_edges": [old_edges, new_edges],
        "state_ratio": round(new.distinct_states / old.distinct_states, 3),
        "cpu_s": [round(statistics.median(r[2] for r in runs[k]), 3) for k in (True, False)],
        "wall_s": [round(statistics.median(r[3] for r in runs[k]), 3) for k in (True, False)],
        "changed": {pid: [before[pid], after[pid]] for pid in after if before[pid] != after[pid]},
        "fired_only_now": sorted(set(old.never_fired) - set(new.never_fired)),
        "never_fired": new.never_fired,
    }


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="MODEL/BOUNDS (repeatable; default: every in-process one)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = [tuple(c.split("/", 1)) for c in args.case] if args.case else [
        (cls.name, p) for cls in registry.all_models() if cls.name != "toy-lock" for p in cls.in_process_presets()]
    print(f"# load before: {load()}  (PULSAR_VERIFY_COMPILED={os.environ.get('PULSAR_VERIFY_COMPILED', '1')})",
          flush=True)
    rows = []
    for name, preset in cases:
        row = case(name, preset, args.repeat)
        rows.append(row)
        if args.json:
            continue
        s, c, w = row["states"], row["cpu_s"], row["wall_s"]
        print(f"{row['case']:<32} states {s[0]:>9,} -> {s[1]:>9,} (x{row['state_ratio']:.2f})  "
              f"cpu {c[0]:>7.2f} -> {c[1]:>7.2f} s  wall {w[0]:>7.2f} -> {w[1]:>7.2f} s", flush=True)
        for pid, (was, now) in row["changed"].items():
            print(f"    {pid}: {was} -> {now}")
        if row["fired_only_now"]:
            print(f"    fired only in the whole search: {', '.join(row['fired_only_now'])}")
    if args.json:
        print(json.dumps(rows, indent=1))
    old = sum(r["cpu_s"][0] for r in rows)
    new = sum(r["cpu_s"][1] for r in rows)
    print(f"# total cpu {old:.1f} s -> {new:.1f} s; load after: {load()}")


if __name__ == "__main__":
    main()
