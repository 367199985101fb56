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
    "first-ack-never-conflicts": ("as-implemented", "ack-timeout"),
    "client-told-the-outcome": ("pr-19201", "tc-restart"),
    "txn-ack-applied": ("mutant:commit-skips-cursor", "acks"),
    "acked-once": ("mutant:ack-acked-position", "ack-timeout"),
    "crashed-broker-serves-nothing": ("mutant:reply-survives-crash", "recovery"),
    "aborted-ack-freed": ("mutant:commit-skips-cursor", "ack-timeout"),
    "answers-true": ("mutant:refuse-above-mark", "two-txns"),
    "acked-not-redelivered": ("mutant:read-acked", "ack-timeout"),
}


def violated(variant, preset) -> dict:
    return helpers.violated(MODEL, variant, preset)


def test_the_baseline_is_the_implementation_before_the_fixes():
    assert V4Impl.baseline() == "as-implemented" and V4Impl.variants[0].kind == "as-written"
    assert V4Impl.best_variant() == "all-fixes"


def test_every_as_implemented_violation_has_a_finding():
    found = set().union(*(violated("as-implemented", p) for p in IN_PROCESS))
    assert found == {f.property for f in FINDINGS} == {"last-id-within-horizon", "told-available-reads",
                                                        "first-ack-never-conflicts", "open-txn-ends",
                                                        "plain-message-delivered", "deadlock",
                                                        "client-told-the-outcome", "committed-entries-delivered"}


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


def test_the_consumer_layer_has_what_the_implementation_has():
    """Exclusive and Shared subscriptions: permits, receive, redelivery (a rewind on Exclusive, the replay set
    on Shared), and a transactional ack that conflicts with a standing ack."""
    from pulsar_verify.target import reach
    for preset, labels in (("acks", ("receive", "txn_ack", "ack_pending", "end_on_subscription", "ack_refused")),
                           ("shared", ("redeliver", "deliver_replay", "ack_refused"))):
        coverage = helpers.explored(MODEL, "as-implemented", preset).coverage
        for label in labels:
            assert coverage[label] > 0, (preset, label)
    both = reach(MODEL, bounds="shared", expr="all(c.queue for c in consumers[0])")
    assert both.reached and both.labels.count("deliver") == 2  # one permit each: two consumers hold one each
    one = reach(MODEL, bounds="acks", expr="len(consumers[0][0].queue) > 1")
    assert not one.reached and one.complete  # one permit: never two messages queued
    rewind = reach(MODEL, bounds="ack-timeout", via=["crash"], expr="subs[0].read == 0 and len(logs[0]) == 1")
    assert rewind.reached  # the restart rewinds to the mark-delete position, before the unacknowledged message


def test_a_standing_ack_conflicts_and_is_not_a_finding():
    """Txn 2's ack of a message txn 1 holds (not aborted) conflicts: the property allows it, and the
    all-fixes variant reaches it."""
    from pulsar_verify.target import reach
    hit = reach(MODEL, variant="all-fixes", bounds="ack-timeout", via=["ack_conflict"],
                expr="clients[2].failed or clients[1].failed")
    assert hit.reached and "ack_conflict" in hit.labels


def test_the_coordinator_restart_has_what_the_implementation_has():
    """The TC's crash and reload, and every fate of the client's END_TXN across them: deferred while the TC is
    down, resent (with retry), failed by the operation timeout (without retry), and each of the TC's answers."""
    from pulsar_verify.target import reach
    coverage = helpers.explored(MODEL, "as-implemented", "tc-restart").coverage
    for label in ("tc_crash", "tc_reload", "end_deferred", "end_resend", "end_not_found", "end_invalid_status",
                  "end_reply", "end_timeout", "add_partition_unavailable"):
        assert coverage[label] > 0, label
    retried = reach(MODEL, variant="all-fixes", bounds="tc-restart",
                    via=("end_txn(want='COMMITTED')", "tc_crash", "tc_reload", "end_resend", "end_reply"),
                    expr="clients[1].outcome == 'COMMITTED'")
    assert retried.reached and "tc_end" in retried.labels


def test_the_first_snapshot_and_low_water_mark_have_what_the_implementation_has():
    """A recovery without a snapshot reads no log (NoSnapshot); the first transactional send waits for the
    first snapshot; an abort there appends no marker; a later transaction's end aborts, through its low water
    mark, a transaction left ongoing below it; and a send at or below the mark is refused."""
    from pulsar_verify.target import reach
    coverage = helpers.explored(MODEL, "as-implemented", "two-txns").coverage
    for label in ("first_snapshot_start", "first_snapshot_written", "abort_without_marker", "lwm_abort",
                  "append_not_allowed"):
        assert coverage[label] > 0, label
    unread = reach(MODEL, bounds="recovery", via=("append", "crash", "tb_recover"),
                   expr="tb_phase[0] == '' and buffers[0].ready and buffers[0].ongoing")
    assert unread.reached and unread.labels.count("first_snapshot_written") == 1  # the snapshot makes it replay
    rescued = reach(MODEL, bounds="two-txns", via=("abort_without_marker", "append", "lwm_abort"),
                    expr="not buffers[0].ongoing and tc.get(2) == 'COMMITTED'")
    assert rescued.reached


def test_the_abort_fix_alone_leaves_a_plain_message_behind_the_first_snapshot():
    """With ``abort-marker-always`` alone, a plain message published during FirstSnapshotting stays behind
    ``maxReadPosition`` once the queued send is dropped as aborted; ``first-snapshot-catches-up`` (in
    all-fixes) moves it."""
    assert "plain-message-delivered" in violated("abort-marker-always", "default")
    from pulsar_verify.target import reach
    stuck = reach(MODEL, variant="abort-marker-always", bounds="default",
                  via=("first_snapshot_start", "send_nontxn", "first_snapshot_written", "append"),
                  expr="tb_phase[0] == '' and max_read[0] < len(logs[0]) - 1 and not buffers[0].ongoing "
                       "and not publishes")
    assert stuck.reached and "abort_without_marker" not in stuck.labels
    assert "plain-message-delivered" not in violated("all-fixes", "default")
