"""Properties of the PIP-468 controller model, each with the PIP-468 text it comes from:
what producers, consumers and operators observe, and the metadata's own integrity."""
from __future__ import annotations

from functools import lru_cache

from pulsar_verify.model import PropertySet
from pulsar_verify.models.pip468 import Pip468
from pulsar_verify.models.pip468.assignment import consumer_name, round_robin
from pulsar_verify.models.pip468.clients import stream_sub
from pulsar_verify.models.pip468.layout import HASH_MAX, HASH_MIN, LayoutError, SegmentLayout
from pulsar_verify.models.pip468.state import KEY_HASHES

PROPERTIES = PropertySet()


SPLIT_WHY = "Split Protocol, Why this ordering matters"


def layout_problems(layout: SegmentLayout) -> list[str]:
    """What is wrong with a layout (empty when it satisfies every layout property of the PIP)."""
    import networkx as nx

    out = []
    act = layout.active_segments
    if not act or act[0].hash_range.start != HASH_MIN or act[-1].hash_range.end != HASH_MAX:
        out.append("active segments do not reach both ends of the hash range")
    for a, b in zip(act, act[1:]):
        if a.hash_range.end + 1 != b.hash_range.start:
            out.append(f"active segments {a.segment_id} and {b.segment_id} leave a gap or overlap")
    ids = [s.segment_id for s in layout.segments]
    if len(set(ids)) != len(ids) or any(i >= layout.next_segment_id or i < 0 for i in ids):
        out.append("segment ids are not unique or not below nextSegmentId")
    by_id = layout.all_segments
    dag = nx.DiGraph()
    dag.add_nodes_from(ids)
    for s in layout.segments:
        for c in s.child_ids:
            dag.add_edge(s.segment_id, c)
            if c not in by_id or s.segment_id not in by_id[c].parent_ids:
                out.append(f"child link {s.segment_id} -> {c} has no parent link back")
        for p in s.parent_ids:
            if p in by_id and s.segment_id not in by_id[p].child_ids:
                out.append(f"parent link {s.segment_id} -> {p} has no child link back")
        if s.active and (s.child_ids or s.sealed_at_epoch != 0):
            out.append(f"active segment {s.segment_id} has children or a seal epoch")
        if not s.active and not (s.created_at_epoch < s.sealed_at_epoch <= layout.epoch):
            out.append(f"sealed segment {s.segment_id} was not sealed after its creation")
        if s.created_at_epoch > layout.epoch:
            out.append(f"segment {s.segment_id} was created after the layout's epoch")
    if not nx.is_directed_acyclic_graph(dag):
        out.append("the segment DAG has a cycle")
    return out


@lru_cache(maxsize=4096)
def layout_ok(layout) -> bool:
    return not layout_problems(layout)


def layout_valid(m, s):
    return layout_ok(s.layout)


def epoch_increases(m, s, a, t):
    return t.version >= s.version and (t.layout == s.layout or t.layout.epoch > s.layout.epoch)


def _target(s, a):
    return s.view.find_active_segment(KEY_HASHES[a.param("key")]).segment_id


def sealed_accepts_no_write(m, s, a, t):
    seg = _target(s, a)
    topic = s.topics.get(seg)
    return s.layout.segment(seg).active and not (topic is not None and topic.terminated)


def _route(layout: SegmentLayout, h: int) -> set:
    """The segment a producer routes hash ``h`` to by ``layout`` (none where no active segment
    covers it, which ``layout-valid`` reports)."""
    try:
        return {layout.find_active_segment(h).segment_id}
    except LayoutError:
        return set()


def one_writable_segment(m, s):
    for h in KEY_HASHES:
        routes = _route(s.layout, h) | _route(s.view, h)
        if sum(1 for seg in routes if seg in s.topics and not s.topics[seg].terminated) > 1:
            return False
    return True


def cursors_before_routing(m, s, a, t):
    topic = s.topics.get(_target(s, a))
    return topic is not None and all(sub in topic.cursors for sub in s.created)


def created_when_propagated(m, s):
    return not any(sub in s.created for c in s.ctrls for sub, _ in c.subscribing)


def undelivered(s):
    """(msg, subscription) pairs acknowledged to the producer and not yet delivered."""
    return [(msg, sub) for msg, _, _, _, subs in s.acked for sub in sorted(subs)
            if msg not in s.delivered.get(sub, ())]


def no_message_loss(m, s):
    for msg, _, seg, pos, subs in s.acked:
        cursors = s.topics[seg].cursors
        for sub in subs:
            if msg not in s.delivered.get(sub, ()) and not (sub in cursors and cursors[sub] <= pos):
                return False
    return True


def per_key_order(m, s, a, t):
    sub = stream_sub(m)
    if sub is None or a.param("sub") != sub:
        return True
    topic = s.topics[a.param("segment")]
    msg, key = topic.entries[topic.cursors[sub]]
    keys = {mm: k for mm, k, _, _, _ in s.acked}
    return not any(keys[d] == key and d > msg for d in s.delivered.get(sub, ()))


def assignment_exclusive(m, s):
    seen = [seg for segs in s.registrations.values() for seg in segs]
    return len(seen) == len(set(seen))


def segment_owned_once(m, s):
    """The views of the consumers connected to a controller broker (what each acts on: ``readable`` in
    ``models/pip468/clients.py`` reads them) share no active segment."""
    active = {seg.segment_id for seg in s.layout.active_segments}
    seen = [seg for x in s.consumers if x.broker is not None for seg in x.view if seg in active]
    return len(seen) == len(set(seen))


def reconnect_keeps_assignment(m, s, a, t):
    """The leader's assignment, and the registration writes it has issued, are as they were."""
    if a.param("consumer") not in s.ctrls[s.lock].members:
        return True
    before, after = s.ctrls[s.lock], t.ctrls[s.lock]
    return (after.assigned, after.writes) == (before.assigned, before.writes)


def connection_closed_with_cause(m, s, a, t):
    """A consumer's connection ends only by its own disconnect, a crash of the broker it is connected
    to, or an error reply to the registration it is waiting on."""
    for i, (x, y) in enumerate(zip(s.consumers, t.consumers)):
        if x.broker is None or y.broker is not None or x.joining:
            continue
        if not ((a.name == "disconnect" and a.param("consumer") == consumer_name(i))
                or (a.name == "crash" and a.param("broker") == x.broker)):
            return False
    return True


def sessions_durable(m, s):
    return s.sessions <= set(s.registrations.keys())


def stranded(m, s):
    return any(seg.segment_id in s.topics and s.topics[seg.segment_id].terminated for seg in s.layout.active_segments)


def assignment_stale(m, s):
    """The persisted assignment is not the round-robin of the current layout, or a consumer connected to
    the leader acts on (or has been sent) another assignment than its persisted one."""
    if s.registrations != round_robin(s.layout, s.registrations.keys()):
        return True
    return any((x.view if x.inbox is None else x.inbox) != s.registrations.get(consumer_name(i), ())
               for i, x in enumerate(s.consumers) if x.broker is not None and x.broker == s.lock)


def unread_by_remaining(m, s):
    """An acknowledged message is not delivered to the stream subscription while a consumer is connected to the
    leader."""
    sub = stream_sub(m)
    return (sub is not None and any(x.broker is not None and x.broker == s.lock for x in s.consumers)
            and any(u == sub for _, u in undelivered(s)))


def departed(m, s):
    """A registered consumer is not connected to the leader (or there is no leader)."""
    return any(consumer_name(i) in s.registrations and (x.broker is None or x.broker != s.lock)
               for i, x in enumerate(s.consumers))


# Weak fairness: the controller's steps, elections, watch delivery, consumers reconnecting and reading;
# not what operators, producers and failures do.
ENVIRONMENT = {"request_split", "request_merge", "lose_session", "crash", "publish", "publish_rejected",
               "disconnect", "create_subscription"}
SYSTEM = tuple(sorted(set(Pip468.action_labels) - ENVIRONMENT))

PROPERTIES.invariant("layout-valid", "The persisted layout's active segments partition [0x0000, 0xFFFF], its DAG is "
                     "acyclic with symmetric links, ids are unique and below nextSegmentId, seals follow creations",
                     "SegmentLayout; SegmentInfo; Metadata Store Schema")(layout_valid)
PROPERTIES.action_property("epoch-increases", "The metadata version never goes back and every layout change "
                           "increases the epoch", "SegmentLayout: 'epoch ... incremented on every layout change'")(
        epoch_increases)
PROPERTIES.action_property("sealed-accepts-no-write", "No write is accepted by a segment the metadata has sealed",
                           f"{SPLIT_WHY}: 'by the time clients see the new layout, the parent is already sealed'",
                           on=("publish",))(sealed_accepts_no_write)
PROPERTIES.invariant("one-writable-segment", "For every hash, the segments a producer can be routed to (by the "
                     "metadata or a stale DAG) hold at most one writable topic",
                     f"{SPLIT_WHY}: 'There is no window where both parent and children are writable'")(
        one_writable_segment)
PROPERTIES.action_property("cursors-before-routing", "A producer's write lands only on a segment that has a cursor "
                           "for every existing subscription",
                           "Motivation: 'all subscription cursors exist before producers are redirected'",
                           on=("publish",))(cursors_before_routing)
PROPERTIES.invariant("created-when-propagated", "The operator's createSubscription call succeeds only once the "
                     "subscription has been issued on every segment: no segment is still to be done after the "
                     "success", "Admin REST API, PUT .../subscriptions/{subscription}: 'The controller propagates it "
                     "to all active segments by issuing createSubscription on each segment:// topic'")(
        created_when_propagated)
PROPERTIES.invariant("no-message-loss", "Every acknowledged message is delivered, or still in the backlog, of every "
                     "subscription that existed when it was acknowledged",
                     "Split Protocol: 'guarantee that no messages are lost'", about=("deliver",))(no_message_loss)
PROPERTIES.action_property("per-key-order", "The stream subscription receives each key's messages in publish order, "
                           "across splits and merges",
                           "Consumer Assignment: StreamConsumer (ordered) and 'getLineage ... catch-up reads'",
                           about=("deliver",))(per_key_order)
PROPERTIES.invariant("assignment-exclusive", "No segment is in two consumers' persisted assignments",
                     "Consumer Assignment: 'Each active segment is owned by exactly one consumer at any time'")(
        assignment_exclusive)
PROPERTIES.invariant("segment-owned-once", "No active segment is in the assignments of two connected stream "
                     "consumers: what each acts on, not only what is persisted",
                     "Consumer Assignment: 'Each active segment is owned by exactly one consumer at any time to "
                     "preserve per-segment ordering'")(segment_owned_once)
PROPERTIES.action_property("reconnect-keeps-assignment", "A consumer reconnecting within its grace period changes "
                           "no assignment", "Consumer Session Lifecycle: 'resumes with the same persisted assignment "
                           "— no rebalance, no other consumer disturbed'", on=("connect",))(
        reconnect_keeps_assignment)
PROPERTIES.action_property("connection-closed-with-cause", "A stream consumer's connection is closed only by the "
                           "consumer, by a crash of its broker, or by an error reply to the registration it waits on",
                           "Consumer Session Lifecycle: 'the leader observes the consumer's connection state "
                           "directly'; 'If the consumer's connection drops, the leader ... transitions the "
                           "in-memory state to \"disconnected\"'")(connection_closed_with_cause)
PROPERTIES.invariant("sessions-durable", "A consumer's registration stays persisted from its registration until "
                     "the leader evicts it after its grace period",
                     "Consumer Session Lifecycle: 'this entry is durable and outlives TCP disconnects, "
                     "client restarts, "
                     "and controller leader failovers'")(sessions_durable)
PROPERTIES.leads_to("writable-coverage", "Every hash again has a writable segment after any split, merge or failover",
                    "Leader Election and Failover; Split Protocol step 3-4",
                    trigger=stranded, fair=SYSTEM)
PROPERTIES.leads_to("acked-delivered", "Every acknowledged message is eventually delivered to every subscription "
                    "that existed when it was acknowledged", "Split Protocol: 'no messages are lost'",
                    trigger=lambda m, s: bool(undelivered(s)), fair=SYSTEM, about=("deliver",))
PROPERTIES.leads_to("departed-consumers-evicted", "A consumer that leaves and does not come back is evicted: its "
                    "registration is deleted after its grace period (so its segments go to the others), unless it "
                    "reconnects to the leader",
                    "Consumer Session Lifecycle: 'If the grace period expires, the leader deletes the "
                    "ConsumerRegistration from the metadata store and triggers a rebalance'",
                    trigger=departed,
                    fair=tuple(a for a in SYSTEM if a != "connect"))  # a consumer may leave for good
PROPERTIES.leads_to("remaining-consumers-served", "While a stream consumer stays connected to the leader, every "
                    "acknowledged message is eventually delivered to the stream subscription, even if the other "
                    "consumers leave for good",
                    "Consumer Assignment: 'Each active segment is owned by exactly one consumer at any time'; Consumer "
                    "Session Lifecycle: 'the leader deletes the ConsumerRegistration ... and triggers a rebalance for "
                    "the remaining consumers'",
                    trigger=unread_by_remaining,
                    fair=tuple(a for a in SYSTEM if a != "connect"))  # a consumer may leave for good
PROPERTIES.leads_to("assignment-complete", "The persisted assignment converges to the round-robin of the current "
                    "active segments over the registered consumers, and each consumer connected to the "
                    "leader acts on it",
                    "Rebalancing; Layout Change Propagation; Consumer Session Lifecycle (failover)",
                    trigger=assignment_stale, fair=SYSTEM)
