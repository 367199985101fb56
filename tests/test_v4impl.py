"""v4-impl: its findings stay found and their fixes (the upstream PRs) kill them, every fix together
holds every property, every property can fail, and the model adds what it says it adds."""
from __future__ import annotations

import pytest

from pulsar_verify.findings import catalogue
from pulsar_verify.models.v4impl import V4Impl
from tests import helpers

MODEL = "v4-impl"
FINDINGS = catalogue(MODEL)
IN_PROCESS = V4Impl.in_process_presets()
BROKEN = {
    "read-committed": ("mutant:deliver-aborted", "default"),
    "committed-never-filtered": ("mutant:commit-marks-aborted", "default"),
    "acks-only-from-committed": ("mutant:apply-aborted-acks", "acks"),
    "tc-state-machine": ("mutant:end-any-state", "default"),
    "end-txn-completes": ("mutant:no-recover-after-crash", "recovery"),
    "committed-acks-applied": ("mutant:commit-skips-cursor", "acks"),
    "committed-entries-delivered": ("mutant:no-recover-after-crash", "recovery"),
    "sends-complete": ("mutant:no-recover-after-crash", "recovery"),
    "last-id-within-horizon": ("as-implemented", "default"),
    "told-available-reads": ("pr-21466", "default"),
    "open-txn-ends": ("mutant:no-timeout", "default"),
    "plain-message-delivered": ("mutant:no-timeout", "default"),
}


def violated(variant, preset) -> dict:
    return helpers.violated(MODEL, variant, preset)


def test_the_baseline_is_the_implementation_before_the_fixes():
    assert V4Impl.baseline() == "as-implemented" and V4Impl.variants[0].kind == "as-written"
    assert V4Impl.best_variant() == "all-fixes"


def test_every_as_implemented_violation_has_a_finding():
    found = set().union(*(violated("as-implemented", p) for p in IN_PROCESS))
    assert found == {f.property for f in FINDINGS} == {"last-id-within-horizon", "told-available-reads"}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_finding_is_still_found_and_its_fix_kills_it(finding):
    helpers.assert_finding_found_and_fixed(finding)


@pytest.mark.parametrize("preset", IN_PROCESS)
def test_all_fixes_satisfies_every_property(preset):
    result = helpers.explored(MODEL, "all-fixes", preset)
    assert result.complete and result.liveness_checked and result.violations == []


@pytest.mark.parametrize("prop", sorted(BROKEN))
def test_every_property_fails_on_a_broken_variant(prop):
    assert set(BROKEN) == {p.id for p in V4Impl.declared_properties()}
    assert prop in violated(*BROKEN[prop])


def test_recovery_publishes_and_answers_happen_while_the_buffer_recovers():
    """The steps the v4-txn model merges or leaves out: each fires, at the bound sets that allow it."""
    coverage = helpers.explored(MODEL, "as-implemented", "recovery").coverage
    for label in ("topic_load", "tb_recover", "txn_timeout", "get_last_id", "has_message_queued", "read_next"):
        assert coverage[label] > 0, label
    from pulsar_verify.target import reach
    during = reach(MODEL, bounds="recovery", expr="loaded[0] and not buffers[0].ready and nontxn == 1 "
                                                   "and len(logs[0]) == 1")
    assert during.reached and during.labels[-1] == "send_nontxn"
