"""A run stands for another variant's only when the model asked its variant nothing they answer differently
(``pulsar_verify.asked``, used by ``review``): the recorders note every question, any other use of the
variant forbids reuse, and on every model the runs the review would reuse are the runs it would make."""
from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_verify import registry
from pulsar_verify.asked import AskedFixes, AskedName, Questions, same_run
from pulsar_verify.engines import run_exploration
from pulsar_verify.model import Variant
from pulsar_verify.review import _anchors, standing_for

from .helpers import NIGHTLY

ROOT = Path(__file__).resolve().parent.parent


def test_membership_and_comparison_are_noted_as_questions():
    q = Questions()
    fixes, name = AskedFixes(frozenset({"a"}), q), AskedName("all-fixes", q)
    assert "a" in fixes and "b" not in fixes and fixes & {"c"} == frozenset() and not {"d"} & fixes
    assert name == "all-fixes" and name != "mutant:x" and name in ("e", "all-fixes") and "f" != name
    assert q.frozen() == {("fix", "a"), ("fix", "b"), ("fix", "c"), ("fix", "d"), ("variant", "all-fixes"),
                          ("variant", "mutant:x"), ("variant", "e"), ("variant", "f")}


@pytest.mark.parametrize("use", [list, len, bool, hash, str, repr, lambda f: f | {"x"}, lambda f: f - {"x"},
                                 lambda f: f == frozenset(), lambda f: {"x"} - f, sorted, set])
def test_any_other_use_of_the_fixes_is_a_dependence_on_the_whole_variant(use):
    q = Questions()
    try:
        use(AskedFixes(frozenset({"a"}), q))
    except TypeError:  # not a set: C code cannot read it unseen
        return
    assert q.frozen() is None


@pytest.mark.parametrize("use", [hash, str, len, "{}".format, lambda n: n.startswith("mutant:"),
                                 lambda n: n.endswith("x"), lambda n: n[0], lambda n: "x" in n, lambda n: n + "x",
                                 lambda n: "x" + n, lambda n: {n: 1}, lambda n: "-".join([n])])
def test_any_other_use_of_the_name_is_a_dependence_on_the_whole_variant(use):
    q = Questions()
    try:
        use(AskedName("as-written", q))
    except TypeError:  # not a str: C code cannot read it unseen
        return
    assert q.frozen() is None


def test_a_variant_stands_for_another_only_if_every_answer_is_the_same():
    a, b = Variant("as-written", "", "as-written"), Variant("fix-1", "", "fix", frozenset({"fix-1"}))
    assert same_run(a, b, frozenset({("fix", "fix-2"), ("variant", "mutant:x")}))
    assert not same_run(a, b, frozenset({("fix", "fix-1")}))
    assert not same_run(a, b, frozenset({("variant", "as-written")}))
    assert not same_run(a, b, None)


def test_models_read_their_variant_only_through_what_notes_it():
    """``config.variant_name`` is the checker's plain copy: a model reading it would ask unseen."""
    for path in [*(ROOT / "models").rglob("*.py"), *(ROOT / "invariants").rglob("*.py")]:
        text = path.read_text()
        assert "variant_name" not in text and "variant_named" not in text, path


def _said(r) -> tuple:
    return (r.distinct_states, r.transitions, r.depth, r.coverage, r.never_fired, r.unreachable_goal,
            sorted((v.prop.id, v.length, v.loop, [str(a) for a in v.actions]) for v in r.violations))


def reuse_mismatches(name: str, preset: str, build=registry.build) -> tuple[int, list[str]]:
    """At ``preset``: how many variants the anchors' runs stand for, and each whose own run differs."""
    cls = registry.model_class(name)
    sources = {}
    for anchor in _anchors(cls):
        q = Questions()
        sources[anchor] = run_exploration(build(name, anchor, preset=preset, questions=q), "local")
        sources[anchor].asked = q.frozen()
    reused, wrong = 0, []
    for variant in sorted(set(cls.variant_names()) - set(sources)):
        source = standing_for(cls, variant, sources)
        if source is not None:
            reused += 1
            if _said(run_exploration(build(name, variant, preset=preset), "local")) != _said(sources[source]):
                wrong.append(variant)
    return reused, wrong


BOUNDS = [(cls.name, preset) for cls in registry.all_models()
          for preset in cls.in_process_presets()[:None if NIGHTLY else 2]]


@pytest.mark.parametrize("name,preset", BOUNDS, ids=[f"{n}-{p}" for n, p in BOUNDS])
def test_a_reused_run_is_the_run_the_variant_makes(name, preset):
    """The same states, transitions, coverage and counterexamples (the lasso's actions too); at each
    model's first two bound sets in CI, at every in-process bound set in the nightly."""
    reused, wrong = reuse_mismatches(name, preset)
    assert wrong == []


def test_the_check_fails_when_a_model_reads_its_variant_unseen():
    """toy-lock reading its variant's name from a config that does not note it: the mutant ``no-release``
    would be taken for all-fixes, and its own run differs."""
    def unseen(name, variant=None, preset="default", **kw):
        model = registry.build(name, variant, preset=preset, **kw)
        model.config = registry.model_class(name).make_config(variant, preset=preset)
        return model
    assert reuse_mismatches("toy-lock", "default") == (1, [])  # atomic-acquire: all-fixes, its only fix
    assert reuse_mismatches("toy-lock", "default", build=unseen) == (2, ["no-release"])
