"""Properties of PIP-477: every row I1-I16 of "Critical Invariants", named by its number, with
its consequence column as what a user loses; then what "Data Plane Continuity" and the rollout
plan promise users."""
from __future__ import annotations

from pulsar_verify.model import PropertySet
from pulsar_verify.models.pip477.model import Pip477
from pulsar_verify.models.pip477.proto import survives_old_broker
from pulsar_verify.models.pip477.routing import create_cluster, creatable, readable, records, resolve
from pulsar_verify.models.pip477.state import ACTIVE, ATTR_KEY, LEGACY_DATA, NEW, OLD
from pulsar_verify.models.pip477.switch import open_handles
from pulsar_verify.models.pip477.traffic import writable

PROPERTIES = PropertySet()


TABLE = "Critical Invariants"
DROPS_UNKNOWN = "mutant:old-reader-drops-unknown"


def i1(m, s):
    return all(attr is not None for kind, lid, attr in records(s) if not (kind == "data" and lid == LEGACY_DATA))


def i2(m, s):
    return not s.failures


def i3(m, s):
    return s.zk_writes == 0 and len(s.schema) == s.schemas_acked


def i4(m, s, a, t):
    return a.param("cluster") == s.own.read[1]


def i5(m, s, a, t):
    return a.param("cluster") not in open_handles(s)


def i6(m, s):
    d = s.directive
    expected = d[0] if d is not None else next((c for c, st in s.registry.items() if st == ACTIVE), None)
    return all(x.active == expected for x in s.brokers if x.up and (d is None or x.epoch == d[2]))


def i7(m, s):
    # The old broker's rewrite (proto.old_broker_rewrite) asks of the variant only whether it is the mutant
    # that drops unknown fields. Asked here, the cache's key is a plain name, not the variant itself, which
    # would make the run depend on the whole variant (pulsar_verify.asked).
    variant = DROPS_UNKNOWN if m.config.variant == DROPS_UNKNOWN else "as-written"
    return all(survives_old_broker(e.ledger, e.entry, ((ATTR_KEY, e.attr),) if e.attr else (), variant)
               for e in s.schema)


def i8(m, s):
    p = s.progress
    if p is None:
        return True
    for kind, lid, attr in records(s):  # topic data ledgers are never copied
        if kind != "data" and attr == NEW and lid in p.built:
            copy, source = s.bk[NEW].get(lid), s.bk[OLD].get(lid, ())
            if copy is None or copy[:len(source)] != source:
                return False
    return True


def i9(m, s, a, t):
    return t.cursor.business() == s.cursor.business()


def i10(m, s, a, t):
    return [e.business() for e in t.schema[:len(s.schema)]] == [e.business() for e in s.schema]


def i11(m, s):
    return not (s.allocated[OLD] & s.allocated[NEW])


def i12(m, s):
    return sum(1 for _, st in s.registry.items() if st == ACTIVE) == 1


def i13(m, s):
    return s.own is None or s.own.info == s.cursor


def i14(m, s):
    """Checked where it is decided: a broker other than the directive's origin that starts an orchestrator
    (Phase 3 step 4: "Non-origin brokers do not start an orchestrator") would run schema BUILD, PROMOTE
    and CLEANUP there; stated over the state, the run stops at that broker's watch or restart, so a
    variant that breaks it is not explored through every interleaving of two orchestrators."""
    return s.directive is None or all(b == s.directive[1] for b, x in enumerate(s.brokers) if x.orchestrator)


def i15(m, s, a, t):
    record = s.ml[-1] if a.name == "load_topic" else s.ml[0]
    return a.param("cluster") == resolve(m, s, record[1], a.param("broker"))


def i16(m, s):
    return all(k != ATTR_KEY or v in (OLD, NEW) for k, v in s.cursor.props.items())


def position_kept(m, s):
    return s.own is None or s.own.md >= s.acked_md


def no_publish_pause(m, s):
    o = s.own
    return o is None or writable(s, o.write) or creatable(m, s, s.owner) or create_cluster(m, s, s.owner) not in s.alive


def unacked_kept(m, s):
    kept = {lid for lid, _ in s.ml}
    return all(s.msgs[k] in kept for k in range(s.acked_md, len(s.msgs)))


def locator_version_bumps(m, s, a, t):
    return t.schema == s.schema or t.schema_version > s.schema_version


def rollback_keeps_reads(m, s, a, t):
    back = {lid for _, lid, attr in records(s) if attr == NEW} - {lid for _, lid, attr in records(t) if attr == NEW}
    return all(readable(s, OLD, lid) for lid in back)


def rollback_keeps_business(m, s, a, t):
    if s.progress is None or s.progress.phase != "rollback":
        return True
    return (t.cursor.business() == s.cursor.business()
            and [e.business() for e in t.schema] == [e.business() for e in s.schema] and t.ml == s.ml)


P = PROPERTIES
P.invariant("I1", "Every ledger record written since the plugin was enabled carries its cluster stamp "
            "(misattribution: reads routed to the wrong cluster)",
            f"{TABLE} I1; Write-Path Stamping: 'written in the same Broker-ZK CAS as the business field'")(i1)
P.invariant("I2", "Every read of a ledger (topic data, cursor recovery, schema) succeeds while a live cluster holds "
            "it: old ledgers stay readable at every phase (production incident)",
            f"{TABLE} I2; Data Plane Continuity: 'reads of historical data continue against the old cluster'")(i2)
P.invariant("I3", "No Broker-ZK update is lost: every putSchema acknowledged is in the locator and no write "
            "skipped its version check (lost "
            "update)", f"{TABLE} I3; Schema PROMOTE; Concurrent putSchema and PROMOTE")(i3)
P.action_property("I4", "Every entry of one read comes through the cluster chosen when its handle was opened "
                  "(NoSuchLedger / partial read)", f"{TABLE} I4; Read-Path Routing", about=("deliver",))(i4)
P.action_property("I5", "The old BK client is closed only when no handle is bound to it (cascading read failures)",
                  f"{TABLE} I5; Phase 6.3", on=("close_client",))(i5)
P.invariant("I6", "A broker that has applied the current switch state (or restarted since) has the active cluster "
            "Broker-ZK records: the directive's target, or the ACTIVE cluster before any switch (startup anomaly)",
            f"{TABLE} I6; Wiring on Broker Start 2")(i6)
P.invariant("I7", "Every schema PositionInfo, encoded with the new field and rewritten by an old broker, decodes "
            "unchanged (compatibility break)", f"{TABLE} I7; S3; Backward & Forward Compatibility")(i7)
P.invariant("I8", "A ledger routed to the new cluster after BUILD is there under the same id with every entry the "
            "old copy has, at the same entry ids (routing chaos / consumer divergence)", f"{TABLE} I8; Phase 4")(i8)
P.action_property("I9", "Cursor PROMOTE (and its rollback) changes only the attribution entry of cursorProperties "
                  "(consumption position lost or rewound)", f"{TABLE} I9; Cursor PROMOTE",
                  on=("promote_cursor_handle", "promote_cursor_send"))(i9)
P.action_property("I10", "Schema PROMOTE (and its rollback) changes only PositionInfo.properties[ATTR_KEY] "
                  "(rollback impossible / historical reads broken)", f"{TABLE} I10; Schema PROMOTE",
                  on=("promote_schema_cas", "rollback_schema"))(i10)
P.invariant("I11", "No ledger id is handed out by both clusters' idgen (new ledger creation collides with a "
            "migrated ledgerId)", f"{TABLE} I11; Phase 2")(i11)


@P.action_property("precheck-refuses-unadvanced-idgen", "The switch request's precheck passes only when the new "
                   "cluster's idgen is past every ledger id of the source cluster; otherwise the operator gets "
                   "HTTP 409 and nothing changes", "Phase 2: 'verifies the new cluster's /ledgers/idgen-long is "
                   "advanced beyond max(ledgerId) of the source cluster ... failure returns HTTP 409'",
                   on=("precheck",))
def precheck_refuses_unadvanced_idgen(m, s, a, t):
    # stated here, not through switch.idgen_advanced, which mutant:no-precheck makes always true
    return t.idgen[NEW] > max(t.bk[OLD].keys(), default=0)


P.invariant("I12", "Broker-ZK has exactly one cluster with status=ACTIVE (split-brain on activeClusterName)",
            f"{TABLE} I12; Phase 6.2; Key Principles")(i12)
P.invariant("I13", "The topic owner's in-memory ManagedCursorInfo equals the cursor znode (owner desynchronized "
            "from ZK)", f"{TABLE} I13; Cursor PROMOTE (forwarded to topic owner)")(i13)
P.invariant("I14", "Only the directive's origin broker runs the orchestrator, so schema BUILD/PROMOTE/CLEANUP run "
            "there centrally (cross-broker scheduling)", f"{TABLE} I14; Phase 3 step 4; Schema Ledger BUILD "
            "(centralized)")(i14)
P.action_property("I15", "The delete path and the first open of the last ledger on topic load route by the ledger's "
                  "attribution, not the constructor-captured client (NoSuchLedger: orphan bytes / topic load "
                  "failure)", f"{TABLE} I15; S2", on=("load_topic", "trim_ledger"))(i15)
P.invariant("I16", "A key under the reserved _pulsar. prefix holds only what Pulsar core wrote (property collision)",
            f"{TABLE} I16; Reserved Property Key")(i16)
P.invariant("position-not-rewound", "A consumer's acknowledged position survives topic moves and restarts: the "
            "recovered markDelete position is never behind the last one confirmed",
            "Data Plane Continuity: 'markDelete ... Continues'; I9 consequence")(position_kept)
P.invariant("no-publish-pause", "The topic owner can always write unless the cluster it writes to is down: its "
            "ledger is writable or it can create "
            "one", "Safety Guarantees: 'No publish/consume pause'")(no_publish_pause)
P.invariant("unacked-messages-kept", "Retention never drops a ledger holding a message the subscription has not "
            "acknowledged: every message past the confirmed markDelete position is in a ledger of the topic",
            "Motivation: 'Topic Data Ledgers age out naturally via TTL/Retention'; primer: 'retention keeps "
            "data after it is acknowledged'")(
    unacked_kept)


@P.invariant("failed-ledgers-from-old-cluster", "failedLedgers names only ledgers the old cluster created: a switch "
             "never reports as failed a ledger it had nothing to move",
             "Phase 4 BUILD: 'if cluster == oldCluster: LedgerCopyUtil.copyLedgerPreservingIds'; Failure Handling: "
             "'Source ledger unreadable', 'LedgerExistException + LAC mismatch': 'Record in failedLedgers'")
def failed_ledgers_from_old_cluster(m, s):
    return s.progress is None or s.progress.failed <= s.allocated[OLD] | s.borrowed


@P.action_property("build-idempotent", "BUILD is idempotent across broker restarts: it reports a ledger failed only "
                   "when the old cluster cannot serve the source or the new cluster holds another ledger under its "
                   "id, never because of a copy of its own that a restart interrupted or that the source outgrew "
                   "before it was recorded (such a ledger could never be moved: every retried switch fails it again)",
                   "Phase 4: 'Idempotency on LedgerExistException' ('BUILD retry / partial prior run'); Failure "
                   "Handling: BUILD rows, 'operator can retry switch'; PROMOTE row: 'orchestrator is idempotent'",
                   on=("build", "build_add"))
def build_idempotent(m, s, a, t):
    lid = a.param("ledger")
    newly = lid in t.progress.failed and lid not in s.progress.failed
    return not newly or not readable(s, OLD, lid, 0) or lid in s.allocated[NEW]


P.action_property("locator-version-bumps", "Every write of the SchemaLocator znode bumps its version, so a "
                  "conditional write that read the one before fails (the write PROMOTE and ROLLBACK make included)",
                  "Concurrent putSchema and PROMOTE: 'concurrent putSchema writes are naturally serialized via the "
                  "/schemas/<schemaId> znode CAS'")(
    locator_version_bumps)
P.action_property("rollback-keeps-business-znodes", "ROLLBACK leaves the business fields of the ledger list, cursor "
                  "and schema znodes byte-for-byte unchanged",
                  "Rollout P6: 'Broker-ZK business znodes byte-for-byte unchanged'; Phase 7",
                  on=("rollback_schema", "rollback_delete", "promote_cursor_handle", "rollback_done"))(
    rollback_keeps_business)

P.action_property("rollback-keeps-reads", "ROLLBACK routes a ledger back to the old cluster only where the old "
                  "cluster can serve it when the flip is made: a schema or cursor readable on its new copy stays "
                  "readable", "Rollout P5 (Scenario A, old cluster down): 'Already-migrated Schema/Cursor still "
                  "readable'; P6: 'reads route back to old cluster'; Phase 7",
                  on=("rollback_schema", "promote_cursor_handle"))(rollback_keeps_reads)


def switch_unfinished(m, s):
    return s.directive is not None and (s.progress is None or s.progress.phase not in ("done", "rolled-back"))


# Weak fairness: the brokers' plugin and orchestrator steps, watch delivery, the owner's handler and topic loads;
# not what the operator, clients and failures do.
ENVIRONMENT = {"register", "fence_idgen", "precheck", "restart", "old_down", "close_client", "start_rollback",
               "publish", "roll_ledger", "open_ledger", "read_entry", "mark_delete", "cursor_rollover",
               "set_sub_property", "put_schema_start", "read_schema", "trim_ledger", "unload_topic"}
P.leads_to("switch-completes", "A switch the operator triggered ends: the orchestrator reaches DONE (with or "
           "without failures), or ROLLED_BACK after the operator's rollback",
           "Switch Phases: 'BUILD_PROMOTE_CLEANUP ... DONE / DONE_WITH_FAILURES'; Phase 7",
           trigger=switch_unfinished,
           fair=tuple(sorted(set(Pip477.action_labels) - ENVIRONMENT)))
