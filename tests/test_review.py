"""The design-review report: every finding appears with its sequence diagram and replay commands, every
action of every model has a place in the diagrams, and a verdict that differs from the expectations file makes
``review`` exit non-zero and say which."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pulsar_verify import registry
from pulsar_verify.findings import catalogue
from pulsar_verify.replay import replay
from pulsar_verify.report import STEPS_PER_DIAGRAM, finding_section
from tests.helpers import ROOT, cli

MODELS = [cls for cls in registry.all_models() if catalogue(cls.name)]


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.name)
def test_every_finding_is_drawn_with_its_replay_commands(cls):
    for f in catalogue(cls.name):
        text = "\n".join(finding_section(cls, f))
        assert f.title in text and f"**{f.severity.capitalize()}** ({f.loss}, {f.path} path)." in text
        diagrams = [d.split("```", 1)[0] for d in text.split("```mermaid\n")[1:]]
        assert all("sequenceDiagram\n" in d for d in diagrams)
        assert sum(d.count("->>") for d in diagrams) == f.length
        assert all(0 < d.count("->>") <= STEPS_PER_DIAGRAM for d in diagrams)
        assert f"{f.property} violated" in diagrams[-1] or "never holds" in diagrams[-1]
        for d in diagrams:  # every lifeline drawn acts in its diagram
            for who in re.findall(r"participant (\w+) as", d):
                assert re.search(rf"^\s*{who}->>|->>{who}:", d, re.M), (f.name, who)
        assert f"pulsar-verify replay findings/{cls.name}/{f.trace.name}\n" in text
        assert f"--variant {f.fix}" in text


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.name)
def test_every_action_has_a_sender_and_a_receiver(cls):
    assert set(cls.action_labels) <= set(cls.sequence), sorted(set(cls.action_labels) - set(cls.sequence))
    assert all(arrow.count("->>") == 1 for arrow in cls.sequence.values())
    forms: dict = {}  # a lifeline is always named the same way: "Broker{broker}", never also "Broker"
    for arrow in cls.sequence.values():
        for actor in arrow.split("->>"):
            forms.setdefault(re.sub(r"\{\w+\}", "", actor), set()).add(actor)
    assert {base: f for base, f in forms.items() if len(f) > 1} == {}
    for f in catalogue(cls.name):  # and each placeholder is a parameter of the actions drawn with it
        for a in replay(f.trace).actions:
            assert set(re.findall(r"\{(\w+)\}", cls.sequence[a.name])) <= dict(a.params).keys(), (f.name, a)


# pip-373's review on one process, in an interpreter of its own as the CLI's is, its Z3 obligations left out
ONE_WORKER_WITHOUT_Z3 = """
import sys
from pathlib import Path
from pulsar_verify import properties, registry, review
properties.registry = lambda: []
sys.exit(review.run([registry.model_class("pip-373")], engines=["local"], out=Path(sys.argv[1]), master="local[1]",
                    nightly=False, expectations=Path(sys.argv[2]), update=True))
"""


def _pip373_review(root, workers: str) -> tuple:
    """pip-373's review on ``workers`` processes, recording its verdicts: (report, expectations)."""
    out, expectations = root / f"report-{workers}", root / f"expectations-{workers}.json"
    if workers == "1":  # without the Z3 obligations (a minute here), which explore nothing
        proc = subprocess.run([sys.executable, "-c", ONE_WORKER_WITHOUT_Z3, str(out), str(expectations)],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
    else:
        proc = cli("review", "--models", "pip-373", "--engines", "local", "--workers", workers, "--out", str(out),
                   "--expectations", str(expectations), "--update-expectations")
    assert proc.returncode == 0, proc.stderr
    return out, expectations


def test_review_pages_and_runs_on_any_number_of_workers(tmp_path):
    """The pages draw the findings and mark the proofs; the runs and verdicts are the same on one process
    and on two (one test, so that the review on two runs once whatever process the test runs in)."""
    out, expectations = _pip373_review(tmp_path, "2")
    assert json.loads(expectations.read_text())["pip-373"]["as-written"]["read-committed"] == "violated"
    page = (out / "pip-373.md").read_text()
    assert "```mermaid" in page and "pulsar-verify replay findings/pip-373/" in page
    assert (out / "pip-373-levels.png").stat().st_size > 0 and (out / "pip-373-coverage.png").exists()
    never_skips = next(line for line in page.splitlines() if line.startswith("| `txn-topic-never-skips` |"))
    assert never_skips.split(" | ")[-1].endswith("∀ |")  # all-fixes, the last column: proved for any log

    summaries, recorded = {}, {}
    for workers, (report, verdicts) in {"1": _pip373_review(tmp_path, "1"), "2": (out, expectations)}.items():
        summaries[workers] = {str(p.relative_to(report)): {k: v for k, v in json.loads(p.read_text()).items()
                                                          if k not in ("seconds", "states_per_second", "peak_rss_mb",
                                                                       "trace_files")}
                              for p in report.rglob("summary.json")}
        recorded[workers] = verdicts.read_text()
    assert summaries["1"] == summaries["2"] and len(summaries["1"]) > 10
    assert recorded["1"] == recorded["2"]


def test_review_gates_on_expectations(tmp_path):
    """Exit 0 when every verdict is the recorded one, 1 naming a verdict that changed, 2 on unreadable
    expectations (the gate is the same for every model: shown on the smallest)."""
    out, expectations = tmp_path / "report", tmp_path / "expectations.json"
    args = ["review", "--models", "toy-lock", "--engines", "local", "--out", str(out), "--expectations", str(expectations)]
    assert cli(*args, "--update-expectations").returncode == 0
    recorded = json.loads(expectations.read_text())
    assert recorded["toy-lock"]["as-written"]["mutual-exclusion"] == "violated"
    same = cli(*args)
    assert same.returncode == 0, same.stderr
    assert "Every verdict is the one" in (out / "index.md").read_text()

    recorded["toy-lock"]["as-written"]["mutual-exclusion"] = "holds"  # as if the finding had been fixed upstream
    expectations.write_text(json.dumps(recorded))
    changed = cli(*args)
    assert changed.returncode == 1
    assert "toy-lock as-written mutual-exclusion: expected holds, got violated" in changed.stderr

    expectations.write_text("{not json")
    broken = cli(*args)
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1 and "Traceback" not in broken.stderr


def test_a_spark_run_that_disagrees_with_the_in_process_run_is_an_internal_error():
    """The review's Spark runs are a cross-check of the engines: the same states, depth, violated
    properties and counterexample lengths as the in-process run, or an error naming both."""
    from pulsar_verify.explorer import explore
    from pulsar_verify.review import _anchors, _disagreements, _said

    cls = registry.model_class("toy-lock")
    assert _anchors(cls) == {"as-written", "all-fixes"}
    local, _ = explore(registry.build("toy-lock", "as-written"))
    same, _ = explore(registry.build("toy-lock", "as-written"))
    key = ("toy-lock", "as-written", "default")
    assert _disagreements({key: local, ("spark", *key): same}) == []
    same.violations = same.violations[1:]  # Spark missed a violation
    assert _disagreements({key: local, ("spark", *key): same}) == [
        f"engines disagree on toy-lock as-written default: in-process {_said(local)}, Spark {_said(same)}"]
    assert _disagreements({key: "a model error", ("spark", *key): same}) == []  # reported as such already


def test_a_proof_for_any_size_marks_its_cells_and_one_the_explorer_contradicts_is_an_error():
    """A cell says whether its verdict is exhaustive at the bounds only or also proved for any size; a
    proof for a variant the explorer finds violated is a disagreement between Z3 and the model."""
    from pulsar_verify.properties.obligations import PROVED, VIOLATED, Obligation, Verdict
    from pulsar_verify.report import Cell, proved_for_any_size

    claim = Obligation("pip-373", "never-skips-inductive", "", "", lambda: None, ("all-fixes", "as-written"),
                       proves=("txn-topic-never-skips",))
    key = ("pip-373", "", "txn-topic-never-skips")
    table = {(key[0], "all-fixes", key[2]): Cell(bounds=7, states=900),
             (key[0], "as-written", key[2]): Cell(bounds=7, states=900, violations=[("default", 6, "trace")])}
    assert proved_for_any_size(table, {"pip-373": [(claim, Verdict(VIOLATED))]}) == []
    assert not table[key[0], "all-fixes", key[2]].proved and "∀" not in table[key[0], "all-fixes", key[2]].compact()
    assert proved_for_any_size(table, {"pip-373": [(claim, Verdict(PROVED))]}) == [
        "pip-373 as-written txn-topic-never-skips: Z3 `never-skips-inductive` proves it for any size, the explorer "
        "violates it at `default`"]
    fixed = table[key[0], "all-fixes", key[2]]
    assert fixed.compact() == "✅ 900 ∀"
    assert fixed.markdown().endswith("proved for any size (Z3 `never-skips-inductive`)")


MUTANT = "mutant:commit-marks-aborted"


def _mutant_review(tmp_path, breaks: frozenset, pool=None) -> dict:
    """pip-373's as-written, all-fixes and one mutant at every in-process bound set, the mutant's runs
    stopped once it breaks ``breaks`` (``review._mutant_runs``): its runs by bound set."""
    from pulsar_verify.review import _local_runs

    presets = registry.model_class("pip-373").in_process_presets()
    runs = [("pip-373", v, p, "local") for v in ("as-written", "all-fixes", MUTANT) for p in presets]
    done, _, _ = _local_runs(runs, [], [], {("pip-373", MUTANT): breaks}, tmp_path / "staging", tmp_path / "out",
                             pool, False)
    return {p: r for (_, v, p), r in done.items() if v == MUTANT}


def _said(runs: dict) -> dict:
    """The runs' summaries, but for times and paths."""
    return {p: {k: v for k, v in r.summary().items() if k not in ("seconds", "states_per_second", "peak_rss_mb",
                                                                   "trace_files")} for p, r in runs.items()}


def _verdicts(runs: dict, unsearched=frozenset()) -> dict:
    from pulsar_verify.report import cells, verdicts

    rows = [("pip-373", MUTANT, p, "local", None, r) for p, r in runs.items()]
    return verdicts(cells(rows, {}, unsearched))["pip-373"]


def test_a_mutant_stops_once_it_breaks_what_it_is_recorded_to_break(tmp_path):
    """A mutant's runs stop at the first complete level that breaks what the expectations say it breaks,
    with its shortest counterexample, and its remaining bound sets are not run; the same on two workers.
    Recorded as breaking a property it does not, it is searched whole, so the review says it holds."""
    import multiprocessing

    from pulsar_verify.explorer import explore
    from pulsar_verify.report import HOLDS, OPEN, VIOLATED, compare

    target = "committed-never-filtered"
    brief = _mutant_review(tmp_path / "one", frozenset({target}))
    stopped = [p for p, r in brief.items() if r.stopped]
    assert stopped and len(brief) < len(registry.model_class("pip-373").in_process_presets())
    full, _ = explore(registry.build("pip-373", MUTANT, preset=stopped[0]))
    [cut] = [v for v in brief[stopped[0]].violations if v.prop.id == target]
    assert full.distinct_states > brief[stopped[0]].distinct_states
    assert cut.length == next(v.length for v in full.violations if v.prop.id == target)

    with multiprocessing.get_context("fork").Pool(2) as pool:
        two = _mutant_review(tmp_path / "two", frozenset({target}), pool)
    assert _said(two) == _said(brief)

    got = _verdicts(brief, {("pip-373", MUTANT)})
    assert got[MUTANT][target] == VIOLATED and OPEN in got[MUTANT].values()
    recorded = {"pip-373": {MUTANT: {p: HOLDS for p in got[MUTANT]} | {target: VIOLATED}}}
    assert compare(recorded, {"pip-373": got}) == []
    recorded["pip-373"][MUTANT]["flag-never-cleared"] = VIOLATED
    assert compare(recorded, {"pip-373": got}) == [
        f"pip-373 {MUTANT} flag-never-cleared: expected {VIOLATED}, got {OPEN}"]

    wrong = _mutant_review(tmp_path / "wrong", frozenset({target, "flag-never-cleared"}))
    assert sorted(wrong) == sorted(registry.model_class("pip-373").in_process_presets())
    assert all(r.complete and not r.stopped for r in wrong.values())
    assert _verdicts(wrong)[MUTANT]["flag-never-cleared"] == HOLDS


def test_a_mutant_search_is_cut_past_its_state_budget_and_what_it_left_is_open(tmp_path, monkeypatch):
    """A mutant's run stops past ``review.MUTANT_MAX_STATES`` states: it says where it stopped, keeps what it
    found violated, and its other properties are open (not searched whole), never ``holds``."""
    from pulsar_verify import review
    from pulsar_verify.report import HOLDS, OPEN, VIOLATED

    monkeypatch.setattr(review, "MUTANT_MAX_STATES", 40)
    out = review._one_run("pip-373", MUTANT, "default", "local", tmp_path / "staging", tmp_path / "out")
    assert not out.complete and out.stopped == "max states 40" and out.distinct_states >= 40
    got = _verdicts({"default": out}, {("pip-373", MUTANT)})
    assert HOLDS not in got[MUTANT].values() and set(got[MUTANT].values()) <= {OPEN, VIOLATED}
    plain = review._one_run("pip-373", "all-fixes", "default", "local", tmp_path / "s2", tmp_path / "o2")
    assert plain.complete and plain.distinct_states > 40
