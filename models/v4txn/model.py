"""The v4 transaction path with in-stream markers (PIP-473 "Background"), on topics that
may be sealed as segments of a scalable topic are (PIP-473 "How the two interact").

Steps merged, because nothing observes the state between them: the client's
end-txn request and the TC logging COMMITTING / ABORTING; ADD_PARTITION_TO_TXN and
the client's send leaving for the broker (the append itself is a separate step);
ADD_SUBSCRIPTION_TO_TXN and the pending-ack append.
"""
from __future__ import annotations

from pulsar_verify.model import ComposedModel, Param, act, variants_of
from pulsar_verify.values import FrozenMap

from pulsar_verify.symmetry import representative

from . import buffer, coordinator, pending_ack, symmetry
from .state import ABORT_MARKER, ABORTED, Buffer, Client, State, Sub

MUTANTS = {
    "mutant:deliver-aborted": "the dispatcher ignores the aborted set (checks read-committed)",
    "mutant:commit-marks-aborted": "the TB records a commit as an abort (checks committed-never-filtered)",
    "mutant:apply-aborted-acks": "aborted acks are applied to the cursor (checks acks-only-from-committed)",
    "mutant:end-any-state": "the TC accepts a second end-txn with the other outcome (checks tc-state-machine)",
    "mutant:commit-skips-cursor": "the subscription's commit appends its marker without applying the acks "
                                  "(checks committed-acks-applied)",
    "mutant:no-recover-after-crash": "a topic whose broker crashed is never loaded again (checks sends-complete)",
    "mutant:append-to-sealed": "a sealed topic appends a transactional send (checks sealed-accepts-no-write)",
    "mutant:ack-acked-position": "a txn may ack a position the cursor already holds (checks acked-once)",
    "mutant:tc-ends-one-at-a-time": "the TC answers a txn only while no other txn is open or ending "
                                    "(checks unsealed-txns-complete)",
    "mutant:reply-survives-crash": "a crash keeps the replies its broker had not sent yet "
                                   "(checks crashed-broker-serves-nothing)",
    "mutant:read-acked": "the cursor's read does not pass over the positions it holds as acknowledged "
                         "(checks acked-not-redelivered)",
}


class V4Txn(ComposedModel):
    name = "v4-txn"
    properties_from = "pulsar_verify.invariants.v4txn"
    title = "v4 transactions: legacy TC, in-stream commit/abort markers, sibling pending-ack topic"
    source = "shared/seeds/000_c973aa9b5a217997.txt (Background)"
    variants = variants_of(
        "v4 as PIP-473's Background describes it, on topics that can be sealed",
        {"off-segment-markers": "PIP-473 Alternative B: markers in a separate stream sealing does not close"},
        MUTANTS)
    modules = (coordinator, buffer, pending_ack)
    params = {
        "txns": Param(1, "transactions", 1, 3),
        "topics": Param(1, "topics (segments)", 1, 2),
        "writes": Param(1, "transactional sends per txn", 0, 2),
        "acks": Param(0, "transactional acks per txn", 0, 2),
        "nontxn": Param(0, "non-transactional sends in all", 0, 2),
        "crashes": Param(0, "broker crashes in all", 0, 2),
        "seals": Param(0, "topics sealed (split/merge) in all", 0, 2),
        "snapshots": Param(0, "TB snapshots taken in all", 0, 2),
    }
    presets = {
        "default": {},
        "sealed": {"seals": 1},
        "acks": {"acks": 1, "nontxn": 1},
        "faults": {"crashes": 1, "snapshots": 1, "nontxn": 1},
        "two-txns": {"txns": 2, "crashes": 1, "snapshots": 1},
        "sealed-plain": {"seals": 1, "nontxn": 1},
        "two-txns-acks": {"txns": 2, "acks": 1, "nontxn": 1},
        "acks-crash": {"acks": 1, "crashes": 1, "nontxn": 1},
        "two-txns-sealed": {"txns": 2, "seals": 1},
        "two-topics": {"txns": 2, "topics": 2, "seals": 1, "acks": 1, "nontxn": 1, "crashes": 1},
    }
    large_presets = ("two-topics",)
    sequence = {
        "new_txn": "Client->>TC", "add_partition": "Client->>TC", "end_txn": "Client->>TC", "tc_end": "TC->>TC",
        "tc_retry": "TC->>Topic{topic}", "end_on_partition": "TC->>Topic{topic}",
        "partition_reply": "Topic{topic}->>TC",
        "end_on_subscription": "TC->>Topic{topic}", "marker_rejected": "Topic{topic}->>TC",
        "append": "Client->>Topic{topic}", "append_rejected": "Topic{topic}->>Client",
        "send_nontxn": "Client->>Topic{topic}", "txn_ack": "Consumer->>Topic{topic}",
        "deliver": "Topic{topic}->>Consumer", "skip_aborted": "Topic{topic}->>Topic{topic}",
        "skip_marker": "Topic{topic}->>Topic{topic}", "take_snapshot": "Topic{topic}->>Topic{topic}",
        "tb_recover": "Topic{topic}->>Topic{topic}", "seal": "Operator->>Topic{topic}",
        "crash": "Topic{topic}->>Topic{topic}", "load_skip": "Topic{topic}->>Topic{topic}",
        "load_rebuild": "Topic{topic}->>Topic{topic}", "load_confirm": "Topic{topic}->>Topic{topic}",
        "request_flag": "Topic{topic}->>Store", "persist_flag": "Topic{topic}->>Store",
        "admin_update": "Operator->>Store", "admin_remove": "Operator->>Store"}
    interchangeable = {"txns": "Background: every txn takes the same client, TC and broker steps; none "
                                "compares or names txn ids (models/v4txn/symmetry.py)"}
    hypothesis_bounds = {"txns": 3, "topics": 2, "writes": 2, "acks": 1, "nontxn": 2, "crashes": 2, "seals": 2,
                         "snapshots": 2}
    action_kinds = {"deliver": ("deliver",), "skip": ("skip_aborted",)}

    def action_names(self):
        cfg = self.config
        blocked = cfg.seals and "off-segment-markers" not in self.fixes
        needs = {"seal": cfg.seals, "append_rejected": cfg.seals, "marker_rejected": blocked,
                 "tc_retry": blocked or cfg.crashes, "crash": cfg.crashes, "send_nontxn": cfg.nontxn,
                 "take_snapshot": cfg.snapshots, "txn_ack": cfg.acks, "end_on_subscription": cfg.acks,
                 "skip_marker": "off-segment-markers" not in self.fixes}
        if not cfg.writes:  # no transactional send: no partition joins a transaction, nothing to end on one
            needs.update(dict.fromkeys(("add_partition", "append", "end_on_partition", "partition_reply"), False))
            needs["tc_retry"] = needs["tc_retry"] and cfg.acks
        names = set(self.action_labels) - {"tb_recover"} | set(self.load_labels())
        return sorted(n for n in names if needs.get(n, True))

    def canonicalize(self, s):
        return representative(s, range(1, self.config.txns + 1), symmetry.signature, symmetry.rename)

    # -- hooks PIP-373 overrides ---------------------------------------------
    def load_labels(self):
        return ["tb_recover"]

    def loads(self, s, topic):
        """How an unloaded topic is loaded: v4 always rebuilds the TB."""
        if self.config.variant == "mutant:no-recover-after-crash" and s.crashes:
            return
        yield act("tb_recover", topic=topic)

    def serving(self, s, topic) -> bool:
        """The topic's broker is up and serves it: v4 serves a topic once its buffer is rebuilt."""
        return s.buffers[topic].ready

    def read_limit(self, s, topic) -> int:
        """The dispatcher's horizon: maxReadPosition, derived from the TB's ongoing set."""
        return buffer.max_read_position(s, topic)

    def in_flight(self, s, t) -> bool:
        """The client's ops of txn ``t`` still on their way (it ends the txn only once they are done)."""
        return any(p[0] == t for p in s.publishes)

    def dispatch(self, s, topic):
        """The dispatcher's steps on a Ready topic: one subscription reading from its read position. The cursor's
        read passes over the positions it holds as acknowledged (primer, Managed cursor: the mark-delete
        position "plus individually acknowledged ranges after it"): after a crash rewinds the read, an
        acknowledged entry is not read again. Merged into the read: ``ManagedCursorImpl`` skips them in the same
        ``asyncReadEntries`` call, and nothing else runs between."""
        read = s.subs[topic].read
        if self.config.variant != "mutant:read-acked":
            while (topic, read) in s.cursors:
                read += 1
        return buffer.dispatch(self, s, topic, read)

    def deliveries(self, s, topic, pos):
        yield act("deliver", topic=topic, pos=pos)

    def on_txn_append(self, s, topic, b: Buffer) -> Buffer:
        return b

    def initial_prop(self):
        return ()

    def initial_log(self):
        return ()

    # -- the state machine -----------------------------------------------------
    def init_states(self):
        c = self.config
        n = c.topics
        log = self.initial_log()
        return [State(
            tc=FrozenMap(), parts=FrozenMap(), subs_of=FrozenMap(), rpcs=FrozenMap(),
            logs=(log,) + ((),) * (n - 1), side=((),) * n, sealed=(False,) * n, snapshots=(None,) * n,
            pending_logs=((),) * n, cursors=FrozenMap(), buffers=(Buffer(),) * n, subs=(Sub(),) * n,
            publishes=frozenset(), clients=FrozenMap((t, Client()) for t in range(1, c.txns + 1)),
            prop=self.initial_prop(), crashes=0, seals=0, snapshots_taken=0, nontxn=0,
            decided=FrozenMap((t, ABORTED) for kind, t in log if kind == ABORT_MARKER),
        )]

    def handed(self, state, successor):
        return any(b.received - a.received for a, b in zip(state.subs, successor.subs))

    def is_terminal(self, state):
        """Every transaction the clients started has ended and nothing is in flight."""
        return not state.rpcs and not state.publishes and \
            all(c.phase in ("idle", "done") for c in state.clients.values())
