"""Target search (``explore --target``, ``--target-expr``, ``--via``, and ``target.reach`` for tests):
the shortest trace to a state a report describes, or a statement that none is reachable at the bounds."""
from __future__ import annotations

import json
from itertools import product

import pytest

from pulsar_verify import registry
from pulsar_verify.target import Aim, TargetSearch, reach

from .helpers import cli


def test_declared_target_reached_as_written_and_unreachable_with_the_fix(tmp_path):
    r = cli("explore", "toy-lock", "--target", "both-critical", "--out", str(tmp_path / "a"), "--quiet")
    assert r.returncode == 1, r.stderr
    assert "REACHED two processes are in their critical sections at once in 6 steps" in r.stdout
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["target"]["reached"] and summary["target"]["length"] == 6
    assert "deadlock" not in summary["properties_checked"]
    text = (tmp_path / "a" / "target.md").read_text()
    assert "target reached in 6 steps" in text and "take(p=1)" in text
    replayed = cli("replay", str(tmp_path / "a" / "target.itf.json"))
    assert replayed.returncode == 1 and "target reached after 6 steps" in replayed.stdout
    fixed = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--target", "both-critical",
                "--out", str(tmp_path / "b"), "--quiet")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.startswith("UNREACHABLE") and "the whole space" in fixed.stdout
    assert not (tmp_path / "b" / "target.itf.json").exists()


def test_target_expression_and_via_give_the_shortest_matching_trace():
    plain = reach("toy-lock", expr="lock == 1")
    assert plain.reached and plain.labels == ["request", "check", "take"]
    via = reach("toy-lock", expr="lock == 1", via=("release(p=0)",))
    assert via.reached and via.length == 7
    assert "release(p=0)" in via.steps
    # the shortest, by brute force over every action sequence of up to 7 steps
    model = registry.build("toy-lock")
    best = None
    for n in range(8):
        for seq in product(range(4), repeat=n):
            s, acts = model.init_states()[0], []
            for k in seq:
                enabled = list(model.actions(s))
                if k >= len(enabled):
                    break
                acts.append(enabled[k])
                s = model.next_state(s, enabled[k])
            else:
                if s.lock == 1 and any(a.name == "release" and a.param("p") == 0 for a in acts):
                    best = n
                    break
        if best is not None:
            break
    assert best == via.length


def test_target_expression_sees_the_state_inside_comprehensions_and_lambdas():
    """The state's fields are names of the whole expression, a nested comprehension's and a lambda's too."""
    nested = reach("toy-lock", expr="sum(1 for p in pc if p == 'critical' and any(q == p for q in pc)) == 2")
    assert nested.reached and nested.length == 6
    lam = reach("toy-lock", expr="(lambda: lock is not None and pc[lock] == 'critical')()")
    assert lam.reached and lam.labels == ["request", "check", "take"]


def test_unreachable_and_bounded_searches_say_which_they_are():
    r = reach("toy-lock", expr="len(pc) > 2")
    assert not r.reached and r.complete
    cut = reach("toy-lock", expr="len(pc) > 2", max_depth=2)
    assert not cut.reached and not cut.complete


@pytest.mark.parametrize("args, message", [
    (("--target-expr", "nosuch == 1"), "NameError"),
    (("--target-expr", "lock =="), "--target-expr"),
    (("--target", "nosuch"), "has no target 'nosuch' (known: both-critical)"),
    (("--target", "both-critical", "--target-expr", "True"), "not both"),
    (("--via", "explode"), "has no action 'explode'"),
    (("--via", "take(1)"), "expected an action label"),
])
def test_bad_targets_are_usage_errors(args, message, tmp_path):
    r = cli("explore", "toy-lock", *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()[-1]) > 0


def test_target_search_on_spark_gives_the_same_answers(tmp_path):
    pytest.importorskip("pyspark")
    for variant, reached in (("as-written", True), ("atomic-acquire", False)):
        r = cli("explore", "toy-lock", "--variant", variant, "--target", "both-critical", "--engine", "spark",
                "--master", "local[2]", "--out", str(tmp_path / variant), "--quiet", "--json")
        assert r.returncode == (1 if reached else 0), r.stderr
        target = json.loads(r.stdout)["target"]
        local = reach("toy-lock", variant=variant, target="both-critical")
        assert target["reached"] == local.reached and target["length"] == (local.length if reached else None)


def test_the_search_model_checks_only_the_target():
    search = TargetSearch(registry.build("toy-lock"), Aim(target="both-critical"))
    assert [p.id for p in search.props] == ["target"] and not search.liveness and not search.action_properties
    assert search.reached_by([], search.inner.init_states()[0]) is False
