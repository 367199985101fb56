"""Traffic that runs through a switch (PIP-477 "Data Plane Continuity"): publish and ledger
rollover, the consumer's reads through a handle bound at open (I4), markDelete and cursor
ledger rollover, putSchema and schema reads from any broker, topic unload and load on
another broker (first open of the last ledger and cursor recovery, I15), and users setting
subscription properties (stored in ``cursorProperties``, I16).

One topic with one subscription; message k is the k-th entry appended to the topic. A write
that fails (its cluster is down or its client closed) makes the managed ledger roll over,
which is the ``roll_ledger`` / ``cursor_rollover`` step."""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from .routing import (allocate, bk_delete, bk_put, create_cluster, creatable, failed_read, reachable, readable,
                      resolve, startup_cluster)
from .state import ATTR_KEY, USER_KEY, CursorInfo, IndexEntry, Owned, State
from .switch import left, spend


def writable(s: State, handle) -> bool:
    return handle is not None and handle[1] in s.alive and handle[1] not in s.closed and handle[0] in s.bk[handle[1]]


def next_message(s: State):
    """(ledger, entries before it in that ledger) of the next message the consumer reads, or None."""
    if s.consumed >= len(s.msgs):
        return None
    lid = s.msgs[s.consumed]
    if lid not in dict(s.ml):  # trimmed: only after a rewind below the trimmed position
        return None
    return lid, s.msgs[:s.consumed].count(lid)


def actions(m, s: State):
    o, b = s.own, s.owner
    if o is not None:
        if left(s, "publish") and writable(s, o.write):
            yield act("publish", broker=b)
        if left(s, "roll") or not writable(s, o.write):
            if creatable(m, s, b):
                yield act("roll_ledger", broker=b)
        nxt = next_message(s)
        if nxt is not None:
            if o.read is None or o.read[0] != nxt[0]:
                yield act("open_ledger", broker=b, ledger=nxt[0])
            else:
                yield act("read_entry", broker=b, ledger=nxt[0], entry=nxt[1], cluster=read_cluster(m, s))
        if o.md < s.consumed:
            if writable(s, o.cursor) and not o.must_roll:
                yield act("mark_delete", broker=b, md=s.consumed)
            elif creatable(m, s, b):
                yield act("cursor_rollover", broker=b)
        if len(s.ml) > 1 and (o.write is None or o.write[0] != s.ml[0][0]) and acked_through(m, s, s.ml[0][0]):
            yield act("trim_ledger", broker=b, ledger=s.ml[0][0], cluster=delete_cluster(m, s, b))
        if left(s, "sub_property"):
            yield act("set_sub_property", broker=b, key=USER_KEY)
            yield act("set_sub_property", broker=b, key=ATTR_KEY)
        if left(s, "move"):
            yield act("unload_topic", broker=b)
    elif s.owner is None:
        for i, x in enumerate(s.brokers):
            first = first_open_cluster(m, s, i)
            if x.up and reachable(s, first) and reachable(s, resolve(m, s, s.cursor.attr, i)):
                yield act("load_topic", broker=i, cluster=first)
    for i, x in enumerate(s.brokers):
        if not x.up:
            continue
        if x.put_schema is None:
            if left(s, "put_schema") and creatable(m, s, i):
                yield act("put_schema_start", broker=i)
        elif x.put_schema[2] == s.schema_version:
            yield act("put_schema_cas", broker=i)
        else:
            yield act("put_schema_conflict", broker=i)
    for e in s.schema:
        if not readable(s, resolve(m, s, e.attr, 0), e.ledger):
            yield act("read_schema", broker=0, version=e.schema_version)


def read_cluster(m, s: State) -> str:
    """I4: the cluster the read handle was bound to at open (mutant read-through-active-client: the
    owner's current BK client, whatever the handle was opened on)."""
    if m.config.variant == "mutant:read-through-active-client":
        return s.brokers[s.owner].active
    return s.own.read[1]


def first_open_cluster(m, s: State, b: int) -> str:
    """I15: the first open of the last ledger on load routes by its attribution (mutant
    constructor-bk: the BK client the broker was started with)."""
    if m.config.variant == "mutant:constructor-bk":
        return startup_cluster(s, b)
    return resolve(m, s, s.ml[-1][1], b)


def acked_through(m, s: State, lid: int) -> bool:
    """Every message of the ledger is below the confirmed markDelete position."""
    if m.config.variant == "mutant:trim-unacked":
        return True
    return all(k < s.acked_md for k, x in enumerate(s.msgs) if x == lid)


def delete_cluster(m, s: State, b: int) -> str:
    """I15: ``asyncDeleteLedger`` routes by the ledger's attribution (mutant constructor-bk: the
    start-up client)."""
    if m.config.variant == "mutant:constructor-bk":
        return startup_cluster(s, b)
    return resolve(m, s, s.ml[0][1], b)


def publish(m, s: State, a):
    """A producer's send is appended to the current ledger and acknowledged."""
    lid, cluster = s.own.write
    s = bk_put(s, cluster, lid, s.bk[cluster][lid] + (len(s.msgs),))
    return spend(replace(s, msgs=s.msgs + (lid,)), "publish")


def roll_ledger(m, s: State, a):
    """``createLedgerAfterClosed`` / ``rollCurrentLedgerIfFull`` (S1): a ledger on the active
    cluster; "In the same metadata CAS that records the new LedgerInfo" its stamp is added (I1;
    mutant stamp-after-create: the LedgerInfo is recorded without it)."""
    b = a.param("broker")
    cluster = create_cluster(m, s, b)
    if writable(s, s.own.write):
        s = spend(s, "roll")
    s, lid = allocate(s, cluster)
    stamp = None if m.config.variant == "mutant:stamp-after-create" else cluster
    return replace(s, ml=s.ml + ((lid, stamp),), own=replace(s.own, write=(lid, cluster)))


def open_ledger(m, s: State, a):
    """``getLedgerHandle``: "the resolver is consulted exactly once at LedgerHandle open time"."""
    lid = a.param("ledger")
    return replace(s, own=replace(s.own, read=(lid, resolve(m, s, dict(s.ml)[lid], s.owner))))


def read_entry(m, s: State, a):
    """The dispatcher reads the next entry through the open handle; the handle is released once
    the consumer has caught up with the ledger, or when the read fails (``NoSuchLedger``, cluster
    down, client closed)."""
    lid, entry, cluster = a.param("ledger"), a.param("entry"), a.param("cluster")
    if readable(s, cluster, lid, entry + 1):
        s = replace(s, consumed=s.consumed + 1)
        if s.msgs.count(lid) == entry + 1:  # caught up with the ledger: its read handle is released
            s = replace(s, own=replace(s.own, read=None))
        return s
    return replace(failed_read(s, "data", lid, entry + 1), own=replace(s.own, read=None))


def mark_delete(m, s: State, a):
    """markDelete: the position is appended to the cursor ledger (the handle opened when the
    ledger was created) and then confirmed to the consumer."""
    o = s.own
    lid, cluster = o.cursor
    s = bk_put(s, cluster, lid, s.bk[cluster][lid] + (s.consumed,))
    return replace(s, own=replace(o, md=s.consumed), acked_md=s.consumed)


def cursor_rollover(m, s: State, a):
    """``doCreateNewMetadataLedger`` (S1): a new cursor ledger on the active cluster holding the
    position, then the cursor znode CAS with the new ``cursorsLedgerId`` and its stamp (I1)."""
    b, o = a.param("broker"), s.own
    cluster = create_cluster(m, s, b)
    s, lid = allocate(s, cluster)
    s = bk_put(s, cluster, lid, (s.consumed,))
    if m.config.variant == "mutant:stamp-after-create":
        props = o.info.props.remove(ATTR_KEY)
    else:
        props = o.info.props.set(ATTR_KEY, cluster)
    info = CursorInfo(ledger=lid, md=s.consumed, props=props, version=s.cursor.version + 1)
    return replace(s, cursor=info, own=replace(o, cursor=(lid, cluster), info=info, md=s.consumed, must_roll=False),
                   acked_md=s.consumed)


def set_sub_property(m, s: State, a):
    """A user sets a subscription property; subscription properties live in
    ``cursorProperties``. Variant reserved-keys-rejected: a key under ``_pulsar.`` is refused."""
    key, o = a.param("key"), s.own
    s = spend(s, "sub_property")
    if key.startswith("_pulsar.") and "reserved-keys-rejected" in m.fixes:
        return s
    info = replace(s.cursor, props=o.info.props.set(key, "user"), version=s.cursor.version + 1)
    return replace(s, cursor=info, own=replace(o, info=info))


def put_schema_start(m, s: State, a):
    """``BookkeeperSchemaStorage.createLedger`` (S3 provider ``active()``): a schema ledger on
    the active cluster with the schema as its entry; the locator is read with its version."""
    b = a.param("broker")
    cluster = create_cluster(m, s, b)
    s, lid = allocate(s, cluster)
    s = bk_put(s, cluster, lid, (lid,))
    x = replace(s.brokers[b], put_schema=(lid, cluster, s.schema_version))
    return spend(replace(s, brokers=put(s.brokers, b, x)), "put_schema")


def put_schema_cas(m, s: State, a):
    """putSchema's locator CAS: the index entry and its stamp ``PositionInfo.properties``
    written together (I1); the schema version is acknowledged."""
    b = a.param("broker")
    lid, cluster, _ = s.brokers[b].put_schema
    stamp = None if m.config.variant == "mutant:stamp-after-create" else cluster
    entry = IndexEntry(ledger=lid, entry=0, attr=stamp, schema_version=len(s.schema), hash=lid)
    x = replace(s.brokers[b], put_schema=None)
    return replace(s, schema=s.schema + (entry,), schema_version=s.schema_version + 1,
                   brokers=put(s.brokers, b, x), schemas_acked=s.schemas_acked + 1)


def put_schema_conflict(m, s: State, a):
    """The locator CAS fails with BadVersion: re-read and retry ("CAS-serialized")."""
    b = a.param("broker")
    lid, cluster, _ = s.brokers[b].put_schema
    x = replace(s.brokers[b], put_schema=(lid, cluster, s.schema_version))
    return replace(s, brokers=put(s.brokers, b, x))


def read_schema(m, s: State, a):
    """A client fetches a schema version: the S3 provider ``resolve(position)`` routes by the
    entry's stamp. Only the reads that fail are steps (a successful read changes nothing)."""
    e = next(e for e in s.schema if e.schema_version == a.param("version"))
    return failed_read(s, "schema", e.ledger)


def trim_ledger(m, s: State, a):
    """Retention: "Topic Data Ledgers age out via TTL/Retention" -- the oldest ledger, fully
    acknowledged, is removed from the ledger list and deleted from the cluster the delete path
    resolves (a delete sent to a cluster without the ledger leaves its bytes behind)."""
    lid, cluster = a.param("ledger"), a.param("cluster")
    if cluster in s.bk and lid in s.bk[cluster] and reachable(s, cluster):
        s = bk_delete(s, cluster, lid)
    return replace(s, ml=s.ml[1:])


def unload_topic(m, s: State, a):
    """The topic's ownership moves away (bundle unload): the owner closes its handles."""
    return spend(replace(s, owner=None, own=None), "move")


def load_topic(m, s: State, a):
    """A broker loads the topic: the first open of the last ledger (I15), then cursor recovery
    reads the last position from the cursor ledger through ``cursorBookKeeperResolver``; if the
    ledger cannot be read, the znode's ``markDelete`` position is used. The consumer reconnects
    from the recovered position, and the next markDelete goes to a new cursor ledger. A cluster
    that is down or whose client is closed fails the load (no step); a ledger missing from a
    reachable cluster is ``NoSuchLedger``, after which cursor recovery falls back to the znode's
    position (``ManagedCursorImpl`` recovery)."""
    b = a.param("broker")
    lid, _ = s.ml[-1]
    n = s.msgs.count(lid)
    if n and not readable(s, a.param("cluster"), lid, n):
        s = failed_read(s, "data", lid, n)
    cur = s.cursor
    cluster = resolve(m, s, cur.attr, b)
    if readable(s, cluster, cur.ledger):
        md = s.bk[cluster][cur.ledger][-1]
    else:
        md = cur.md
        s = failed_read(s, "cursor", cur.ledger)
    own = Owned(write=None, cursor=(cur.ledger, cluster), info=cur, md=md, must_roll=True)
    return replace(s, owner=b, own=own, consumed=md)


APPLY = {"publish": publish, "roll_ledger": roll_ledger, "open_ledger": open_ledger, "read_entry": read_entry,
         "mark_delete": mark_delete, "cursor_rollover": cursor_rollover, "set_sub_property": set_sub_property,
         "put_schema_start": put_schema_start, "put_schema_cas": put_schema_cas,
         "put_schema_conflict": put_schema_conflict, "read_schema": read_schema, "unload_topic": unload_topic,
         "load_topic": load_topic, "trim_ledger": trim_ledger}
