"""Consumer assignment for the stream subscription (PIP-468 "Consumer Assignment",
"Rebalancing", "Consumer Session Lifecycle", "Metadata Store Paths").

A rebalance is computed in memory; each ``ConsumerRegistration`` it changes ("keyed by
``consumerName`` under the subscription path") is then its own metadata write
(``persist_registration``), in any order, and the consumer whose assignment changed is pushed
it once its registration is written: what a consumer is told is durable. Two rebalances' writes
of one key are coalesced into the later: a rebalance reads no registration and a write changes
nothing a rebalance reads, so the earlier write commutes to before the later rebalance.
"""
from __future__ import annotations

from pulsar_verify.values import FrozenMap, put, replace

from .layout import SegmentLayout
from .state import ALL, Consumer, State

REVOKE_FIRST = "revoke-before-grant"


def consumer_name(i: int) -> str:
    return f"c{i + 1}"


def round_robin(layout: SegmentLayout, members) -> FrozenMap:
    """"1. Collect all active segments, sorted by hash range start. 2. Collect all consumers, sorted
    by name. 3. Assign segments to consumers in round-robin order." """
    names = sorted(members)
    out: dict[str, list] = {n: [] for n in names}
    for i, seg in enumerate(layout.active_segments if names else ()):
        out[names[i % len(names)]].append(seg.segment_id)
    return FrozenMap((n, tuple(v)) for n, v in out.items())


def takes(m, s: State, i: int, assignment: tuple) -> Consumer:
    """Consumer ``i`` acts on ``assignment``, a reply or a push it receives: at once, as written. Variant
    revoke-before-grant: it gives up at once the segments the assignment no longer has, but takes a segment
    only once no other connected consumer acts on it (the coordinator grants a segment after its previous
    owner has acknowledged the revocation); the grant of the others stays pending in its inbox."""
    x = s.consumers[i]
    if REVOKE_FIRST not in m.fixes:
        return replace(x, view=assignment, inbox=None)
    held = {seg for j, y in enumerate(s.consumers) if j != i and y.broker is not None for seg in y.view}
    view = tuple(seg for seg in assignment if seg not in held)
    return replace(x, view=view, inbox=None if view == assignment else assignment)


def rebalance(m, s: State, b: int) -> State:
    """The coordinator on broker ``b`` recomputes the assignment against its layout and members and
    issues a write of each registration that changed (a delete for a consumer no longer a member);
    variant atomic-registrations: one write of them all."""
    c = s.ctrls[b]
    new = round_robin(c.layout, c.members)
    if new == c.assigned:
        return s
    writes = c.writes
    if "atomic-registrations" in m.fixes:
        writes = writes.set(ALL, new)
    else:
        for name in sorted(set(c.assigned.keys()) | set(new.keys())):
            if new.get(name) != c.assigned.get(name):
                writes = writes.set(name, new.get(name))
    return replace(s, ctrls=put(s.ctrls, b, replace(c, assigned=new, writes=writes)))


def persist_registration(m, s: State, a):
    """One registration write lands (``consumer`` ALL: all of them at once). A consumer connected to
    this broker whose assignment it changes is pushed the new ``ConsumerAssignment``; one waiting to
    register gets its reply, and from then on holds a session. Variant fenced-registrations: the
    write is conditional on the leader lock and fails on a broker that lost it; a consumer waiting
    for that write gets an error and reconnects."""
    b, key = a.param("broker"), a.param("consumer")
    c = s.ctrls[b]
    value = c.writes[key]
    c = replace(c, writes=c.writes.remove(key))
    s = replace(s, ctrls=put(s.ctrls, b, c))
    if key == ALL:
        regs, updates = value, {name: value.get(name) for name in set(value.keys()) | set(s.registrations.keys())}
    else:
        regs = s.registrations.remove(key) if value is None else s.registrations.set(key, value)
        updates = {key: value}
    failed = "fenced-registrations" in m.fixes and s.lock != b
    consumers, sessions = list(s.consumers), s.sessions
    for i, x in enumerate(s.consumers):
        name = consumer_name(i)
        if name not in updates or x.broker != b:
            continue
        if x.joining and failed:
            consumers[i] = replace(x, broker=None, joining=False)
        elif x.joining:  # the register request's handler replies, whatever its coordinator became meanwhile
            consumers[i] = replace(takes(m, replace(s, consumers=tuple(consumers)), i, updates[name] or ()),
                                   joining=False)
            sessions = sessions | {name}
        elif not failed and name in c.connected and updates[name] not in (None, x.view if x.inbox is None else x.inbox):
            consumers[i] = replace(x, inbox=updates[name])
    s = replace(s, consumers=tuple(consumers), sessions=sessions)
    return s if failed else replace(s, registrations=regs)
