"""What runs alongside the controller: the producer and its DAG watch session, the admin's
subscription creation, stream consumers and their sessions, and delivery to subscriptions
(PIP-468 "DAG Watch Sessions", "Admin API", "Consumer Assignment").

Delivery is per subscription: a queue subscription reads every segment, active or sealed
("attaches directly to all segments"); the stream subscription reads only the segments
assigned to a connected consumer, each after the ancestors ``getLineage`` gives ("DAG
traversal during catch-up reads") have no backlog left.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from .assignment import REVOKE_FIRST, consumer_name, persist_registration, rebalance, round_robin, takes
from .controller import loaded
from .state import ALL, KEY_HASHES, STREAM_SUB, State, Topic


def stream_sub(m) -> str | None:
    return STREAM_SUB if m.config.consumers else None


def actions(m, s: State):
    cfg = m.config
    if not s.blocked and len(s.acked) < cfg.msgs:
        for key in range(cfg.keys):
            seg = s.view.find_active_segment(KEY_HASHES[key]).segment_id
            t = s.topics.get(seg)
            yield act("publish_rejected" if t is not None and t.terminated else "publish", key=key)
    if s.view != s.layout:
        yield act("dag_update")
    if len(s.subs) < cfg.subs + cfg.new_subs:
        for b, c in enumerate(s.ctrls):
            if c.leader:
                yield act("create_subscription", broker=b, sub=f"s{len(s.subs)}")
    for b, c in enumerate(s.ctrls):
        for sub, _ in c.subscribing:
            yield act("propagate_subscription", broker=b, sub=sub)
    lock = s.lock
    for i, x in enumerate(s.consumers):
        name = consumer_name(i)
        if lock is not None and s.ctrls[lock].leader and x.broker != lock:
            yield act("connect", consumer=name)
        if x.broker is not None and s.disconnects < cfg.disconnects:
            yield act("disconnect", consumer=name)
        if x.inbox is not None and (REVOKE_FIRST not in m.fixes or takes(m, s, i, x.inbox) != x):
            yield act("receive_assignment", consumer=name)
    for b, c in enumerate(s.ctrls):
        for key in sorted(c.writes.keys()):
            yield act("persist_registration", broker=b, consumer=key)
    for b, c in enumerate(s.ctrls):
        if c.leader:
            for name in sorted(c.timers):
                yield act("grace_expire", broker=b, consumer=name)
    for seg, t in s.topics:
        for sub, pos in t.cursors:
            if pos < len(t.entries) and readable(m, s, sub, seg):
                yield act("deliver", sub=sub, segment=seg)


def readable(m, s: State, sub: str, seg: int) -> bool:
    if sub != stream_sub(m):
        return True
    owned = set()
    for x in s.consumers:
        if x.broker is not None:
            owned.update(x.view)
    by_id = s.layout.all_segments
    if not any(seg == o or (o in by_id and seg in s.layout.ancestors(o)) for o in owned):
        return False
    if m.config.variant == "mutant:no-catch-up" or seg not in by_id:
        return True
    for anc in s.layout.ancestors(seg):
        t = s.topics.get(anc)
        pos = t.cursors.get(sub) if t is not None else None
        if pos is not None and pos < len(t.entries):
            return False
    return True


def publish(m, s: State, a):
    """The producer routes by ``findActiveSegment(hash)`` on its DAG and the segment's broker appends
    and acknowledges; a topic missing from the broker is auto-created, with no cursor."""
    key = a.param("key")
    seg = s.view.find_active_segment(KEY_HASHES[key]).segment_id
    t = s.topics.get(seg, Topic())
    msg = len(s.acked) + 1
    return replace(s, topics=s.topics.set(seg, replace(t, entries=t.entries + ((msg, key),))),
                   acked=s.acked + ((msg, key, seg, len(t.entries), s.created),))


def publish_rejected(m, s: State, a):
    """"producers writing to the parent receive ``TopicTerminated`` and must re-route to child
    segments": the producer waits for its DAG watch to push a newer layout."""
    return replace(s, blocked=True)


def dag_update(m, s: State, a):
    """The watch fires on the metadata change; the broker reloads and pushes the current DAG.
    Delivery can be delayed arbitrarily and coalesces: the client gets the latest layout."""
    return replace(s, view=s.layout, blocked=False)


def create_subscription(m, s: State, a):
    """Admin ``createSubscription`` reaches the leader, which will "propagate it to all active segments
    by issuing ``createSubscription`` on each ``segment://`` topic via the Segments admin API": the
    segments are the active ones of its layout now; each call is then a step of its own
    (``propagate_subscription``). Variant subs-in-metadata: the subscription is first written into
    the topic's metadata by CAS (and reloaded), so a split that read an older version fails its CAS."""
    b, sub = a.param("broker"), a.param("sub")
    c = s.ctrls[b]
    s = replace(s, subs=s.subs | {sub})
    if "subs-in-metadata" in m.fixes:
        s = replace(s, version=s.version + 1)
        c = loaded(s, c)
    targets = tuple(seg.segment_id for seg in c.layout.active_segments)
    return replace(s, ctrls=put(s.ctrls, b, replace(c, subscribing=c.subscribing + ((sub, targets),))))


def propagate_subscription(m, s: State, a):
    """One Segments admin ``createSubscription``: a cursor at the end of the segment topic (created if
    missing); a subscription the topic already has is left as it is (the call's conflict outcome,
    which the controller takes as done). After the last segment the admin call succeeds: from then
    on the subscription exists for its user. A crash before that fails the call."""
    b, sub = a.param("broker"), a.param("sub")
    c = s.ctrls[b]
    i = next(i for i, (x, _) in enumerate(c.subscribing) if x == sub)
    seg, rest = c.subscribing[i][1][0], c.subscribing[i][1][1:]
    t = s.topics.get(seg, Topic())
    if sub not in t.cursors:
        t = replace(t, cursors=t.cursors.set(sub, len(t.entries)))
    s = replace(s, topics=s.topics.set(seg, t))
    left = c.subscribing[:i] + (((sub, rest),) if rest else ()) + c.subscribing[i + 1:]
    s = replace(s, ctrls=put(s.ctrls, b, replace(c, subscribing=left)))
    if rest and m.config.variant != "mutant:created-after-first-segment":
        return s
    return replace(s, created=s.created | {sub})


def _consumer(s: State, name: str):
    i = int(name[1:]) - 1
    return i, s.consumers[i]


def connect(m, s: State, a):
    """A stream consumer connects to the controller leader (the DAG watch's ``controller_broker_url``)
    and registers. A registered consumer within its grace period "resumes with the same persisted
    assignment — no rebalance", in the reply (once that assignment's write is done, if it is not); a
    new one is added, the assignment recomputed, and it waits for the reply, which comes once its
    ``ConsumerRegistration`` is written ("When a consumer registers, the ``SubscriptionCoordinator``
    writes its ``ConsumerRegistration``"; "Once a consumer successfully registers, this entry is
    durable")."""
    name = a.param("consumer")
    i, x = _consumer(s, name)
    b = s.lock
    c = s.ctrls[b]
    if name in c.members:
        c = replace(c, connected=c.connected | {name}, timers=c.timers - {name})
        s = replace(s, ctrls=put(s.ctrls, b, c))
        if m.config.variant == "mutant:rebalance-on-reconnect":
            s = rebalance(m, s, b)
        c = s.ctrls[b]
        if name in c.writes or ALL in c.writes:  # its assignment is not persisted yet: the reply waits for it
            waiting = replace(x, broker=b, inbox=None, joining=True)
            if REVOKE_FIRST in m.fixes:  # it acts on no segment until the reply grants it some
                waiting = replace(waiting, view=())
            return replace(s, consumers=put(s.consumers, i, waiting))
        x = takes(m, s, i, c.assigned.get(name, ()))
        return replace(s, consumers=put(s.consumers, i, replace(x, broker=b, joining=False)))
    c = replace(c, members=c.members | {name}, connected=c.connected | {name})
    s = replace(s, ctrls=put(s.ctrls, b, c),
                consumers=put(s.consumers, i, replace(x, broker=b, view=(), inbox=None, joining=True)))
    if m.config.variant != "mutant:no-rebalance-on-join":
        return rebalance(m, s, b)
    assigned = c.assigned.set(name, round_robin(c.layout, c.members)[name])
    key, value = (ALL, assigned) if "atomic-registrations" in m.fixes else (name, assigned[name])
    return replace(s, ctrls=put(s.ctrls, b, replace(c, assigned=assigned, writes=c.writes.set(key, value))))


def disconnect(m, s: State, a):
    """The consumer's connection drops; the leader "transitions the in-memory state to disconnected
    and starts a configurable session grace period timer"."""
    name = a.param("consumer")
    i, x = _consumer(s, name)
    c = s.ctrls[x.broker]
    if name in c.connected:
        c = replace(c, connected=c.connected - {name}, timers=c.timers | {name})
    return replace(s, ctrls=put(s.ctrls, x.broker, c), disconnects=s.disconnects + 1,
                   consumers=put(s.consumers, i, replace(x, broker=None, inbox=None, joining=False)))


def receive_assignment(m, s: State, a):
    """The consumer acts on the assignment pushed to it (variant revoke-before-grant: on what of it is
    granted yet, ``takes``)."""
    i, x = _consumer(s, a.param("consumer"))
    return replace(s, consumers=put(s.consumers, i, takes(m, s, i, x.inbox)))


def grace_expire(m, s: State, a):
    """"If the grace period expires, the leader deletes the ``ConsumerRegistration`` from the metadata
    store and triggers a rebalance for the remaining consumers." """
    b, name = a.param("broker"), a.param("consumer")
    c = s.ctrls[b]
    s = replace(s, ctrls=put(s.ctrls, b, replace(c, members=c.members - {name}, timers=c.timers - {name})))
    if s.lock == b:
        s = replace(s, sessions=s.sessions - {name})  # an eviction by the leader ends the session
    return rebalance(m, s, b)  # its registration's delete is one of the writes


def deliver(m, s: State, a):
    """The next entry after the subscription's cursor on the segment reaches its consumer and is acked."""
    sub, seg = a.param("sub"), a.param("segment")
    t = s.topics[seg]
    pos = t.cursors[sub]
    msg = t.entries[pos][0]
    return replace(s, topics=s.topics.set(seg, replace(t, cursors=t.cursors.set(sub, pos + 1))),
                   delivered=s.delivered.set(sub, s.delivered.get(sub, ()) + (msg,)))


APPLY = {"publish": publish, "publish_rejected": publish_rejected, "dag_update": dag_update,
         "create_subscription": create_subscription, "propagate_subscription": propagate_subscription,
         "connect": connect, "disconnect": disconnect, "receive_assignment": receive_assignment,
         "persist_registration": persist_registration, "grace_expire": grace_expire, "deliver": deliver}
