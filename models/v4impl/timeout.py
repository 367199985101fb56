"""The coordinator's transaction timeout (apache/pulsar ``TransactionMetadataStore`` timeout tracker):
an open transaction whose timeout expires is aborted by the TC (ABORTING, then v4's fan-out). A timer,
so weakly fair. The client is not told: it learns when the TC refuses its next request for the
transaction (``add_partition_refused``, ``ack_refused``, ``end_refused``: the transaction is not open);
the TC's final step answers only a client that asked (``coordinator_restart.tc_end``).

The timer does not wait for the client's sends: a send still in flight when the TC aborts lands after
the abort (v4's late write, which the v4 model leaves out: ``models/v4txn/coordinator.py``), and the buffer
drops it as aborted (``recovery.append``), unless it holds no record of the abort (``first_snapshot``).
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import coordinator
from pulsar_verify.models.v4txn.state import ABORTED, OPEN
from pulsar_verify.values import replace

from .state import ImplState, with_client


def actions(m, s: ImplState):
    if m.config.variant == "mutant:no-timeout":
        return
    for t, state in s.tc:
        if state == OPEN:
            yield act("txn_timeout", txn=t)


def refusals(s: ImplState, a):
    """The TC's answer to a client request for a transaction it no longer has open."""
    if a.name in REFUSED and s.clients[a.param("txn")].phase == "open" and s.tc[a.param("txn")] != OPEN:
        return act(REFUSED[a.name], txn=a.param("txn"))
    return a


def txn_timeout(m, s: ImplState, a):
    t = a.param("txn")
    aborted = coordinator.end_txn(m, s, act("end_txn", txn=t, want=ABORTED))
    return replace(aborted, clients=s.clients)


def add_partition_refused(m, s: ImplState, a):
    """ADD_PARTITION_TO_TXN refused: the send fails; the client can only abort."""
    t = a.param("txn")
    return with_client(s, t, failed=True)


def end_refused(m, s: ImplState, a):
    """The client's end-txn refused: the transaction is not open; the client is told it aborted."""
    t = a.param("txn")
    return with_client(s, t, phase="done", outcome=ABORTED)


REFUSED = {"add_partition": "add_partition_refused", "end_txn": "end_refused"}
APPLY = {"txn_timeout": txn_timeout, "add_partition_refused": add_partition_refused, "end_refused": end_refused}
