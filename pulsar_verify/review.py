"""The design-review run (the main job): every model, variant and bound set explored (or known to be
as-written's or all-fixes' run at those bounds, ``_reuse``; a mutant only until it has broken what it is
recorded to break, ``_mutant_runs``, and over at most ``MUTANT_MAX_STATES`` states), Hypothesis on
as-written and all-fixes, the Z3 obligations, then the report (``report``) and the comparison with the
recorded verdicts. Everything it reads is checked before the
first exploration; the report directory is replaced whole when the run ends, or left as it was."""
from __future__ import annotations

import json
import multiprocessing
import queue
import sys
import threading
import traceback
from pathlib import Path

import attrs

from . import registry, report
from .asked import Questions, same_run
from .engines import run_exploration, write_results
from .model import Model, UsageError
from .outdir import replacing, write_text

ENGINES = ("local", "spark")
# A mutant's search is cut past this many states (about a minute and 2 GB here): with every violating state
# expanded, a mistake that unleashes the protocol (every broker orchestrating) can reach tens of millions of
# states at bounds sized for the design. A cut run's properties not yet violated are open, never ``holds``.
MUTANT_MAX_STATES = 1_000_000


def read_expectations(path: Path, classes: list[type[Model]], update: bool = False) -> dict:
    """The recorded verdicts, ``{model: {variant: {property: holds|violated}}}``. Every variant and
    property named for a model under review must be the model's own; models not installed are ignored.
    A file that does not exist is an error, unless this run is to record it (then the entries of the
    models under review are replaced whole, and only the file's shape is checked)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        if update:
            return {}
        raise UsageError(f"--expectations {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(f"--expectations {path}: not a readable expectations file: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--expectations {path}: expected an object of models")
    by_name = {cls.name: cls for cls in classes}
    for name, variants in data.items():
        if not isinstance(variants, dict):
            raise UsageError(f"--expectations {path}: {name}: expected an object of variants")
        cls = by_name.get(name)
        for variant, props in variants.items():
            if not isinstance(props, dict) or not all(v in (report.HOLDS, report.VIOLATED, report.OPEN)
                                                      for v in props.values()):
                raise UsageError(f"--expectations {path}: {name} {variant}: expected property -> holds|violated|"
                                 f"{report.OPEN}")
            if cls is None or update:  # not installed, or about to be recorded anew
                continue
            if variant not in cls.variant_names():
                raise UsageError(f"--expectations {path}: model {name} has no variant {variant!r}")
            unknown = sorted(set(props) - set(cls.property_ids()))
            if unknown:
                raise UsageError(f"--expectations {path}: model {name} has no property {unknown[0]!r}")
    return data


def _hypothesis_variants(cls) -> list[str]:
    """As written, and the variant with every fix."""
    best = cls.best_variant()
    return [cls.baseline()] + ([best] if best else []) if cls.hypothesis_bounds else []


def _one_run(name, variant, preset, engine, into: Path, final: Path, master="local[*]", ask=False, breaks=()):
    """One exploration and its files: the Result, or the traceback of a model error (a string). ``ask``:
    the Result also holds the questions the model asked of its variant (``asked``). ``breaks``: properties
    whose violation ends the search, at the first complete level where each of them is violated."""
    questions = Questions() if ask else None
    model = registry.build(name, variant, preset=preset, questions=questions)
    until = (lambda violated, depth: violated.keys() >= breaks) if breaks else None
    cap = MUTANT_MAX_STATES if model.variant_named(variant).kind == "mutant" else None
    try:
        result = run_exploration(model, engine, master=master, out=into, fresh=True, until=until, max_states=cap)
    except UsageError:
        raise
    except Exception as exc:
        return f"{name} {variant} {preset} {engine}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    if questions is not None:
        result.asked = questions.frozen()
    if breaks and not result.complete:
        result.stopped = f"{', '.join(sorted(breaks))} broken"
    write_results(model, result, into, final)
    return result


def standing_for(cls, variant: str, sources: dict) -> str | None:
    """The variant among ``sources`` (variant -> its Result, holding the questions its model asked, or a
    model error) whose run is ``variant``'s: each question asked has the same answer under both."""
    return next((source for source, result in sources.items() if not isinstance(result, str)
                 and same_run(cls.variant_named(source), cls.variant_named(variant), result.asked)), None)


def _reuse(name: str, variant: str, preset: str, sources: dict, into: Path, final: Path):
    """The run of ``variant`` at ``preset`` as the one of ``sources`` that stands for it, with its files;
    None if there is none."""
    source = standing_for(registry.model_class(name), variant, sources)
    if source is None:
        return None
    reused = attrs.evolve(sources[source], variant=variant, reused_from=source, seconds=0.0, trace_files=[])
    write_results(registry.build(name, variant, preset=preset), reused, into, final)
    return reused


def _brief(classes, expected: dict) -> dict:
    """(model, mutant) -> the properties ``expected`` records it breaks, for each mutant that breaks one.
    A mutant is there to show that checks can fail, so its runs may stop once it has broken them
    (``_mutant_runs``); a mutant recorded as breaking nothing is searched whole."""
    out = {}
    for cls in classes:
        for v in cls.variants:
            breaks = {p for p, said in expected.get(cls.name, {}).get(v.name, {}).items() if said == report.VIOLATED}
            if v.kind == "mutant" and breaks:
                out[cls.name, v.name] = frozenset(breaks)
    return out


def _mutant_runs(name, variant, presets, into: Path, final: Path, breaks: frozenset) -> list:
    """A mutant at ``presets`` in order until it has broken every property of ``breaks``: each run stops at
    the first complete level where each of those not broken yet is (so its counterexamples are still
    the shortest at its bounds), and the bound sets after the last are not run. [(bounds, outcome)]."""
    out, left = [], breaks
    for preset in presets:
        if not left:
            break
        run_dir = Path(name, variant, preset, "local")
        outcome = _one_run(name, variant, preset, "local", into / run_dir, final / run_dir, breaks=left)
        if not isinstance(outcome, str):
            left = left - {v.prop.id for v in outcome.violations}
        out.append((preset, outcome))
    return out


def _local_job(job):
    """One job of the pool: an exploration, a mutant's runs (``_mutant_runs``), a Hypothesis machine, or a
    Z3 obligation (by its index)."""
    if job[0] == "mutant":
        return job, _mutant_runs(*job[1:])
    kind, name, variant, preset, into, final, nightly = job
    if kind == "z3":
        from .properties import registry as obligations
        return job, obligations()[preset].run()
    if kind == "hypothesis":
        from .hypo import run_machine
        cls = registry.model_class(name)
        return job, run_machine(cls(cls.make_config(variant, values=cls.hypothesis_bounds)), into, nightly)
    return job, _one_run(name, variant, preset, "local", into, final, ask=kind == "source")


def _progress(name, variant, preset, engine, outcome) -> None:
    if isinstance(outcome, str):
        print(f"model error: {outcome.splitlines()[0]}", file=sys.stderr, flush=True)
        return
    violated = ", ".join(v.prop.id for v in outcome.violations) or "-"
    took = f"as {outcome.reused_from}" if outcome.reused_from else f"{outcome.seconds:7.2f}s"
    if outcome.stopped:
        took += f" (stopped: {outcome.stopped})"
    print(f"{name:<9} {variant:<36} {preset:<14} {engine:<6} {outcome.distinct_states:>9,} states "
          f"{took}  violated: {violated}", flush=True)


def _local_runs(runs, machines, proofs: list, brief: dict, staging: Path, out: Path, pool,
                nightly: bool) -> tuple[dict, dict, dict]:
    """The in-process explorations, the Hypothesis machines and the Z3 obligations (given as indices
    into the registry), each in a worker process (forked before any Spark session starts); the
    machines first (shrinking a failure takes seconds to tens of seconds, so they run beside the explorations), on
    ``pool`` (or in this process if it is None). Each run is the one-process run, so counts, verdicts
    and counterexamples are the same for any number of workers. Each line is printed as its job ends.

    At each bound set, as-written and all-fixes run first, noting the questions their models ask of
    their variant (``pulsar_verify.asked``); another variant that answers each of one's questions alike
    has that run (``_reuse``), and only the others are explored. A mutant of ``brief`` (``_brief``) runs
    once its model's anchors have run at every bound set: those bound sets where one of them stands for it
    first, then the others in one job, fewest states of ``all-fixes`` first (``_mutant_runs``). Its
    runs absent from the first dict were not needed."""
    from .properties import registry as obligations
    every = obligations()
    anchors = {n: _anchors(registry.model_class(n)) for n in {r[0] for r in runs}}
    jobs = [("hypothesis", n, v, None, staging / n / v / "hypothesis", None, nightly) for n, v in machines]
    jobs += [("z3", every[i].model, None, i, None, None, nightly) for i in proofs]
    waiting: dict = {}  # (model, bounds) -> the runs that wait for its anchors' runs
    expected: dict = {}  # (model, bounds) -> the anchors that run there
    mutants: dict = {}  # (model, mutant) of ``brief`` -> its bound sets
    for n, v, p, _ in runs:
        job = ("source" if v in anchors[n] else "local", n, v, p, staging / n / v / p / "local",
               out / n / v / p / "local", nightly)
        if job[0] == "source":
            jobs.append(job)
            expected.setdefault((n, p), set()).add(v)
        elif (n, v) in brief:
            mutants.setdefault((n, v), []).append(p)
        else:
            waiting.setdefault((n, p), []).append(job)
    finished: queue.Queue = queue.Queue()
    outstanding = 0

    def start(job):
        nonlocal outstanding
        outstanding += 1
        if pool is None:
            finished.put(_local_job(job))
        else:
            pool.apply_async(_local_job, (job,), callback=finished.put,
                             error_callback=lambda exc: finished.put((None, exc)))

    done, hypothesis, verdicts, sources = {}, {}, {}, {}

    def reused(name, variant, preset):
        """The run of ``variant`` at ``preset`` as an anchor's, noted; False if none stands for it."""
        at = Path(name, variant, preset, "local")
        outcome = _reuse(name, variant, preset, sources.get((name, preset), {}), staging / at, out / at)
        if outcome is not None:
            _progress(name, variant, preset, "local", outcome)
            done[name, variant, preset] = outcome
        return outcome is not None

    def start_mutants():
        """Each mutant whose model's anchors have all run (or that has none)."""
        for (name, variant), presets in list(mutants.items()):
            if any(set(sources.get((name, p), {})) != expected.get((name, p), set()) for p in presets):
                continue
            del mutants[name, variant]
            left = brief[name, variant] - {v.prop.id for p in presets if reused(name, variant, p)
                                           for v in done[name, variant, p].violations}
            best = registry.model_class(name).best_variant()
            order = sorted((p for p in presets if (name, variant, p) not in done),
                           key=lambda p: getattr(sources.get((name, p), {}).get(best), "distinct_states", 0))
            if left and order:
                start(("mutant", name, variant, order, staging, out, left))

    for job in jobs:
        start(job)
    for key in set(waiting) - set(expected):  # no anchor at these bounds
        for job in waiting.pop(key):
            start(job)
    start_mutants()
    while outstanding:
        job, outcome = finished.get()
        outstanding -= 1
        if job is None:
            raise outcome
        kind, name, variant, preset, *_ = job
        if kind == "mutant":
            for at, outcome in outcome:
                _progress(name, variant, at, "local", outcome)
                done[name, variant, at] = outcome
            continue
        if kind == "z3":
            o = every[preset]
            verdicts[preset] = outcome
            print(f"{o.model:<9} {'z3 ' + o.name:<36} {', '.join(o.variants):<24} {outcome.status} "
                  f"({outcome.seconds:.2f}s)", flush=True)
            continue
        if kind == "hypothesis":
            examples, failed = hypothesis[name, variant] = outcome
            print(f"{name:<9} {variant:<36} hypothesis {examples} examples  violated: "
                  f"{', '.join(sorted(failed)) or '-'}", flush=True)
            continue
        _progress(name, variant, preset, "local", outcome)
        done[name, variant, preset] = outcome
        if kind != "source":
            continue
        got = sources.setdefault((name, preset), {})
        got[variant] = outcome
        if (name, preset) in waiting and set(got) == expected[name, preset]:
            for later in waiting.pop((name, preset)):
                if not reused(name, later[2], preset):
                    start(later)
        start_mutants()
    return done, hypothesis, verdicts


def _alongside(local: tuple, nightly: bool, workers: int, spark) -> tuple[dict, dict, dict]:
    """The local jobs on a pool of ``workers`` processes (forked first, before any Spark session) and,
    meanwhile, ``spark()`` in this process: the Spark runs spend most of their time waiting on the JVM,
    so they cost the local jobs little. The local results, with the Spark runs' outcomes added to the
    first dict under ``("spark", model, variant, bounds)``."""
    if workers <= 1:
        done, hypothesis, verdicts = _local_runs(*local, None, nightly)
        spark_done = spark()
    else:
        pool = multiprocessing.get_context("fork").Pool(workers)
        box: dict = {}

        def collect():
            try:
                box["local"] = _local_runs(*local, pool, nightly)
            except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller's thread
                box["error"] = exc
        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        try:
            spark_done = spark()
            collector.join()
        finally:
            pool.terminate()
        if "error" in box:
            raise box["error"]
        done, hypothesis, verdicts = box["local"]
    done.update((("spark", *key), outcome) for key, outcome in spark_done.items())
    return done, hypothesis, verdicts


def _anchors(cls) -> set[str]:
    """As written, and with every fix: the variants Spark runs too at the default bounds, and whose runs
    the other variants' runs may be (``_reuse``)."""
    return {cls.baseline(), cls.best_variant()} - {None}


def _said(r) -> tuple:
    """What a run says: states, depth, and each violated property with its counterexample's length and loop."""
    return r.distinct_states, r.depth, sorted((v.prop.id, v.length, v.loop) for v in r.violations)


def _disagreements(done: dict) -> list[str]:
    """Each Spark run that says something else than the in-process run of the same variant and bounds
    (an engine's bug, so an internal error)."""
    out = []
    for key, spark in done.items():
        if key[0] != "spark" or isinstance(spark, str):
            continue
        local = done.get(key[1:])
        if local is not None and not isinstance(local, str) and _said(local) != _said(spark):
            out.append(f"engines disagree on {' '.join(key[1:])}: in-process {_said(local)}, Spark {_said(spark)}")
    return out


def _mutation_scores(path: Path | None) -> tuple[dict, str]:
    """The mutation scores for the index: of the harness's report ``path``, or the recorded ones."""
    from . import mutation

    if path is None:
        return mutation.recorded(), f"the last recorded run (`{mutation.SCORES.relative_to(mutation.ROOT)}`)"
    return {m: r["score"] for m, r in json.loads(path.read_text())["models"].items()}, f"`{path.name}` of this run"


def run(classes: list[type[Model]], *, engines: list[str], out: Path, master: str, nightly: bool,
        expectations: Path, update: bool, workers: int = 1, mutation: Path | None = None) -> int:
    from .properties import registry as obligations

    expected = read_expectations(expectations, classes, update)
    if update:
        write_text(expectations, json.dumps(expected, indent=1, sort_keys=True) + "\n")  # writable, before any work
    with replacing(out) as staging:
        rows, errors, tracebacks, proofs = [], [], [], {}
        runs = []  # (model, variant, bounds, engine) in the report's order
        for cls in classes:
            presets = list(cls.in_process_presets()) + (list(cls.large_presets) if nightly else [])
            for variant in cls.variant_names():
                for preset in presets:
                    # The large bounds (at night) run on Spark alone. Spark also runs the default bounds
                    # of as-written and all-fixes, as a cross-check of the engines (``_disagreements``):
                    # a violated design and a sound one; the engines do not depend on the variant.
                    if preset in cls.large_presets:
                        engines_here = ["spark"] if "spark" in engines else ["local"]
                    else:
                        engines_here = [e for e in engines if e == "local"
                                        or (preset == "default" and variant in _anchors(cls))]
                    runs += [(cls.name, variant, preset, engine) for engine in engines_here]
        machines = [(cls.name, variant) for cls in classes for variant in _hypothesis_variants(cls)]
        names = {cls.name for cls in classes}
        selected = [i for i, o in enumerate(obligations()) if o.model in names and (nightly or not o.minutes)]
        brief = {} if nightly or update else _brief(classes, expected)  # those search every run whole
        local = ([r for r in runs if r[3] == "local"], machines, selected, brief, staging, out)

        def spark() -> dict:
            outcomes = {}
            for name, variant, preset, engine in runs:
                if engine == "spark":
                    run_dir = Path(name, variant, preset, engine)
                    outcome = _one_run(name, variant, preset, engine, staging / run_dir, out / run_dir, master)
                    _progress(name, variant, preset, engine, outcome)
                    outcomes[name, variant, preset] = outcome
            return outcomes
        done, hypothesis, verdicts = _alongside(local, nightly, workers, spark)
        unsearched = set()  # the mutants of ``brief`` with a run stopped or not needed: what else they break is open
        for name, variant, preset, engine in runs:
            outcome = done.get((name, variant, preset) if engine == "local" else ("spark", name, variant, preset))
            if outcome is None or getattr(outcome, "stopped", ""):
                unsearched.add((name, variant))
            if outcome is None:
                continue
            if isinstance(outcome, str):  # a model bug: reported, and the rest of the review goes on
                errors.append(outcome.splitlines()[0])
                tracebacks.append(f"== {outcome}")
                continue
            rows.append((name, variant, preset, engine, registry.build(name, variant, preset=preset), outcome))
        for line in _disagreements(done):
            errors.append(line)
            tracebacks.append(f"== {line}")
        every = obligations()
        for i in selected:  # in the registry's order, whatever order they ended in
            proofs.setdefault(every[i].model, []).append((every[i], verdicts[i]))
        table = report.cells(rows, hypothesis, unsearched)
        for line in report.proved_for_any_size(table, proofs):
            errors.append(line)
            tracebacks.append(f"== {line}")
        got = report.verdicts(table)
        mismatches = None if update else report.compare(expected, got)
        for cls in classes:
            pngs = report.plots(staging, cls.name, rows)
            write_text(staging / f"{cls.name}.md", report.model_page(cls, table, rows, pngs, proofs.get(cls.name)))
        index = report.index_page(classes, table, rows, mismatches, _mutation_scores(mutation))
        errors_md = ["", "## Internal errors", ""] + [f"- {e}" for e in errors] if errors else []
        write_text(staging / "index.md", index + "\n".join(report.sealed_comparison(rows) + errors_md) + "\n")
        if tracebacks:
            write_text(staging / "errors.log", "\n".join(tracebacks))
    print(f"report: {out / 'index.md'}")
    if errors:
        print(f"pulsar-verify: internal error: {len(errors)} runs failed with a model error, disagree between "
              f"engines or contradict a Z3 proof (details in {out / 'errors.log'})", file=sys.stderr)
        return 3
    unfired = [f"{name} {variant} {preset}: system actions never fired: {', '.join(outcome.unfired_system)}"
               for name, variant, preset, _, model, outcome in rows
               if model.variant_named(variant).kind != "mutant" and outcome.unfired_system]
    for line in unfired:  # a mutant's is a mistake it makes; a design's, a model that checks less than it says
        print(f"never fired: {line}", file=sys.stderr)
    if unfired:
        print(f"pulsar-verify: {len(unfired)} runs never took a system action their model declares at their "
              f"bounds (correct the model's action_names or the bounds)", file=sys.stderr)
        return 1
    if update:
        write_text(expectations, json.dumps({**expected, **got}, indent=1, sort_keys=True) + "\n")
        print(f"expectations recorded: {expectations}")
        return 0
    for line in mismatches:
        print(f"verdict changed: {line}", file=sys.stderr)
    if mismatches:
        print(f"pulsar-verify: {len(mismatches)} verdicts differ from {expectations} "
              f"(--update-expectations records them if the change is meant)", file=sys.stderr)
    return 1 if mismatches else 0
