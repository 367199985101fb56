"""The state of the PIP-468 controller model: the metadata store (layout, leader lock,
subscriptions, consumer registrations), the segment topics, each broker's controller (in
memory, lost on a crash), the producer's and consumers' views, and ghosts the properties read.
"""
from __future__ import annotations

import attrs

from pulsar_verify.values import FrozenMap

from .layout import SegmentLayout

EMPTY_MAP = FrozenMap()
SPLIT, MERGE = "split", "merge"
DISCOVER, CREATE, TERMINATE, CAS, NOTIFY = "discover", "create", "terminate", "cas", "notify"
ALL = "*"  # the key of a write of every registration at once (variant atomic-registrations)
STREAM_SUB = "s0"  # the subscription the stream consumers share; others are queue subscriptions
KEY_HASHES = (0x0000, 0xFFFF)  # key k routes by hash KEY_HASHES[k]


@attrs.frozen
class Topic:
    """A ``segment://`` topic on whichever broker owns it: its managed ledger and cursors."""

    entries: tuple = ()  # (msg, key), in append order
    terminated: bool = False
    cursors: FrozenMap = EMPTY_MAP  # subscription -> position of the next entry to deliver


@attrs.frozen
class Op:
    """A split or merge a controller is executing (in memory: lost when its broker crashes)."""

    kind: str  # SPLIT | MERGE
    parents: tuple
    children: tuple  # segment ids taken from the controller's layout (nextSegmentId)
    base: int  # the metadata version the controller's layout was read at
    step: str = DISCOVER
    subs: frozenset = frozenset()  # subscriptions discovered in step 1
    progress: int = 0  # children created (step 2) / parents terminated (step 3) so far

    @property
    def label(self) -> str:
        """How traces name the operation, e.g. ``merge(0, 1)``."""
        return f"{self.kind}({', '.join(map(str, self.parents))})"


@attrs.frozen
class Controller:
    """A broker's ``ScalableTopicController`` and its ``SubscriptionCoordinator`` for the stream
    subscription. ``leader`` is what the broker believes, which may lag the lock."""

    leader: bool = False
    version: int = -1  # metadata version of ``layout``; -1 before the first load
    layout: SegmentLayout | None = None
    subs: frozenset = frozenset()  # subscriptions as loaded with the layout (variant subs-in-metadata)
    ops: tuple = ()
    members: frozenset = frozenset()  # consumers in the coordinator
    assigned: FrozenMap = EMPTY_MAP  # the coordinator's assignment: consumer -> segment ids
    connected: frozenset = frozenset()  # keep-alive: consumers connected to this broker
    timers: frozenset = frozenset()  # consumers whose grace-period timer runs
    writes: FrozenMap = EMPTY_MAP  # registration writes issued, not yet done: consumer -> assignment (None:
    # delete), or ALL -> the whole set of registrations (variant atomic-registrations)
    subscribing: tuple = ()  # admin createSubscription calls in progress: (sub, segments left to issue it on)


@attrs.frozen
class Consumer:
    """A stream consumer of ``STREAM_SUB``: its connection and the assignment it acts on."""

    broker: int | None = None  # the controller broker it is connected to
    view: tuple = ()  # segment ids of the last assignment it received
    inbox: tuple | None = None  # an assignment pushed and not yet received (pushes are ordered)
    joining: bool = False  # registered with the leader, waiting for the reply (sent once its registration is written)


@attrs.frozen
class State:
    # metadata store
    version: int  # version of /topics/{t}/{ns}/{topic}
    layout: SegmentLayout
    lock: int | None  # /controller: the leader's broker (ephemeral)
    intent: tuple  # variant op-intent: (kind, parents) of the operation in progress, persisted
    subs: frozenset  # subscriptions requested through the admin API (subs-in-metadata: in the topic's metadata)
    registrations: FrozenMap  # consumer -> assigned segment ids (the persisted session)
    # segment topics and brokers
    topics: FrozenMap  # segment id -> Topic
    ctrls: tuple  # per broker: Controller
    # clients
    view: SegmentLayout  # the producer's DAG (its watch session's last push)
    blocked: bool  # the producer got TopicTerminated and waits for a DAG update
    consumers: tuple  # per stream consumer: Consumer
    # budgets
    splits: int  # split requests accepted
    merges: int  # merge requests accepted
    failovers: int
    disconnects: int
    # ghosts
    created: frozenset  # subscriptions at topic creation and those whose createSubscription call succeeded
    sessions: frozenset  # consumers registered and not evicted by the leader's grace timer
    acked: tuple  # (msg, key, segment, position, subscriptions that existed at the ack)
    delivered: FrozenMap  # subscription -> delivered msgs, in order
