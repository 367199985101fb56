"""PIP-477 bookie cluster switching: each finding stays found and its fix kills it, all fixes together
satisfy every property at every in-process bound set, every property fails on a broken variant, every action
fires, I7 holds on real protobuf encodings, and ``list`` shows I1-I16."""
from __future__ import annotations

import json

import pytest
from hypothesis.stateful import run_state_machine_as_test

from pulsar_verify.models.pip477 import Pip477
from pulsar_verify.models.pip477.proto import NewPositionInfo, OldPositionInfo, old_broker_rewrite, survives_old_broker
from pulsar_verify.models.pip477.state import ATTR_KEY
from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.findings import catalogue, shortest
from pulsar_verify.hypo import machine_for
from pulsar_verify.replay import replay
from tests.helpers import cli, explored, violated

MODEL = "pip-477"
FINDINGS = catalogue(MODEL)
IN_PROCESS = Pip477.in_process_presets()
BROKEN = {
    "I1": ("mutant:stamp-after-create", "cursor"),
    "I2": ("as-written", "legacy"),
    "I3": ("mutant:blind-schema-promote", "schema"),
    "I4": ("mutant:read-through-active-client", "legacy"),
    "I5": ("mutant:close-without-drain", "close"),
    "I6": ("as-written", "restart"),
    "I7": ("mutant:old-reader-drops-unknown", "default"),
    "I8": ("mutant:copy-new-id", "default"),
    "I9": ("mutant:promote-clears-cursor-props", "default"),
    "I10": ("mutant:promote-resets-hash", "default"),
    "I11": ("as-written", "cursor"),
    "precheck-refuses-unadvanced-idgen": ("mutant:no-precheck", "cursor"),
    "failed-ledgers-from-old-cluster": ("mutant:build-new-entries", "schema"),
    "build-idempotent": ("as-written", "restart"),
    "I12": ("as-written", "cleanup"),
    "I13": ("mutant:coordinator-promotes-cursor", "default"),
    "I14": ("mutant:every-broker-orchestrates", "default"),
    "I15": ("mutant:constructor-bk", "close-restart"),
    "I16": ("as-written", "sub-property"),
    "position-not-rewound": ("as-written", "cursor"),
    "no-publish-pause": ("as-written", "close-restart"),
    "rollback-keeps-reads": ("as-written", "rollback-old-down"),
    "rollback-keeps-business-znodes": ("mutant:rollback-resets-hash", "rollback"),
    "unacked-messages-kept": ("mutant:trim-unacked", "close"),
    "locator-version-bumps": ("mutant:rollback-keeps-version", "rollback"),
    "switch-completes": ("mutant:orchestrator-not-resumed", "restart"),
}


def test_every_as_written_violation_has_a_finding():
    found = {f.property for f in FINDINGS}
    as_written = set().union(*(violated(MODEL, "as-written", p) for p in IN_PROCESS))
    # I8 is the internal view of cursor-position-rewound-after-promote: the routed copy lacks the later entries
    assert as_written == found | {"I8"}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_finding_is_still_found_and_its_fix_kills_it(finding):
    _, v = shortest(finding)
    assert v is not None and v.length == finding.length
    assert replay(finding.trace).reproduced
    assert not replay(finding.trace, finding.fix).reproduced
    assert finding.property not in violated(MODEL, finding.fix, finding.bounds)
    assert finding.explanation.read_text().count(f"--variant {finding.fix}") == 1


@pytest.mark.parametrize("preset", IN_PROCESS)
def test_all_fixes_satisfy_every_property(preset):
    result = explored(MODEL, "all-fixes", preset)
    assert result.complete and result.violations == []


@pytest.mark.parametrize("prop", sorted(BROKEN))
def test_every_property_fails_on_a_broken_variant(prop):
    assert set(BROKEN) == {p.id for p in Pip477.declared_properties()}
    assert prop in violated(MODEL, *BROKEN[prop])


def test_every_action_fires_somewhere():
    """As written too: DONE (and so close-client) lies past the I12 violation between the two status CASes,
    which the search expands like any other state."""
    for variant in ("as-written", "all-fixes"):
        fired = set().union(*(explored(MODEL, variant, p).coverage for p in IN_PROCESS))
        names = set().union(*(registry.build(MODEL, variant, preset=p).action_names() for p in IN_PROCESS))
        assert names - fired == set(), variant


def test_i7_old_broker_keeps_the_unknown_properties_field():
    """S3: ``repeated KeyValue properties = 3`` is new; a broker built before it parses PositionInfo without it,
    keeps it as an unknown field and writes it back, so the stamp survives a rolling upgrade or downgrade."""
    new = NewPositionInfo(ledgerId=7, entryId=3)
    new.properties.add(key=ATTR_KEY, value="new")
    data = new.SerializeToString()
    old = OldPositionInfo.FromString(data)
    assert (old.ledgerId, old.entryId) == (7, 3)
    assert NewPositionInfo.FromString(old_broker_rewrite(data)) == new
    assert OldPositionInfo.FromString(NewPositionInfo(ledgerId=7, entryId=3).SerializeToString()) == \
        OldPositionInfo(ledgerId=7, entryId=3)  # and an old value reads the same in the new message
    assert survives_old_broker(7, 3, ((ATTR_KEY, "new"),))
    assert not survives_old_broker(7, 3, ((ATTR_KEY, "new"),), "mutant:old-reader-drops-unknown")


def test_list_shows_i1_to_i16_with_statements():
    out = cli("list", "--json")
    assert out.returncode == 0
    model = next(m for m in json.loads(out.stdout) if m["model"] == MODEL)
    props = {p["id"]: p for p in model["properties"]}
    for n in range(1, 17):
        assert props[f"I{n}"]["statement"] and f"I{n}" in props[f"I{n}"]["section"]


def test_hypothesis_beyond_exhaustive_bounds(tmp_path):
    model = registry.build(MODEL, "all-fixes", values=Pip477.hypothesis_bounds)
    run_state_machine_as_test(machine_for(model, tmp_path))
    assert not list(tmp_path.iterdir())


def test_precheck_refuses_a_new_cluster_whose_idgen_is_behind():
    """Phase 2 (I11): with the new cluster's idgen at 2 while the old one holds ledgers 1-3, the switch is
    refused (409, nothing changes); a switch without the precheck hands out colliding ids."""
    behind = {"new_idgen": 2, "roll": 1, "brokers": 1}
    refused, _ = explore(registry.build(MODEL, "as-written", values=behind))
    assert "switch" not in refused.coverage and refused.violations == []
    unchecked, _ = explore(registry.build(MODEL, "mutant:no-precheck", values=behind))
    assert "I11" in {v.prop.id for v in unchecked.violations}
