"""The coordinator's transaction timeout (apache/pulsar ``TransactionMetadataStore`` timeout tracker):
an open transaction whose timeout expires is aborted by the TC as if its client had asked, and the
client learns the outcome when the TC answers. A timer, so weakly fair.

Enabled once the client's sends have landed: a send still in flight when the TC aborts is v4's
late-write race, which the v4 model leaves out (``models/v4txn/coordinator.py``).
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import coordinator
from pulsar_verify.models.v4txn.state import ABORTED, OPEN

from .state import ImplState


def actions(m, s: ImplState):
    if m.config.variant == "mutant:no-timeout":
        return
    for t, state in s.tc:
        if state == OPEN and not any(p[0] == t for p in s.publishes):
            yield act("txn_timeout", txn=t)


def txn_timeout(m, s: ImplState, a):
    return coordinator.end_txn(m, s, act("end_txn", txn=a.param("txn"), want=ABORTED))


APPLY = {"txn_timeout": txn_timeout}
