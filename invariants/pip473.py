"""Properties of PIP-473, each with the section of the PIP it comes from.

User-visible ones first: what a consumer receives, what a client is told,
what an operator sees left behind. Ghost variables (``decided``,
``acks_made``, ``applied``, ``received``, ``filtered``) record history that
GC must not be able to erase from the properties' view.
"""
from __future__ import annotations

from pulsar_verify import answers
from pulsar_verify.model import PropertySet
from pulsar_verify.models.pip473 import Pip473
from pulsar_verify.models.pip473.state import ACK, COMMITTED, FINAL, OPEN

PROPERTIES = PropertySet()


SEC_HEADER = "Data Model / Header: 'OPEN -> COMMITTED and OPEN -> ABORTED are the only allowed transitions'"
SEC_DISPATCH = "Subscribe / dispatch; Goals: 'Atomic transactions over segment:// topics'"
SEC_ACKS = "MetadataPendingAckStore: commit applies acks to the cursor, abort drops them"


@PROPERTIES.action_property("header-state-machine",
                            "A txn header only goes OPEN -> COMMITTED or OPEN -> ABORTED, once", SEC_HEADER)
def header_state_machine(m, s, a, t):
    if t.headers is s.headers and t.decided is s.decided:  # the step left both as they were
        return True
    for txn, before in s.headers:
        after = t.headers.get(txn)
        if after is not None and after.state != before.state and before.state != OPEN:
            return False
    return all(t.decided.get(txn) == d for txn, d in s.decided)


@PROPERTIES.invariant("one-outcome",
                      "Commit and abort never both win: the client's answer, the header and every later reader agree",
                      "End-txn: 'The CAS on the header is the linearization point'")
def one_outcome(m, s):
    for txn, h in s.headers:
        if h.state in FINAL and s.decided.get(txn) != h.state:
            return False
    for i, c in enumerate(s.clients, start=1):
        if c.outcome in FINAL and s.decided.get(i) != c.outcome:
            return False
    return True


@PROPERTIES.action_property("read-committed",
                            "No subscription or reader receives an entry of a txn that is not committed", SEC_DISPATCH,
                            about=("deliver",))
def read_committed(m, s, a, t):
    txn = s.logs[a.param("seg")][a.param("pos")]
    return txn == 0 or s.decided.get(txn) == COMMITTED


@PROPERTIES.action_property("acked-not-redelivered",
                            "An entry the subscription's cursor holds as acknowledged is not delivered to it again, "
                            "across crashes and restarts", "Primer, Managed cursor: 'the mark-delete position ... "
                            "plus individually acknowledged ranges after it'", about=("deliver",))
def acked_not_redelivered(m, s, a, t):
    return a.param("pos") not in s.subs[a.param("seg") * (m.config.subs + m.config.late_subs) + a.param("sub")].acked


@PROPERTIES.action_property("committed-never-filtered",
                            "No subscription or reader skips an entry of a committed txn as aborted "
                            "(sealed segments, late subscriptions and GC included)", SEC_DISPATCH, about=("skip",))
def committed_never_filtered(m, s, a, t):
    return s.decided.get(s.logs[a.param("seg")][a.param("pos")]) != COMMITTED


@PROPERTIES.invariant("dispatch-decisions-agree",
                      "No transactional entry is delivered to one subscription (or before a broker restart) and "
                      "skipped as aborted by another (or after)",
                      "Recovery: 'the participant re-derives state from the header on restart'; Why this works: "
                      "'Sealed parents and live children both consult the same metadata'", about=("deliver", "skip"))
def dispatch_decisions_agree(m, s):
    received, filtered = set(), set()
    n = m.config.subs + m.config.late_subs
    for i, sub in enumerate(s.subs):
        seg = i // n
        received.update((seg, p) for p in sub.received if s.logs[seg][p])
        filtered.update((seg, p) for p in sub.filtered)
    return not (received & filtered)


@PROPERTIES.invariant("acks-only-from-committed", "An aborted txn's acks never reach the cursor", SEC_ACKS)
def acks_only_from_committed(m, s):
    return all(s.decided.get(txn) == COMMITTED for _, txn in s.applied)


@PROPERTIES.invariant("committed-acks-not-lost",
                      "Every ack of a committed txn is in the cursor or still recorded for its store to apply",
                      SEC_ACKS + "; review: 'GC orphan-cleanup window vs. slow participant can lose committed work'")
def committed_acks_not_lost(m, s):
    n = m.config.subs + m.config.late_subs
    recorded = {(txn, op.seg, op.sub, op.pos) for (txn, _), op in s.ops if op.kind == ACK}
    for ack in s.acks_made:
        txn, seg, sub, pos = ack
        if s.decided.get(txn) == COMMITTED and ack not in recorded and pos not in s.subs[seg * n + sub].acked:
            return False
    return True


@PROPERTIES.action_property("no-write-after-end",
                            "A send is acknowledged to the client only while its txn's header is OPEN",
                            "Late-write race: 'The publish-path header check on the participant broker rejects "
                            "with TxnConflict'", on=("pub_ack",))
def no_write_after_end(m, s, a, t):
    h = s.headers.get(a.param("txn"))
    return h is not None and h.state == OPEN


@PROPERTIES.invariant("entries-are-sends",
                      "A consumer sees no transactional entry its producer did not send: no txn has more entries "
                      "in the segments' logs than sends its producer made (pipelined sends included)",
                      "Flows / Publish (transactional): one asyncAddEntry per send(txnId, payload)")
def entries_are_sends(m, s):
    entries: dict[int, int] = {}
    for log in s.logs:
        for txn in log:
            entries[txn] = entries.get(txn, 0) + 1
    return all(entries.get(t, 0) <= c.sends for t, c in enumerate(s.clients, start=1))


# The steps a segment's broker serves or takes: a request to the segment, its own work, a watch event
# it handles. Not restart (the way back up), not seal (the controller's metadata change, PIP-468), not
# subscribe (a late subscription's cursor, made in the store, names no segment).
_SERVED = frozenset(n for n, arrows in Pip473.sequence.items() if "Segment{seg}" in arrows) - {
    "restart", "seal", "subscribe"}


@PROPERTIES.action_property("crashed-broker-serves-nothing",
                            "While a segment's broker is down, the segment accepts no send or ack, delivers and "
                            "trims nothing, and handles no watch event: a client's request to it fails",
                            "Recovery: a restarted broker rebuilds from the store, so nothing is served from the "
                            "in-memory state a crash lost", on=_SERVED)
def crashed_broker_serves_nothing(m, s, a, t):
    return s.up[a.param("seg")]


def _ending(m, s):
    return any(c.phase == "ending" for c in s.clients)


# Weak fairness: every system step (TC, brokers, stores, dispatchers, sweeps, restarts, time passing) is
# weakly fair; what the environment does (clients' choices, crashes, seals, new subscriptions) need not happen.
ENVIRONMENT = {"new_txn", "end_txn", "send", "send_conflict", "txn_ack", "txn_ack_cumulative", "nontxn_send", "seal",
               "crash", "tc_crash", "subscribe"}
SYSTEM = tuple(sorted(set(Pip473.action_labels) - ENVIRONMENT))

PROPERTIES.leads_to("end-txn-completes",
                    "Every end-txn the client asks for is answered, with segments sealed mid-transaction",
                    "Why this works: 'Sealing a segment is irrelevant ... End-txn becomes a metadata-store CAS'",
                    trigger=_ending, fair=SYSTEM)


def _uncollected(m, s):
    return any(txn in s.headers or any(k[0] == txn for k, _ in s.ops) for txn, _ in s.decided)


PROPERTIES.leads_to("finalized-txns-collected",
                    "Every finalized txn's op records and header are eventually deleted",
                    "Garbage collection: two phases, participant materialization then header GC sweep",
                    trigger=_uncollected, fair=SYSTEM)


def _forgotten_but_cached(m, s):
    """A running broker still holds, in its header cache, index view or pending acks, a txn the
    metadata store has forgotten (no header, no op record)."""
    live = set(s.headers.keys()) | {k[0] for k, _ in s.ops}
    if any(s.up[seg] and (set(b.hdr.keys()) | set(b.writes.keys())) - live for seg, b in enumerate(s.buffers)):
        return True
    nsubs = len(s.pending) // len(s.buffers)
    return any(s.up[i // nsubs] and (set(p.hdr.keys()) | set(p.acks.keys())) - live for i, p in enumerate(s.pending))


PROPERTIES.leads_to("collected-txns-leave-brokers",
                    "Once a txn's records are collected, every running broker eventually drops it from its header "
                    "cache, index view and pending acks: broker memory does not grow with finished txns",
                    "Notification mechanism: the header cache is 'kept up to date by point-watches', "
                    "maxReadPosition 'populated by a watch on idx:writes-by-segment'; Garbage collection",
                    trigger=_forgotten_but_cached, fair=SYSTEM)


def _undelivered(m, s):
    """Some existing subscription has not yet read up to an entry of a committed txn. (Reading
    past it without delivering it is the safety property ``committed-never-filtered``.)"""
    n = m.config.subs + m.config.late_subs
    for seg, log in enumerate(s.logs):
        for sub in s.subs[seg * n:(seg + 1) * n]:
            if sub.exists and any(log[p] and s.decided.get(log[p]) == COMMITTED
                                  for p in range(max(sub.read, s.first[seg]), len(log))):
                return True
    return False


PROPERTIES.leads_to("committed-entries-delivered",
                    "Once a txn commits, every subscription eventually receives all its entries, sealed "
                    "segments included",
                    "Goals: 'Atomic transactions over segment:// topics (writes and acks), including "
                    "transactions whose "
                    "lifetime spans split/merge'",
                    trigger=_undelivered, fair=SYSTEM)


@PROPERTIES.sometimes("sealed-txn-delivered",
                      "Where the bounds allow a seal: a subscription receives a committed txn's entry from a segment "
                      "that has been sealed (a split or merge does not strand transactional data)",
                      "Goals: 'including transactions whose lifetime spans split/merge'; Scalable topics: segments "
                      "'get sealed when split or merged'")
def sealed_txn_delivered(m, s):
    if m.config.seals == 0:
        return True  # nothing to show at these bounds: any state is the example
    n = m.config.subs + m.config.late_subs
    return any(s.sealed[seg] and log[p] and s.decided.get(log[p]) == COMMITTED
               for seg, log in enumerate(s.logs) for sub in s.subs[seg * n:(seg + 1) * n] for p in sub.received)


def _header_not_open(m, s, a, t) -> bool:
    """TxnConflict: the transaction's header in the store is not OPEN (final, or collected)."""
    h = s.headers.get(a.param("txn"))
    return h is None or h.state != OPEN


def _sealed(m, s, a, t) -> bool:
    return s.sealed[a.param("seg")]


answers.declare(PROPERTIES, Pip473,
                judges={"send_conflict": _header_not_open, "pub_late": _header_not_open, "pub_terminated": _sealed,
                        "crash": answers.says_nothing},
                judged_by={"tc_reply": "one-outcome", "pub_ack": "no-write-after-end"},
                statement="Every answer a client is given is true when it is given: TxnConflict comes for a "
                          "transaction whose header is no longer OPEN, TopicTerminated from a sealed segment (the "
                          "end-txn reply and the send's acknowledgement are judged by their own properties)",
                section="Late-write race: 'The publish-path header check on the participant broker rejects with "
                        "TxnConflict'; primer: a terminated managed ledger fails appends with TopicTerminated")
