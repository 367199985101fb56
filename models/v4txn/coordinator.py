"""The legacy (v4) Transaction Coordinator and the client's side of a transaction.

PIP-473 "Background": the TC is "backed by a system topic (``__transaction_log_*``)
that tracks the lifecycle of every transaction (OPEN, COMMITTING, COMMITTED,
ABORTING, ABORTED ...) and orchestrates two-phase commit across the topics"; "When
a transaction ends, the TC sends END_TXN_ON_PARTITION (and END_TXN_ON_SUBSCRIPTION
for acks) to every participant." Each fan-out RPC is its own message: it can fail
(the participant's broker crashed, or its topic rejected the marker) and the TC
retries it ("The end-txn RPC times out (~30s)"); the TC logs the final state and
answers the client once every participant has answered.

The client waits for its sends before ending (v4's own late-write race is outside
this model); timeouts are left out for the same reason.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import replace

from .state import ABORTED, COMMITTED, ENDING, OPEN, PARTITION, SUBSCRIPTION, State


def actions(m, s: State):
    cfg = m.config
    for t in range(1, cfg.txns + 1):
        c = s.clients[t]
        if c.phase == "idle":
            yield act("new_txn", txn=t)
        elif c.phase == "open" and not m.in_flight(s, t):
            if c.sends < cfg.writes:
                for topic in range(cfg.topics):
                    yield act("add_partition", txn=t, topic=topic)
            if not c.failed:
                yield act("end_txn", txn=t, want=COMMITTED)
            yield act("end_txn", txn=t, want=ABORTED)
        elif (c.phase == "ending" and m.config.variant == "mutant:end-any-state" and t in s.decided
              and s.tc[t] == ENDING[s.decided[t]]):
            yield act("end_txn", txn=t, want=ABORTED if s.decided[t] == COMMITTED else COMMITTED)
    for (t, kind, topic), status in s.rpcs:
        if status == "failed":
            yield act("tc_retry", txn=t, kind=kind, topic=topic)
        elif status == "written":
            yield act("partition_reply", txn=t, topic=topic)
    alone = m.config.variant == "mutant:tc-ends-one-at-a-time"
    for t, state in s.tc:
        if alone and any(c.phase in ("open", "ending") for x, c in s.clients.items() if x != t):
            continue
        if state in ENDING.values() and all(st == "done" for (x, _, _), st in s.rpcs if x == t):
            yield act("tc_end", txn=t)


def new_txn(m, s: State, a):
    t = a.param("txn")
    return replace(s, tc=s.tc.set(t, OPEN), clients=s.clients.set(t, replace(s.clients[t], phase="open")))


def add_partition(m, s: State, a):
    """ADD_PARTITION_TO_TXN (logged by the TC), then the client's send is in flight to the topic."""
    t, topic = a.param("txn"), a.param("topic")
    c = s.clients[t]
    return replace(s, parts=s.parts.set(t, s.parts.get(t, frozenset()) | {topic}),
                   publishes=s.publishes | {(t, topic)},
                   clients=s.clients.set(t, replace(c, sends=c.sends + 1)))


def end_txn(m, s: State, a):
    """The TC logs COMMITTING / ABORTING (the decision) and sends the fan-out RPCs."""
    t, want = a.param("txn"), a.param("want")
    rpcs = s.rpcs
    for topic in sorted(s.parts.get(t, ())):
        rpcs = rpcs.set((t, PARTITION, topic), "sent")
    for topic in sorted(s.subs_of.get(t, ())):
        rpcs = rpcs.set((t, SUBSCRIPTION, topic), "sent")
    decided = s.decided if t in s.decided else s.decided.set(t, want)
    return replace(s, tc=s.tc.set(t, ENDING[want]), rpcs=rpcs, decided=decided,
                   clients=s.clients.set(t, replace(s.clients[t], phase="ending")))


def tc_retry(m, s: State, a):
    return replace(s, rpcs=s.rpcs.set((a.param("txn"), a.param("kind"), a.param("topic")), "sent"))


def partition_reply(m, s: State, a):
    """The participant's answer to END_TXN_ON_PARTITION reaches the TC."""
    return replace(s, rpcs=s.rpcs.set((a.param("txn"), PARTITION, a.param("topic")), "done"))


def tc_end(m, s: State, a):
    """Every participant answered: the TC logs COMMITTED / ABORTED and answers the client."""
    t = a.param("txn")
    final = COMMITTED if s.tc[t] == ENDING[COMMITTED] else ABORTED
    rpcs = s.rpcs
    for key, _ in s.rpcs:
        if key[0] == t:
            rpcs = rpcs.remove(key)
    return replace(s, tc=s.tc.set(t, final), rpcs=rpcs,
                   clients=s.clients.set(t, replace(s.clients[t], phase="done", outcome=final)))


APPLY = {"new_txn": new_txn, "add_partition": add_partition, "end_txn": end_txn, "tc_retry": tc_retry,
         "partition_reply": partition_reply, "tc_end": tc_end}
