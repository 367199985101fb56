"""The ``pulsar-verify`` command line.

Exit codes: 0 every property holds within the bounds (or a replayed violation
no longer reproduces); 1 a violation was found (or reproduced); 2 usage error
or invalid input, with a one-line message and no traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__, registry
from .explorer import Result, explore, stderr_progress
from .itf import trace_document, write_trace
from .model import UsageError
from .show import render_trace

DEFAULT_OUT = Path("out")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as for every usage error
        raise UsageError(message)


def _settings(pairs: list[str], option: str = "--set") -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pulsar-verify", description="Check executable models of Apache Pulsar PIPs.")
    p.add_argument("--version", action="version", version=f"pulsar-verify {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser("list", help="models, variants and properties with their PIP sections")
    ls.add_argument("--json", action="store_true")

    ex = sub.add_parser("explore", help="exhaustive exploration of one model variant")
    ex.add_argument("model")
    ex.add_argument("--variant", default="as-written")
    ex.add_argument("--bounds", default="default", metavar="PRESET", help="a named bound set (see list)")
    ex.add_argument("--set", action="append", metavar="KEY=VALUE", help="a bound or fault switch")
    ex.add_argument("--max-depth", type=_positive)
    ex.add_argument("--max-states", type=_positive)
    ex.add_argument("--engine", choices=("local", "spark"), default="local")
    ex.add_argument("--master", default="local[*]", help="engine spark: local[N] (default local[*], embedded) "
                    "or spark://HOST:PORT; under spark-submit, the master it was given")
    ex.add_argument("--out", type=Path, help="output directory (default out/MODEL/VARIANT/BOUNDS); the Spark "
                    "engine keeps its checkpoint in OUT/spark and continues from it when run again")
    ex.add_argument("--fresh", action="store_true", help="engine spark: discard the checkpoint in OUT first")
    ex.add_argument("--conf", action="append", metavar="KEY=VALUE", help="engine spark: a Spark setting")
    ex.add_argument("--partitions", type=_positive, help="engine spark: partitions of the frontier and visited "
                    "set (default: the master's parallelism; more for runs of millions of states)")
    ex.add_argument("--stop-at-first", action="store_true", help="stop at the first violation")
    ex.add_argument("--no-liveness", action="store_true",
                    help="safety properties only: no state graph is kept (engine spark: no transition files), "
                         "so runs of tens of millions of states fit in memory; liveness is reported not checked")
    ex.add_argument("--json", action="store_true", help="print the summary as JSON")
    ex.add_argument("--quiet", action="store_true", help="no progress display")

    sw = sub.add_parser("swarm", help="many seeded random walks, for bounds beyond exhaustive search")
    sw.add_argument("model")
    sw.add_argument("--variant", default="as-written")
    sw.add_argument("--bounds", default="default", metavar="PRESET", help="a named bound set (see list)")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE", help="a bound or fault switch")
    sw.add_argument("--walks", type=_positive, default=1000)
    sw.add_argument("--steps", type=_positive, default=200, help="the longest walk")
    sw.add_argument("--seed", type=int, default=0, help="the swarm's seed: walk i uses a seed derived from it")
    sw.add_argument("--engine", choices=("local", "spark"), default="local")
    sw.add_argument("--master", default="local[*]")
    sw.add_argument("--conf", action="append", metavar="KEY=VALUE", help="engine spark: a Spark setting")
    sw.add_argument("--out", type=Path, help="output directory (default out/swarm/MODEL/VARIANT/BOUNDS)")
    sw.add_argument("--json", action="store_true", help="print the summary as JSON")

    rp = sub.add_parser("replay", help="re-execute an ITF counterexample and re-check its property")
    rp.add_argument("file", type=Path)
    rp.add_argument("--variant", help="try the file's actions against another variant (does a fix kill it?)")

    pv = sub.add_parser("prove", help="Z3 proof obligations: proved, violated (with the counterexample) or unknown")
    pv.add_argument("model", nargs="?", help="one model (default: every model with obligations)")
    pv.add_argument("--variant", help="only the obligations about this variant (default: all)")
    pv.add_argument("--json", action="store_true")

    rv = sub.add_parser("review", help="the design-review evidence run over every model")
    rv.add_argument("--out", type=Path, default=Path("review"))
    rv.add_argument("--engines", default="local,spark", help="comma-separated: local, spark")
    rv.add_argument("--models", help="comma-separated model names (default: every model)")
    rv.add_argument("--master", default="local[*]")
    rv.add_argument("--nightly", action="store_true",
                    help="also the Spark-scale bound sets, Hypothesis with the nightly profile, and the Z3 obligations "
                         "that take minutes")
    rv.add_argument("--expectations", type=Path, default=registry.REPO_ROOT / "expectations.json",
                    help="expected verdict of every (model, variant, property)")
    rv.add_argument("--update-expectations", action="store_true",
                    help="record this run's verdicts as the expected ones (deliberately)")
    return p


def cmd_list(args) -> int:
    rows = []
    for cls in registry.all_models():
        rows.append({
            "model": cls.name, "title": cls.title, "source": cls.source,
            "variants": [{"name": v.name, "kind": v.kind, "description": v.description} for v in cls.variants],
            "params": {k: {"default": p.default, "help": p.help} for k, p in cls.params.items()},
            "bounds": {name: {**{k: p.default for k, p in cls.params.items()}, **values}
                       for name, values in cls.presets.items()},
            "large_bounds": list(cls.large_presets),
            "properties": [{"id": p.id, "kind": p.kind, "statement": p.statement, "section": p.section,
                            "variants": list(p.variants) if p.variants else "all"} for p in cls.properties],
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"{row['model']}: {row['title']}" + (f"  [{row['source']}]" if row["source"] else ""))
        for v in row["variants"]:
            print(f"  variant {v['name']:<28} {v['kind']:<10} {v['description']}")
        for k, p in row["params"].items():
            print(f"  set     {k + '=' + str(p['default']):<28} {p['help']}")
        for name, values in row["bounds"].items():
            changed = {k: v for k, v in values.items() if v != row["params"][k]["default"]}
            tag = " (Spark-scale)" if name in row["large_bounds"] else ""
            print(f"  bounds  {name:<28} " + (" ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults")
                  + tag)
        for p in row["properties"]:
            print(f"  {p['kind']:<9} {p['id']:<28} {p['statement']}  ({p['section']})")
        print()
    return 0


def run_exploration(model, engine: str, *, max_depth=None, max_states=None, stop_at_first=False, liveness=True,
                    master="local[*]", progress=None, out: Path | None = None, fresh=False,
                    conf: dict | None = None, partitions: int | None = None) -> Result:
    if engine == "spark":
        from spark_checks.bfs import explore_spark
        from spark_checks.session import spark_session
        return explore_spark(model, max_depth=max_depth, max_states=max_states, master=master,
                             progress=progress, out=out, fresh=fresh, stop_at_first=stop_at_first,
                             graph=None if liveness else False,
                             spark=spark_session(master, conf_pairs=conf), partitions=partitions)
    result, _ = explore(model, max_depth=max_depth, max_states=max_states, stop_at_first=stop_at_first,
                        check_liveness=liveness,
                        progress=progress)
    return result


def write_violations(model, result: Result, out: Path) -> None:
    for v in result.violations:
        doc = trace_document(model, v.states, v.actions, v.as_dict(), v.loop)
        result.trace_files.append(write_trace(out / f"{v.prop.id}.itf.json", doc))


def cmd_explore(args) -> int:
    model = registry.build(args.model, args.variant, _settings(args.set), preset=args.bounds)
    out = args.out or DEFAULT_OUT / model.name / model.config.variant / args.bounds
    progress = None if (args.quiet or args.json) else stderr_progress
    if not args.json:
        print(f"exploring {model.name} [{model.config!r}] engine={args.engine}", file=sys.stderr)
    result = run_exploration(model, args.engine, max_depth=args.max_depth, max_states=args.max_states,
                             stop_at_first=args.stop_at_first, liveness=not args.no_liveness, master=args.master,
                             progress=progress, out=out,
                             fresh=args.fresh, conf=_settings(args.conf, "--conf"), partitions=args.partitions)
    if progress:
        sys.stderr.write("\n")
    write_violations(model, result, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result.summary(), indent=2) + "\n")
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(human_summary(model, result))
    return 1 if result.violations else 0


def human_summary(model, r: Result) -> str:
    lines = [
        f"{r.model} variant {r.variant}: {r.distinct_states:,} distinct states, {r.transitions:,} transitions, "
        f"depth {r.depth}{'' if r.complete else ' (bounds reached: incomplete)'}",
        f"  {r.seconds:.2f}s, {r.states_per_second:,.0f} states/s, peak memory {r.peak_rss_mb:,.0f} MB",
        "  action coverage: " + ", ".join(f"{k}={v:,}" for k, v in r.coverage.items()),
    ]
    if r.never_fired:
        lines.append("  NEVER FIRED (check the model): " + ", ".join(r.never_fired))
    if model.liveness and not r.liveness_checked:
        lines.append("  liveness: not checked (exploration incomplete, or --no-liveness)")
    failed = {v.prop.id for v in r.violations}
    unchecked = set() if r.liveness_checked else {p.id for p in model.liveness}
    for p in model.props:
        verdict = "VIOLATED" if p.id in failed else "not checked" if p.id in unchecked else "holds   "
        lines.append(f"  {verdict} {p.id}")
    for v, path in zip(r.violations, r.trace_files):
        lines.append(f"\n{v.prop.kind} {v.prop.id} violated ({v.prop.statement}; {v.prop.section}), "
                     f"{v.length} steps:")
        lines.append(render_trace(v.states, v.actions, v.loop))
        lines.append(f"  counterexample: {path}\n  replay: pulsar-verify replay {path}")
    return "\n".join(lines)


def cmd_swarm(args) -> int:
    from spark_checks.swarm import swarm
    model = registry.build(args.model, args.variant, _settings(args.set), preset=args.bounds)
    out = args.out or DEFAULT_OUT / "swarm" / model.name / model.config.variant / args.bounds
    spark = None
    if args.engine == "spark":
        from spark_checks.session import spark_session
        spark = spark_session(args.master, conf_pairs=_settings(args.conf, "--conf"))
    result = swarm(model, walks=args.walks, steps=args.steps, seed=args.seed, engine=args.engine,
                   master=args.master, spark=spark)
    for v in result.violations:
        info = {**v.as_dict(), "walk_seed": result.seeds[v.prop.id], "swarm_seed": args.seed}
        result.trace_files.append(write_trace(out / f"{v.prop.id}.itf.json", trace_document(model, v.states,
                                                                                            v.actions, info)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result.summary(), indent=2) + "\n")
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(f"{model.name} variant {model.config.variant}: {result.walks:,} walks of at most {result.steps} "
              f"steps (seed {result.seed}, engine {result.engine}): {result.total_steps:,} steps in "
              f"{result.seconds:.2f}s")
        for v, path in zip(result.violations, result.trace_files):
            print(f"  VIOLATED {v.prop.id} in {v.length} steps (walk seed {result.seeds[v.prop.id]}): "
                  f"pulsar-verify replay {path}")
        if not result.violations:
            print("  no walk broke a property")
    return 1 if result.violations else 0


def cmd_replay(args) -> int:
    from .replay import replay
    outcome = replay(args.file, args.variant)
    print(outcome.message)
    return 1 if outcome.reproduced else 0


def cmd_prove(args) -> int:
    from properties import registry as obligations
    from properties.obligations import PROVED
    chosen = obligations()
    if args.model:
        cls = registry.model_class(args.model)
        chosen = [o for o in chosen if o.model == cls.name]
        if args.variant:
            registry.build(cls.name, args.variant)  # an unknown variant is a usage error
    if args.variant:
        chosen = [o for o in chosen if args.variant in o.variants]
    if not chosen:
        raise UsageError(f"no Z3 obligations for {args.model or 'any model'}"
                         + (f" variant {args.variant}" if args.variant else ""))
    rows = []
    for o in chosen:
        v = o.run()
        rows.append({"model": o.model, "obligation": o.name, "variants": list(o.variants), "statement": o.statement,
                     "section": o.section, "verdict": v.status, "seconds": round(v.seconds, 3), "detail": v.detail})
        if not args.json:
            print(f"{v.status.upper():<9} {o.model:<8} {o.name:<30} [{', '.join(o.variants)}] {v.seconds:6.2f}s  "
                  f"{o.statement}", flush=True)
            if v.detail:
                print(f"          {v.detail}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if all(r["verdict"] == PROVED for r in rows) else 1


def cmd_review(args) -> int:
    from . import report
    from .hypo import run_machine

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ("local", "spark"):
            raise UsageError(f"--engines: unknown engine {e!r} (known: local, spark)")
    classes = ([registry.model_class(n.strip()) for n in args.models.split(",") if n.strip()]
               if args.models else registry.all_models())
    expected = _read_expectations(args.expectations)
    rows, hypothesis, errors = [], {}, []
    for cls in classes:
        presets = list(cls.in_process_presets()) + (list(cls.large_presets) if args.nightly else [])
        for variant in cls.variant_names():
            for preset in presets:
                model = cls(cls.make_config(variant, preset=preset))
                # Spark runs the default bounds and, at night, the large ones: its per-level overhead
                # buys nothing on the small runs; the large ones run on Spark alone.
                if preset in cls.large_presets:
                    runs = ["spark"] if "spark" in engines else ["local"]
                else:
                    runs = [e for e in engines if e == "local" or preset == "default"]
                for engine in runs:
                    out = args.out / model.name / variant / preset / engine
                    try:
                        r = run_exploration(model, engine, master=args.master, out=out, fresh=True)
                    except UsageError:
                        raise
                    except Exception as exc:  # a model bug: reported, and the rest of the review goes on
                        errors.append(f"{model.name} {variant} {preset} {engine}: {type(exc).__name__}: {exc}")
                        print(f"model error: {errors[-1]}", file=sys.stderr, flush=True)
                        continue
                    write_violations(model, r, out)
                    out.mkdir(parents=True, exist_ok=True)
                    (out / "summary.json").write_text(json.dumps(r.summary(), indent=2) + "\n")
                    rows.append((model.name, variant, preset, engine, model, r))
                    print(f"{model.name:<9} {variant:<36} {preset:<14} {engine:<6} {r.distinct_states:>9,} states "
                          f"{r.seconds:7.2f}s  violated: {', '.join(v.prop.id for v in r.violations) or '-'}",
                          flush=True)
        for variant in _hypothesis_variants(cls):
            model = cls(cls.make_config(variant, values=cls.hypothesis_bounds))
            examples, failed = run_machine(model, args.out / cls.name / variant / "hypothesis", args.nightly)
            hypothesis[cls.name, variant] = (examples, failed)
            print(f"{cls.name:<9} {variant:<36} hypothesis {examples} examples  violated: "
                  f"{', '.join(sorted(failed)) or '-'}", flush=True)
    from properties import registry as obligations
    proofs: dict = {}
    for o in obligations():
        if o.model in {cls.name for cls in classes} and (args.nightly or not o.minutes):
            v = o.run()
            proofs.setdefault(o.model, []).append((o, v))
            print(f"{o.model:<9} {'z3 ' + o.name:<36} {', '.join(o.variants):<24} {v.status} ({v.seconds:.2f}s)",
                  flush=True)
    table = report.cells(rows, hypothesis)
    got = report.verdicts(table)
    mismatches = None if args.update_expectations else report.compare(expected, got)
    args.out.mkdir(parents=True, exist_ok=True)
    for cls in classes:
        pngs = report.plots(args.out, cls.name, rows)
        (args.out / f"{cls.name}.md").write_text(report.model_page(cls, table, rows, pngs, proofs.get(cls.name)))
    index = report.index_page(classes, table, rows, mismatches)
    errors_md = ["", "## Model errors", ""] + [f"- {e}" for e in errors] if errors else []
    (args.out / "index.md").write_text(index + "\n".join(sealed_comparison(rows) + errors_md) + "\n")
    print(f"report: {args.out / 'index.md'}")
    if errors:
        print(f"pulsar-verify: {len(errors)} runs failed with a model error (listed in the report)", file=sys.stderr)
        return 1
    if args.update_expectations:
        merged = {**expected, **got}
        args.expectations.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        print(f"expectations recorded: {args.expectations}")
        return 0
    for line in mismatches:
        print(f"verdict changed: {line}", file=sys.stderr)
    if mismatches:
        print(f"pulsar-verify: {len(mismatches)} verdicts differ from {args.expectations} "
              f"(--update-expectations records them if the change is meant)", file=sys.stderr)
    return 1 if mismatches else 0


def _hypothesis_variants(cls) -> list[str]:
    """As written, and the variant with every fix (or the only fix)."""
    names = cls.variant_names()
    fixes = [v.name for v in cls.variants if v.kind == "fix"]
    best = "all-fixes" if "all-fixes" in names else (fixes[0] if fixes else None)
    return ["as-written"] + ([best] if best else []) if cls.hypothesis_bounds else []


def _read_expectations(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable expectations file: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not an expectations file: expected an object of models")
    return data


def sealed_comparison(rows) -> list[str]:
    """v4 (in-stream markers) against PIP-473 on the scenario PIP-473 exists for: a segment
    sealed mid-transaction (bounds ``sealed`` of both models, in-process)."""
    cells = {}
    for name, variant, preset, engine, _, r in rows:
        if name in ("v4-txn", "pip-473") and variant == "as-written" and preset == "sealed" and engine == "local":
            stall = next((v for v in r.violations if v.prop.id == "end-txn-completes"), None)
            cells[name] = (f"violated: {stall.length}-step lasso" if stall else
                           "holds" if r.liveness_checked else "not checked")
    if len(cells) < 2:
        return []
    return ["", "## A segment sealed mid-transaction: v4 against PIP-473", "",
            "| model | end-txn-completes (bounds `sealed`) |", "|---|---|",
            f"| v4-txn (in-stream markers) | {cells['v4-txn']} |", f"| pip-473 (metadata-driven) | {cells['pip-473']} |"]


COMMANDS = {"list": cmd_list, "explore": cmd_explore, "swarm": cmd_swarm, "replay": cmd_replay, "prove": cmd_prove,
            "review": cmd_review}


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"pulsar-verify: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\npulsar-verify: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
