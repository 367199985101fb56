"""apache/pulsar #11877, fixed by PR #22610: "Reader stuck after reading all the messages on a topic that
were each published via a separate transaction": ``hasMessageAvailable`` says true after the last
message, and ``readNext`` blocks, because the topic ends with transaction markers or aborted messages."""
from __future__ import annotations

import pytest

from pulsar_verify.target import reach

REPORT = dict(model="v4-impl", target="reader-stuck-on-aborted-tail", bounds="default")


@pytest.mark.parametrize("variant", ["as-implemented", "pr-21466"])
def test_the_reader_gets_stuck_before_the_fix(variant):
    """Shortest: the transaction times out with its send in flight, so the abort marker is the last entry."""
    r = reach(**REPORT, variant=variant)
    assert r.reached and r.length == 9
    assert r.steps[-3:] == ["txn_timeout(txn=1)", "end_on_partition(txn=1, topic=0)", "get_last_id()"]
    aborted = reach(**REPORT, variant=variant, via=("end_txn(want='ABORTED')",))
    assert aborted.reached and aborted.length == 10
    assert aborted.steps[-3:] == ["end_txn(txn=1, want='ABORTED')", "end_on_partition(txn=1, topic=0)",
                                  "get_last_id()"]


def test_the_reader_gets_stuck_after_a_committed_txn_too():
    """The report's own case: every message committed, the last entry the commit marker."""
    r = reach(**REPORT, variant="as-implemented", via=("end_txn(want='COMMITTED')", "read_next"))
    assert r.reached and r.length == 13
    assert r.labels[-4:] == ["deliver", "has_message_queued", "read_next", "get_last_id"]


@pytest.mark.parametrize("variant", ["pr-22610", "all-fixes"])
@pytest.mark.parametrize("bounds", ["default", "recovery", "two-txns"])
def test_the_fix_makes_the_report_unreachable(variant, bounds):
    r = reach(**{**REPORT, "bounds": bounds}, variant=variant)
    assert not r.reached and r.complete
