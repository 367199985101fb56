"""The state of the v4 transaction model: the legacy TC's log, topics (or segments) with
their managed ledgers, TransactionBuffers, buffer snapshots, the sibling pending-ack
topics, one subscription per topic, clients, and ghosts only the properties read.

A log entry is ``(kind, txn)``: ``d`` a message (txn 0: non-transactional), ``c`` a
commit marker, ``a`` an abort marker. Positions are indexes into a log.
"""
from __future__ import annotations

import attrs

from pulsar_verify.values import FrozenMap

OPEN, COMMITTING, ABORTING, COMMITTED, ABORTED = "OPEN", "COMMITTING", "ABORTING", "COMMITTED", "ABORTED"
ENDING = {COMMITTED: COMMITTING, ABORTED: ABORTING}
DATA, COMMIT_MARKER, ABORT_MARKER = "d", "c", "a"
PARTITION, SUBSCRIPTION = "partition", "subscription"  # END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION
EMPTY_MAP = FrozenMap()


@attrs.frozen
class Buffer:
    """In-memory TopicTransactionBuffer of one topic (lost when its broker crashes).

    ``flag``: PIP-373 only, a ``__contains_txn_messages`` value queued for the managed
    ledger's properties and not yet persisted."""

    ready: bool = False
    ongoing: FrozenMap = EMPTY_MAP  # txn -> position of its first entry
    aborted: frozenset = frozenset()
    flag: str | None = None


@attrs.frozen
class Sub:
    """The topic's subscription: the dispatcher's read position (in memory) and what its
    consumer has observed (ghosts)."""

    read: int = 0
    received: frozenset = frozenset()
    filtered: frozenset = frozenset()  # positions skipped as aborted


@attrs.frozen
class Client:
    phase: str = "idle"  # idle, open, ending, done
    sends: int = 0
    acks: int = 0
    failed: bool = False  # a send failed (TopicTerminated, broker crash): the client may only abort
    outcome: str = ""


@attrs.frozen
class State:
    # legacy TC: its log (a system topic, persisted)
    tc: FrozenMap  # txn -> OPEN | COMMITTING | ABORTING | COMMITTED | ABORTED
    parts: FrozenMap  # txn -> topics added by ADD_PARTITION_TO_TXN
    subs_of: FrozenMap  # txn -> topics whose subscription was added by ADD_SUBSCRIPTION_TO_TXN
    rpcs: FrozenMap  # (txn, PARTITION | SUBSCRIPTION, topic) -> sent | written | failed | done
    # topics
    logs: tuple  # per topic: entries
    side: tuple  # per topic: the off-segment marker stream (variant off-segment-markers only)
    sealed: tuple
    snapshots: tuple  # per topic: None or (maxReadPosition, aborted): __transaction_buffer_snapshot
    pending_logs: tuple  # per topic: the sibling pending-ack topic, entries (kind, txn, position)
    cursors: FrozenMap  # (topic, position) -> txn whose committed ack put it in the cursor
    # brokers (one per topic) and clients
    buffers: tuple  # per topic: Buffer
    subs: tuple  # per topic: Sub
    publishes: frozenset  # (txn, topic): added to the txn, append not yet done
    clients: FrozenMap  # txn -> Client
    prop: tuple  # PIP-373: (value, written by the broker) of __contains_txn_messages; () in v4
    crashes: int
    seals: int
    snapshots_taken: int
    nontxn: int
    decided: FrozenMap  # ghost: txn -> COMMITTED | ABORTED, from the TC's first end record
