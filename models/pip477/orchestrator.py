"""``BookieClusterSwitchOrchestrator`` on the origin broker: BUILD, PROMOTE, CLEANUP and
ROLLBACK (PIP-477 Phases 4-7), one ledger or one metadata CAS per step, and the topic
owner's side of the promote-cursor RPC. Schema PROMOTE's read and CAS are separate steps
(a BadVersion sends it back to the read; a conflict needs a concurrent putSchema, so the
five-retry bound is never reached at the model's bounds)."""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, replace

from .routing import allocate, bk_delete, bk_put, readable, source_of
from .state import ACTIVE, ATTR_KEY, DEPRECATED, NEW, OLD, State, with_broker


def candidates(s: State):
    """BUILD's work list: each schema index entry and the cursor ledger whose stamp (or, for an
    unstamped one, the cluster active at first write) is the old cluster."""
    p = s.progress
    done = set(p.built.keys()) | p.failed
    out = [(lid, "schema") for lid in sorted({e.ledger for e in s.schema if (e.attr or source_of(s)) == OLD})]
    if (s.cursor.attr or source_of(s)) == OLD:
        out.append((s.cursor.ledger, "cursor"))
    return [(lid, kind) for lid, kind in out if lid not in done]


def to_promote(m, s: State) -> list:
    """Schema entries PROMOTE flips: "if (readClusterAttr(ie.position).equals(oldCluster))" --
    every entry stamped old. Variant promote-built-only: only entries BUILD copied."""
    built = s.progress.built
    return [e for e in s.schema if e.attr == OLD and ("promote-built-only" not in m.fixes or e.ledger in built)]


def promote_pending(m, s: State) -> bool:
    p = s.progress
    built_old = any(e.attr == OLD and e.ledger in p.built for e in s.schema)
    return built_old or any(c not in p.sent for c in p.cursors) or bool(s.rpc)


def actions(m, s: State):
    p = s.progress
    if p is None:
        return
    todo = candidates(s) if p.phase == "build" else []
    for b, x in enumerate(s.brokers):
        if not (x.up and x.orchestrator):
            continue
        if p.phase == "build":
            for lid, kind in todo:
                if lid not in x.copies:
                    yield act("build", broker=b, ledger=lid, kind=kind)
            for lid, (_, n, dst) in x.copies.items():
                yield act("build_add" if len(s.bk[NEW].get(dst, ())) < n else "build_record", broker=b, ledger=lid)
            if m.config.variant == "mutant:build-new-entries":
                for lid in sorted({e.ledger for e in s.schema if e.attr == NEW} - set(p.built.keys()) - p.failed):
                    yield act("build", broker=b, ledger=lid, kind="schema")
            if x.promote_read is None:
                if any(e.ledger in p.built for e in to_promote(m, s)):
                    yield act("promote_schema_read", broker=b)
            elif x.promote_read[0] == s.schema_version or m.config.variant == "mutant:blind-schema-promote":
                yield act("promote_schema_cas", broker=b)
            else:
                yield act("promote_schema_conflict", broker=b)
            for lid in p.cursors:
                if lid not in p.sent:
                    yield act("promote_cursor_send", broker=b, ledger=lid)
            if not todo and not promote_pending(m, s) and x.promote_read is None:
                yield act("start_cleanup", broker=b)
                if s.budget.get("rollback", 0):
                    yield act("start_rollback", broker=b)
        elif p.phase == "cleanup":
            stale = [lid for lid in sorted(p.promoted) if lid in s.bk[OLD]]
            for lid in stale:
                if OLD in s.alive:
                    yield act("cleanup_delete", broker=b, ledger=lid)
            if not stale or OLD not in s.alive:
                if "single-cas-status-flip" in m.fixes:
                    yield act("cleanup_status", broker=b)
                else:
                    yield act("cleanup_status_old" if p.status_flips == 0 else "cleanup_status_new", broker=b)
        elif p.phase == "rollback":
            if any(e.ledger in p.promoted and e.attr == NEW and may_revert(m, s, e.ledger) for e in s.schema):
                yield act("rollback_schema", broker=b)
            cur = s.cursor
            if cur.ledger in p.promoted and cur.attr == NEW and not s.rpc and may_revert(m, s, cur.ledger):
                yield act("rollback_cursor_send", broker=b, ledger=cur.ledger)
            copies = [lid for lid in sorted(p.promoted) if lid in s.bk[NEW] and not routed_to_new(s, lid)]
            for lid in copies:
                yield act("rollback_delete", broker=b, ledger=lid)
            if not copies and not s.rpc and not any(routed_to_new(s, lid) and may_revert(m, s, lid)
                                                    for lid in p.promoted):
                yield act("rollback_done", broker=b)
    if s.rpc:
        yield act("promote_cursor_handle", ledger=s.rpc[0][0], target=s.rpc[0][1])


def may_revert(m, s: State, lid: int) -> bool:
    """Whether ROLLBACK routes ledger ``lid`` back to the old cluster: as written, always. Fix
    rollback-only-to-readable-old: only if the old cluster can serve it (up, client open, the
    ledger there), checked in the step that flips it; otherwise it stays on the new copy."""
    return "rollback-only-to-readable-old" not in m.fixes or readable(s, OLD, lid)


def routed_to_new(s: State, lid: int) -> bool:
    return (s.cursor.ledger == lid and s.cursor.attr == NEW) or any(
        e.ledger == lid and e.attr == NEW for e in s.schema)


def _progress(s: State, **changes) -> State:
    return replace(s, progress=replace(s.progress, **changes))


def build(m, s: State, a):
    """Phase 4 BUILD of one ledger, its first step: ``copyLedgerPreservingIds`` --
    ``asyncCreateLedgerAdv(ledgerId)`` on the new cluster, which reads the source's
    ``lastAddConfirmed`` (the entries to copy, kept in the orchestrator's memory) and creates an
    empty ledger under the same id. On ``LedgerExistException`` ("BUILD retry / partial prior
    run"), ``verifyDstMatchesSrc`` compares LAC and length: a match is an idempotent copy, recorded
    as built; a mismatch goes to ``failedLedgers``, and so does an unreadable source. Fix
    recopy-own-copy: a mismatching ledger that is BUILD's own copy (its custom metadata is the
    source's; in the model, an id the new cluster's idgen never handed out) is deleted, and the next
    BUILD step copies it again. (Mutant copy-new-id: the copy takes a fresh id from the new
    cluster's idgen.)"""
    b, lid, kind = a.param("broker"), a.param("ledger"), a.param("kind")
    p = s.progress
    if not readable(s, OLD, lid, 0):
        return _progress(s, failed=p.failed | {lid})
    src = s.bk[OLD][lid]
    if lid in s.bk[NEW]:
        if len(s.bk[NEW][lid]) == len(src):
            return _record(s, lid, kind, len(src))
        if "recopy-own-copy" in m.fixes and lid not in s.allocated[NEW]:
            return bk_delete(s, NEW, lid)
        return _progress(s, failed=p.failed | {lid})
    dst = lid
    if m.config.variant == "mutant:copy-new-id":
        s, dst = allocate(s, NEW)
    s = bk_put(s, NEW, dst, ())
    return with_broker(s, b, copies=s.brokers[b].copies.set(lid, (kind, len(src), dst)))


def build_add(m, s: State, a):
    """BUILD: ``newLh.addEntry(entryId, srcEntry)`` -- the next entry read from the source and
    written to the copy under the same entry id (a restart between two leaves a partial copy on the
    new cluster). A source entry that cannot be read fails the ledger, as an unreadable source does.
    A copy another orchestrator deleted meanwhile fails the write, and the copy is dropped (the ledger
    stays on BUILD's work list): only past an I14 violation, two orchestrators with fix recopy-own-copy
    (mutant every-broker-orchestrates, its other properties checked on their own)."""
    b, lid = a.param("broker"), a.param("ledger")
    x = s.brokers[b]
    _, _, dst = x.copies[lid]
    if dst not in s.bk[NEW]:
        return with_broker(s, b, copies=x.copies.remove(lid))
    done = s.bk[NEW][dst]
    if not readable(s, OLD, lid, len(done) + 1):
        s = with_broker(s, b, copies=x.copies.remove(lid))
        return _progress(s, failed=s.progress.failed | {lid})
    return bk_put(s, NEW, dst, done + (s.bk[OLD][lid][len(done)],))


def build_record(m, s: State, a):
    """BUILD's last step for a ledger: ``newLh.close()`` and the ledger recorded as built in the
    orchestrator's progress. Merged: the close with the record. Nothing reads the copy before
    PROMOTE, and a copy a restart leaves unclosed is closed by the recovery of the next open
    (``verifyDstMatchesSrc``), at the entries it holds, which the close would have written."""
    b, lid = a.param("broker"), a.param("ledger")
    x = s.brokers[b]
    kind, n, _ = x.copies[lid]
    return _record(with_broker(s, b, copies=x.copies.remove(lid)), lid, kind, n)


def _record(s: State, lid: int, kind: str, entries: int) -> State:
    """Ledger ``lid`` recorded as built with ``entries`` entries (a cursor ledger also in the list
    cursor PROMOTE works through, once: past an I14 violation, two orchestrators may both record it)."""
    p = s.progress
    listed = kind == "cursor" and lid not in p.cursors
    return _progress(s, built=p.built.set(lid, entries), cursors=p.cursors + ((lid,) if listed else ()))


def promote_schema_read(m, s: State, a):
    """Schema PROMOTE: ``(locator, version) = brokerZk.getWithVersion("/schemas/<schemaId>")``."""
    return with_broker(s, a.param("broker"), promote_read=(s.schema_version, s.schema))


def flip(entries: tuple, ledgers: set, to: str, mutant: bool = False) -> tuple:
    """The index with the attribution of the given ledgers' entries set to ``to`` (mutants
    promote-resets-hash, rollback-resets-hash: the rebuilt entry also loses its ``info.hash``)."""
    return tuple(replace(e, attr=to, hash=0 if mutant else e.hash) if e.ledger in ledgers else e for e in entries)


def promote_schema_cas(m, s: State, a):
    """Schema PROMOTE: ``brokerZk.put("/schemas/<schemaId>", updated, version)`` where ``updated``
    is the index read with every entry stamped old re-stamped new (mutant blind-schema-promote:
    the put carries no version, I3)."""
    b = a.param("broker")
    version, read = s.brokers[b].promote_read
    view = replace(s, schema=read)
    ledgers = {e.ledger for e in to_promote(m, view)}
    blind = version != s.schema_version
    s = replace(s, schema=flip(read, ledgers, NEW, m.config.variant == "mutant:promote-resets-hash"),
                schema_version=s.schema_version + 1, zk_writes=s.zk_writes + blind)
    s = _progress(s, promoted=s.progress.promoted | ledgers)
    return with_broker(s, b, promote_read=None)


def promote_schema_conflict(m, s: State, a):
    """Schema PROMOTE: ``catch (BadVersionException) { continue; }`` -- back to the read."""
    return with_broker(s, a.param("broker"), promote_read=None)


def promote_cursor_send(m, s: State, a):
    """Cursor PROMOTE: ``POST {ownerUrl}/admin/v2/bookie-clusters/internal/promote-cursor`` with
    ``expectedCursorsLedgerId``. (Mutant coordinator-promotes-cursor: the orchestrator CASes the
    cursor znode itself, I13.)"""
    lid = a.param("ledger")
    s = _progress(s, sent=s.progress.sent | {lid})
    if m.config.variant == "mutant:coordinator-promotes-cursor":
        if s.cursor.ledger != lid:
            return _progress(s, fallback=s.progress.fallback | {lid})
        cur = s.cursor
        s = replace(s, cursor=replace(cur, props=cur.props.set(ATTR_KEY, NEW), version=cur.version + 1))
        return _progress(s, promoted=s.progress.promoted | {lid})
    return replace(s, rpc=s.rpc + ((lid, NEW),))


def rollback_cursor_send(m, s: State, a):
    """Phase 7: the reverse-CAS of the cursor's attribution, forwarded to the owner like PROMOTE."""
    return replace(s, rpc=s.rpc + ((a.param("ledger"), OLD),))


def promote_cursor_handle(m, s: State, a):
    """The owner's ``AdditionalServlet`` handler, inside ``synchronized (cursor)``: 409 if
    ``cursorsLedgerId != expectedCursorsLedgerId`` (recorded promotedViaRolloverFallback); else
    ``cursorProperties`` rewritten with the attribution entry replaced and the update CASed at
    the owner's version. No owner loaded: the request fails (recorded in failedLedgers).
    Variant promote-cursor-at-copied-lac: also 409 when the cursor ledger has grown past the
    copy, and a promoted cursor rolls its ledger before its next markDelete (the copy is closed).
    (Mutant promote-clears-cursor-props: the rewrite keeps only the attribution entry, I9.)"""
    lid, target = a.param("ledger"), a.param("target")
    s = replace(s, rpc=s.rpc[1:])
    p, o = s.progress, s.own
    if o is None:
        return _progress(s, failed=p.failed | {lid})
    if o.info.ledger != lid:
        return _progress(s, fallback=p.fallback | {lid})
    grown = len(s.bk[OLD].get(lid, ())) != p.built.get(lid)
    if target == NEW and "promote-cursor-at-copied-lac" in m.fixes and grown:
        return _progress(s, fallback=p.fallback | {lid})
    if target == OLD and not may_revert(m, s, lid):
        return _progress(s, failed=p.failed | {lid})
    props = o.info.props.set(ATTR_KEY, target)
    if m.config.variant == "mutant:promote-clears-cursor-props":
        props = FrozenMap({ATTR_KEY: target})
    info = replace(s.cursor, props=props, version=s.cursor.version + 1)
    roll = o.must_roll or (target == NEW and "promote-cursor-at-copied-lac" in m.fixes)
    s = replace(s, cursor=info, own=replace(o, info=info, must_roll=roll))
    if target == NEW:
        return _progress(s, promoted=p.promoted | {lid})
    return _progress(s, reverted=p.reverted | {lid})


def start_cleanup(m, s: State, a):
    """Phase 6: "After the rollback window elapses, or upon explicit ``cleanup``"."""
    return _progress(s, phase="cleanup")


def start_rollback(m, s: State, a):
    """Phase 7: the operator triggers ROLLBACK within the window."""
    return replace(_progress(s, phase="rollback"), budget=s.budget.set("rollback", 0))


def cleanup_delete(m, s: State, a):
    """Phase 6.1: "Delete old-cluster ledgers via ``oldBk.asyncDeleteLedger(ledgerId)``" -- the
    old copies of the promoted ledgers."""
    return bk_delete(s, OLD, a.param("ledger"))


def cleanup_status_old(m, s: State, a):
    """Phase 6.2, first of "two sequential CAS": ``oldCluster.status = DEPRECATED``."""
    return _progress(replace(s, registry=s.registry.set(OLD, DEPRECATED)), status_flips=1)


def cleanup_status_new(m, s: State, a):
    """Phase 6.2, second CAS: ``newCluster.status = ACTIVE``; the orchestrator is DONE."""
    return _progress(replace(s, registry=s.registry.set(NEW, ACTIVE)), status_flips=2, phase="done")


def cleanup_status(m, s: State, a):
    """Variant single-cas-status-flip: both statuses change in one metadata write."""
    return _progress(replace(s, registry=s.registry.set(OLD, DEPRECATED).set(NEW, ACTIVE)), status_flips=2,
                     phase="done")


def rollback_schema(m, s: State, a):
    """Phase 7: "The reverse-CAS flips the attribution property back to ``oldCluster``" (read and
    CAS in one step: a conflicting putSchema only appends entries this flip leaves alone). Fix
    rollback-only-to-readable-old: only the ledgers the old cluster can serve."""
    mutant = m.config.variant == "mutant:rollback-resets-hash"
    p = s.progress
    ledgers = {e.ledger for e in s.schema if e.ledger in p.promoted and may_revert(m, s, e.ledger)}
    version = s.schema_version if m.config.variant == "mutant:rollback-keeps-version" else s.schema_version + 1
    s = replace(s, schema=flip(s.schema, ledgers, OLD, mutant), schema_version=version)
    return _progress(s, reverted=p.reverted | ledgers)


def rollback_delete(m, s: State, a):
    """Phase 7: "new-cluster ledgers are scheduled for delayed deletion"."""
    return bk_delete(s, NEW, a.param("ledger"))


def rollback_done(m, s: State, a):
    """Phase 7 ends; fix rollback-only-to-readable-old: the ledgers left on the new cluster because
    the old one could not serve them are reported in ``failedLedgers``."""
    p = s.progress
    return _progress(s, phase="rolled-back", failed=p.failed | {lid for lid in p.promoted if routed_to_new(s, lid)})


APPLY = {"build": build, "build_add": build_add, "build_record": build_record,
         "promote_schema_read": promote_schema_read, "promote_schema_cas": promote_schema_cas,
         "promote_schema_conflict": promote_schema_conflict, "promote_cursor_send": promote_cursor_send,
         "promote_cursor_handle": promote_cursor_handle, "start_cleanup": start_cleanup,
         "start_rollback": start_rollback, "cleanup_delete": cleanup_delete,
         "cleanup_status_old": cleanup_status_old, "cleanup_status_new": cleanup_status_new,
         "cleanup_status": cleanup_status, "rollback_schema": rollback_schema,
         "rollback_cursor_send": rollback_cursor_send, "rollback_delete": rollback_delete,
         "rollback_done": rollback_done}
