"""Properties of the v4 transaction model, each with the PIP-473 "Background" text it
comes from. ``read_committed`` and ``committed_never_filtered`` are shared with PIP-373,
which runs on the same transaction buffer."""
from __future__ import annotations

from pulsar_verify.model import PropertySet
from pulsar_verify.models.v4txn import V4Txn
from pulsar_verify.models.v4txn.state import ABORTED, COMMIT_MARKER, COMMITTED, DATA, ENDING, OPEN

PROPERTIES = PropertySet()


SEC_TB = ("Background: the TB 'gates the dispatcher's read horizon (maxReadPosition) so that uncommitted "
          "entries are not delivered'")


# The steps the two read-path properties constrain (pip-373's model reuses them with its own labels of the same names)


def read_committed(m, s, a, t):
    txn = s.logs[a.param("topic")][a.param("pos")][1]
    return txn == 0 or s.decided.get(txn) == COMMITTED


def committed_never_filtered(m, s, a, t):
    return s.decided.get(s.logs[a.param("topic")][a.param("pos")][1]) != COMMITTED


def acks_only_from_committed(m, s):
    """A position is in the cursor only if a committed txn acked it (whatever txn the cursor
    names: a commit that applies another txn's ack is caught too)."""
    committed = {(topic, pos) for topic, log in enumerate(s.pending_logs)
                 for kind, txn, pos in log if kind == "ack" and s.decided.get(txn) == COMMITTED}
    return all(key in committed and s.decided.get(txn) == COMMITTED for key, txn in s.cursors)


def acked_once(m, s):
    """No position is acked by two txns that both commit (read from the pending-ack topics, so a
    commit that overwrites the cursor's owner is caught too)."""
    for log in s.pending_logs:
        owner = {}
        for kind, txn, pos in log:
            if kind == "ack" and s.decided.get(txn) == COMMITTED and owner.setdefault(pos, txn) != txn:
                return False
    return True


def acked_not_redelivered(m, s, a, t):
    return (a.param("topic"), a.param("pos")) not in s.cursors


def committed_acks_applied(m, s):
    """A txn's acks are in the cursor once its subscription has the commit marker (appended by the
    step that applies them) or once the TC has logged it COMMITTED (after every participant,
    subscriptions included, answered: what the client is then told)."""
    for topic, log in enumerate(s.pending_logs):
        committed = {t for kind, t, _ in log if kind == COMMIT_MARKER} | {t for t, st in s.tc if st == COMMITTED}
        if any(kind == "ack" and t in committed and (topic, pos) not in s.cursors for kind, t, pos in log):
            return False
    return True


def sealed_accepts_no_write(m, s, a, t):
    return all(t.logs[topic] == log for topic, log in enumerate(s.logs) if s.sealed[topic])


def undelivered(m, s):
    """A subscription has not yet read up to an entry of a committed txn. (Reading past it without
    delivering it is the safety property ``committed-never-filtered``.)"""
    return any(kind == DATA and s.decided.get(txn) == COMMITTED
               for topic, log in enumerate(s.logs) for kind, txn in log[s.subs[topic].read:])


def sending(m, s):
    """A transactional send is on its way: added to the txn, neither appended nor refused yet."""
    return bool(s.publishes)


def sends_done(m, s):
    return not s.publishes


def undelivered_none_open(m, s):
    """``undelivered``, while no txn is open: an open txn holds the read horizon until it ends,
    and ending it is the client's step (the model has no transaction timeout)."""
    return undelivered(m, s) and all(c.phase != "open" for c in s.clients.values())


NEXT = {OPEN: {ENDING[COMMITTED], ENDING[ABORTED]}, ENDING[COMMITTED]: {COMMITTED}, ENDING[ABORTED]: {ABORTED}}


def tc_state_machine(m, s, a, t):
    for txn, before in s.tc:
        after = t.tc.get(txn)
        if after != before and after not in NEXT.get(before, ()):
            return False
    return True


def ending(m, s):
    return any(c.phase == "ending" for c in s.clients.values())


def unsealed_ending(m, s):
    """A client waits for the end of a txn that wrote to no sealed topic."""
    return any(c.phase == "ending" and not any(s.sealed[topic] for topic in s.parts.get(t, ()))
               for t, c in s.clients.items())


_SERVED: dict[type, frozenset] = {}


def _served(m) -> frozenset:
    """The steps a topic's broker serves or takes: a request to the topic, its own work, its dispatcher.
    Not the TC re-sending an RPC (the broker serves it once it is up), not a load (the way back up), not a
    crash, not a seal (the operator's split or merge terminates the managed ledger). Once per model class."""
    cls = type(m)
    if cls not in _SERVED:
        _SERVED[cls] = frozenset(n for n, arrows in cls.sequence.items() if "Topic{topic}" in arrows
                                 and n in cls.action_labels) - {"tc_retry", "crash", "seal", *m.load_labels()}
    return _SERVED[cls]


def crashed_broker_serves_nothing(m, s, a, t):
    return a.name not in _served(m) or m.serving(s, a.param("topic"))


# Weak fairness: every step of the TC, the brokers and the dispatcher; not what clients, operators
# (seals) or failures (crashes) do.
ENVIRONMENT = {"new_txn", "add_partition", "end_txn", "txn_ack", "send_nontxn", "seal", "crash", "take_snapshot"}
SYSTEM = tuple(sorted(set(V4Txn.action_labels) - ENVIRONMENT))
SEC_END = "How the two interact: 'End-of-transaction stalls on sealed segments ... The end-txn RPC times out'"


PROPERTIES.action_property("read-committed", "No subscription receives an entry of a txn that is not committed",
                           SEC_TB, about=("deliver",))(read_committed)
PROPERTIES.action_property("committed-never-filtered", "No subscription skips an entry of a committed txn as aborted",
                           SEC_TB, about=("skip",))(committed_never_filtered)
PROPERTIES.invariant("acks-only-from-committed", "An aborted txn's acks never reach the cursor",
                     "Background: the PendingAckStore applies acks 'to the cursor only when the transaction commits'")(
         acks_only_from_committed)
PROPERTIES.action_property("tc-state-machine",
                           "The TC's log moves a txn only OPEN -> COMMITTING -> COMMITTED or OPEN -> "
                           "ABORTING -> ABORTED",
                           "Background: the TC 'tracks the lifecycle of every transaction (OPEN, "
                           "COMMITTING, COMMITTED, "
                           "ABORTING, ABORTED ...)'")(tc_state_machine)
PROPERTIES.leads_to("end-txn-completes",
                    "Every end-txn the client asks for is answered, with topics sealed mid-transaction",
                    SEC_END, trigger=ending, fair=SYSTEM)
PROPERTIES.leads_to("unsealed-txns-complete",
                    "A txn that wrote to no sealed topic is answered, even while another txn stalls on one: the "
                    "stall stays with the txns that touched the sealed segment",
                    SEC_END + "; Background: the TC 'orchestrates two-phase commit across the topics that "
                    "participate'", trigger=unsealed_ending, fair=SYSTEM)
PROPERTIES.invariant("committed-acks-applied",
                     "A committed txn's acks are never lost: once its subscription has processed the commit, or the "
                     "TC has logged it committed, each of them is in the cursor",
                     "Background: the PendingAckStore applies acks 'to the cursor only when the transaction commits'")(
         committed_acks_applied)
PROPERTIES.invariant("acked-once",
                     "No message is acknowledged by two transactions that both commit: a consume-transform-produce "
                     "pipeline processes each message once",
                     "Background: the PendingAckStore applies acks 'to the cursor only when the transaction commits'; "
                     "Notification mechanism: on abort it 'drops the buffered acks', which frees the message for "
                     "another txn")(acked_once)
PROPERTIES.action_property("acked-not-redelivered",
                           "An entry the subscription's cursor holds as acknowledged is not delivered to it again, "
                           "after a crash and its rewind too (the cursor here is persisted when the ack is applied)",
                           "Primer, Managed cursor: 'the mark-delete position ... plus individually acknowledged "
                           "ranges after it'; after a crash 'the cursor restarts from the last persisted state'",
                           about=("deliver",))(acked_not_redelivered)
PROPERTIES.action_property("sealed-accepts-no-write",
                           "A sealed topic accepts no write: no producer is acknowledged for an entry appended to it",
                           "How the two interact: sealed segments reject appends (TopicTerminated)")(
         sealed_accepts_no_write)
PROPERTIES.action_property("crashed-broker-serves-nothing",
                           "While a topic's broker is down (crashed, its buffer not yet rebuilt), the topic accepts "
                           "no send or ack, answers no RPC and delivers nothing: a reply it had not sent is lost "
                           "with it, and the TC's retry is served once the topic is loaded again",
                           "Background: the TB 'rebuilds it on topic load by reading the log'; primer: on a load "
                           "'in-memory state ... is rebuilt from storage'")(crashed_broker_serves_nothing)
PROPERTIES.leads_to("committed-entries-delivered",
                    "Once a txn commits, its subscription eventually receives all its entries, across crashes, "
                    "reloads and seals",
                    SEC_TB, trigger=undelivered_none_open, goal=lambda m, s: not undelivered(m, s), fair=SYSTEM,
                    about=("deliver",))
PROPERTIES.leads_to("sends-complete",
                    "A producer's transactional send never hangs: it is eventually appended, or refused "
                    "(TopicTerminated), or fails with the broker",
                    "Background: the TB 'appends transactional entries' to the topic", trigger=sending,
                    goal=sends_done, fair=SYSTEM)


@PROPERTIES.sometimes("txn-ack-applied",
                      "Where the bounds allow an ack: a consumer acknowledges a message in a transaction that commits, "
                      "and the ack reaches the subscription's cursor",
                      "Background: the PendingAckStore applies acks 'to the cursor only when the transaction commits'")
def txn_ack_applied(m, s):
    return m.config.acks == 0 or len(s.cursors) > 0


@PROPERTIES.sometimes("aborted-ack-freed",
                      "Where the bounds allow two txns with acks: a message acked in a txn that aborts is acked again "
                      "in a txn that commits, and that ack reaches the cursor",
                      "Notification mechanism: on abort the PendingAckStore 'drops the buffered acks'")
def aborted_ack_freed(m, s):
    if m.config.acks == 0 or m.config.txns < 2:
        return True
    return any(s.decided.get(txn) == ABORTED and s.decided.get(s.cursors.get((topic, pos))) == COMMITTED
               for topic, log in enumerate(s.pending_logs) for kind, txn, pos in log if kind == "ack")
