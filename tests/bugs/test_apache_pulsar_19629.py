"""apache/pulsar #19629 "Throw exception though transaction committed successfully" (open; PIP-255 and PR
#19662 propose idempotent commit and abort): the client resends END_TXN after a coordinator restart, and the
reloaded coordinator, which has dropped the ended transaction, answers ``TransactionNotFound``."""
from __future__ import annotations

import pytest

from pulsar_verify.target import reach

REPORT = dict(model="v4-impl", target="commit-reported-failed", bounds="tc-restart")


@pytest.mark.parametrize("variant", ["as-implemented", "pr-19201"])
def test_a_committed_transaction_is_reported_failed(variant):
    r = reach(**REPORT, variant=variant)
    assert r.reached and r.length == 7
    assert r.labels == ["new_txn", "end_txn", "tc_end", "tc_crash", "tc_reload", "end_not_found", "end_reply"]
    assert r.states[-1].clients[1].outcome == "TransactionNotFound"


def test_with_a_message_in_the_transaction():
    r = reach(**REPORT, variant="as-implemented", via=("append", "tc_end", "tc_crash"))
    assert r.reached and r.states[-1].logs[0][0] == ("d", 1)


@pytest.mark.parametrize("variant", ["idempotent-end", "all-fixes"])
def test_the_fix_makes_the_report_unreachable(variant):
    r = reach(**REPORT, variant=variant)
    assert not r.reached and r.complete
