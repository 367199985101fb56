"""The kernel checked on its own small model (examples/toy-lock/toy_lock.py, counts derived there by hand)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.fingerprint import encode, fingerprint
from pulsar_verify.hypo import PropertyFailed, machine_for
from pulsar_verify.itf import from_itf, to_itf, trace_document, write_trace
from pulsar_verify.liveness import check_liveness
from pulsar_verify.model import Property
from pulsar_verify.replay import replay
from pulsar_verify.values import FrozenMap

from .helpers import cli
from toy_lock import CRITICAL, WAITING, LockState


def lock(variant, **values):
    return registry.build("toy-lock", variant, values=values)


def test_fixed_variant_counts_match_hand_derivation():
    result, _ = explore(lock("atomic-acquire"))
    assert (result.distinct_states, result.transitions, result.depth) == (8, 14, 3)
    assert result.level_sizes == [1, 2, 3, 2]
    assert result.complete and result.violations == [] and result.never_fired == []


def test_buggy_variant_counts_and_shortest_counterexample():
    # 9 states with nobody critical, 3 + 3 with one critical holding the lock, 2 with both (lock 0 or 1), and,
    # past those (a violating state is expanded too), 3 + 3 with one critical after the other released: 23.
    # Transitions: 9 x 2 + 2 x (2 + 1 + 2) = 28 from the first 15, 2 x 2 releases from both critical, and 2 from
    # each of the last 6 (the other process's step and the release): 44.
    result, _ = explore(lock("as-written"))
    assert (result.distinct_states, result.transitions) == (23, 44)
    v = result.violations[0]
    assert v.prop.id == "mutual-exclusion" and v.length == 6
    assert sorted(a.name for a in v.actions) == ["check", "check", "request", "request", "take", "take"]


def test_a_violation_does_not_hide_what_lies_beyond_it():
    """Past the broken mutual exclusion, the two processes can take turns in the critical section so that one is
    always in it: ``critical-released`` breaks there (a lasso through a state that breaks mutual exclusion), and
    a search that stopped at the first broken state would have said it holds."""
    result, _ = explore(lock("as-written"))
    assert [v.prop.id for v in result.violations] == ["mutual-exclusion", "critical-released"]
    lasso = result.violations[1]
    assert any(pc.count(CRITICAL) == 2 for pc in (s.pc for s in lasso.states[lasso.loop:]))
    assert result.verdict("critical-released") == "violated" and result.verdict("deadlock") == "holds"


def test_deadlock_is_detected_with_shortest_trace():
    result, _ = explore(lock("no-release"))
    dead = next(v for v in result.violations if v.prop.id == "deadlock")
    assert dead.length == 3 and not dead.actions[-1].name == "release"


def test_liveness_dead_end_is_a_stuttering_lasso():
    result, _ = explore(lock("no-release"))
    v = next(v for v in result.violations if v.prop.id == "critical-released")
    assert v.loop == len(v.states) - 1  # stutters at the dead end
    assert CRITICAL in v.states[-1].pc
    assert result.unreachable_goal["critical-released"] > 0


def test_liveness_fair_cycle_is_found_as_a_lasso():
    """Under weak fairness a plain lock lets process 0 starve: process 1 loops
    request/acquire/release while process 0's acquire is enabled only on and off."""
    model = lock("atomic-acquire")
    starve = Property("p0-enters", "A waiting process 0 eventually enters", "toy", "liveness",
                      trigger=lambda m, s: s.pc[0] == WAITING, goal=lambda m, s: s.pc[0] == CRITICAL,
                      fair=("acquire", "release"))
    model.liveness = [starve]
    result, ex = explore(model)
    v, _ = check_liveness(ex, starve)
    assert v is not None and v.loop is not None and v.loop < len(v.states) - 1
    loop_states = v.states[v.loop:]
    assert fingerprint(loop_states[0]) == fingerprint(loop_states[-1])
    assert all(s.pc[0] == WAITING for s in loop_states)
    assert {a.name for a in v.actions[v.loop:]} == {"request", "acquire", "release"}
    # With acquire(p=0) strongly needed, the same property under no fairness on release
    # but with process 1 unable to loop (one process) holds.
    single = lock("atomic-acquire", procs=1)
    single.liveness = [starve]
    _, ex1 = explore(single)
    assert check_liveness(ex1, starve)[0] is None


def test_weakly_fair_action_continuously_enabled_excludes_cycle():
    """critical-released holds in the fixed variant: release is fair and always enabled while critical."""
    result, _ = explore(lock("atomic-acquire"))
    assert result.liveness_checked and not result.violations


def test_itf_round_trip_of_values():
    value = (1, "a", True, None, frozenset({3, 1}), FrozenMap({2: "x", 1: (4, 5)}), -7, 2 ** 70)
    assert from_itf(json.loads(json.dumps(to_itf(value)))) == value


def test_itf_document_and_replay_exit_codes(tmp_path):
    model = lock("as-written")
    result, _ = explore(model)
    v = result.violations[0]
    path = write_trace(tmp_path / "t.itf.json", trace_document(model, v.states, v.actions, v.as_dict()))
    doc = json.loads(path.read_text())
    assert doc["#meta"]["model"] == "toy-lock" and doc["#meta"]["variant"] == "as-written"
    assert doc["#meta"]["tool-version"] and doc["vars"] == ["lock", "pc"]
    assert [s["mbt::actionTaken"] for s in doc["states"]][0] == "init"
    assert len(doc["states"]) == 7
    assert replay(path).reproduced

    assert cli("replay", str(path)).returncode == 1
    # The same trace cut before the last step no longer violates: exit 0.
    doc["states"] = doc["states"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(doc))
    assert cli("replay", str(tmp_path / "short.json")).returncode == 0


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.__setitem__("#meta", {**d["#meta"], "model": "nope"}), "unknown model"),
    (lambda d: d.__setitem__("#meta", {**d["#meta"], "variant": "nope"}), "unknown variant"),
    (lambda d: d["states"][3].__setitem__("mbt::actionTaken", "take"), "states[3]: take(p=1) is not enabled"),
    (lambda d: d["states"][2].__setitem__("lock", {"#bigint": "1"}), "states[2]"),
    (lambda d: d["states"][2].pop("mbt::actionTaken"), "states[2]: missing 'mbt::actionTaken'"),
    (lambda d: d.pop("states"), "'states' must be a non-empty list"),
])
def test_invalid_traces_get_one_line_errors(tmp_path, mutate, message):
    model = lock("as-written")
    result, _ = explore(model)
    v = result.violations[0]
    doc = trace_document(model, v.states, v.actions, v.as_dict())
    mutate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = cli("replay", str(bad))
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_broken_json_is_exit_2(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"#meta": ')
    proc = cli("replay", str(bad))
    assert proc.returncode == 2 and "not JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_explore_buggy_exits_1_and_trace_replays(tmp_path):
    proc = cli("explore", "toy-lock", "--out", str(tmp_path), "--quiet")
    assert proc.returncode == 1, proc.stderr
    assert "23 distinct states, 44 transitions" in proc.stdout
    trace = tmp_path / "mutual-exclusion.itf.json"
    assert cli("replay", str(trace)).returncode == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["violations"][0]["length"] == 6


def test_cli_explore_fixed_exits_0(tmp_path):
    proc = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["distinct_states"], summary["transitions"], summary["depth"]) == (8, 14, 3)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_cli_explore_no_liveness_reports_liveness_not_checked(engine, tmp_path):
    proc = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--no-liveness", "--engine", engine,
               "--master", "local[2]", "--out", str(tmp_path), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "not checked critical-released" in proc.stdout and "holds    critical-released" not in proc.stdout
    assert "holds    mutual-exclusion" in proc.stdout
    assert json.loads((tmp_path / "summary.json").read_text())["liveness_checked"] is False


@pytest.mark.parametrize("args, message", [
    (["explore", "nope"], "unknown model 'nope'"),
    (["explore", "toy-lock", "--variant", "x"], "unknown variant 'x'"),
    (["explore", "toy-lock", "--set", "procs=0"], "out of range"),
    (["explore", "toy-lock", "--set", "nope=1"], "unknown setting 'nope'"),
    (["explore", "toy-lock", "--set", "procs"], "--set expects key=value"),
    (["explore", "toy-lock", "--max-states", "0"], "positive integer"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_are_one_line_exit_2(args, message):
    proc = cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def signature(result) -> tuple:
    """Everything a run decides: counts, levels, coverage, each violation with its path (a lasso's loop)."""
    return (result.distinct_states, result.transitions, result.depth, result.level_sizes, result.coverage,
            result.complete, result.liveness_checked, result.unreachable_goal, result.examples,
            [(v.prop.id, v.length, [str(a) for a in v.actions], v.loop) for v in result.violations])


@pytest.mark.parametrize("name,variant,preset,depth", [
    ("toy-lock", "as-written", "default", None), ("toy-lock", "no-release", "default", None),
    ("toy-lock", "atomic-acquire", "default", 2), ("pip-473", "as-written", "default", None),
    ("pip-473", "as-written", "default", 6), ("v4-txn", "as-written", "sealed", None),
    ("pip-373", "as-written", "default", None), ("pip-468", "as-written", "session-failover", None),
    ("pip-477", "as-written", "cursor", None), ("pip-477", "all-fixes", "rollback-old-down", None),
    ("v4-txn", "as-written", "two-txns", 12), ("pip-473", "all-fixes", "sealed", None)])
@pytest.mark.parametrize("liveness", [True, False])
def test_several_workers_give_the_one_process_run(name, variant, preset, depth, liveness):
    """``explore --workers``: the same states in the same order, so the same counts, verdicts and
    counterexamples (deadlocks and lassos included), complete or cut at a depth; with the liveness
    graph (every edge sent) and without it (a worker sends only the successors it has not met)."""
    one, _ = explore(registry.build(name, variant, preset=preset), max_depth=depth, check_liveness=liveness)
    two, _ = explore(registry.build(name, variant, preset=preset), max_depth=depth, workers=2,
                     check_liveness=liveness)
    assert signature(two) == signature(one)


@pytest.mark.parametrize("liveness", [True, False])
def test_three_workers_share_uneven_levels(liveness):
    """Three workers on two cores: levels that do not split evenly, states handed between workers at
    every level (the single initial state's worker finds the whole second level), the same run."""
    one, _ = explore(registry.build("pip-473", "as-written", preset="faults"), max_depth=9,
                     check_liveness=liveness)
    three, _ = explore(registry.build("pip-473", "as-written", preset="faults"), max_depth=9, workers=3,
                       check_liveness=liveness)
    assert signature(three) == signature(one)


def lock_sometimes(predicate, variant="atomic-acquire"):
    """toy-lock with one property more: some run reaches a state where ``predicate`` holds."""
    import types

    from pulsar_verify.model import PropertySet
    from toy_lock import PROPERTIES, LockModel
    props = PropertySet()
    props.items = list(PROPERTIES.items)
    props.sometimes("example", "some run reaches it", "test")(predicate)
    module = types.ModuleType("toy_lock_sometimes")
    module.PROPERTIES = props
    sys.modules[module.__name__] = module
    cls = type("LockSometimes", (LockModel,), {"properties_from": module.__name__})
    return cls(cls.make_config(variant))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sometimes_property_keeps_its_shortest_example_and_fails_without_one(workers):
    """Met: held, with the length of its shortest example (request, acquire). Never met in a complete
    search: violated, with no trace. A state that breaks another property is no example (two processes
    critical, as written). Cut by a bound before any example: not decided."""
    r, _ = explore(lock_sometimes(lambda m, s: CRITICAL in s.pc), workers=workers)
    assert r.examples == {"example": 2} and "example" in r.properties_checked and r.violations == []
    for predicate, variant in ((lambda m, s: False, "atomic-acquire"),
                               (lambda m, s: s.pc.count(CRITICAL) == 2, "as-written")):
        r, _ = explore(lock_sometimes(predicate, variant), workers=workers)
        [v] = [v for v in r.violations if v.prop.id == "example"]
        assert r.complete and not v.traced and v.states == [] and v.as_dict()["never"] and r.examples == {}
    r, _ = explore(lock_sometimes(lambda m, s: False), max_depth=2, workers=workers)
    assert r.violations == [] and "example" not in r.properties_checked


def test_bounds_make_the_run_incomplete():
    result, _ = explore(lock("atomic-acquire"), max_depth=2)
    assert not result.complete and result.depth == 2 and result.distinct_states == 6
    assert not result.liveness_checked  # liveness on a cut graph would be unsound
    result, _ = explore(lock("atomic-acquire"), max_states=3)
    assert not result.complete


def test_list_shows_properties_with_sections():
    proc = cli("list", "--json")
    assert proc.returncode == 0
    [toy] = [m for m in json.loads(proc.stdout) if m["model"] == "toy-lock"]
    assert {p["id"] for p in toy["properties"]} == {"mutual-exclusion", "lock-held-by-entrant",
                                                    "critical-released", "deadlock"}
    assert all(p["section"] for p in toy["properties"])


SNIPPET = """
from pulsar_verify.fingerprint import fingerprint
from pulsar_verify.values import FrozenMap
from toy_lock import LockState
s = LockState(pc=("idle", "critical"), lock=1)
print(fingerprint(s), fingerprint((frozenset({{"a", "b", "c"}}), FrozenMap({{"x": 1, "y": 2}}))))
"""


def test_fingerprints_equal_across_processes_with_different_hash_seeds():
    outs = set()
    for seed in ("0", "1", "12345"):
        proc = subprocess.run([sys.executable, "-c", SNIPPET.format()], capture_output=True,
                              text=True, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin"}, check=True)
        outs.add(proc.stdout)
    assert len(outs) == 1
    here = LockState(pc=("idle", "critical"), lock=1)
    assert str(fingerprint(here)) == outs.pop().split()[0]


def test_encoding_distinguishes_structurally_different_states():
    assert encode(LockState(pc=("idle",), lock=None)) != encode(LockState(pc=("idle",), lock=0))
    assert fingerprint(frozenset({1, 2})) == fingerprint(frozenset({2, 1}))
    assert fingerprint((1, 2)) != fingerprint(frozenset({1, 2}))


@pytest.mark.parametrize("name", registry.names())
def test_successors_agree_with_actions_and_next_state(name):
    """``successors`` (which the explorers call, and a model or ``ComposedModel`` may fuse for speed) is
    ``actions`` then ``next_state``, for every variant of every model at its default bounds, subclasses that
    override either included, and for its as-written and all-fixes variants at every in-process bound set (the
    faults and crashes only larger bounds enable)."""
    cls = registry.model_class(name)
    names = cls.variant_names()
    cases = [(variant, "default") for variant in names]
    cases += [(variant, preset) for variant in (names[0], *({"all-fixes"} & set(names)))
              for preset in cls.in_process_presets()]
    for variant, preset in cases:
        model = registry.build(name, variant, preset=preset)
        _, ex = explore(model, max_states=300)
        for fp in list(ex.parents)[::3]:
            s = ex.path_to(fp)[0][-1]
            assert model.successors(s) == [(a, model.next_state(s, a)) for a in model.actions(s)], (variant, preset, s)


def test_hypothesis_machine_finds_and_writes_replayable_failure(tmp_path):
    machine = machine_for(lock("as-written"), tmp_path)
    with pytest.raises(PropertyFailed):
        run_state_machine_as_test(machine, settings=settings(max_examples=300, stateful_step_count=20,
                                                              derandomize=True, database=None))
    trace = tmp_path / "hypothesis-mutual-exclusion.itf.json"
    outcome = replay(trace)
    assert outcome.reproduced and outcome.steps == 6  # shrunk to the shortest


def test_hypothesis_machine_passes_on_fixed_variant():
    run_state_machine_as_test(machine_for(lock("atomic-acquire", procs=3)))


def test_hypothesis_machine_reports_deadlock(tmp_path):
    with pytest.raises(PropertyFailed, match="deadlock"):
        run_state_machine_as_test(machine_for(lock("no-release"), tmp_path),
                                  settings=settings(max_examples=100, derandomize=True, database=None))


def test_review_writes_a_report(tmp_path):
    proc = cli("review", "--models", "toy-lock", "--engines", "local", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "[`toy-lock`](toy-lock.md)" in (tmp_path / "index.md").read_text()
    page = (tmp_path / "toy-lock.md").read_text()
    [run] = [line for line in page.splitlines() if line.startswith("| `as-written` | `default` | local |")]
    assert run.startswith("| `as-written` | `default` | local | 23 | 9 |")
    assert run.endswith("| mutual-exclusion, critical-released |")
    assert page.index("## Properties by variant") < page.index("<summary>Every run (4)</summary>")
    assert (tmp_path / "toy-lock" / "as-written" / "default" / "local" / "mutual-exclusion.itf.json").exists()
    assert cli("review", "--models", "nope").returncode == 2


def test_a_cut_search_never_prints_a_bare_holds(tmp_path):
    """A search a bound cut short says how far it went in every verdict it gives, on screen and in summary.json."""
    proc = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--max-depth", "2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "  holds up to depth 2, 6 states: max depth 2: mutual-exclusion" in proc.stdout
    assert "  holds    " not in proc.stdout
    verdicts = json.loads((tmp_path / "summary.json").read_text())["verdicts"]
    assert verdicts["mutual-exclusion"] == "holds up to depth 2, 6 states: max depth 2"
    assert verdicts["critical-released"] == "not checked"
