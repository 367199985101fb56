"""``v4-impl``: the v4 transaction path (``v4-txn``) at the granularity of the apache/pulsar
implementation, where the bugs users report live. ``v4-txn`` stays the PIP-level model of
PIP-473's "Background", for the v4-versus-v5 comparison; this model runs the same coordinator,
buffer, dispatcher and pending-ack code (``models/v4txn``) and adds, each in a module of its own:

- ``recovery``: topic load and transaction-buffer recovery as two steps (Initializing, then Ready),
  a stored ``maxReadPosition`` moved by events, publishes arriving during recovery;
- ``first_snapshot``: a buffer recovered without a snapshot (NoSnapshot), the first snapshot its first
  transactional send starts (FirstSnapshotting), and the abort that appends no marker there;
- ``reader``: a reader's ``hasMessageAvailable`` / ``readNext`` loop on topic 0, its receiver queue,
  and the broker's ``getLastMessageId``;
- ``low_water``: the low water mark each END_TXN_ON_PARTITION carries, and the buffer's abort of an earlier
  transaction left ongoing below it;
- ``timeout``: the coordinator's transaction timeout, which does not wait for sends in flight;
- ``coordinator_restart``: with ``tc_crashes`` set, the TC's crash and reload, and the client's end-txn
  request held, lost, resent (``TransactionCoordinatorNotFound``, ``TransactionNotFound``,
  ``InvalidTxnStatus``) or failed by its operation timeout;
- ``consumers``: with ``consumers`` set, each topic's subscription (Exclusive with one consumer, Shared
  with two): permits, the application's receive, redelivery and the replay set, rewind to the
  mark-delete position, and transactional acks split at ADD_SUBSCRIPTION_TO_TXN, with the broker's
  conflict check (it replaces the v4 pending-ack module; without consumers there are no acks).

The baseline variant is the implementation before apache/pulsar PRs #19201, #21466 and #22610 (the three
touch disjoint code); each PR is a fix variant. Topics are ``persistent://`` topics, never sealed (sealing is ``v4-txn``'s).
"""
from __future__ import annotations

import attrs

from pulsar_verify.model import Param, Variant, act
from pulsar_verify.values import FrozenMap
from pulsar_verify.models.v4txn import V4Txn, buffer, coordinator
from pulsar_verify.models.v4txn.model import MUTANTS as V4_MUTANTS

from . import consumers, coordinator_restart, first_snapshot, low_water, reader, recovery, timeout
from .state import IDLE, Consumer, ImplState, Reader

FIXES = {
    "pr-21466": "getLastMessageId answers maxReadPosition, after the buffer's recovery (apache/pulsar PR #21466)",
    "pr-22610": "getLastMessageId answers the last entry the dispatcher would deliver, at or before "
                "maxReadPosition (apache/pulsar PR #22610, on #21466)",
    coordinator_restart.FIX_RECOVERY: "the reloaded TC drives its committing and aborting transactions again and arms "
                                      "its timeouts once it serves requests (apache/pulsar PR #19201, #18923, #19200)",
    coordinator_restart.FIX_IDEMPOTENT: "the TC keeps an ended transaction's outcome and answers a resent end-txn "
                                        "asking for it with success (PIP-255, apache/pulsar #19629, PR #19662)",
    first_snapshot.FIX: "the transaction buffer appends the abort marker and records the abort in every recovered "
                        "state, as it does the commit marker (minimal fix, this model's finding "
                        "late-send-after-markerless-abort-blocks-topic)",
    first_snapshot.FIX_CATCH_UP: "the first snapshot's completion moves maxReadPosition to the last confirmed entry, "
                                 "as a recovery's does (minimal fix, the second path of this model's finding "
                                 "late-send-after-markerless-abort-blocks-topic)",
    consumers.FIX_ENDED: "the pending-ack handle refuses a transaction's ack once it has ended that "
                         "transaction (minimal fix, this model's finding ack-after-timeout-leaks-pending-ack)",
}
MUTANTS = {
    **{k: V4_MUTANTS[k] for k in ("mutant:deliver-aborted", "mutant:commit-marks-aborted",
                                  "mutant:apply-aborted-acks", "mutant:end-any-state", "mutant:commit-skips-cursor",
                                  "mutant:no-recover-after-crash", "mutant:ack-acked-position",
                                  "mutant:reply-survives-crash", "mutant:read-acked")},
    "mutant:no-timeout": "the coordinator never times a transaction out (checks open-txn-ends, "
                         "plain-message-delivered)",
    "mutant:refuse-above-mark": "the buffer refuses a send of the transaction just above its low water mark too, "
                                "an off-by-one (checks answers-true)",
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
    title = ("v4 transactions as implemented: TB recovery states, stored maxReadPosition, a reader, consumers, TC "
             "timeouts, crash and reload")
    source = "apache/pulsar (TopicTransactionBuffer, ServerCnx, ConsumerImpl); shared/seeds/000_*.txt (Background)"
    variants = _variants()
    modules = (coordinator, buffer, recovery, first_snapshot, low_water, consumers, reader, timeout,
               coordinator_restart)
    params = {
        "txns": Param(1, "transactions", 1, 2),
        "topics": Param(1, "topics (the reader reads topic 0)", 1, 2),
        "writes": Param(1, "transactional sends per txn", 0, 2),
        "acks": Param(0, "transactional acks per txn (needs consumers)", 0, 1),
        "nontxn": Param(1, "non-transactional sends in all", 0, 2),
        "crashes": Param(0, "broker crashes (topic unloads) in all", 0, 2),
        "seals": Param(0, "not used: persistent:// topics are not sealed", 0, 0),
        "snapshots": Param(0, "TB snapshots taken in all", 0, 1),
        "consumers": Param(0, "consumers of each topic's subscription: 0 (the reader reads topic 0), "
                              "1 (Exclusive), 2 (Shared)", 0, 2),
        "permits": Param(1, "a consumer's receiver queue size", 1, 2),
        "redeliveries": Param(0, "client redelivery requests (ack timeout, negative ack) in all", 0, 1),
        "tc_crashes": Param(0, "transaction coordinator crashes (another broker reloads it from its log)", 0, 1),
    }
    presets = {
        "default": {},
        "recovery": {"crashes": 1},
        "two-txns": {"txns": 2, "nontxn": 0},
        "acks": {"acks": 1, "consumers": 1},
        "shared": {"acks": 1, "consumers": 2, "redeliveries": 1},
        "ack-timeout": {"txns": 2, "acks": 1, "consumers": 1, "writes": 0, "crashes": 1},
        "tc-restart": {"tc_crashes": 1},
    }
    interchangeable = {}  # the reader reads one topic and timeouts name a txn: no symmetry is claimed
    hypothesis_bounds = {"txns": 2, "writes": 2, "nontxn": 2, "crashes": 2, "snapshots": 1, "acks": 1, "consumers": 2,
                         "permits": 2, "redeliveries": 1, "tc_crashes": 1}
    sequence = {**V4Txn.sequence, "topic_load": "Topic{topic}->>Topic{topic}", "get_last_id": "Reader->>Topic0",
                "has_message_queued": "Reader->>Reader", "read_next": "Reader->>Reader", "txn_timeout": "TC->>TC",
                "txn_ack": "Consumer->>TC", "ack_refused": "TC->>Consumer",
                "end_refused": "TC->>Client", "add_partition_refused": "TC->>Client",
                "ack_pending": "Consumer->>Topic{topic}", "ack_conflict": "Topic{topic}->>Consumer",
                "ack_rejected": "Topic{topic}->>Consumer", "deliver": "Topic{topic}->>Consumer",
                "deliver_replay": "Topic{topic}->>Consumer", "receive": "Consumer->>Consumer",
                "redeliver": "Consumer->>Topic{topic}", "tc_crash": "TC->>TC", "tc_reload": "TC->>TC",
                "end_deferred": "Client->>TC", "end_resend": "Client->>TC", "end_not_found": "TC->>Client",
                "end_invalid_status": "TC->>Client", "end_reply": "TC->>Client", "end_timeout": "Client->>Client",
                "add_partition_unavailable": "Client->>Client", "ack_unavailable": "Consumer->>Consumer",
                "first_snapshot_start": "Topic{topic}->>Topic{topic}",
                "first_snapshot_written": "Topic{topic}->>Topic{topic}", "abort_without_marker": "TC->>Topic{topic}",
                "lwm_abort": "Topic{topic}->>Topic{topic}", "append_not_allowed": "Topic{topic}->>Client"}

    action_kinds = {"deliver": ("deliver", "deliver_replay"), "skip": ("skip_aborted",),
                    "answer": ("end_reply", "tc_end", "end_refused", "end_timeout", "ack_refused", "ack_rejected", "ack_conflict", "ack_unavailable",
                               "add_partition_refused", "add_partition_unavailable", "append_not_allowed", "crash",
                               "get_last_id", "has_message_queued")}

    def action_names(self):
        cfg = self.config
        names = set(super().action_names()) - {"seal", "append_rejected", "marker_rejected"} - set(self.OPTIONAL)
        if not cfg.writes:
            names -= {"add_partition", "append", "end_on_partition", "partition_reply", "skip_aborted", "skip_marker"}
        timeouts = cfg.variant != "mutant:no-timeout"
        acks = cfg.consumers and cfg.acks
        fires = {
            "topic_load": True, "txn_timeout": timeouts, "end_refused": timeouts,
            "add_partition_refused": timeouts and cfg.writes,
            "get_last_id": not cfg.consumers, "read_next": not cfg.consumers,
            "has_message_queued": not cfg.consumers and (cfg.crashes or cfg.nontxn),
            "receive": cfg.consumers, "redeliver": cfg.consumers and cfg.redeliveries,
            "deliver_replay": cfg.consumers > 1 and (cfg.acks or cfg.redeliveries),
            "txn_ack": acks, "ack_pending": acks, "end_on_subscription": acks, "ack_refused": acks and timeouts,
            "ack_conflict": acks and cfg.txns > 1 and cfg.crashes and not self.fixes & {consumers.FIX_ENDED},
            "ack_rejected": acks and consumers.FIX_ENDED in self.fixes,
            **{n: cfg.tc_crashes for n in ("tc_crash", "tc_reload", "end_deferred", "end_resend", "end_reply",
                                           "end_timeout")},
            "end_not_found": cfg.tc_crashes and coordinator_restart.FIX_IDEMPOTENT not in self.fixes,
            "end_invalid_status": cfg.tc_crashes and timeouts,
            "add_partition_unavailable": cfg.tc_crashes and cfg.writes, "ack_unavailable": cfg.tc_crashes and acks,
            "first_snapshot_start": cfg.writes, "first_snapshot_written": cfg.writes,
            "abort_without_marker": cfg.writes and timeouts and first_snapshot.FIX not in self.fixes,
            "lwm_abort": cfg.writes and cfg.txns > 1 and timeouts and first_snapshot.FIX not in self.fixes,
            "append_not_allowed": cfg.writes and cfg.txns > 1 and timeouts,
        }
        return sorted(names | {n for n, on in fires.items() if on})

    OPTIONAL = ("topic_load", "txn_timeout", "end_refused", "add_partition_refused", "get_last_id", "read_next",
                "has_message_queued", "receive", "redeliver", "deliver_replay", "txn_ack", "ack_pending",
                "end_on_subscription", "ack_refused", "ack_conflict", "ack_rejected", "tc_crash", "tc_reload",
                "end_deferred", "end_resend", "end_reply", "end_timeout", "end_not_found", "end_invalid_status",
                "add_partition_unavailable", "ack_unavailable", "first_snapshot_start", "first_snapshot_written",
                "abort_without_marker", "lwm_abort", "append_not_allowed")

    def actions(self, state):
        """Every module's actions, each passed through the routes in turn: while the TC is down a client
        request is held by the client and the TC does nothing; a buffer without a snapshot queues sends and
        aborts without a marker; ids are issued in order and a send below the low water mark is refused; a
        client request for a transaction the TC no longer has open (it timed out) is the TC's refusal."""
        for a in super().actions(state):
            a = coordinator_restart.route(self, state, a)
            a = low_water.route(self, state, first_snapshot.route(self, state, a))
            if a is not None:
                yield timeout.refusals(state, a)

    def next_state(self, state, action):
        """The step; each END_TXN_ON_PARTITION it sent carries the TC's low water mark."""
        return low_water.stamp(state, super().next_state(state, action))

    def in_flight(self, s, t) -> bool:
        return super().in_flight(s, t) or any(k[0] == t for k in s.acking)

    def dispatch(self, s, topic):
        if s.consumers:
            return consumers.dispatch(self, s, topic)
        return super().dispatch(s, topic)

    def deliveries(self, s, topic, pos):
        if s.consumers:
            return consumers.deliveries(self, s, topic, pos)
        return super().deliveries(s, topic, pos)

    def handed(self, state, successor):
        """An entry newly received by a subscription, or put in a consumer's or the reader's receiver queue."""
        grew = any(len(b.queue) > len(a.queue) for xs, ys in zip(state.consumers, successor.consumers)
                   for a, b in zip(xs, ys))
        return grew or len(successor.reader.queue) > len(state.reader.queue) or super().handed(state, successor)

    def answered(self, state, successor):
        """A transaction's application told how an end-txn, a send or an ack ended (its outcome, or that it
        failed), or the reader told whether a message is available."""
        before = state.clients
        told = any(t in before and (before[t].outcome, before[t].failed) != (c.outcome, c.failed)
                   for t, c in successor.clients)
        return told or state.reader.phase != successor.reader.phase != IDLE

    def is_terminal(self, state):
        return super().is_terminal(state) and not state.acking

    def canonicalize(self, s):
        return s

    def load_labels(self):
        return ["topic_load", "tb_recover"]

    def serving(self, s, topic) -> bool:
        """The topic is loaded: its broker serves it while the buffer still recovers."""
        return s.loaded[topic]

    def loads(self, s, topic):
        """v4's load in two steps: the topic is loaded first (``topic_load``), then its buffer recovers."""
        for a in super().loads(s, topic):
            yield a if s.loaded[topic] else act("topic_load", topic=topic)

    def read_limit(self, s, topic) -> int:
        """The dispatcher reads up to the buffer's answer to ``getMaxReadPosition``."""
        return first_snapshot.readable(s, topic)

    def init_states(self):
        cfg = self.config
        n = cfg.topics
        subs = ((Consumer(),) * cfg.consumers,) * n if cfg.consumers else ()
        v4 = super().init_states()  # here, not in the comprehension: compiled, that has no __class__ cell
        return [ImplState(**{f.name: getattr(s, f.name) for f in attrs.fields(type(s))},
                          loaded=(False,) * n, tb_phase=(first_snapshot.READY,) * n, low_water=(0,) * n,
                          max_read=(-1,) * n, reader=Reader(), consumers=subs, replay=(frozenset(),) * n,
                          pending=(FrozenMap(),) * n)
                for s in v4]
