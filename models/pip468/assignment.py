"""Consumer assignment for the stream subscription (PIP-468 "Consumer Assignment",
"Rebalancing", "Consumer Session Lifecycle")."""
from __future__ import annotations

from pulsar_verify.values import FrozenMap, put, replace

from .layout import SegmentLayout
from .state import State


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


def rebalance(m, s: State, b: int) -> State:
    """The coordinator on broker ``b`` recomputes the assignment against its layout, persists it
    (the ``ConsumerRegistration`` entries) and "for each consumer whose assignment changed, push[es]
    the new ``ConsumerAssignment``" to it, if it is connected to this broker."""
    c = s.ctrls[b]
    if "fenced-registrations" in m.fixes and s.lock != b:
        return s  # the conditional write fails: a deposed coordinator changes nothing
    new = round_robin(c.layout, c.members)
    consumers = s.consumers
    for i, x in enumerate(s.consumers):
        name = consumer_name(i)
        if name in c.connected and x.broker == b and new.get(name) != c.assigned.get(name):
            consumers = put(consumers, i, replace(x, inbox=new[name]))
    return replace(s, registrations=new, consumers=consumers, ctrls=put(s.ctrls, b, replace(c, assigned=new)))
