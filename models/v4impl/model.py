"""``v4-impl``: the v4 transaction path (``v4-txn``) at the granularity of the apache/pulsar
implementation, where the bugs users report live. ``v4-txn`` stays the PIP-level model of
PIP-473's "Background", for the v4-versus-v5 comparison; this model runs the same coordinator,
buffer, dispatcher and pending-ack code (``models/v4txn``) and adds, each in a module of its own:

- ``recovery``: topic load and transaction-buffer recovery as two steps (Initializing, then Ready),
  a stored ``maxReadPosition`` moved by events, publishes arriving during recovery;
- ``reader``: a reader's ``hasMessageAvailable`` / ``readNext`` loop on topic 0, its receiver queue,
  and the broker's ``getLastMessageId``;
- ``timeout``: the coordinator's transaction timeout.

The baseline variant is the implementation before apache/pulsar PR #21466 and PR #22610; each
PR is a fix variant. Topics are ``persistent://`` topics, never sealed (sealing is ``v4-txn``'s).
"""
from __future__ import annotations

import attrs

from pulsar_verify.model import Param, Variant, act
from pulsar_verify.models.v4txn import V4Txn, buffer, coordinator, pending_ack
from pulsar_verify.models.v4txn.model import MUTANTS as V4_MUTANTS

from . import reader, recovery, timeout
from .state import ImplState, Reader

FIXES = {
    "pr-21466": "getLastMessageId answers maxReadPosition, after the buffer's recovery (apache/pulsar PR #21466)",
    "pr-22610": "getLastMessageId answers the last entry the dispatcher would deliver, at or before "
                "maxReadPosition (apache/pulsar PR #22610, on #21466)",
}
MUTANTS = {
    **{k: V4_MUTANTS[k] for k in ("mutant:deliver-aborted", "mutant:commit-marks-aborted",
                                  "mutant:apply-aborted-acks", "mutant:end-any-state", "mutant:commit-skips-cursor",
                                  "mutant:no-recover-after-crash")},
    "mutant:no-timeout": "the coordinator never times a transaction out (checks open-txn-ends, "
                         "plain-message-delivered)",
}
BASELINE = "as-implemented"


def _variants() -> tuple:
    every = frozenset(FIXES)
    return ((Variant(BASELINE, "the implementation before PR #21466 and PR #22610", "as-written"),)
            + tuple(Variant(name, desc, "fix", frozenset({name})) for name, desc in FIXES.items())
            + (Variant("all-fixes", "every fix above together", "fix", every),)
            + tuple(Variant(name, desc, "mutant", every) for name, desc in MUTANTS.items()))


class V4Impl(V4Txn):
    name = "v4-impl"
    properties_from = "pulsar_verify.invariants.v4impl"
    title = "v4 transactions as implemented: TB recovery states, stored maxReadPosition, a reader, TC timeouts"
    source = "apache/pulsar (TopicTransactionBuffer, ServerCnx, ConsumerImpl); shared/seeds/000_*.txt (Background)"
    variants = _variants()
    modules = (coordinator, buffer, pending_ack, recovery, reader, timeout)
    params = {
        "txns": Param(1, "transactions", 1, 2),
        "topics": Param(1, "topics (the reader reads topic 0)", 1, 2),
        "writes": Param(1, "transactional sends per txn", 0, 2),
        "acks": Param(0, "transactional acks per txn", 0, 1),
        "nontxn": Param(1, "non-transactional sends in all", 0, 2),
        "crashes": Param(0, "broker crashes (topic unloads) in all", 0, 2),
        "seals": Param(0, "not used: persistent:// topics are not sealed", 0, 0),
        "snapshots": Param(0, "TB snapshots taken in all", 0, 1),
    }
    presets = {
        "default": {},
        "recovery": {"crashes": 1},
        "two-txns": {"txns": 2, "nontxn": 0},
        "acks": {"acks": 1},
    }
    interchangeable = {}  # the reader reads one topic and timeouts name a txn: no symmetry is claimed
    hypothesis_bounds = {"txns": 2, "writes": 2, "nontxn": 2, "crashes": 2, "snapshots": 1, "acks": 1}
    sequence = {**V4Txn.sequence, "topic_load": "Topic{topic}->>Topic{topic}", "get_last_id": "Reader->>Topic0",
                "has_message_queued": "Reader->>Reader", "read_next": "Reader->>Reader", "txn_timeout": "TC->>TC"}

    def action_names(self):
        names = set(super().action_names()) - {"seal", "append_rejected", "marker_rejected"}
        names |= {"topic_load", "get_last_id", "has_message_queued", "read_next"}
        if self.config.variant != "mutant:no-timeout":
            names.add("txn_timeout")
        if not self.config.crashes and not self.config.nontxn:
            names.discard("has_message_queued")
        return sorted(names)

    def canonicalize(self, s):
        return s

    def load_labels(self):
        return ["topic_load", "tb_recover"]

    def loads(self, s, topic):
        """v4's load in two steps: the topic is loaded first (``topic_load``), then its buffer recovers."""
        for a in super().loads(s, topic):
            yield a if s.loaded[topic] else act("topic_load", topic=topic)

    def read_limit(self, s, topic) -> int:
        """The dispatcher reads up to the stored maxReadPosition."""
        return s.max_read[topic]

    def init_states(self):
        n = self.config.topics
        return [ImplState(**{f.name: getattr(s, f.name) for f in attrs.fields(type(s))},
                          loaded=(False,) * n, max_read=(-1,) * n, reader=Reader())
                for s in super().init_states()]
