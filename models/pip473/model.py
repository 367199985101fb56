"""PIP-473 metadata-driven transactions, as written (``shared/seeds/000_*.txt``),
with the review questions of ``001_*.txt`` in mind.

One segment broker per segment hosts its MetadataTransactionBuffer, the
MetadataPendingAckStore of each subscription and the dispatchers. Every step
the PIP makes separate is a separate action; notifications are delivered by
their own actions, so they can be late and interleave with everything else.
A notification lost with a session is re-read on reconnect, which the model
covers as a late delivery of the current value.

Steps are merged only where nothing can observe the state between them: the
client's send and the broker's header check (the send has no other effect), a
time event and the sweep that is its only observer (deadline / timeout sweep,
retention window / GC sweep: "the sweep may pick the txn at any time"), and a
watch delivery and the materialization that runs in its callback.
"""
from __future__ import annotations

from pulsar_verify.model import ComposedModel, Param, variants_of
from pulsar_verify.values import FrozenMap

from pulsar_verify.symmetry import representative

from . import buffer, coordinator, dispatcher, lifecycle, pending_ack, symmetry
from .state import Buffer, Client, PendingAck, State, Sub

FIXES = {
    "open-entry-barrier": "the dispatcher never passes an entry of a txn whose header is still OPEN",
    "finalize-in-cas": "finalized_ms is set in the same CAS that decides the txn (as the sequence diagram has it)",
    "recheck-before-ack": "the send-ack re-reads the header and answers TxnConflict if it left OPEN",
    "gc-waits-for-participants": "the GC sweep never force-deletes the ack records of a committed txn",
    "keep-decisions-with-data": "write op records (and so the header) live until retention trims their entry",
    "owners-reap-orphans": "a buffer or pending-ack store deletes the op records its index holds of a txn whose "
                           "header is gone",
    "forget-collected-acks": "a pending-ack store that learns a txn's header is gone (from the header watch, or when "
                             "an ack of the txn arrives) drops or does not keep the txn's pending acks (as written "
                             "they stay, and their positions stay claimed)",
}
MUTANTS = {
    "mutant:blind-cas": "the TC's CAS ignores the version (checks header-state-machine, one-outcome)",
    "mutant:deliver-aborted": "the dispatcher ignores isTxnAborted (checks read-committed)",
    "mutant:apply-aborted-acks": "aborted acks are applied to the cursor (checks acks-only-from-committed)",
    "mutant:end-needs-append": "v4-style: end-txn waits for a marker appended to every written segment "
                               "(checks end-txn-completes)",
    "mutant:pin-committed": "maxReadPosition stays pinned by committed txns too (checks committed-entries-delivered)",
    "mutant:double-append": "the broker's asyncAddEntry of a send is retried after a timeout the first attempt "
                            "survived, with no de-duplication: the entry is written twice (checks entries-are-sends)",
    "mutant:trim-while-down": "retention trims a segment whose broker is down (checks crashed-broker-serves-nothing)",
    "mutant:read-acked": "the dispatcher does not pass over the positions the cursor holds as acknowledged "
                         "(checks acked-not-redelivered)",
    "mutant:conflict-on-cache-miss": "a send whose segment has no cached header takes the miss for a header "
                                     "that is not OPEN and answers TxnConflict (checks answers-true)",
}


class Pip473(ComposedModel):
    name = "pip-473"
    properties_from = "pulsar_verify.invariants.pip473"
    title = "PIP-473 Metadata-Driven Transactions for Scalable Topics"
    source = "shared/seeds/000_c973aa9b5a217997.txt"
    variants = variants_of("the protocol as PIP-473 describes it", FIXES, MUTANTS)
    modules = (coordinator, buffer, pending_ack, dispatcher, lifecycle)
    params = {
        "txns": Param(1, "transactions", 1, 4),
        "segments": Param(1, "segments", 1, 3),
        "subs": Param(1, "subscriptions existing from the start", 1, 2),
        "late_subs": Param(0, "subscriptions created later, reading from the earliest entry", 0, 1),
        "writes": Param(1, "transactional sends per txn", 0, 3),
        "acks": Param(0, "transactional acks per txn", 0, 2),
        "nontxn": Param(0, "non-transactional sends in all", 0, 3),
        "crashes": Param(0, "segment-broker crashes in all", 0, 3),
        "tc_crashes": Param(0, "TC crashes in all", 0, 2),
        "seals": Param(0, "segments sealed (split/merge) in all", 0, 3),
        "timeouts": Param(True, "txn deadlines may pass (the timeout sweep may abort an OPEN txn)"),
        "gc": Param(True, "the retention window may pass and the GC sweep run"),
        "trim": Param(True, "retention may trim entries every subscription has read"),
    }
    presets = {
        "default": {},
        "acks": {"nontxn": 1, "acks": 1, "crashes": 1, "timeouts": False},
        "faults": {"crashes": 1, "tc_crashes": 1},
        "late-sub": {"late_subs": 1},
        "sealed": {"seals": 1, "nontxn": 1},
        "pipelined": {"writes": 2, "timeouts": False},
        "two-segments": {"segments": 2, "writes": 2, "seals": 1, "gc": False, "trim": False, "timeouts": False},
        "two-txns": {"txns": 2, "acks": 1, "nontxn": 1},
    }
    large_presets = ("two-segments", "two-txns")
    sequence = {
        "new_txn": "Client->>TC", "end_txn": "Client->>TC", "retry_end": "Client->>TC", "send": "Client->>Segment{seg}",
        "send_conflict": "Store->>Segment{seg}", "pub_append": "Segment{seg}->>Segment{seg}",
        "pub_put": "Segment{seg}->>Store", "pub_late": "Segment{seg}->>Store", "pub_ack": "Segment{seg}->>Client",
        "pub_terminated": "Segment{seg}->>Client", "nontxn_send": "Client->>Segment{seg}",
        "tc_read": "TC->>Store", "tc_cas": "TC->>Store", "tc_bad_version": "Store->>TC", "tc_reply": "TC->>Client",
        "tc_finalize": "TC->>Store", "tc_crash": "TC->>TC", "timeout_sweep": "TC->>Store",
        "gc_list": "TC->>Store", "gc_delete_header": "TC->>Store", "gc_delete_ops": "TC->>Store",
        "tb_index": "Store->>Segment{seg}", "tb_header": "Store->>Segment{seg}", "tb_cleanup": "Segment{seg}->>Store",
        "tb_reap": "Segment{seg}->>Store", "pa_header": "Store->>Segment{seg}", "pa_cleanup": "Segment{seg}->>Store",
        "pa_reap": "Segment{seg}->>Store", "filter": "Segment{seg}->>Segment{seg}",
        "skip_acked": "Segment{seg}->>Segment{seg}", "deliver": "Segment{seg}->>Consumer{sub}",
        "subscribe": "Consumer{sub}->>Segment{seg}", "txn_ack": "Consumer{sub}->>Segment{seg}",
        "txn_ack_cumulative": "Consumer{sub}->>Segment{seg}", "trim": "Segment{seg}->>Segment{seg}",
        "seal": "Operator->>Segment{seg}", "crash": "Segment{seg}->>Segment{seg}",
        "restart": "Segment{seg}->>Segment{seg}"}
    interchangeable = {"txns": "every txn takes the same client, TC V5, sweep, buffer and pending-ack steps; "
                                "none compares or names txn ids (models/pip473/symmetry.py)"}
    hypothesis_bounds = {"txns": 2, "segments": 2, "late_subs": 1, "writes": 2, "acks": 1, "nontxn": 1, "crashes": 1,
                         "tc_crashes": 1, "seals": 1}

    action_kinds = {"deliver": ("deliver",), "skip": ("filter",),
                    "answer": ("tc_reply", "send_conflict", "pub_ack", "pub_late", "pub_terminated", "crash")}

    def action_names(self):
        names = set(self.action_labels)
        if "recheck-before-ack" not in self.fixes:
            names.discard("pub_late")
        if "keep-decisions-with-data" in self.fixes:
            names.discard("tb_cleanup")
        if "owners-reap-orphans" not in self.fixes:
            names -= {"tb_reap", "pa_reap"}
        if "finalize-in-cas" in self.fixes:
            names.discard("tc_finalize")
        if not self.config.gc:
            names -= {"gc_list", "gc_delete_ops", "gc_delete_header"}
        if not self.config.timeouts:
            names.discard("timeout_sweep")
        cfg = self.config
        if not cfg.tc_crashes:
            names -= {"tc_crash", "retry_end"}
        # what the budgets rule out: each action needs the step or the client it names
        if not cfg.crashes:
            names -= {"crash", "restart"}
        if not cfg.seals:
            names -= {"seal", "pub_terminated"}
        if not cfg.nontxn:
            names.discard("nontxn_send")
        if not cfg.late_subs:
            names.discard("subscribe")
        if not cfg.acks:
            names -= {"txn_ack", "txn_ack_cumulative", "pa_header", "pa_cleanup", "pa_reap"}
        if not (cfg.acks and cfg.crashes):
            names.discard("skip_acked")  # only a restart's rewind reads an acknowledged position again
        if not cfg.timeouts:
            # a client ends its transaction once its sends are done, and while it is open only: without the
            # timeout sweep no send meets an ended transaction, no end races another on the header, and no
            # transaction is left for the owners to reap
            names -= {"send_conflict", "pub_late", "tb_reap", "pa_reap"}
            if not cfg.tc_crashes:
                names.discard("tc_bad_version")  # nor a retried end after a TC crash
            if "keep-decisions-with-data" in self.fixes:
                # a write record is then force-deleted only if it landed after retention trimmed its entry,
                # which takes a transaction ended while its send was on its way: only a timeout ends one then
                names.discard("gc_delete_ops")
        return sorted(names)

    def canonicalize(self, s):
        return representative(s, range(1, self.config.txns + 1), symmetry.signature, symmetry.rename)

    def init_states(self):
        c = self.config
        n = c.subs + c.late_subs
        subs = tuple(Sub(exists=(i % n) < c.subs) for i in range(c.segments * n))
        return [State(
            headers=FrozenMap(), ops=FrozenMap(), seqs=(0,) * c.txns,
            logs=((),) * c.segments, first=(0,) * c.segments, sealed=(False,) * c.segments, nontxn=0,
            up=(True,) * c.segments, buffers=(Buffer(),) * c.segments,
            pending=(PendingAck(),) * (c.segments * n), subs=subs, publishes=(),
            ends=(), sweeps=FrozenMap(), clients=(Client(),) * c.txns,
            crashes=0, tc_crashes=0, seals=0,
            decided=FrozenMap(), acks_made=frozenset(), applied=FrozenMap(),
        )]

    def handed(self, state, successor):
        return any(b.received - a.received for a, b in zip(state.subs, successor.subs))

    def answered(self, state, successor):
        """A client told how its end-txn ended or that a send failed, or a send answered (acknowledged,
        refused, or failed with its connection)."""
        return len(successor.publishes) < len(state.publishes) or any(
            (a.outcome, a.failed) != (b.outcome, b.failed) for a, b in zip(state.clients, successor.clients))

    def is_terminal(self, state):
        """Every transaction the clients started has ended and nothing is in flight."""
        return not state.publishes and not state.ends and all(c.phase in ("idle", "done") for c in state.clients)
