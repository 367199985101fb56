"""apache/pulsar PR #21466, "Fix getting last message ID when there are ongoing transactions":
``getLastMessageIds`` answered the last confirmed entry instead of ``maxReadPosition`` while a transaction
was open, and did not wait for the transaction buffer's recovery, so a reader was told a message is
available that it could not read."""
from __future__ import annotations

import pytest

from pulsar_verify.target import reach

REPORT = dict(model="v4-impl", target="reader-told-available-beyond-horizon")


def test_an_open_transaction_makes_the_reader_wait_before_the_fix():
    r = reach(**REPORT, variant="as-implemented")
    assert r.reached and r.length == 8
    assert r.labels == ["new_txn", "add_partition", "topic_load", "tb_recover", "first_snapshot_start",
                        "first_snapshot_written", "append", "get_last_id"]


def test_an_answer_during_recovery_before_the_fix():
    """A crash, the topic loaded again, and the question asked before the buffer has recovered."""
    r = reach(**REPORT, variant="as-implemented", bounds="recovery", via=("crash", "topic_load", "get_last_id"))
    assert r.reached and r.length == 10
    assert not r.states[-1].buffers[0].ready  # asked and answered while the buffer was recovering


@pytest.mark.parametrize("variant", ["pr-21466", "pr-22610", "all-fixes"])
@pytest.mark.parametrize("bounds", ["default", "recovery", "two-txns"])
def test_the_fix_makes_the_report_unreachable(variant, bounds):
    r = reach(**REPORT, variant=variant, bounds=bounds)
    assert not r.reached and r.complete
