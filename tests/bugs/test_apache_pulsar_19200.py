"""apache/pulsar #19200 "Timeout transaction do not end" and #18923, fixed by PR #19201: a reloaded coordinator
ran its timeouts and the recovery of its committing and aborting transactions before it was registered, so
their ``endTransaction`` failed with ``CoordinatorNotFoundException`` and was not retried."""
from __future__ import annotations

import pytest

from pulsar_verify.target import reach

REPORT = dict(model="v4-impl", target="txn-stranded-after-tc-reload", bounds="tc-restart")


def test_a_timeout_due_during_the_restart_is_lost_before_the_fix():
    r = reach(**REPORT, variant="as-implemented")
    assert r.reached and r.length == 3
    assert r.steps == ["new_txn(txn=1)", "tc_crash()", "tc_reload(expired=(1,))"]


def test_a_committing_transaction_is_no_longer_driven_before_the_fix():
    r = reach(**REPORT, variant="as-implemented", via=("end_txn(want='COMMITTED')", "tc_crash", "tc_reload"))
    assert r.reached and r.states[-1].orphaned == {1} and r.states[-1].tc[1] == "COMMITTING"


@pytest.mark.parametrize("variant", ["pr-19201", "all-fixes"])
@pytest.mark.parametrize("bounds", ["tc-restart", "default"])
def test_the_fix_makes_the_report_unreachable(variant, bounds):
    r = reach(**{**REPORT, "bounds": bounds}, variant=variant)
    assert not r.reached and r.complete
