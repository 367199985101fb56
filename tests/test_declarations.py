"""Verdicts a reviewer can rely on: a model's properties are declared data that no import can change,
every name a declaration, finding, obligation or expectation uses is the model's own, variants carry
their fix sets, and ``all-fixes`` holds every property at every in-process bound set."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pulsar_verify import registry, report
from pulsar_verify.explorer import explore
from pulsar_verify.findings import EXPECTATIONS, catalogue
from pulsar_verify.model import Model, ModelDefinitionError, PropertySet, variants_of

from .helpers import cli, explored

NAMES = registry.names()
IN_PROCESS = [(name, preset) for name in NAMES for preset in registry.model_class(name).in_process_presets()]


@pytest.fixture(scope="module")
def listed() -> dict:
    proc = cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {m["model"]: [p["id"] for p in m["properties"]] for m in json.loads(proc.stdout)}


@pytest.mark.parametrize("name", NAMES)
def test_explore_list_and_review_name_the_same_properties(name, listed, tmp_path):
    """``explore`` in a fresh process (nothing else imported), ``list --json`` and the review's verdicts."""
    proc = cli("explore", name, "--json", "--quiet", "--out", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["properties_checked"] == listed[name] and summary["properties_not_checked"] == []
    model = registry.build(name)
    result, _ = explore(model)
    base = model.config.variant
    verdicts = report.verdicts(report.cells([(name, base, "default", "local", model, result)], {}))
    assert sorted(verdicts[name][base]) == sorted(listed[name])


IMPORTS_FIRST = """
import importlib, json
import pulsar_verify.invariants.v4txn, pulsar_verify.invariants.pip473, pulsar_verify.invariants.pip373
for mod in ("pulsar_verify.invariants.v4txn", "pulsar_verify.models.pip373.model", "pulsar_verify.invariants.pip373",
            "pulsar_verify.invariants.pip473"):
    importlib.reload(importlib.import_module(mod))
from pulsar_verify import registry
print(json.dumps({n: registry.model_class(n).property_ids() for n in registry.names()}))
"""


def test_imports_and_reloads_do_not_change_any_property_set(listed):
    proc = subprocess.run([sys.executable, "-c", IMPORTS_FIRST], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == listed


def _declare(props: PropertySet, labels=("go",)) -> type[Model]:
    module = types.ModuleType("declared_in_test")
    module.PROPERTIES = props
    sys.modules[module.__name__] = module
    return type("Declared", (Model,), {"name": "declared", "action_labels": labels,
                                       "properties_from": module.__name__})


def test_a_fairness_set_naming_an_unknown_action_is_an_error():
    props = PropertySet()
    props.leads_to("done", "eventually done", "-", goal=lambda m, s: True, fair=("go", "stop"))
    with pytest.raises(ModelDefinitionError, match="names stop, which the model has no action for"):
        _declare(props).declared_properties()


def test_an_action_property_on_an_unknown_action_is_an_error():
    props = PropertySet()
    props.action_property("only-go", "go keeps the state", "-", on=("go", "stop"))(lambda m, s, a, t: s == t)
    with pytest.raises(ModelDefinitionError, match="'only-go' is declared on stop, which the model has no action"):
        _declare(props).declared_properties()


def test_an_action_property_holds_off_its_steps_and_the_explorer_does_not_evaluate_it_there():
    """``on`` is the property's own: its ``check`` holds on any other step without calling the function, which is
    what lets the explorers skip it there; on its steps the function decides."""
    from pulsar_verify.model import Action, StepChecks
    calls = []

    def go_keeps(m, s, a, t):
        calls.append(a.name)
        return s == t
    props = PropertySet()
    props.action_property("go-keeps", "go keeps the state", "-", on=("go",))(go_keeps)
    props.action_property("every-step", "every step keeps the state", "-")(go_keeps)
    prop, every = _declare(props, labels=("go", "stop")).declared_properties()
    assert prop.check(None, 1, Action("stop"), 2) and calls == []
    assert not prop.check(None, 1, Action("go"), 2) and calls == ["go"]
    checks = StepChecks([prop, every])
    assert checks["go"] == [(0, prop), (1, every)] and checks["stop"] == [(1, every)]


def test_a_property_declared_twice_is_an_error():
    props = PropertySet()
    for _ in range(2):
        props.invariant("same", "twice", "-")(lambda m, s: True)
    with pytest.raises(ModelDefinitionError, match="'same' is declared twice"):
        _declare(props).declared_properties()


def test_every_fairness_set_names_only_the_models_actions():
    for name in NAMES:
        cls = registry.model_class(name)
        for p in cls.declared_properties():
            assert set(p.fair) <= set(cls.action_labels), (name, p.id)


def test_findings_and_obligations_name_only_what_their_models_have():
    from pulsar_verify.properties import registry as obligations
    for name in NAMES:
        catalogue(name)  # raises on a property, bound set or fix the model lacks
    for o in obligations():
        cls = registry.model_class(o.model) if o.model in NAMES else None
        assert cls and set(o.variants) <= set(cls.variant_names()) and set(o.proves) <= set(cls.property_ids()), o.name


@pytest.mark.parametrize("name", NAMES)
def test_variants_carry_their_fix_sets_and_a_mutant_is_all_fixes_plus_one_mistake(name):
    cls = registry.model_class(name)
    fixes = [v.name for v in cls.variants if v.kind == "fix" and v.name != "all-fixes"]
    assert cls.variants[0].kind == "as-written" and cls.variant_named(cls.baseline()).fixes == frozenset()
    assert all(cls.variant_named(f).fixes == {f} for f in fixes)
    if fixes:
        assert cls.best_variant() == "all-fixes" and cls.variant_named("all-fixes").fixes == set(fixes)
    for v in cls.variants:
        if v.kind == "mutant":
            assert v.fixes == set(fixes), v.name
        assert registry.build(name, v.name).fixes == v.fixes


def test_variants_of_has_all_fixes_whenever_there_is_a_fix():
    names = [v.name for v in variants_of("as written", {"one": "the only fix"}, {"m": "a mistake"})]
    assert names == ["as-written", "one", "all-fixes", "m"]


# (model, variant, bound set) -> the actions the model declares there that the whole search never takes, for the
# baseline and every fix together: a listed action is out of reach at those bounds (its budget is 0, or the
# variant does not reach it there); one that stops firing (a weakened fault model, a guard never true) fails
NEVER_FIRED = json.loads((Path(__file__).parent / "never_fired.json").read_text())


def never_fired(name: str, variant: str, preset: str) -> list[str]:
    return NEVER_FIRED.get(name, {}).get(variant, {}).get(preset, [])


@pytest.mark.parametrize("name,preset", IN_PROCESS, ids=[f"{n}-{p}" for n, p in IN_PROCESS])
def test_all_fixes_holds_every_property(name, preset):
    """``all-fixes`` is a claim: every property, liveness included, at every in-process bound set; and every
    action the model declares there fires but those listed in ``never_fired.json``."""
    cls = registry.model_class(name)
    result, _ = explore(cls(cls.make_config(cls.best_variant(), preset=preset)))
    assert result.complete and (result.liveness_checked or all(kind != "liveness" for _, kind in result.properties))
    assert [(v.prop.id, v.length) for v in result.violations] == []
    assert result.never_fired == never_fired(name, cls.best_variant(), preset)


@pytest.mark.parametrize("name,preset", IN_PROCESS, ids=[f"{n}-{p}" for n, p in IN_PROCESS])
def test_as_written_fires_every_action_but_those_listed(name, preset):
    """The baseline's whole search (a violating state expanded too) takes every action the model declares at the
    bound set but those listed in ``never_fired.json``: no action is hidden behind another property's violation."""
    baseline = registry.model_class(name).baseline()
    assert explored(name, baseline, preset).never_fired == never_fired(name, baseline, preset)


def test_no_system_action_is_left_unfired_at_any_bound_set():
    """What never fires is a client's or an operator's step whose occasion the bounds leave out (pip-477's failed
    schema read): every system action a model declares at a bound set fires there, as written and with every
    fix, so no run fails for it."""
    for name, variants in NEVER_FIRED.items():
        system = registry.model_class(name).system_actions()
        for variant, presets in variants.items():
            for preset, actions in presets.items():
                assert not set(actions) & system, (name, variant, preset)


def test_a_system_action_that_never_fires_fails_the_run(monkeypatch, tmp_path, capsys):
    """pip-468's grace timer declared at ``failover``, where no consumer connects (as the model declared it before
    this check): the whole search never takes it, and the run fails, saying why."""
    from pulsar_verify import cli
    cls = registry.model_class("pip-468")
    declared = cls.action_names
    monkeypatch.setattr(cls, "action_names", lambda self: sorted(set(declared(self)) | {"grace_expire"}))
    result, _ = explore(registry.build("pip-468", "all-fixes", preset="failover"))
    assert result.unfired_system == ["grace_expire"] and result.violations == []
    code = cli.main(["explore", "pip-468", "--variant", "all-fixes", "--bounds", "failover", "--quiet",
                     "--out", str(tmp_path / "out")])
    assert code == 1 and "FAILED: system actions the model declares at these bounds never fired: grace_expire" \
        in capsys.readouterr().out


def test_expectations_record_every_property_and_no_violation_of_all_fixes():
    recorded = json.loads(EXPECTATIONS.read_text())
    for name in NAMES:
        cls = registry.model_class(name)
        if name not in recorded:
            continue
        assert set(recorded[name]) == set(cls.variant_names()), name
        for variant, verdicts in recorded[name].items():
            assert sorted(verdicts) == sorted(cls.property_ids()), (name, variant)
        assert set(recorded[name]["all-fixes"].values()) == {"holds"}, name


def test_a_severity_off_the_rubric_is_refused(tmp_path, monkeypatch):
    """A finding's severity is the rubric's for its loss and path (docs/severity.md), never one typed apart."""
    from pulsar_verify import findings
    entry = {"name": "n", "title": "t", "property": "mutual-exclusion", "bounds": "default", "length": 6,
             "fix": "atomic-acquire", "severity": "critical", "loss": "data", "path": "normal", "loses": "x"}
    (tmp_path / "toy-lock").mkdir()
    monkeypatch.setattr(findings, "FINDINGS_DIR", tmp_path)
    for changed, ok in (({}, True), ({"severity": "high"}, False), ({"path": "mistake"}, False),
                        ({"path": "mistake", "severity": "high"}, True), ({"loss": "lost"}, False),
                        ({"loss": "none", "severity": "observation"}, True)):
        (tmp_path / "toy-lock" / "index.json").write_text(json.dumps([{**entry, **changed}]))
        if ok:
            assert [f.severity for f in findings.catalogue("toy-lock")] == [changed.get("severity", "critical")]
        else:
            with pytest.raises(ModelDefinitionError):
                findings.catalogue("toy-lock")


OBSERVATIONS = [f for name in NAMES for f in catalogue(name) if f.observation]


@pytest.mark.parametrize("finding", OBSERVATIONS, ids=lambda f: f.name)
def test_an_observation_breaks_no_other_property_along_its_trace(finding):
    """Nobody loses anything in an observation's trace: no state or step of it breaks a property of the model
    other than the observation's own."""
    from pulsar_verify.replay import load, model_for, replay
    model = model_for(load(finding.trace), finding.trace)
    outcome = replay(finding.trace)
    states, actions = outcome.states, outcome.actions
    broken = {p.id for s in states for p in model.invariants if not p.check(model, s)}
    broken |= {p.id for s, a, t in zip(states, actions, states[1:]) for p in model.action_properties
               if not p.check(model, s, a, t)}
    assert broken == {finding.property}


FINDING_BOUNDS = sorted({(name, f.bounds) for name in NAMES for f in catalogue(name)})


@pytest.mark.parametrize("name,preset", FINDING_BOUNDS, ids=[f"{n}-{p}" for n, p in FINDING_BOUNDS])
def test_no_property_holds_where_a_finding_breaks_it(name, preset):
    """A finding's property is violated by the search of the baseline at the finding's bounds (the whole
    search: no other property's violation hides it), is recorded violated, and is no ``holds`` in a report."""
    cls = registry.model_class(name)
    result = explored(name, cls.baseline(), preset)
    recorded = json.loads(EXPECTATIONS.read_text()).get(name, {}).get(cls.baseline(), {})
    for f in catalogue(name):
        if f.bounds == preset:
            assert result.verdict(f.property) == "violated", f.name
            assert recorded.get(f.property) == report.VIOLATED, f.name


@pytest.mark.parametrize("name", NAMES)
def test_a_property_about_a_kind_of_action_constrains_every_action_of_it(name):
    """Every kind a model declares is spoken of by a property, and every action property about a kind
    constrains each of its actions (``Model.action_kinds``, ``Property.about``)."""
    cls = registry.model_class(name)
    props = cls.declared_properties()
    for kind, labels in cls.action_kinds.items():
        about = [p for p in props if kind in p.about]
        assert about, f"{name}: no property speaks of its {kind} actions ({', '.join(labels)})"
        for p in about:
            assert p.kind != "action" or set(labels) <= p.on, (name, p.id, kind)


def _steps(name: str, preset: str, variant: str, cap: int = 20_000):
    """The steps of a breadth-first search of up to ``cap`` states (every step out of each state it expands)."""
    model = registry.build(name, variant, preset=preset)
    seen = set(model.init_states())
    frontier = list(seen)
    while frontier and len(seen) < cap:
        nxt = []
        for s in frontier:
            for a, t in model.successors(s):
                yield model, s, a, t
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt


@pytest.mark.parametrize("name", NAMES)
def test_every_delivery_and_answer_is_of_its_kind_and_only_deliveries_meet_a_promise_of_one(name):
    """At each in-process bound set, as written and with every fix (up to 20,000 states each):
    - a step that hands a consumer or a reader an entry (``Model.handed``) is an action of the ``deliver`` kind,
      so a delivery path added later is under every property about deliveries, and each action of that kind
      hands one somewhere;
    - likewise a step that changes what a client has been told (``Model.answered``) is of the ``answer`` kind,
      where the model declares one, and each action of that kind that fires answers somewhere;
    - a liveness property about deliveries is released only by a delivery (a step of the kind, or one that hands
      an entry): no other step (a crash, a cursor move, a subscription leaving) meets it without the delivery
      its statement promises."""
    cls = registry.model_class(name)
    deliver = set(cls.labels_of(["deliver"]))
    promises = [p for p in cls.declared_properties() if p.kind == "liveness" and "deliver" in p.about]
    answer = set(cls.labels_of(["answer"]))
    handing, answering, fired = set(), set(), set()
    for variant in {cls.baseline(), cls.best_variant()} - {None}:
        for preset in cls.in_process_presets():
            for model, s, a, t in _steps(name, preset, variant):
                fired.add(a.name)
                handed = model.handed(s, t)
                if handed:
                    assert a.name in deliver, f"{name} {variant} {preset}: {a} hands an entry, of no deliver kind"
                    handing.add(a.name)
                if answer and model.answered(s, t):
                    assert a.name in answer, f"{name} {variant} {preset}: {a} answers a client, of no answer kind"
                    answering.add(a.name)
                for p in promises:
                    if (p.trigger is None or p.trigger(model, s)) and not p.goal(model, s) and p.goal(model, t):
                        assert a.name in deliver or handed, \
                            f"{name} {variant} {preset}: {a} meets {p.id} delivering nothing"
    assert handing == deliver, name
    assert answering == answer & fired, name  # v4-impl's ack_unavailable needs acks and TC crashes: no bound set


def test_a_delivery_path_left_out_of_the_deliver_kind_is_caught(monkeypatch):
    """v4-impl declared as before this check: ``deliver_replay`` of no kind, so ``read-committed`` would not judge it."""
    cls = registry.model_class("v4-impl")
    monkeypatch.setattr(cls, "action_kinds", {**cls.action_kinds, "deliver": ("deliver",)})
    with pytest.raises(AssertionError, match="deliver_replay.* hands an entry, of no deliver kind"):
        test_every_delivery_and_answer_is_of_its_kind_and_only_deliveries_meet_a_promise_of_one("v4-impl")


def test_an_answer_left_out_of_the_answer_kind_is_caught(monkeypatch):
    """v4-impl declared as before the kind: a refusal of an ack (``ack_refused``) of no kind, judged by no property."""
    cls = registry.model_class("v4-impl")
    monkeypatch.setattr(cls, "action_kinds", {**cls.action_kinds, "answer": tuple(
        label for label in cls.action_kinds["answer"] if label != "ack_refused")})
    with pytest.raises(AssertionError, match="ack_refused.* answers a client, of no answer kind"):
        test_every_delivery_and_answer_is_of_its_kind_and_only_deliveries_meet_a_promise_of_one("v4-impl")


KERNEL_VARIANTS = {"as-written", "all-fixes"}  # every model with a fix has both (model.variants_of)
ENCODED = {"pip373": "pip-373", "pip468": "pip-468", "pip473": "pip-473", "pip477": "pip-477", "v4txn": "v4-txn",
           "v4impl": "v4-impl"}


def typed_variants(source: str, model: str | None) -> list[str]:
    """What an encoding's source copies by hand: a string naming a variant its model (any model, for a
    shared module: ``model`` None) does not declare, and a literal list of variants (two or more, one a
    model's own fix or mutant) outside a comparison. The variants an obligation covers are read from
    the model and its findings (``properties.obligations.finding_variants``, ``with_fix``)."""
    import ast
    declared = {n: set(registry.model_class(n).variant_names()) for n in NAMES}
    own = declared[model] if model else set().union(*declared.values())
    every = set().union(*declared.values())
    tree = ast.parse(source)
    compared = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Compare) for c in node.comparators}
    def selects(node):  # a comparison with the variant or its fix set
        return any(isinstance(n, (ast.Name, ast.Attribute)) and any(
            w in (n.id if isinstance(n, ast.Name) else n.attr) for w in ("fix", "variant"))
            for n in (node.left, *node.comparators))
    named = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Compare) and selects(node)
             for operand in (node.left, *node.comparators)
             for c in (operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else (operand,))}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value not in own and (
                node.value in every or node.value.startswith("mutant:") and node.value != "mutant:"
                or id(node) in named):
            out.append(f"line {node.lineno}: {node.value!r} is not a variant of {model or 'any model'}")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in compared:
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in every]
            if len(names) >= 2 and set(names) - KERNEL_VARIANTS:
                out.append(f"line {node.lineno}: a list of variants typed by hand: {names}")
    return out


def test_the_encodings_copy_no_variant_list_and_name_only_declared_variants():
    from pathlib import Path
    for path in sorted((Path(__file__).resolve().parent.parent / "properties").glob("*.py")):
        model = next((m for prefix, m in ENCODED.items() if path.name.startswith(prefix)), None)
        assert typed_variants(path.read_text(), model) == [], path.name


def test_a_typed_variant_list_or_a_misspelt_fix_is_caught():
    assert typed_variants('CASES = {"split-merge": ("as-written", "op-intent")}\n', "pip-468")
    assert len(typed_variants('fenced = "fenced-registration" in self.fixes or "mutant:nope" == v\n', "pip-468")) == 2
    assert typed_variants('fenced = "op-intent" in fixes\n', "pip-473")  # another model's fix
    assert typed_variants('ok = variant in ("op-intent", "all-fixes")\n', "pip-468") == []
