"""The state of the PIP-473 model: metadata store, segment logs, participant
brokers, TC V5 requests, clients, plus ghost (history) variables that only the
properties read.

Txn ids are 1..N; a log entry holds the txn id of its message, 0 for a
non-transactional message. Positions are indexes into a segment's log.
"""
from __future__ import annotations

import attrs

from pulsar_verify.values import FrozenMap, ordered

OPEN, COMMITTED, ABORTED = "OPEN", "COMMITTED", "ABORTED"
FINAL = (COMMITTED, ABORTED)
WRITE, ACK = "write", "ack"
EMPTY_MAP = FrozenMap()


@attrs.frozen
class Header:
    """``/txn/<txnId>``: state, and whether ``finalized_ms`` has been set."""

    state: str
    finalized: bool
    version: int


@attrs.frozen
class Op:
    """``/txn-op/<txnId>/<seq>``: kind, segment, subscription (acks only, else -1), position;
    a cumulative ack carries the position it acknowledges up to."""

    kind: str
    seg: int
    sub: int
    pos: int
    cumulative: bool = False


@attrs.frozen
class Buffer:
    """In-memory state of a segment's MetadataTransactionBuffer (lost on a broker crash)."""

    hdr: FrozenMap = EMPTY_MAP  # txn -> cached header state (each kept by a point watch)
    writes: FrozenMap = EMPTY_MAP  # txn -> positions: the cached idx:writes-by-segment view
    aborted: frozenset = frozenset()  # txns marked aborted
    done: frozenset = frozenset()  # txns whose decision has been materialized
    pend_hdr: frozenset = frozenset()  # txns with an undelivered header notification
    pend_idx: bool = False  # an undelivered idx:writes-by-segment notification


@attrs.frozen
class PendingAck:
    """In-memory state of the MetadataPendingAckStore of one (segment, subscription)."""

    hdr: FrozenMap = EMPTY_MAP
    acks: FrozenMap = EMPTY_MAP  # txn -> positions acknowledged in that txn
    done: frozenset = frozenset()
    pend: frozenset = frozenset()


@attrs.frozen
class Sub:
    """A subscription on one segment: its persisted cursor, the dispatcher's
    in-memory read position, and what its consumer has observed (ghost)."""

    exists: bool
    read: int = 0
    acked: frozenset = frozenset()  # positions acknowledged in the cursor
    received: frozenset = frozenset()  # positions delivered to the consumer (ghost)
    filtered: frozenset = frozenset()  # positions the dispatcher skipped as aborted (ghost)


@ordered
@attrs.frozen
class Publish:
    """A transactional send past its header check: ``append`` -> ``put`` -> ``ack``."""

    txn: int
    seg: int
    stage: str
    pos: int = -1


@ordered
@attrs.frozen
class End:
    """An end-txn in flight at the TC: ``read`` -> ``cas`` -> ``finalize`` -> ``reply``."""

    txn: int
    origin: str  # client | timeout
    want: str  # COMMITTED | ABORTED
    stage: str
    version: int = -1
    outcome: str = ""


@attrs.frozen
class Client:
    """The client's view of one transaction."""

    phase: str = "idle"  # idle, open, ending, done
    sends: int = 0
    acks: int = 0
    failed: bool = False  # some send failed: the client may only abort
    want: str = ""  # the outcome the client asked for
    outcome: str = ""  # the outcome the TC replied


@attrs.frozen
class State:
    # metadata store
    headers: FrozenMap  # txn -> Header
    ops: FrozenMap  # (txn, seq) -> Op
    seqs: tuple  # per txn: the next sequential key
    # segments (managed ledgers)
    logs: tuple  # per segment: txn id of each entry (0: non-transactional)
    first: tuple  # per segment: first retained position
    sealed: tuple
    nontxn: int  # non-transactional sends made
    # participant brokers, one per segment
    up: tuple
    buffers: tuple  # per segment: Buffer
    pending: tuple  # per (segment, subscription): PendingAck
    subs: tuple  # per (segment, subscription): Sub
    publishes: tuple  # sorted Publish
    # TC V5 and clients
    ends: tuple  # sorted End
    sweeps: FrozenMap  # txn -> the op record keys the GC sweep listed for it, () once it deleted them
    clients: tuple  # per txn (index txn - 1): Client
    crashes: int
    tc_crashes: int
    seals: int
    # ghosts
    decided: FrozenMap  # txn -> COMMITTED | ABORTED, kept after GC
    acks_made: frozenset  # (txn, seg, sub, pos) of every ack op record written
    applied: FrozenMap  # (seg, sub, pos) -> txn whose commit put it in the cursor
