"""PIP-477 dynamic bookie cluster switching (plugin-first revision) as written: registration,
the switch directive and its watches, BUILD/PROMOTE/CLEANUP/ROLLBACK one step at a time,
broker restarts, topic moves, and publish/consume/markDelete/putSchema traffic throughout.

At the start the old cluster holds the topic's first data ledger (1, unstamped when
``legacy`` is set: written before the plugin was enabled), its cursor ledger (2) and a schema
ledger (3), all stamped ``old``; broker 0 owns the topic."""
from __future__ import annotations

from pulsar_verify.model import ComposedModel, Param, variants_of
from pulsar_verify.values import FrozenMap

from . import orchestrator, switch, traffic
from .state import (ACTIVE, ATTR_KEY, INITIAL_CURSOR, INITIAL_SCHEMA, LEGACY_DATA, NEW, OLD, USER_KEY, Broker,
                    CursorInfo, IndexEntry, Owned, State)

FIXES = {
    "fallback-to-source-cluster": "an unstamped ledger resolves to the cluster that was active before the first "
                                  "switch (recorded in the directive), not to the current active cluster",
    "recover-from-directive": "a restarting broker takes its active cluster from the switch directive when one "
                              "exists, not from the registry status that CLEANUP flips only at the end",
    "promote-built-only": "schema PROMOTE re-stamps only the index entries BUILD copied",
    "promote-cursor-at-copied-lac": "the owner refuses promote-cursor (409) when the cursor ledger has grown since "
                                    "BUILD copied it, and rolls a promoted cursor to a new ledger before its next "
                                    "markDelete",
    "single-cas-status-flip": "CLEANUP flips both cluster statuses in one metadata write",
    "fence-old-idgen": "the switch request first fences the old cluster's idgen-long at its next id, then advances "
                       "the new cluster's idgen past it (instead of only checking): a ledger created on the old "
                       "cluster from then on takes its id from the new cluster's idgen, past the fence",
    "close-after-data-expires": "close-client also waits until no ledger record still routes to the old cluster",
    "close-after-brokers-switched": "close-client also waits until every running broker has applied the directive",
    "rollback-only-to-readable-old": "ROLLBACK flips a ledger back only if the old cluster can serve it; the others "
                                     "stay on their new copy and the rollback ends reporting them in failedLedgers",
    "reserved-keys-rejected": "subscription-property writes under the reserved _pulsar. prefix are refused",
    "recopy-own-copy": "BUILD meeting LedgerExistException with a mismatching ledger that is its own copy (its custom "
                       "metadata is the source's) deletes it and copies the ledger again, instead of failing it",
}
MUTANTS = {
    "mutant:stamp-after-create": "new ledger records are written without their stamp (checks I1)",
    "mutant:blind-schema-promote": "schema PROMOTE puts the locator it read without a version (checks I3)",
    "mutant:read-through-active-client": "an open read handle reads each entry through the broker's current BK "
                                         "client, not the cluster it was opened on (checks I4)",
    "mutant:close-without-drain": "close-client does not wait for open handles (checks I5)",
    "mutant:old-reader-drops-unknown": "an old broker rewriting PositionInfo drops unknown fields (checks I7)",
    "mutant:copy-new-id": "BUILD copies a ledger under a fresh id (checks I8)",
    "mutant:promote-clears-cursor-props": "cursor PROMOTE keeps only the attribution property (checks I9)",
    "mutant:promote-resets-hash": "schema PROMOTE rebuilds entries without info.hash (checks I10)",
    "mutant:rollback-resets-hash": "schema ROLLBACK rebuilds entries without info.hash (checks "
                                   "rollback-keeps-business-znodes)",
    "mutant:build-new-entries": "BUILD also works on schema entries stamped with the new cluster "
                                "(checks failed-ledgers-from-old-cluster)",
    "mutant:no-precheck": "the switch skips the idgen precheck (checks I11, precheck-refuses-unadvanced-idgen)",
    "mutant:coordinator-promotes-cursor": "the orchestrator CASes cursor znodes itself (checks I13)",
    "mutant:every-broker-orchestrates": "every broker starts an orchestrator on the directive (checks I14)",
    "mutant:orchestrator-not-resumed": "a restarted origin broker does not resume its orchestrator (checks "
                                       "switch-completes)",
    "mutant:constructor-bk": "topic load opens the last ledger with the broker's start-up client (checks I15)",
    "mutant:trim-unacked": "retention drops the oldest ledger without waiting for its messages' acks "
                           "(checks unacked-messages-kept)",
    "mutant:rollback-keeps-version": "schema ROLLBACK writes the locator without bumping its version "
                                     "(checks locator-version-bumps)",
}
BUDGETS = ("publish", "roll", "put_schema", "move", "restart", "old_down", "rollback", "sub_property",
           "close_client")


class Pip477(ComposedModel):
    name = "pip-477"
    properties_from = "pulsar_verify.invariants.pip477"
    title = "PIP-477 bookie cluster switching: attribution, switch phases, BUILD/PROMOTE/CLEANUP/ROLLBACK, I1-I16"
    source = "shared/seeds/002_5d4f3e6345a1f8e3.txt"
    variants = variants_of("PIP-477 revision 2 (plugin-first) as written", FIXES, MUTANTS)
    modules = (switch, orchestrator, traffic)
    params = {
        "brokers": Param(2, "brokers", 1, 2),
        "legacy": Param(0, "the first data ledger predates the plugin (no stamp)", 0, 1),
        "new_idgen": Param(4, "the new cluster's idgen-long when registered (old holds ledgers 1-3)", 1, 8),
        "publish": Param(0, "messages published beyond the one already in ledger 1", 0, 2),
        "roll": Param(0, "voluntary ledger rollovers (data or cursor)", 0, 2),
        "put_schema": Param(0, "putSchema calls", 0, 2),
        "move": Param(0, "topic unloads (ownership moves)", 0, 2),
        "restart": Param(0, "broker restarts", 0, 2),
        "old_down": Param(0, "the old cluster may go down (Scenario A)", 0, 1),
        "rollback": Param(0, "the operator may roll back instead of cleaning up", 0, 1),
        "sub_property": Param(0, "subscription-property writes by users", 0, 2),
        "close_client": Param(0, "the operator may close the old BK client after DONE", 0, 1),
    }
    presets = {
        "default": {},
        "legacy": {"legacy": 1, "brokers": 1, "publish": 1},
        "restart": {"restart": 1},
        "schema": {"put_schema": 1},
        "cursor": {"move": 1, "brokers": 1},
        "cleanup": {"brokers": 1},
        "idgen": {"roll": 1, "put_schema": 1},
        "close": {"close_client": 1, "brokers": 1, "publish": 1, "roll": 1},
        "close-restart": {"close_client": 1, "brokers": 1, "restart": 1, "roll": 1},
        "close-lagging": {"close_client": 1, "brokers": 2, "move": 1},
        "sub-property": {"sub_property": 1, "move": 1, "brokers": 1},
        "rollback": {"rollback": 1, "brokers": 1, "move": 1},
        "old-down": {"old_down": 1, "brokers": 1, "move": 1},
        "rollback-old-down": {"rollback": 1, "old_down": 1, "brokers": 1, "move": 1},
        "two-brokers-close": {"brokers": 2, "move": 1, "close_client": 1, "publish": 1, "roll": 1},
        "two-brokers-rollback": {"brokers": 2, "move": 1, "restart": 1, "rollback": 1, "old_down": 1},
    }
    large_presets = ("two-brokers-close", "two-brokers-rollback")

    sequence = {
        "register": "Operator->>BrokerZK", "fence_idgen": "Operator->>Broker{broker}",
        "precheck": "Operator->>Broker{broker}", "switch": "Broker{broker}->>BrokerZK",
        "watch": "BrokerZK->>Broker{broker}",
        "restart": "Broker{broker}->>BrokerZK", "close_client": "Operator->>BK_old", "old_down": "BK_old->>BK_old",
        "build": "Broker{broker}->>BK_new", "build_add": "Broker{broker}->>BK_new",
        "build_record": "Broker{broker}->>BrokerZK", "promote_schema_read": "Broker{broker}->>BrokerZK",
        "promote_schema_cas": "Broker{broker}->>BrokerZK", "promote_schema_conflict": "BrokerZK->>Broker{broker}",
        "promote_cursor_send": "Broker{broker}->>Owner", "promote_cursor_handle": "Owner->>BrokerZK",
        "rollback_cursor_send": "Broker{broker}->>Owner", "start_cleanup": "Operator->>Broker{broker}",
        "start_rollback": "Operator->>Broker{broker}", "cleanup_delete": "Broker{broker}->>BK_old",
        "cleanup_status_old": "Broker{broker}->>BrokerZK", "cleanup_status_new": "Broker{broker}->>BrokerZK",
        "cleanup_status": "Broker{broker}->>BrokerZK", "rollback_schema": "Broker{broker}->>BrokerZK",
        "rollback_delete": "Broker{broker}->>BK_new", "rollback_done": "Broker{broker}->>BrokerZK",
        "publish": "Client->>Broker{broker}", "roll_ledger": "Broker{broker}->>BrokerZK",
        "open_ledger": "Broker{broker}->>Broker{broker}", "read_entry": "Broker{broker}->>BK_{cluster}",
        "mark_delete": "Client->>Broker{broker}", "cursor_rollover": "Broker{broker}->>BrokerZK",
        "set_sub_property": "Client->>Broker{broker}", "put_schema_start": "Client->>Broker{broker}",
        "put_schema_cas": "Broker{broker}->>BrokerZK", "put_schema_conflict": "BrokerZK->>Broker{broker}",
        "read_schema": "Client->>Broker{broker}", "trim_ledger": "Broker{broker}->>BK_{cluster}",
        "unload_topic": "Broker{broker}->>Broker{broker}", "load_topic": "Broker{broker}->>BrokerZK"}
    hypothesis_bounds = {"brokers": 2, "legacy": 1, "publish": 2, "roll": 2, "put_schema": 2, "move": 2, "restart": 1,
                         "old_down": 1, "rollback": 1, "sub_property": 1, "close_client": 1}

    action_kinds = {"deliver": ("read_entry",)}

    def action_names(self):
        cfg, fixed = self.config, self.fixes
        needs = {"restart": cfg.restart, "old_down": cfg.old_down, "close_client": cfg.close_client,
                 "publish": cfg.publish, "set_sub_property": cfg.sub_property, "unload_topic": cfg.move,
                 "put_schema_start": cfg.put_schema, "put_schema_cas": cfg.put_schema,
                 "put_schema_conflict": cfg.put_schema and cfg.brokers > 1,
                 "promote_schema_conflict": cfg.put_schema, "load_topic": cfg.move or cfg.restart,
                 "start_rollback": cfg.rollback, "rollback_schema": cfg.rollback,
                 "rollback_cursor_send": cfg.rollback, "rollback_delete": cfg.rollback, "rollback_done": cfg.rollback,
                 "roll_ledger": cfg.roll or cfg.move or cfg.restart or cfg.old_down or cfg.close_client,
                 "trim_ledger": cfg.roll or cfg.move or cfg.restart or cfg.old_down or cfg.close_client,
                 "cursor_rollover": True, "mark_delete": True, "read_schema": True,
                 "fence_idgen": "fence-old-idgen" in fixed, "cleanup_status": "single-cas-status-flip" in fixed,
                 "cleanup_status_old": "single-cas-status-flip" not in fixed,
                 "cleanup_status_new": "single-cas-status-flip" not in fixed}
        return sorted(n for n in self.action_labels if needs.get(n, True))

    def init_states(self):
        c = self.config
        data_stamp = None if c.legacy else OLD
        cursor = CursorInfo(ledger=INITIAL_CURSOR, md=0, props=FrozenMap({ATTR_KEY: OLD, USER_KEY: "a"}))
        return [State(
            registry=FrozenMap({OLD: ACTIVE}), directive=None, progress=None,
            bk=FrozenMap({OLD: FrozenMap({LEGACY_DATA: (0,), INITIAL_CURSOR: (0,), INITIAL_SCHEMA: (INITIAL_SCHEMA,)}),
                          NEW: FrozenMap()}),
            idgen=FrozenMap({OLD: 4, NEW: c.new_idgen}), alive=frozenset({OLD, NEW}), closed=frozenset(),
            ml=((LEGACY_DATA, data_stamp),), cursor=cursor,
            schema=(IndexEntry(ledger=INITIAL_SCHEMA, entry=0, attr=OLD, schema_version=0, hash=INITIAL_SCHEMA),),
            schema_version=0, brokers=(Broker(),) * c.brokers, owner=0,
            own=Owned(write=(LEGACY_DATA, OLD), cursor=(INITIAL_CURSOR, OLD), info=cursor, md=0), rpc=(),
            budget=FrozenMap({k: getattr(c, k) for k in BUDGETS}), fenced=None, msgs=(LEGACY_DATA,),
            allocated=FrozenMap({OLD: frozenset({1, 2, 3}), NEW: frozenset()}))]

    def handed(self, state, successor):
        return successor.consumed > state.consumed

    def is_terminal(self, state):
        """The switch never started, or it ended (DONE or rolled back): the rest is spent budgets."""
        p = state.progress
        return state.directive is None or (p is not None and p.phase in ("done", "rolled-back"))
