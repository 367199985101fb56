"""The ``pulsar-verify`` command line.

Exit codes, the only ways out: 0 every property holds within the bounds (or a replayed
violation no longer reproduces); 1 a violation was found (or reproduced); 2 bad input or
environment, one line on stderr and no traceback; 3 an internal error, one line naming the
log file that holds the traceback. Whatever a command reads or writes is checked before
its work starts, and its output directory is replaced whole or not at all.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import __version__, registry, target
from .engines import run_exploration, start_spark, write_results
from .explorer import stderr_progress
from .results import Result
from .findings import EXPECTATIONS
from .model import UsageError
from .outdir import is_uri, replacing
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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds (0 or more), got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pulsar-verify", description="Check executable models of Apache Pulsar PIPs.")
    p.add_argument("--version", action="version", version=f"pulsar-verify {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser("list", help="models, variants and properties with their PIP sections")
    ls.add_argument("--json", action="store_true")

    ex = sub.add_parser("explore", help="exhaustive exploration of one model variant")
    ex.add_argument("model")
    ex.add_argument("--variant", help="default: the model's baseline, as-written (see list)")
    ex.add_argument("--bounds", default="default", metavar="PRESET", help="a named bound set (see list)")
    ex.add_argument("--set", action="append", metavar="KEY=VALUE", help="a bound or fault switch")
    ex.add_argument("--max-depth", type=_positive)
    ex.add_argument("--max-states", type=_positive)
    ex.add_argument("--engine", choices=("local", "spark"), default="local")
    ex.add_argument("--master", default="local[*]", help="engine spark: local[N] (default local[*], embedded) "
                    "or spark://HOST:PORT; under spark-submit, the master it was given")
    ex.add_argument("--out", help="output directory (default out/MODEL/VARIANT/BOUNDS); the Spark engine keeps its "
                    "checkpoint in OUT/spark and continues from it when run again. Engine spark: also a URI "
                    "(file://, s3a://, gs://, hdfs://, abfs://) every executor can reach")
    ex.add_argument("--fresh", action="store_true", help="engine spark: discard the checkpoint in OUT first")
    ex.add_argument("--conf", action="append", metavar="KEY=VALUE", help="engine spark: a Spark setting")
    _ship_option(ex)
    ex.add_argument("--start-timeout", type=_positive, metavar="SECONDS",
                    help="engine spark, spark:// master: the longest wait for the master to run a first job "
                         "(default 60); a peer that is no Spark master, or has no worker, fails then")
    ex.add_argument("--partitions", type=_positive, help="engine spark: partitions of the frontier and visited "
                    "set (default: the master's parallelism; more for runs of millions of states)")
    ex.add_argument("--spark-search", choices=("auto", "levels", "resident"), default="auto",
                    help="engine spark: levels (a stage per level, every new state shuffled to its partition; any "
                         "cluster), resident (one barrier stage whose tasks keep their states and exchange "
                         "fingerprints: faster, needs a slot per partition at once and checkpoints less often), "
                         "or auto (default: resident on a local master with a local --out, else levels)")
    ex.add_argument("--checkpoint-every", type=_seconds, metavar="SECONDS",
                    help="engine spark, resident search: the longest time between two checkpoints (default 300); "
                         "an interrupted run resumes from the last one")
    ex.add_argument("--workers", type=_positive, default=os.cpu_count() or 1,
                    help="engine local: processes that expand each level (default: one per core); the run is the "
                         "same whatever the number (--max-states and --stop-at-first use one)")
    ex.add_argument("--stop-at-first", action="store_true", help="stop at the first violation")
    ex.add_argument("--no-liveness", action="store_true",
                    help="safety properties only: no state graph is kept (engine spark: no transition files), "
                         "so runs of tens of millions of states fit in memory; liveness is reported not checked")
    ex.add_argument("--no-reduction", action="store_true",
                    help="the full search: no symmetry reduction (see list for the interchangeable actors)")
    ex.add_argument("--target", metavar="NAME", help="search for the shortest trace to a state the model's "
                    "target NAME describes (see list); exit 1 reached, 0 unreachable within the bounds")
    ex.add_argument("--target-expr", metavar="EXPR", help="the same for a Python expression over the state: its "
                    "fields by name, s (the state), m (the model), config")
    ex.add_argument("--via", action="append", metavar="STEP", default=[],
                    help="the trace takes this step (an action label, or label(key=value, ...)); repeated, in "
                         "this order; without a target, the shortest trace that takes them")
    ex.add_argument("--json", action="store_true", help="print the summary as JSON")
    ex.add_argument("--quiet", action="store_true", help="no progress display")

    sw = sub.add_parser("swarm", help="many seeded random walks, for bounds beyond exhaustive search")
    sw.add_argument("model")
    sw.add_argument("--variant", help="default: the model's baseline, as-written (see list)")
    sw.add_argument("--bounds", default="default", metavar="PRESET", help="a named bound set (see list)")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE", help="a bound or fault switch")
    sw.add_argument("--walks", type=_positive, default=1000)
    sw.add_argument("--steps", type=_positive, default=200, help="the longest walk")
    sw.add_argument("--seed", type=int, default=0, help="the swarm's seed: walk i uses a seed derived from it")
    sw.add_argument("--engine", choices=("local", "spark"), default="local")
    sw.add_argument("--master", default="local[*]")
    sw.add_argument("--conf", action="append", metavar="KEY=VALUE", help="engine spark: a Spark setting")
    _ship_option(sw)
    sw.add_argument("--out", type=_local_dir, help="output directory (default out/swarm/MODEL/VARIANT/BOUNDS)")
    sw.add_argument("--json", action="store_true", help="print the summary as JSON")

    rp = sub.add_parser("replay", help="re-execute an ITF counterexample and re-check its property")
    rp.add_argument("file", type=Path)
    rp.add_argument("--variant", help="try the file's actions against another variant (does a fix kill it?)")

    pv = sub.add_parser("prove", help="Z3 proof obligations: proved, violated (with the counterexample) or unknown")
    pv.add_argument("model", nargs="?", help="one model (default: every model with obligations)")
    pv.add_argument("--variant", help="only the obligations about this variant (default: all)")
    pv.add_argument("--agreement", action="store_true",
                    help="instead: check each step-for-step encoding against its model on every state the model "
                         "reaches, at each in-process bound set the encoding covers (or --variant, --bounds)")
    pv.add_argument("--bounds", help="with --agreement: only this bound set")
    pv.add_argument("--json", action="store_true")

    rv = sub.add_parser("review", help="the design-review evidence run over every model")
    rv.add_argument("--out", type=Path, default=Path("review"))
    rv.add_argument("--engines", default="local,spark", help="comma-separated: local, spark")
    rv.add_argument("--models", help="comma-separated model names (default: every model)")
    rv.add_argument("--master", default="local[*]")
    rv.add_argument("--workers", type=_positive, default=os.cpu_count() or 1,
                    help="processes for the in-process explorations (default: one per core); the runs are the "
                         "same whatever the number")
    rv.add_argument("--nightly", action="store_true",
                    help="also the Spark-scale bound sets, Hypothesis with the nightly profile, and the Z3 obligations "
                         "that take minutes")
    rv.add_argument("--expectations", type=Path, default=EXPECTATIONS,
                    help="expected verdict of every (model, variant, property)")
    rv.add_argument("--mutation", type=Path, metavar="MUTATION_JSON",
                    help="the mutation harness's report whose scores the index shows (default: the recorded scores)")
    rv.add_argument("--update-expectations", action="store_true",
                    help="record this run's verdicts as the expected ones (deliberately)")
    rv.add_argument("--no-compile", dest="compile", action="store_false",
                    help="run the models from source, without compiling them first (see `compile`)")

    sub.add_parser("compile", help="compile the explorer and the models with Cython into the cache, for the "
                                   "source as it is (an edited module runs from source until compiled again)")

    mu = sub.add_parser("mutation", help="mutation score: small changes to the models' code, each run until a "
                                         "verdict changes (exit 1 when a model's score drops below its floor)")
    mu.add_argument("models", nargs="*", help="model names (default: every model)")
    mu.add_argument("--mutants", type=_positive, default=100, help="mutants drawn per model (default 100)")
    mu.add_argument("--seed", type=int, help="the draw (default: a fresh one, printed and recorded in the report)")
    mu.add_argument("--workers", type=_positive, default=os.cpu_count() or 1,
                    help="processes, one mutant each at a time (default: one per core)")
    mu.add_argument("--out", type=Path, default=Path("mutation"), help="where mutation.json and mutation.md go")
    mu.add_argument("--record", action="store_true",
                    help="record this run's scores as the floors (tests/mutation/scores.json), deliberately")
    mu.add_argument("--only", action="append", default=[], metavar="MUTANT",
                    help="run only this mutant (repeatable): a partial run, which records no floor")
    return p


def cmd_list(args) -> int:
    rows = []
    for cls in registry.all_models():
        rows.append({
            "model": cls.name, "title": cls.title, "source": cls.source,
            "variants": [{"name": v.name, "kind": v.kind, "fixes": sorted(v.fixes), "description": v.description}
                         for v in cls.variants],
            "params": {k: {"default": p.default, "help": p.help} for k, p in cls.params.items()},
            "bounds": {name: {**{k: p.default for k, p in cls.params.items()}, **values}
                       for name, values in cls.presets.items()},
            "large_bounds": list(cls.large_presets),
            "interchangeable": dict(cls.interchangeable),
            "properties": [{"id": p.id, "kind": p.kind, "statement": p.statement, "section": p.section,
                            **({"fair": list(p.fair)} if p.kind == "liveness" else {})}
                           for p in cls.checked_properties()],
            "targets": [{"name": t.name, "statement": t.statement, "source": t.source}
                        for t in cls.declared_targets()],
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
        for k, why in row["interchangeable"].items():
            print(f"  symmetry {k:<27} interchangeable when 2 or more: {why}")
        for name, values in row["bounds"].items():
            changed = {k: v for k, v in values.items() if v != row["params"][k]["default"]}
            tag = " (Spark-scale)" if name in row["large_bounds"] else ""
            print(f"  bounds  {name:<28} " + (" ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults")
                  + tag)
        for p in row["properties"]:
            print(f"  {p['kind']:<9} {p['id']:<28} {p['statement']}  ({p['section']})")
        for t in row["targets"]:
            print(f"  target    {t['name']:<28} {t['statement']}  ({t['source']})")
        print()
    return 0


def _local_dir(text: str) -> Path:
    """An --out that only a local directory can be (a URI is for explore's Spark engine)."""
    if is_uri(text):
        raise argparse.ArgumentTypeError(f"{text}: a local directory here (a URI --out is for explore --engine spark)")
    return Path(text)


def _ship_option(parser) -> None:
    from .spark_checks.ship import ROUTES
    parser.add_argument("--ship", choices=ROUTES, default="auto",
                        help="engine spark: what goes with the job to the executors (spark_checks/ship.py): env, "
                             "pulsar-verify and its executor dependencies (the default on a cluster master: workers "
                             "need only Python and Spark); code, pulsar-verify only (workers' Python has attrs, "
                             "networkx, numpy, pyarrow, protobuf); none, nothing (workers have pulsar-verify; the "
                             "default on local[N])")


def cmd_explore(args) -> int:
    model = registry.build(args.model, args.variant, _settings(args.set), preset=args.bounds,
                           reduction=not args.no_reduction)
    aimed = bool(args.target or args.target_expr or args.via)
    if aimed:  # a target search (pulsar_verify/target.py): the same run, with the target as its question
        model = target.TargetSearch(model, target.Aim(args.target or "", args.target_expr or "", tuple(args.via)))
    progress = None if (args.quiet or args.json) else stderr_progress
    conf = _settings(args.conf, "--conf")
    if args.out and is_uri(args.out):
        if args.engine != "spark":
            raise UsageError(f"--out {args.out}: a URI is for the Spark engine (--engine spark); the local engine "
                             f"writes to a local directory")
        from .spark_checks.location import Location, publishing
        out, output = Location(args.out), publishing
    else:
        out = Path(args.out or DEFAULT_OUT / model.name / model.config.variant_name / args.bounds
                   / ("target" if aimed else "")).absolute()
        output = replacing
    with output(out, keep=("spark",)) as staging:
        spark = start_spark(args.master, conf, args.start_timeout, args.ship, (model.name,)) \
            if args.engine == "spark" else None
        if not args.json:
            print(f"{'searching' if aimed else 'exploring'} {model.name} [{model.config!r}] engine={args.engine}"
                  + (f" for {model.statement}" if aimed else ""), file=sys.stderr)
        run = dict(max_depth=args.max_depth, max_states=args.max_states, master=args.master, progress=progress,
                   out=out, fresh=args.fresh, conf=conf, partitions=args.partitions, spark=spark,
                   search=args.spark_search, checkpoint_seconds=args.checkpoint_every)
        result = target.search(model, args.engine, **run) if aimed else run_exploration(
            model, args.engine, stop_at_first=args.stop_at_first, liveness=not args.no_liveness,
            workers=args.workers, **run)
        if progress:
            sys.stderr.write("\n")
        if aimed:
            summary = target.write_reach(model, result, staging, out)
        else:
            write_results(model, result, staging, out)
            summary = result.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(target.report(model, result, summary) if aimed else human_summary(model, result))
    return 1 if (result.reached if aimed else result.violations or result.unfired_system) else 0


def human_summary(model, r: Result) -> str:
    lines = [
        f"{r.model} variant {r.variant}: {r.distinct_states:,} distinct states, {r.transitions:,} transitions, "
        f"depth {r.depth}{'' if r.complete else ' (bounds reached: incomplete)'}",
        f"  {r.seconds:.2f}s, {r.states_per_second:,.0f} states/s, peak memory {r.peak_rss_mb:,.0f} MB",
        f"  symmetry reduction: {r.reduction} (one state per renaming; --no-reduction for the full search)"
        if r.reduction else "  no symmetry reduction: the full search",
        "  action coverage: " + ", ".join(f"{k}={v:,}" for k, v in r.coverage.items()),
    ]
    if r.never_fired:
        lines.append("  NEVER FIRED (check the model): " + ", ".join(r.never_fired))
    if r.unfired_system:
        lines.append(f"  FAILED: system actions the model declares at these bounds never fired: "
                     f"{', '.join(r.unfired_system)}. The search checked a weaker system than the model says (a "
                     f"timer, retry or recovery that cannot happen): correct the model's action_names or its "
                     f"bounds")
    if model.liveness and not r.liveness_checked:
        lines.append("  liveness: not checked (exploration incomplete, or --no-liveness)")
    shown = {"violated": "VIOLATED", "holds": "holds   ", "not checked": "not checked"}
    for pid, _ in r.properties:
        verdict = r.verdict(pid)  # or "holds up to ..." for a cut search
        lines.append(f"  {shown[verdict]} {pid}" if verdict in shown else f"  {verdict}: {pid}")
    paths = iter(r.trace_files)  # one per violation with a counterexample, in order
    for v in r.violations:
        if not v.traced:
            lines.append(f"\n{v.prop.kind} {v.prop.id} violated ({v.prop.statement}; {v.prop.section}): "
                         f"none of the {r.distinct_states:,} states reached is an example")
            continue
        path = next(paths)
        lines.append(f"\n{v.prop.kind} {v.prop.id} violated ({v.prop.statement}; {v.prop.section}), "
                     f"{v.length} steps:")
        lines.append(render_trace(v.states, v.actions, v.loop))
        lines.append(f"  counterexample: {path}\n  replay: pulsar-verify replay {path}")
    return "\n".join(lines)


def cmd_swarm(args) -> int:
    from pulsar_verify.spark_checks.swarm import swarm
    model = registry.build(args.model, args.variant, _settings(args.set), preset=args.bounds)
    out = Path(args.out or DEFAULT_OUT / "swarm" / model.name / model.config.variant_name / args.bounds).absolute()
    with replacing(out) as staging:
        spark = start_spark(args.master, _settings(args.conf, "--conf"), ship=args.ship, models=(model.name,)) \
            if args.engine == "spark" else None
        result = swarm(model, walks=args.walks, steps=args.steps, seed=args.seed, engine=args.engine,
                       master=args.master, spark=spark)
        write_results(model, result, staging, out,
                      info=lambda v: {"walk_seed": result.seeds[v.prop.id], "swarm_seed": args.seed})
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(f"{model.name} variant {model.config.variant_name}: {result.walks:,} walks of at most {result.steps} "
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
    if args.agreement:
        return _agreement(args)
    if args.bounds:
        raise UsageError("--bounds is for --agreement")
    from pulsar_verify.properties import registry as obligations
    from pulsar_verify.properties.obligations import PROVED
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


def _compile() -> int:
    """``compiled.build``: the count compiled, or a ``UsageError`` saying why nothing can be."""
    from . import compiled

    if not compiled.enabled():
        raise UsageError("PULSAR_VERIFY_COMPILED=0 turns the compiled modules off")
    built, why = compiled.build(say=lambda line: print(line, file=sys.stderr))
    if why:
        raise UsageError(f"cannot compile: {why}")
    return built


def cmd_compile(args) -> int:
    from . import compiled

    if not _compile():
        print(f"the cache has every module compiled from its current source: {compiled.cache_dir()}", file=sys.stderr)
    return 0


def cmd_review(args) -> int:
    from . import compiled, review

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in review.ENGINES:
            raise UsageError(f"--engines: unknown engine {e!r} (known: {', '.join(review.ENGINES)})")
    classes = ([registry.model_class(n.strip()) for n in args.models.split(",") if n.strip()]
               if args.models else registry.all_models())
    if args.mutation is not None:
        try:
            json.loads(args.mutation.read_text())["models"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--mutation {args.mutation}: not a mutation report ({exc})") from None
    if args.compile and compiled.enabled():
        review.read_expectations(args.expectations, classes, args.update_expectations)  # bad input: before compiling
        try:
            _compile()
        except UsageError as exc:
            print(f"pulsar-verify: running the models from source ({exc})", file=sys.stderr)
        if args.argv is not None and compiled.loaded_from_source() and not os.environ.get("PULSAR_VERIFY_REEXEC"):
            # this process imported them from source before they were compiled: start again on the compiled ones
            os.environ["PULSAR_VERIFY_REEXEC"] = "1"
            os.execv(sys.executable, [sys.executable, "-m", "pulsar_verify", *args.argv])
    return review.run(classes, engines=engines, out=args.out.absolute(), master=args.master, nightly=args.nightly,
                      expectations=args.expectations, update=args.update_expectations, workers=args.workers,
                      mutation=args.mutation)


def cmd_mutation(args) -> int:
    from . import mutation

    names = args.models or registry.names()
    for name in names:
        registry.model_class(name)
    if args.record and not os.access(mutation.SCORES.parent, os.W_OK):
        raise UsageError(f"--record: {mutation.SCORES.parent} is not writable")
    only = frozenset(args.only)
    if only and args.record:
        raise UsageError("--record with --only: a partial run's score is no floor")
    unknown = sorted(only - {mu.id for name in names for mu in mutation.all_mutants(name)})
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no mutant of {', '.join(names)} has that name")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    if not only:
        print(f"mutants drawn with --seed {seed}", file=sys.stderr, flush=True)
    with replacing(args.out) as staging:
        report = mutation.harness(names, count=args.mutants, workers=args.workers, only=only, seed=seed,
                                  progress=lambda line: print(line, file=sys.stderr, flush=True))
        low = mutation.below_floor(report)
        report["below_floor"] = low
        (staging / "mutation.json").write_text(json.dumps(report, indent=1) + "\n")
        (staging / "mutation.md").write_text(mutation.markdown(report))
    for name, r in report["models"].items():
        s = r["score"]
        print(f"{name}: {s['score']}% of {s['mutants'] - s['equivalent']} killed ({s['killed-by-exception']} by "
              f"exception, {s['survived']} survived, {s['not-reached']} not reached, {s['inconclusive']} inconclusive, "
              f"{s['accepted']} accepted)")
    print(f"{report['seconds']:.0f} s on {report['workers']} processes; report in {args.out}/mutation.md")
    if args.record:
        mutation.record(report)
        print(f"scores recorded: {mutation.SCORES}")
        return 0
    for line in low:
        print(f"below floor: {line}", file=sys.stderr)
    return 1 if low else 0


def _agreement(args) -> int:
    """``prove --agreement``: a line per encoding, variant and bound set; exit 1 on a disagreement."""
    from pulsar_verify.properties import agreement, step_encodings
    encodings = step_encodings()
    if args.model:
        name = registry.model_class(args.model).name
        encodings = [e for e in encodings if e.model == name]
        if not encodings:
            raise UsageError(f"no step-for-step encoding of {name}")
    for option, value, known in (("variant", args.variant, lambda cls: cls.variant_names()),
                                 ("bounds", args.bounds, lambda cls: cls.presets)):
        if value:  # checked before any work: the encodings of the models that have it, or a usage error
            encodings = [e for e in encodings if value in known(registry.model_class(e.model))]
            if not encodings:
                raise UsageError(f"unknown {option} {value!r} of {args.model or 'any model with an encoding'}")

    def wanted(variant: str, preset: str) -> bool:
        return (not args.variant or variant == args.variant) and (not args.bounds or preset == args.bounds)
    rows = []
    for enc in encodings:
        where = enc.__module__.rpartition(".")[2]
        covered, not_covered = agreement.cases(enc)
        for (variant, preset), why in not_covered.items():
            if wanted(variant, preset):
                rows.append({"encoding": where, "model": enc.model, "variant": variant, "bounds": preset,
                             "covered": False, "reason": why})
                if not args.json:
                    print(f"{'-':<9} {where:<20} {preset:<22} {variant:<34} not covered: {why}", flush=True)
        for variant, preset in filter(lambda case: wanted(*case), covered):
            started = time.perf_counter()
            r = agreement.check(enc, variant, preset)
            rows.append({"encoding": where, "model": enc.model, "variant": variant, "bounds": preset,
                         "covered": True, "states": r.states, "steps": r.steps, "disagreements": r.disagreements,
                         "first": list(r.problems), "seconds": round(time.perf_counter() - started, 2)})
            if not args.json:
                print(f"{'AGREES' if not r.disagreements else 'DIFFERS':<9} {where:<20} {preset:<22} "
                      f"{variant:<34} {r.states:>8,} states {r.steps:>9,} steps  {rows[-1]['seconds']:7.2f}s", flush=True)
                for problem in r.problems:
                    print(f"          {problem}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 1 if any(r.get("disagreements") for r in rows) else 0


COMMANDS = {"list": cmd_list, "explore": cmd_explore, "swarm": cmd_swarm, "replay": cmd_replay, "prove": cmd_prove,
            "review": cmd_review, "mutation": cmd_mutation, "compile": cmd_compile}


def internal_error(exc: BaseException) -> str:
    """Write the traceback to a log file of its own and return the one line that names it."""
    log_dir = Path(os.environ.get("PULSAR_VERIFY_LOG_DIR") or tempfile.gettempdir())
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f"pulsar-verify-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log",
                                    dir=log_dir)
        with os.fdopen(fd, "w") as log:
            log.write(f"pulsar-verify {__version__}: {' '.join(sys.argv)}\n")
            log.write("".join(traceback.format_exception(exc)))
        where = f"traceback in {name}"
    except OSError as err:
        where = f"no log written ({err.strerror})"
    return f"pulsar-verify: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} " \
           f"({where})"


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        args.argv = sys.argv[1:] if argv is None else None  # the command line, to start again with (review)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"pulsar-verify: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\npulsar-verify: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # the file system or the network: the environment, not the design
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"pulsar-verify: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(internal_error(exc), file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
