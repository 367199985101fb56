"""The controller leader: election and failover, and split and merge as their five steps
(PIP-468 "Leader Election and Failover", "Split Protocol", "Merge Protocol").

Steps merged, because nothing else observes the state between them: ``initialize()``'s
metadata load and the election it then attempts; a CAS and the reload that follows it
("Layout Change Propagation" 1). Each Segments admin call (create, terminate) is its own
step; a call that fails is retried by the controller, and as every one of them is
idempotent (``getOrCreateTopic``; terminating a terminated ledger) a failed-then-retried
call is the same transition as one that succeeded, so failures add no separate action.
"""
from __future__ import annotations

import attrs

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, put, replace

from .assignment import consumer_name, rebalance
from .layout import LayoutError
from .state import ALL, CAS, CREATE, DISCOVER, MERGE, NOTIFY, SPLIT, TERMINATE, Controller, Op, State, Topic


def actions(m, s: State):
    cfg = m.config
    fixed = m.fixes
    for b, c in enumerate(s.ctrls):
        if s.lock is None and not c.leader:
            yield act("elect", broker=b)
        if c.leader and s.lock != b:
            yield act("learn_deposed", broker=b)
        if c.leader and c.version != s.version and "leader-watches-layout" in fixed:
            yield act("layout_changed", broker=b)
        if s.failovers < cfg.failovers:
            if s.lock == b:
                yield act("lose_session", broker=b)
            if c.leader or c.ops:
                yield act("crash", broker=b)
        # op-intent: one operation at a time, its intent written under the leader lock (a deposed leader's
        # write fails: the request is refused) and the metadata version of the layout (``_request``)
        if c.leader and not ("op-intent" in fixed and (s.intent or s.lock != b)):
            if s.splits < cfg.splits:
                for seg in c.layout.active_segments:
                    if seg.hash_range.size > 1:
                        yield act("request_split", broker=b, segment=seg.segment_id)
            if s.merges < cfg.merges:
                for pair in c.layout.adjacent_pairs():
                    yield act("request_merge", broker=b, segments=pair)
        for i, op in enumerate(c.ops):
            step = "cas_conflict" if op.step == CAS and s.version != op.base else op.step
            yield act(step, broker=b, op=i, of=op.label)


def _set_ctrl(s: State, b: int, c: Controller) -> State:
    return replace(s, ctrls=put(s.ctrls, b, c))


def _set_op(s: State, b: int, i: int, op: Op | None) -> State:
    c = s.ctrls[b]
    ops = c.ops[:i] + ((op,) if op is not None else ()) + c.ops[i + 1:]
    return _set_ctrl(s, b, replace(c, ops=ops))


def loaded(s: State, c: Controller) -> Controller:
    return replace(c, version=s.version, layout=s.layout, subs=s.subs)


def elect(m, s: State, a):
    """``initialize()``: load the metadata, win the election ("Failover" 3-4): restore every
    consumer registration and treat each consumer as just disconnected, with a fresh grace timer
    -- except one whose connection to this broker is still open, as "the leader observes the
    consumer's connection state directly" (a broker re-elected after losing its session). Variant
    leader-watches-layout: it then rebalances against the layout it loaded; a consumer still connected to
    it with no registration (evicted meanwhile by another leader) is taken as joining, and each other one
    connected is pushed the assignment restored for it, which it may never have been told. One step with the
    election: all of it is in the broker's memory, and its writes land and its pushes arrive by steps of their own."""
    b = a.param("broker")
    if m.config.variant == "mutant:elect-drops-connections":
        s = replace(s, consumers=tuple(replace(x, broker=None, inbox=None, joining=False) if x.broker == b else x
                                       for x in s.consumers))
    members = frozenset(s.registrations.keys())
    live = frozenset(consumer_name(i) for i, x in enumerate(s.consumers) if x.broker == b) & members
    c = replace(loaded(s, s.ctrls[b]), leader=True, members=members, assigned=s.registrations, connected=live,
                timers=members - live)
    if "fenced-registrations" in m.fixes and c.writes:
        # writes issued under an earlier lock fail (their condition is that lock's version): dropped
        # here, and a consumer waiting for one gets its error, which ends its connection: the leader,
        # which "observes the consumer's connection state directly", starts its grace timer
        told = frozenset(consumer_name(i) for i, x in enumerate(s.consumers) if x.joining and x.broker == b)
        s = replace(s, consumers=tuple(replace(x, broker=None, joining=False) if consumer_name(i) in told else x
                                       for i, x in enumerate(s.consumers)))
        c = replace(c, writes=FrozenMap(), connected=c.connected - told, timers=c.timers | (told & members))
    if "op-intent" in m.fixes and s.intent and s.intent not in {(op.kind, op.parents) for op in c.ops}:
        # the new leader resumes the persisted operation (operations of an earlier term it still runs are others)
        c = replace(c, ops=c.ops + (op_on(c, *s.intent),))
    if "leader-watches-layout" in m.fixes:
        adopted = frozenset(consumer_name(i) for i, x in enumerate(s.consumers) if x.broker == b) - members
        c = replace(c, members=c.members | adopted, connected=c.connected | adopted)
    s = replace(_set_ctrl(s, b, c), lock=b)
    return _push_restored(rebalance(m, s, b), b) if "leader-watches-layout" in m.fixes else s


def _push_restored(s: State, b: int) -> State:
    """Variant leader-watches-layout: the new leader pushes each consumer connected to it the assignment it
    restored, unless a write of it is pending (the write's completion pushes it)."""
    c = s.ctrls[b]
    consumers = list(s.consumers)
    for i, x in enumerate(s.consumers):
        name = consumer_name(i)
        if name in c.connected and not x.joining and not (name in c.writes or ALL in c.writes):
            if c.assigned.get(name, ()) != (x.view if x.inbox is None else x.inbox):
                consumers[i] = replace(x, inbox=c.assigned.get(name, ()))
    return replace(s, consumers=tuple(consumers))


def layout_changed(m, s: State, a):
    """Variant leader-watches-layout: the leader's watch on the topic's metadata fires; it reloads
    and recomputes the assignment ("Layout Change Propagation" 1-3)."""
    return _reload(m, s, a.param("broker"))


def _reload(m, s: State, b: int) -> State:
    """The controller reloads the metadata; variant leader-watches-layout: a leader reacts to the reload as
    to any layout change, and recomputes the assignment."""
    s = _set_ctrl(s, b, loaded(s, s.ctrls[b]))
    return rebalance(m, s, b) if "leader-watches-layout" in m.fixes and s.ctrls[b].leader else s


def learn_deposed(m, s: State, a):
    """The ``NoLeader`` notification reaches the broker: ``checkLeader()`` now rejects new mutations.
    Operations already running are not stopped by it (the guard is at their entry)."""
    b = a.param("broker")
    return _set_ctrl(s, b, replace(s.ctrls[b], leader=False, timers=frozenset()))


def lose_session(m, s: State, a):
    """"The metadata store detects the session loss and clears the leader lock"; the broker may
    not know yet and keeps executing."""
    return replace(s, lock=None, failovers=s.failovers + 1)


def crash(m, s: State, a):
    """The broker crashes and restarts: its controller's memory (operations, timers, writes not yet
    done) is gone; the consumers connected to it are disconnected."""
    b = a.param("broker")
    consumers = tuple(replace(x, broker=None, inbox=None, joining=False) if x.broker == b else x for x in s.consumers)
    return replace(_set_ctrl(s, b, Controller()), lock=None if s.lock == b else s.lock,
                   failovers=s.failovers + 1, consumers=consumers)


def request_split(m, s: State, a):
    """``splitSegment``: accepted after ``checkLeader()`` on an active segment of the controller's layout."""
    b, seg = a.param("broker"), a.param("segment")
    return _request(m, s, b, SPLIT, (seg,), splits=s.splits + 1)


def request_merge(m, s: State, a):
    b, pair = a.param("broker"), a.param("segments")
    return _request(m, s, b, MERGE, tuple(pair), merges=s.merges + 1)


def _request(m, s: State, b: int, kind: str, parents: tuple, **counted) -> State:
    """Variant op-intent: the intent is written conditionally on the metadata version the controller's
    layout was read at. On a stale layout the write fails with BadVersion: the controller reloads (a
    layout change the leader reacts to) and checks the request again, on the metadata the write
    would then be conditional on: accepted if its parents are still active there, else refused
    (the retried write merged with the failed one: nothing but this controller reads the reload)."""
    if "op-intent" in m.fixes and s.ctrls[b].version != s.version:
        s = _reload(m, s, b)
        c = s.ctrls[b]
        try:
            new_layout(m, s, Op(kind, parents, (), c.version), c.layout)
        except LayoutError:
            return s
    return _start(m, replace(s, **counted), b, op_on(s.ctrls[b], kind, parents))


def op_on(c: Controller, kind: str, parents: tuple) -> Op:
    """An operation on the controller's layout: child ids from its ``nextSegmentId``."""
    n = c.layout.next_segment_id
    return Op(kind, parents, (n, n + 1) if kind == SPLIT else (n,), c.version)


def _start(m, s: State, b: int, op: Op) -> State:
    c = s.ctrls[b]
    s = _set_ctrl(s, b, replace(c, ops=c.ops + (op,)))
    return replace(s, intent=(op.kind, op.parents)) if "op-intent" in m.fixes else s


def discover(m, s: State, a):
    """Step 1: "The controller queries the parent segment topic for its list of subscriptions"
    (merge: "queries both parent segments ... and takes the union": one query a step). A parent with
    no topic yet (only when step 4 runs before step 2, mutant cas-before-create) has no
    subscriptions. Variant subs-in-metadata: one read, of the metadata the controller loaded."""
    b, i = a.param("broker"), a.param("op")
    op = s.ctrls[b].ops[i]
    if "subs-in-metadata" in m.fixes:
        return _set_op(s, b, i, replace(op, step=m.after[DISCOVER], subs=s.ctrls[b].subs))
    p = op.parents[op.progress]
    subs = op.subs | (frozenset(s.topics[p].cursors.keys()) if p in s.topics else frozenset())
    done = op.progress + 1 == len(op.parents)
    return _set_op(s, b, i, replace(op, step=m.after[DISCOVER] if done else DISCOVER, subs=subs,
                                    progress=0 if done else op.progress + 1))


def create(m, s: State, a):
    """Step 2: ``createSegment(child, subs)``: the topic and a cursor at ``Earliest`` per subscription."""
    b, i = a.param("broker"), a.param("op")
    op = s.ctrls[b].ops[i]
    child = op.children[op.progress]
    t = s.topics.get(child, Topic())
    cursors = t.cursors
    for sub in sorted(op.subs):
        if sub not in cursors:
            cursors = cursors.set(sub, 0)
    s = replace(s, topics=s.topics.set(child, replace(t, cursors=cursors)))
    done = op.progress + 1 == len(op.children)
    return _set_op(s, b, i, replace(op, step=m.after[CREATE] if done else CREATE, progress=0 if done else op.progress + 1))


def terminate(m, s: State, a):
    """Step 3: terminate the parent ("sequentially" for a merge): a marker seals its managed ledger.
    A parent whose topic was never created (only when step 4 runs before step 2, mutant
    cas-before-create) is created terminated, as the retried call finally does."""
    b, i = a.param("broker"), a.param("op")
    op = s.ctrls[b].ops[i]
    p = op.parents[op.progress]
    s = replace(s, topics=s.topics.set(p, replace(s.topics.get(p, Topic()), terminated=True)))
    done = op.progress + 1 == len(op.parents)
    return _set_op(s, b, i, replace(op, step=m.after[TERMINATE] if done else TERMINATE, progress=0 if done else op.progress + 1))


def new_layout(m, s: State, op: Op, layout):
    out = layout.split(op.parents[0]) if op.kind == SPLIT else layout.merge(*op.parents)
    if m.config.variant == "mutant:stale-epoch":
        out = attrs.evolve(out, epoch=layout.epoch)
    return out


def cas(m, s: State, a):
    """Step 4: the CAS succeeds (the version is the one the layout was read at); the controller
    reloads the metadata ("Layout Change Propagation" 1)."""
    b, i = a.param("broker"), a.param("op")
    c = s.ctrls[b]
    op = c.ops[i]
    s = replace(s, version=s.version + 1, layout=new_layout(m, s, op, c.layout), intent=())
    s = _set_ctrl(s, b, loaded(s, c))
    return _set_op(s, b, i, replace(op, step=m.after[CAS]))


def cas_conflict(m, s: State, a):
    """Step 4 fails with BadVersion: "the update fails and must be retried". The controller reloads;
    if the parents are still active the operation starts over on the new layout, else it fails."""
    b, i = a.param("broker"), a.param("op")
    s = _reload(m, s, b)
    c = s.ctrls[b]
    op = c.ops[i]
    try:
        new_layout(m, s, op, c.layout)
    except LayoutError:
        return _failed(s, b, i, op)
    return _set_op(s, b, i, op_on(c, op.kind, op.parents))


def _failed(s: State, b: int, i: int, op: Op) -> State:
    """The operation fails: dropped, and its persisted intent (variant op-intent) with it."""
    if s.intent == (op.kind, op.parents):
        s = replace(s, intent=())
    return _set_op(s, b, i, None)


def notify(m, s: State, a):
    """Step 5: ``notifySubscriptions()``: the coordinator recomputes the assignment against the new
    layout, persists it and pushes it to the consumers whose assignment changed."""
    b, i = a.param("broker"), a.param("op")
    s = _set_op(s, b, i, None)
    return rebalance(m, s, b)


APPLY = {"elect": elect, "learn_deposed": learn_deposed, "layout_changed": layout_changed, "lose_session": lose_session, "crash": crash,
         "request_split": request_split, "request_merge": request_merge, DISCOVER: discover, CREATE: create,
         TERMINATE: terminate, CAS: cas, "cas_conflict": cas_conflict, NOTIFY: notify}
