"""The state of the PIP-477 bookie-cluster switching model: Broker-ZK (cluster registry, switch
directive, orchestrator progress, the topic's ledger list, cursor and schema znodes, each with
the version its CAS checks), the two BookKeeper clusters, each broker's memory (lost on a
restart), the topic owner's open handles, and ghosts the properties read."""
from __future__ import annotations

import attrs

from pulsar_verify.values import FrozenMap, put, replace

OLD, NEW = "old", "new"
ACTIVE, STANDBY, DEPRECATED = "ACTIVE", "STANDBY", "DEPRECATED"
ATTR_KEY = "_pulsar.bookieClusterName"  # "Reserved Property Key"
USER_KEY = "app"  # a subscription property a user sets
LEGACY_DATA, INITIAL_CURSOR, INITIAL_SCHEMA = 1, 2, 3  # ledgers on the old cluster at the start
EMPTY = FrozenMap()


@attrs.frozen
class CursorInfo:
    """The cursor znode ``ManagedCursorInfo``: business fields and ``cursorProperties``."""

    ledger: int  # cursorsLedgerId
    md: int  # markDeleteLedgerId/EntryId, as the number of messages acknowledged
    props: FrozenMap  # cursorProperties: ATTR_KEY -> cluster, USER_KEY -> value
    version: int = 0

    @property
    def attr(self):
        return self.props.get(ATTR_KEY)

    def business(self):
        """What I9 says PROMOTE never changes: everything but the attribution entry."""
        return self.ledger, self.md, self.props.remove(ATTR_KEY)


@attrs.frozen
class IndexEntry:
    """One ``SchemaLocator`` index entry: ``PositionInfo`` (ledgerId, entryId, properties),
    ``info.version`` and ``info.hash``."""

    ledger: int
    entry: int
    attr: str | None
    schema_version: int
    hash: int

    def business(self):
        """What I10 says PROMOTE never changes."""
        return self.ledger, self.entry, self.schema_version, self.hash


@attrs.frozen
class Progress:
    """Orchestrator progress under ``/admin/bookie-clusters/orchestrator/<switchId>``."""

    phase: str = "build"  # build | cleanup | rollback | done | rolled-back
    built: FrozenMap = EMPTY  # ledger id -> entries copied (its LAC + 1)
    cursors: tuple = ()  # the cursor ledgers among ``built``, in the order built
    sent: frozenset = frozenset()  # cursor ledgers whose promote-cursor RPC was sent
    failed: frozenset = frozenset()
    promoted: frozenset = frozenset()  # ledger ids whose attribution PROMOTE flipped to new
    reverted: frozenset = frozenset()  # promoted ledger ids ROLLBACK flipped back to old
    fallback: frozenset = frozenset()  # cursors recorded promotedViaRolloverFallback (409)
    status_flips: int = 0  # CLEANUP step 2: status CASes done


@attrs.frozen
class Broker:
    """A broker's plugin memory: ``activeClusterName``, the directive epoch its watcher has
    applied, whether it runs the orchestrator, and in-flight multi-step requests and metadata writes."""

    up: bool = True
    active: str = OLD
    epoch: int = 0
    orchestrator: bool = False
    put_schema: tuple | None = None  # (ledger created, cluster, locator version read)
    promote_read: int | None = None  # orchestrator: the locator version PROMOTE read
    request: str | None = None  # the POST /switch it serves: "fenced" (fix fence-old-idgen), then "checked"
    copies: FrozenMap = EMPTY  # orchestrator: BUILD's copies in progress, ledger -> (kind, entries to copy, copy's id)


@attrs.frozen
class Owned:
    """The topic as loaded by its owner: the write ledger and the cursor ledger handles (each
    bound to one cluster at open, I4), the in-memory cursor, the consumer's read handle."""

    write: tuple | None  # (ledger, cluster) or None until the next ledger is created
    cursor: tuple  # (cursorsLedgerId, cluster) the markDelete writes go to
    info: CursorInfo  # the in-memory ManagedCursorInfo
    md: int  # markDelete position in memory
    must_roll: bool = False  # variant promote-cursor-at-copied-lac: roll before the next write
    read: tuple | None = None  # (ledger, cluster, entries read) of the open read handle


@attrs.frozen
class State:
    registry: FrozenMap  # cluster -> status, under /admin/bookie-clusters/<name>
    directive: tuple | None  # switch-target: (target, origin, epoch, source cluster)
    progress: Progress | None
    bk: FrozenMap  # cluster -> FrozenMap(ledger id -> entries)
    idgen: FrozenMap  # cluster -> next ledger id of /ledgers/idgen-long
    alive: frozenset  # clusters that are up
    closed: frozenset  # clusters whose BK client the operator closed
    ml: tuple  # ManagedLedgerInfo of the topic: (ledger id, attribution or None) per ledger
    cursor: CursorInfo
    schema: tuple  # SchemaLocator index: IndexEntry per schema version
    schema_version: int  # the locator znode's version
    brokers: tuple
    owner: int | None
    own: Owned | None
    rpc: tuple  # promote-cursor requests in flight: (expectedCursorsLedgerId, target)
    budget: FrozenMap  # how many of each environment event are left
    fenced: int | None  # fix fence-old-idgen: the old cluster's idgen-long, fenced at this next id
    # ghosts
    msgs: tuple  # the ledger each acknowledged message was appended to, in publish order
    allocated: FrozenMap  # cluster -> ledger ids its idgen handed out
    borrowed: frozenset = frozenset()  # ids the new cluster's idgen handed out for ledgers created on the old one
    consumed: int = 0  # messages the consumer has received
    acked_md: int = 0  # the markDelete position last confirmed persisted to the consumer
    schemas_acked: int = 1  # putSchema calls acknowledged (version 0 is there from the start)
    failures: frozenset = frozenset()  # (what, ledger) reads that failed although the data is on a live cluster
    zk_writes: int = 0  # Broker-ZK writes made without a version check (I3)


def with_broker(s: State, b: int, **changes) -> State:
    """``s`` with broker ``b``'s memory changed."""
    return replace(s, brokers=put(s.brokers, b, replace(s.brokers[b], **changes)))
