"""PIP-468 scalable topic controller as written: leader election and failover, split and
merge as five steps each, subscription creation, the producer's DAG watch, stream consumers
with persisted sessions and grace timers, delivery through the segment DAG."""
from __future__ import annotations

from pulsar_verify.model import ComposedModel, Param, variants_of
from pulsar_verify.values import FrozenMap

from . import clients, controller
from .layout import SegmentLayout
from .state import CAS, CREATE, DISCOVER, NOTIFY, TERMINATE, Consumer, Controller, State, Topic

STEPS = (DISCOVER, CREATE, TERMINATE, CAS, NOTIFY)  # "Split Protocol" / "Merge Protocol": steps 1-5

FIXES = {
    "subs-in-metadata": "subscriptions live in the CASed topic metadata; split/merge discover them there, "
                        "so a subscription created meanwhile fails the operation's CAS",
    "op-intent": "the leader persists the operation before step 1, conditionally on its leader lock and on the "
                 "metadata version of its layout, accepts one at a time, and a new leader resumes it unless it "
                 "still runs it: a terminated parent is always followed by its CAS",
    "fenced-registrations": "the coordinator's registration writes are conditional on the version of the leader "
                            "lock they were issued under, so a deposed leader, or an earlier term of the same "
                            "one, can no longer overwrite or delete the sessions the leader restored",
    "atomic-registrations": "a rebalance persists every changed registration in one write (the subscription's "
                            "SubscriptionMetadata, or a metadata multi-op), not one key at a time",
    "revoke-before-grant": "a segment whose owner changes is granted to its new consumer only once its previous "
                           "owner has received the assignment that revokes it; a consumer waiting to register acts "
                           "on no segment until the reply",
    "leader-watches-layout": "the leader rebalances against the layout it loads when elected, and watches the "
                             "metadata so a change it did not make (a deposed leader's CAS) is reloaded too; "
                             "elected with consumers still connected to it (from its earlier term), it takes one "
                             "with no registration as joining and pushes the others the assignment it restored",
}
MUTANTS = {
    "mutant:cas-before-terminate": "step 4 before step 3 (checks sealed-accepts-no-write, one-writable-segment)",
    "mutant:cas-before-create": "step 4 before step 2 (checks cursors-before-routing, no-message-loss)",
    "mutant:no-catch-up": "stream consumers read a segment before its ancestors drain (checks per-key-order)",
    "mutant:stale-epoch": "the CAS keeps the old epoch (checks layout-valid, epoch-increases)",
    "mutant:no-rebalance-on-join": "a joining consumer is given its share without rebalancing the others "
                                   "(checks assignment-exclusive)",
    "mutant:rebalance-on-reconnect": "a reconnect within the grace period rebalances "
                                     "(checks reconnect-keeps-assignment)",
    "mutant:elect-drops-connections": "a broker that wins the election closes the connections of the consumers "
                                      "connected to it (checks connection-closed-with-cause)",
    "mutant:created-after-first-segment": "the createSubscription call succeeds once the first segment has the "
                                          "subscription (checks created-when-propagated)",
}


class Pip468(ComposedModel):
    name = "pip-468"
    properties_from = "pulsar_verify.invariants.pip468"
    title = "PIP-468 scalable topic controller: segment DAG, split/merge, leader failover, consumer assignment"
    source = "shared/seeds/003_a87dccc0bce9ff9e.txt"
    variants = variants_of("PIP-468 as the vote thread's text describes it", FIXES, MUTANTS)
    modules = (controller, clients)
    params = {
        "segments": Param(1, "initial segments", 1, 3),
        "brokers": Param(2, "brokers running a controller for the topic", 1, 3),
        "splits": Param(1, "split requests accepted in all", 0, 2),
        "merges": Param(0, "merge requests accepted in all", 0, 2),
        "subs": Param(1, "subscriptions at creation (s0 is the stream consumers' when there are any)", 0, 2),
        "new_subs": Param(0, "subscriptions created through the admin API", 0, 2),
        "keys": Param(1, "message keys (hashes 0x0000 and 0xFFFF)", 1, 2),
        "msgs": Param(2, "messages published in all", 0, 4),
        "consumers": Param(0, "stream consumers of s0", 0, 2),
        "disconnects": Param(0, "consumer disconnects in all", 0, 2),
        "failovers": Param(0, "leader session losses or broker crashes in all", 0, 2),
    }
    presets = {
        "default": {},
        "new-sub": {"new_subs": 1, "msgs": 1},
        "two-new-subs": {"new_subs": 2},
        "failover": {"failovers": 1, "msgs": 1},
        "merge": {"segments": 2, "splits": 0, "merges": 1, "keys": 2},
        "split-merge": {"segments": 2, "splits": 1, "merges": 1, "brokers": 1, "msgs": 0},
        "consumers": {"consumers": 2, "disconnects": 1, "msgs": 1, "brokers": 1},
        "stream-order": {"consumers": 1, "msgs": 2, "brokers": 1},
        "consumer-failover": {"consumers": 1, "failovers": 1, "msgs": 1},
        "two-consumers-failover": {"consumers": 2, "failovers": 1, "msgs": 1},
        "session-failover": {"consumers": 1, "failovers": 1, "disconnects": 1, "splits": 0, "msgs": 1},
        "merge-new-sub": {"segments": 2, "splits": 0, "merges": 1, "keys": 2, "new_subs": 1, "msgs": 1},
        "two-segments-two-consumers": {"segments": 2, "consumers": 2, "brokers": 1, "msgs": 1},
    }
    large_presets = ("two-consumers-failover",)
    sequence = {
        "elect": "Controller{broker}->>Store", "lose_session": "Store->>Store",
        "learn_deposed": "Store->>Controller{broker}", "crash": "Controller{broker}->>Controller{broker}",
        "layout_changed": "Store->>Controller{broker}", "request_split": "Operator->>Controller{broker}",
        "request_merge": "Operator->>Controller{broker}", "discover": "Controller{broker}->>Store",
        "create": "Controller{broker}->>Segments", "terminate": "Controller{broker}->>Segments",
        "cas": "Controller{broker}->>Store", "cas_conflict": "Store->>Controller{broker}",
        "notify": "Controller{broker}->>Store", "create_subscription": "Operator->>Controller{broker}",
        "propagate_subscription": "Controller{broker}->>Segments",
        "publish": "Producer->>Segments", "publish_rejected": "Segments->>Producer", "dag_update": "Store->>Producer",
        "connect": "Consumer{consumer}->>Leader", "disconnect": "Consumer{consumer}->>Leader",
        "receive_assignment": "Leader->>Consumer{consumer}",
        "persist_registration": "Controller{broker}->>Store", "grace_expire": "Controller{broker}->>Store",
        "deliver": "Segments->>Subscription{sub}"}
    hypothesis_bounds = {"segments": 2, "splits": 2, "merges": 1, "brokers": 3, "subs": 2, "new_subs": 1, "keys": 2,
                         "msgs": 4, "consumers": 2, "disconnects": 2, "failovers": 2}

    def __init__(self, config):
        super().__init__(config)
        v = config.variant
        order = list(STEPS)
        if v in ("mutant:cas-before-terminate", "mutant:cas-before-create"):
            order.remove(CAS)
            order.insert(order.index(TERMINATE if v.endswith("terminate") else CREATE), CAS)
        self.after = dict(zip(order, order[1:]))

    action_kinds = {"deliver": ("deliver",)}

    def action_names(self):
        cfg = self.config
        needs = {"request_split": cfg.splits, "request_merge": cfg.merges, "crash": cfg.failovers,
                 "lose_session": cfg.failovers, "learn_deposed": cfg.failovers,
                 "create_subscription": cfg.new_subs,
                 "propagate_subscription": cfg.new_subs, "connect": cfg.consumers, "disconnect": cfg.disconnects,
                 # one consumer's assignment changes only with the layout
                 "receive_assignment": cfg.consumers and (cfg.consumers > 1 or cfg.splits + cfg.merges),
                 "persist_registration": cfg.consumers,
                 "grace_expire": cfg.consumers and (cfg.disconnects or cfg.failovers),
                 # a CAS fails only on another writer's CAS: a second operation (op-intent runs one at a time),
                 # or, with subs-in-metadata, a subscription created while one runs
                 "cas_conflict": (cfg.splits + cfg.merges > 1 and "op-intent" not in self.fixes
                                  or cfg.new_subs and "subs-in-metadata" in self.fixes),
                 "layout_changed": "leader-watches-layout" in self.fixes and cfg.failovers and cfg.splits + cfg.merges,
                 "publish": cfg.msgs, "publish_rejected": cfg.msgs and cfg.splits + cfg.merges, "deliver": cfg.msgs,
                 "dag_update": cfg.splits + cfg.merges}
        return sorted(n for n in self.action_labels if needs.get(n, cfg.splits + cfg.merges))

    def init_states(self):
        c = self.config
        layout = SegmentLayout.create(c.segments)
        subs = frozenset(f"s{i}" for i in range(c.subs))
        cursors = FrozenMap((sub, 0) for sub in subs)
        return [State(
            version=0, layout=layout, lock=None, intent=(), subs=subs, registrations=FrozenMap(),
            topics=FrozenMap((seg.segment_id, Topic(cursors=cursors)) for seg in layout.segments),
            ctrls=(Controller(),) * c.brokers, view=layout, blocked=False, consumers=(Consumer(),) * c.consumers,
            splits=0, merges=0, failovers=0, disconnects=0, created=subs, sessions=frozenset(), acked=(), delivered=FrozenMap())]

    def handed(self, state, successor):
        return any(len(msgs) > len(state.delivered.get(sub, ())) for sub, msgs in successor.delivered.items())

    def is_terminal(self, state):
        """No split or merge is in flight: what is left is budgets spent, not a stuck protocol."""
        return not any(c.ops for c in state.ctrls)
