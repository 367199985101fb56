"""PIP-473: the findings stay found, their fixes hold, every property can fail."""
from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from pulsar_verify.models.pip473 import Pip473
from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.findings import catalogue
from pulsar_verify.hypo import PropertyFailed, machine_for
from pulsar_verify.model import act
from pulsar_verify.replay import replay
from tests import helpers
from tests.helpers import explored

FINDINGS = catalogue("pip-473")
IN_PROCESS = Pip473.in_process_presets()

# A deliberately broken variant, and bounds, under which each property must fail.
BROKEN = {
    "header-state-machine": ("mutant:blind-cas", "default"),
    "one-outcome": ("mutant:blind-cas", "default"),
    "read-committed": ("mutant:deliver-aborted", "default"),
    "acks-only-from-committed": ("mutant:apply-aborted-acks", "acks"),
    "end-txn-completes": ("mutant:end-needs-append", "sealed"),
    "committed-entries-delivered": ("mutant:pin-committed", "default"),
    "crashed-broker-serves-nothing": ("mutant:trim-while-down", "acks"),
    "entries-are-sends": ("mutant:double-append", "default"),
    "committed-never-filtered": ("as-written", "default"),
    "dispatch-decisions-agree": ("as-written", "faults"),
    "committed-acks-not-lost": ("as-written", "acks"),
    "no-write-after-end": ("as-written", "default"),
    "finalized-txns-collected": ("as-written", "default"),
    "collected-txns-leave-brokers": ("as-written", "acks"),
    "sealed-txn-delivered": ("mutant:double-append", "sealed"),  # every run that writes breaks entries-are-sends
    "acked-not-redelivered": ("mutant:read-acked", "acks"),
    "answers-true": ("mutant:conflict-on-cache-miss", "default"),
}


def run(variant: str, preset: str):
    return explored("pip-473", variant, preset)


def violated(variant, preset) -> dict:
    return helpers.violated("pip-473", variant, preset)


def test_catalogue_is_complete():
    assert len(FINDINGS) == 8
    assert {f.fix for f in FINDINGS} <= set(Pip473.variant_names())
    # Every property the design as written violates, at any in-process bounds, has a finding.
    as_written = set().union(*(violated("as-written", p) for p in IN_PROCESS))
    assert as_written == {f.property for f in FINDINGS}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_finding_is_still_found_with_its_shortest_counterexample(finding):
    v = violated("as-written", finding.bounds)[finding.property]
    assert v.length == finding.length
    assert finding.trace.exists() and finding.explanation.exists()
    assert replay(finding.trace).reproduced
    text = finding.explanation.read_text()
    assert finding.property in text and finding.fix in text and "## What users see" in text


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_fix_kills_the_counterexample(finding):
    assert not replay(finding.trace, finding.fix).reproduced
    assert not replay(finding.trace, "all-fixes").reproduced


@pytest.mark.parametrize("preset", IN_PROCESS)
def test_all_fixes_satisfies_every_property(preset):
    result = run("all-fixes", preset)
    assert result.complete and result.liveness_checked
    assert result.violations == []


@pytest.mark.parametrize("prop", sorted(BROKEN))
def test_every_property_fails_on_a_broken_variant(prop):
    variant, preset = BROKEN[prop]
    assert prop in violated(variant, preset)


def test_every_property_has_a_broken_witness():
    assert set(BROKEN) == {p.id for p in Pip473.declared_properties()}


def test_v5_end_txn_completes_with_a_sealed_segment_where_v4_style_markers_cannot():
    """PIP-473 "Why this works": sealing is irrelevant to end-txn, unlike in-stream markers."""
    for variant in ("as-written", "all-fixes"):
        assert "end-txn-completes" not in violated(variant, "sealed")
    stuck = violated("mutant:end-needs-append", "sealed")["end-txn-completes"]
    assert stuck.actions[-1].name != "tc_reply" and any(a.name == "seal" for a in stuck.actions)


def test_every_action_fires_somewhere():
    for variant in ("as-written", "all-fixes"):
        declared = set().union(*(registry.build("pip-473", variant, preset=p).action_names() for p in IN_PROCESS))
        fired = set().union(*(run(variant, p).coverage for p in IN_PROCESS))
        # pa_reap needs an ack after a timeout abort and the header's GC: beyond these bounds (no in-process bound
        # set has both acks and timeouts, so none declares it), shown below.
        assert declared - fired == set() and "pa_reap" not in fired, variant


def test_pa_reap_is_reachable():
    """A consumer acks inside a txn that the timeout sweep aborted and the GC already collected."""
    model = registry.build("pip-473", "all-fixes", values={"nontxn": 1, "acks": 1})
    steps = [("new_txn", dict(txn=1)), ("nontxn_send", dict(seg=0)), ("deliver", dict(seg=0, sub=0, pos=0)),
             ("timeout_sweep", dict(txn=1)), ("tc_read", dict(txn=1, origin="timeout")),
             ("tc_cas", dict(txn=1, origin="timeout")), ("tc_reply", dict(txn=1, origin="timeout")),
             ("gc_list", dict(txn=1)), ("gc_delete_header", dict(txn=1)), ("txn_ack", dict(txn=1, seg=0, sub=0, pos=0))]
    s = model.init_states()[0]
    for name, params in steps:
        a = act(name, **params)
        assert a in list(model.actions(s)), a
        s = model.next_state(s, a)
    assert act("pa_reap", seg=0, sub=0, txn=1) in list(model.actions(s))


LARGE = Pip473.hypothesis_bounds


def test_hypothesis_all_fixes_at_bounds_beyond_exhaustive(tmp_path):
    model = registry.build("pip-473", "all-fixes", values=LARGE)
    run_state_machine_as_test(machine_for(model, tmp_path))
    assert not list(tmp_path.iterdir())


def test_hypothesis_finds_the_as_written_flaws_at_large_bounds(tmp_path):
    model = registry.build("pip-473", "as-written", values=LARGE)
    with pytest.raises(PropertyFailed):
        run_state_machine_as_test(machine_for(model, tmp_path),
                                  settings=settings(max_examples=100, stateful_step_count=15, derandomize=True,
                                                    database=None, deadline=None, report_multiple_bugs=False))
    traces = list(tmp_path.iterdir())
    assert traces and all(replay(t).reproduced for t in traces)


def test_all_fixes_collects_a_txn_its_client_acks_after_the_timeout_aborted_it():
    """Beyond the bound sets (one txn, one plain message, two transactional acks, timeouts on): an ack of a txn the
    timeout aborted lands after the GC sweep listed its records, or after the store materialized the abort and the
    header went. As first modelled, ``owners-reap-orphans`` reaped only what the store held in memory and
    ``forget-collected-acks`` forgot only on the header watch: ``all-fixes`` then left the record (12 steps) or the
    pending ack (16 steps) forever."""
    result, _ = explore(registry.build("pip-473", "all-fixes", {"nontxn": 1, "acks": 2}))
    assert result.complete and result.liveness_checked and result.violations == []
