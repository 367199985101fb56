"""What ``v4-impl`` adds to the v4 state: each topic's load status and stored ``maxReadPosition``,
a reader on topic 0 with its receiver queue, and each subscription's consumers, replay set and
in-memory pending acks.

The topic's transaction buffer is in one of the implementation's states (``TopicTransactionBuffer``):
None (``loaded`` false: the topic is not served), Initializing (``loaded``, the buffer not ready: its
recovery is reading the snapshot and the log), Ready, and, for a topic with no snapshot, NoSnapshot and
FirstSnapshotting (``tb_phase``; ``first_snapshot``).
"""
from __future__ import annotations

import attrs

from pulsar_verify.values import FrozenMap, replace

from pulsar_verify.models.v4txn.state import State

IDLE, READING, DONE = "idle", "reading", "done"


@attrs.frozen
class Reader:
    """A ``Reader`` (an exclusive, non-durable subscription) running the loop of the reports:
    ``while reader.hasMessageAvailable(): reader.readNext()``.

    ``pos``: the last message the application read (-1: none); ``queue``: positions delivered into the
    client's receiver queue, not yet read; ``phase``: idle (about to ask), reading (told a message is
    available: blocked in ``readNext`` until one is queued), done (told none is: the loop ended);
    ``beyond``: a ghost, the last answer named an entry past the readable horizon."""

    phase: str = IDLE
    pos: int = -1
    queue: tuple = ()
    beyond: bool = False


@attrs.frozen
class Consumer:
    """A consumer of the subscription: ``queue``, its receiver queue (delivered, not yet received by the
    application; its length is the permits it has used); ``unacked``, received by the application and
    not yet acknowledged."""

    queue: tuple = ()
    unacked: frozenset = frozenset()


@attrs.frozen
class ImplState(State):
    loaded: tuple = ()  # per topic: served by a broker (the TB is then Initializing or Ready)
    tb_phase: tuple = ()  # per topic: "" (as loaded and buffers[].ready say), NoSnapshot or FirstSnapshotting
    max_read: tuple = ()  # per topic: the TB's stored maxReadPosition (-1 while the topic is not loaded)
    reader: Reader = Reader()
    consumers: tuple = ()  # per topic: its subscription's consumers (none: the reader reads topic 0)
    replay: tuple = ()  # per topic: positions the dispatcher redelivers before reading on (shared only)
    pending: tuple = ()  # per topic: the pending-ack handle's memory, position -> txn (individualAckPositions)
    acking: frozenset = frozenset()  # (txn, topic, pos, consumer): a txn ack the TC accepted, on its way
    redeliveries: int = 0
    tc_up: bool = True  # the TC's store is registered and serves requests
    tc_crashes: int = 0
    ends: FrozenMap = FrozenMap()  # txn -> (held | retrying | reply, asked for, answer): the client's END_TXN
    orphaned: frozenset = frozenset()  # committing / aborting txns no TC drives any more (before PR #19201)
    untimed: frozenset = frozenset()  # open txns whose timeout the reloaded TC lost (before PR #19201)
    low_water: tuple = ()  # per topic: the buffer's low water mark for the TC (memory; 0: none)
    marks: FrozenMap = FrozenMap()  # (txn, topic) -> the TC's low water mark its END_TXN_ON_PARTITION carries
    acks_ok: frozenset = frozenset()  # ghost: (txn, topic, pos) of every txn ack the broker accepted


def with_client(s: ImplState, t: int, **changes) -> ImplState:
    """``s`` with txn ``t``'s client changed."""
    return replace(s, clients=s.clients.set(t, replace(s.clients[t], **changes)))
