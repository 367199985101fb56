"""v4 transactions: the sealed-segment stall stays found, its fix holds, every property can
fail, and PIP-473 completes the same scenario."""
from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from pulsar_verify.models.v4txn import V4Txn
from pulsar_verify import registry
from pulsar_verify.findings import catalogue
from pulsar_verify.hypo import machine_for
from pulsar_verify.replay import replay
from tests import helpers
from tests.helpers import explored

FINDINGS = catalogue("v4-txn")
IN_PROCESS = V4Txn.in_process_presets()
BROKEN = {
    "read-committed": ("mutant:deliver-aborted", "default"),
    "committed-never-filtered": ("mutant:commit-marks-aborted", "default"),
    "acks-only-from-committed": ("mutant:apply-aborted-acks", "acks"),
    "tc-state-machine": ("mutant:end-any-state", "default"),
    "end-txn-completes": ("as-written", "sealed"),
    "committed-acks-applied": ("mutant:commit-skips-cursor", "acks"),
    "sealed-accepts-no-write": ("mutant:append-to-sealed", "sealed"),
    "committed-entries-delivered": ("as-written", "sealed"),
    "sends-complete": ("mutant:no-recover-after-crash", "faults"),
    "txn-ack-applied": ("mutant:commit-skips-cursor", "acks"),
    "acked-once": ("mutant:ack-acked-position", "two-txns-acks"),
    "crashed-broker-serves-nothing": ("mutant:reply-survives-crash", "faults"),
    "unsealed-txns-complete": ("mutant:tc-ends-one-at-a-time", "two-txns-sealed"),
    "aborted-ack-freed": ("mutant:apply-aborted-acks", "two-txns-acks"),
    "acked-not-redelivered": ("mutant:read-acked", "acks-crash"),
}


run = explored


def violated(variant, preset, model="v4-txn") -> dict:
    return helpers.violated(model, variant, preset)


def test_every_as_written_violation_has_a_finding():
    as_written = set().union(*(violated("as-written", p) for p in IN_PROCESS))
    assert as_written == {f.property for f in FINDINGS} == {"end-txn-completes", "committed-entries-delivered"}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_finding_is_still_found_and_its_fix_kills_it(finding):
    v = violated("as-written", finding.bounds)[finding.property]
    assert v.length == finding.length and v.loop is not None
    assert replay(finding.trace).reproduced
    assert not replay(finding.trace, finding.fix).reproduced


@pytest.mark.parametrize("preset", IN_PROCESS)
def test_off_segment_markers_satisfies_every_property(preset):
    result = run("v4-txn", "off-segment-markers", preset)
    assert result.complete and result.liveness_checked and result.violations == []


@pytest.mark.parametrize("prop", sorted(BROKEN))
def test_every_property_fails_on_a_broken_variant(prop):
    assert set(BROKEN) == {p.id for p in V4Txn.declared_properties()}
    assert prop in violated(*BROKEN[prop])


def test_every_action_fires_somewhere():
    for variant in ("as-written", "off-segment-markers"):
        fired = set().union(*(run("v4-txn", variant, p).coverage for p in IN_PROCESS))
        assert set(registry.build("v4-txn", variant, preset="sealed").action_names()) - fired == set(), variant


def test_v4_stalls_where_pip473_completes():
    """PIP-473 'Why this works': with a segment sealed mid-transaction, v4's end-txn never completes
    (a lasso of rejected markers and retries); PIP-473's end-txn does, at the same scenario's bounds."""
    stall = violated("as-written", "sealed")["end-txn-completes"]
    loop = [a.name for a in stall.actions[stall.loop:]]
    assert loop == ["marker_rejected", "tc_retry"] and any(a.name == "seal" for a in stall.actions)
    v5 = run("pip-473", "as-written", "sealed")
    assert v5.liveness_checked and "end-txn-completes" not in {v.prop.id for v in v5.violations}


def test_hypothesis_beyond_exhaustive_bounds(tmp_path):
    model = registry.build("v4-txn", "off-segment-markers", values=registry.model_class("v4-txn").hypothesis_bounds)
    run_state_machine_as_test(machine_for(model, tmp_path))
    assert not list(tmp_path.iterdir())


def test_review_report_compares_v4_and_pip473_on_a_sealed_segment():
    from pulsar_verify.report import sealed_comparison
    rows = [(m, "as-written", "sealed", "local", None, run(m, "as-written", "sealed")) for m in ("v4-txn", "pip-473")]
    text = "\n".join(sealed_comparison(rows))
    assert "| v4-txn (in-stream markers) | violated: 8-step lasso |" in text
    assert "| pip-473 (metadata-driven) | holds |" in text
