"""The mutation harness (``pulsar-verify mutation``): its mutants, its verdicts, its early stop."""
from __future__ import annotations

import ast
import json
import multiprocessing
import subprocess
import sys

import pytest

from pulsar_verify import mutation, registry

PROTOCOLS = ["v4-txn", "pip-373", "pip-473", "pip-468", "pip-477"]


@pytest.mark.parametrize("model", PROTOCOLS)
def test_each_model_has_its_mutants_spread_over_its_files(model):
    """A draw is at least 100 mutants (or all of them), over every file, the same for the same seed in every
    process, and another seed draws another sample: a score cannot be tuned to the names of one set."""
    every = mutation.all_mutants(model)
    chosen = mutation.chosen(model, seed=7)
    assert len(chosen) == min(mutation.PER_MODEL, len(every)) and mutation.PER_MODEL >= 100
    assert len({m.id for m in chosen}) == len(chosen)
    assert [m.id for m in mutation.chosen(model, seed=7)] == [m.id for m in chosen]  # the same draw every time
    if len(every) > len(chosen):
        assert {m.id for m in mutation.chosen(model, seed=8)} != {m.id for m in chosen}
    files = {m.path for m in every}
    assert {m.path for m in chosen} == files
    assert len({m.op for m in chosen}) >= 6
    for m in chosen:
        assert m.path.startswith("models/") and m.before != m.after
        compile(m.source(), m.path, "exec")  # each applies to today's code, as the change it names


def test_the_operators_cover_reordered_effects_stale_reads_duplicates_and_crashes_that_keep_memory():
    """Beyond single tokens: two updates of a step swapped (never a name read before it is bound), a read of the
    state as the step received it after the step updated it, an entry appended twice, a field a crash resets left
    as it was. Each applies and runs."""
    every = {}
    for model in PROTOCOLS:
        for m in mutation.all_mutants(model):
            every.setdefault(m.op, []).append(m)
    for op in ("swap-statements", "stale-read", "append-twice", "crash-keeps-memory"):
        assert every.get(op), op
    swap = next(m for m in every["swap-statements"] if m.where == "persist_registration"
                and m.before == "c = replace(c, writes=c.writes.remove(key))")
    assert swap.after == "s = replace(s, ctrls=put(s.ctrls, b, c)); " + swap.before
    tree = swap.source()
    body = next(f for f in tree.body if getattr(f, "name", "") == "persist_registration").body
    texts = [" ".join(ast.unparse(x).split()) for x in body]
    assert texts.index(swap.before) == texts.index("s = replace(s, ctrls=put(s.ctrls, b, c))") + 1
    stale = every["stale-read"][0]
    assert stale.after == stale.before.replace("s.", mutation.STALE_NAME + ".", 1)
    assert f"{mutation.STALE_NAME} = s" in ast.unparse(stale.source())
    assert all(m.after.startswith(m.before + " + (") for m in every["append-twice"])
    assert all("crash" in m.where.lower() for m in every["crash-keeps-memory"])
    for m in (swap, stale, every["append-twice"][0], every["crash-keeps-memory"][0]):
        compile(m.source(), m.path, "exec")


def test_code_that_selects_a_variant_is_not_mutated():
    for model in PROTOCOLS:
        for m in mutation.all_mutants(model):
            assert "fixes" not in m.before and "config.variant" not in m.before and "mutant:" not in m.before, m.id


def test_null_checks_mutant_only_code_and_declarations_are_not_mutated():
    code = """
def f(s, d, k, v):
    a = s.p is None or s.p.phase == 1
    b = k in d and d[k] > 0
    c = s.p is None or k > 0
    if v == "mutant:broken":
        g(s)
    else:
        h(s)
    if v != "mutant:other":
        h(d)
    else:
        g(d)
    x = g(k) if v == "mutant:third" else s.p + 1
    e = {h[1] for h in d if h is not None}
    f = [h for h in d if h is not None]
def _declare_schema():
    g(1)
@PROPERTIES.target("t", "a state a report describes", "a report")
def t(m, s):
    return g(s) > 2
"""
    import ast
    points = [(p.op, mutation._text(p.node)) for p in mutation._points(ast.parse(code))]
    assert ("negate-or-shift-comparison", "s.p is None") in points  # in c: it guards no dereference
    assert ("and-or", "s.p is None or k > 0") in points
    assert ("negate-or-shift-comparison", "k > 0") in points and ("no-increment", "s.p + 1") in points
    texts = {t for _, t in points}
    assert not texts & {"s.p is None or s.p.phase == 1", "k in d", "k in d and d[k] > 0"}
    assert [t for op, t in points if op == "drop-call"] == ["h(s)", "h(d)"]  # not g(...): mutant only, or declared
    assert not texts & {"g(s) > 2", "g(s)"}  # a target's predicate: no run of the plan checks it
    assert [t for op, t in points if op == "drop-filter"] == [mutation._text(ast.parse(code).body[0].body[-1].value
                                                                             .generators[0])]  # f's filter, not e's


def test_a_bound_or_a_local_name_for_one_is_not_mutated_and_other_arithmetic_is():
    import ast
    code = """
def init(self):
    c = self.config
    n = c.topics
    return (1,) * (n - 1), (2,) * (c.topics - 1), s.crashes + 1, s.sends + 1
def other(s, n):
    return n - 1
"""
    tree, params = ast.parse(code), {"topics", "crashes"}
    aliases = mutation._bound_aliases(tree, params)
    assert aliases == {"init": {"n"}}
    kept = [mutation._text(p.node) for p in mutation._points(tree)
            if not mutation._spends_bounds(p.node, p.op, params, aliases.get(p.where, set()))]
    assert kept == ["s.sends + 1", "n - 1"]  # the second: other's n is its argument, not a bound


def _decide(args):
    mutant, runs, base, early = args
    return mutation.run_mutant(mutant, runs, base, early=early)


def _pool():
    return multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=1)


def test_early_stop_decides_as_the_whole_search_does():
    """Every mutant of toy-lock, with the runs that do not reach it skipped and each run stopped at
    its first deciding level, and with every run searched whole: the same outcome at the same run."""
    runs = mutation.plan("toy-lock")
    every = mutation.all_mutants("toy-lock")
    with _pool() as pool:
        base = pool.apply(mutation.baseline, ("toy-lock", runs, every))
        early = pool.map(_decide, [(m, runs, base, True) for m in every], chunksize=1)
        whole = pool.map(_decide, [(m, runs, base, False) for m in every], chunksize=1)
    assert [(r["status"], r.get("run")) for r in early] == [
        ("survived" if r["status"] == "not-reached" else r["status"], r.get("run")) for r in whole]
    # The three mutants of critical-released's declaration survived while the search stopped at mutual-exclusion's
    # first violation (beyond it, as written, the processes can take turns so that one is always critical): the
    # whole search breaks it as written, so dropping or inverting it now changes a verdict.
    assert {r["status"] for r in early} == {"killed"}
    by_change = {(m.where, m.before, m.after): r for m, r in zip(every, early)}
    never_request = by_change["actions", "pc == IDLE", "pc != IDLE"]
    assert never_request["status"] == "killed" and never_request["changed"] == "deadlock: holds -> violated in 0"


def test_the_models_built_on_a_model_run_its_mutants_too():
    """v4-impl and pip-373 run v4-txn's modules: their baseline and all-fixes runs join v4-txn's plan."""
    assert mutation.users("v4-txn") == ["pip-373", "v4-impl"] and mutation.users("pip-473") == []
    runs = mutation.plan("v4-txn")
    borrowed = {(r.model, r.variant) for r in runs if r.model}
    assert borrowed == {("pip-373", "as-written"), ("pip-373", "all-fixes"), ("v4-impl", "as-implemented"),
                        ("v4-impl", "all-fixes")}
    assert {r.preset for r in runs if r.model == "v4-impl"} == set(registry.model_class("v4-impl").in_process_presets())
    assert all(not r.model for r in mutation.plan("pip-473"))


def test_a_crash_of_the_mutated_model_is_counted_apart():
    runs = mutation.plan("pip-373")
    [mutant] = [m for m in mutation.all_mutants("pip-373")  # the filter reads a parameter only append has
                if (m.where, m.before, m.after) == ("actions", "a.name == 'append'", "a.name != 'append'")]
    with _pool() as pool:
        base = pool.apply(mutation.baseline, ("pip-373", runs, [mutant]))
        rec = pool.apply(mutation.run_mutant, (mutant, runs, base))
    assert rec["status"] == "killed-by-exception" and "KeyError: 'txn'" in rec["changed"]
    score = mutation.score([rec, {"id": "x", "status": "killed"}], {})
    assert (score["killed"], score["killed-by-exception"], score["score"]) == (1, 1, 50.0)


def test_a_mutant_needs_a_fresh_interpreter():
    mutant = mutation.chosen("v4-txn")[0]
    registry.build("v4-txn")
    with pytest.raises(RuntimeError, match="fresh interpreter"):
        mutation.run_mutant(mutant, [], [])


def test_equivalent_mutants_leave_the_denominator_and_accepted_ones_do_not():
    recs = [{"id": "a", "status": "killed"}, {"id": "b", "status": "survived"}, {"id": "c", "status": "survived"}]
    notes = {"b": {"kind": "equivalent", "reason": "r"}, "c": {"kind": "accepted", "reason": "r"}}
    s = mutation.score(recs, notes)
    assert (s["killed"], s["equivalent"], s["accepted"], s["score"]) == (1, 1, 1, 50.0)


def test_the_accepted_survivors_name_mutants_with_reasons():
    notes = mutation.accepted()
    for model, entries in notes.items():
        ids = {m.id for m in mutation.all_mutants(model)}
        for mid, note in entries.items():
            assert mid in ids, f"{model}: {mid} is no mutant of today's code (stale after a code change?)"
            assert note["kind"] in ("equivalent", "accepted") and len(note["reason"]) > 20


def test_cli_reports_and_exits_1_below_the_recorded_score(tmp_path):
    out = tmp_path / "mut"
    cmd = [sys.executable, "-m", "pulsar_verify", "mutation", "toy-lock", "--mutants", "6", "--workers", "2",
           "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "mutation.json").read_text())
    score = report["models"]["toy-lock"]["score"]
    assert score["mutants"] == 6 and "toy-lock" in (out / "mutation.md").read_text()
    assert f"drawn with seed {report['seed']}" in (out / "mutation.md").read_text() and "--seed" in done.stderr


def test_the_floor_compares_the_rate_beyond_chance(tmp_path):
    """Another draw is compared by its kill rate: below the floor only when that few kills had under 1% chance
    at the recorded rate, whatever the number or the names of the mutants."""
    floor = _write(tmp_path / "s.json", {"m": {"score": 90.0, "mutants": 30}})

    def drawn(killed, mutants, equivalent=0):
        return {"models": {"m": {"score": {"killed": killed, "mutants": mutants, "equivalent": equivalent,
                                           "score": round(100 * killed / (mutants - equivalent), 1)}}}}
    assert mutation.below_floor(drawn(60, 100), floor)  # 60% of 100 at a 90% floor: no draw is that unlucky
    assert not mutation.below_floor(drawn(85, 100), floor)  # 85% of 100: within chance
    assert not mutation.below_floor(drawn(4, 6), floor)  # 4 of 6: too few to tell
    assert mutation.below_floor(drawn(50, 104, equivalent=4), floor)


def test_only_runs_the_named_mutants_and_records_no_floor(tmp_path):
    first = mutation.chosen("toy-lock", 6)[0].id
    cmd = [sys.executable, "-m", "pulsar_verify", "mutation", "toy-lock", "--mutants", "6", "--only", first]
    done = subprocess.run(cmd + ["--out", str(tmp_path / "mut")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "mut" / "mutation.json").read_text())
    assert [r["id"] for r in report["models"]["toy-lock"]["mutants"]] == [first] and report["only"] == [first]
    for extra in (["--record"], ["--only", "no-such-mutant"]):
        done = subprocess.run(cmd + extra + ["--out", str(tmp_path / "x")], capture_output=True, text=True)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_the_review_index_shows_the_mutation_score(tmp_path):
    report = tmp_path / "mutation.json"
    score = {"killed": 1, "mutants": 3, "equivalent": 1, "score": 50.0}
    report.write_text(json.dumps({"models": {"toy-lock": {"score": score}}}))
    out = tmp_path / "review"
    done = subprocess.run([sys.executable, "-m", "pulsar_verify", "review", "--models", "toy-lock", "--engines", "local",
                           "--out", str(out), "--mutation", str(report)], capture_output=True, text=True, timeout=600)
    index = (out / "index.md").read_text()
    assert "mutation score" in index and "| 50.0% (1 of 2) |" in index, (done.stderr, index)
