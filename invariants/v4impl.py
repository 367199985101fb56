"""Properties of ``v4-impl``, stated as a producer, consumer or reader sees them: the v4 model's
(with the fairness of this model's own steps: topic load, recovery, the reader's loop, timeouts),
and the symptoms users report (apache/pulsar issues and PRs named in each)."""
from __future__ import annotations

import attrs

from pulsar_verify import answers
from pulsar_verify.model import PropertySet
from pulsar_verify.models.v4impl import V4Impl
from pulsar_verify.models.v4impl.coordinator_restart import INVALID, NOT_FOUND
from pulsar_verify.models.v4impl.reader import aborted_in_log
from pulsar_verify.models.v4impl.state import READING
from pulsar_verify.models.v4txn.state import ABORT_MARKER, ABORTED, ABORTING, COMMITTED, DATA, OPEN

from . import v4txn

PROPERTIES = PropertySet()

# Weak fairness: the TC (its timeout included), the brokers (load, recovery, dispatch) and the reader's
# loop; not what producers and transactional clients do, nor crashes, snapshots or seals.
SYSTEM = tuple(sorted(set(V4Impl.action_labels) - v4txn.ENVIRONMENT
                     - {"redeliver", "ack_refused", "tc_crash", "end_deferred", "end_timeout",
                        "add_partition_unavailable", "ack_unavailable"}))
READER = "Pulsar client Reader: 'hasMessageAvailable ... readNext'; apache/pulsar #11877, PR #22610"
# About sealed segments, which persistent:// topics are not:
SINCE_V4 = {"sealed-accepts-no-write", "unsealed-txns-complete"}

RESTATED = {"end-txn-completes": "Every end-txn the client asks for, or the timeout starts, is answered, across "
                                "crashes and reloads"}

for p in v4txn.PROPERTIES.items:
    if p.id not in SINCE_V4:
        PROPERTIES.items.append(attrs.evolve(p, statement=RESTATED.get(p.id, p.statement),
                                             fair=SYSTEM if p.kind == "liveness" else p.fair))


@PROPERTIES.action_property("last-id-within-horizon",
                            "A reader is never told a message is available when the only newer entries are those "
                            "of a transaction not yet ended on the topic, or while the topic's buffer recovers",
                            "apache/pulsar PR #21466: getLastMessageIds 'should return the max read position "
                            "instead of lastConfirmedEntry'", on=("get_last_id",))
def last_id_within_horizon(m, s, a, t):
    return not t.reader.beyond


PROPERTIES.leads_to("told-available-reads",
                    "A reader told a message is available eventually reads one (readNext returns)", READER,
                    trigger=lambda m, s: s.reader.phase == READING,
                    fair=SYSTEM)


def _open(m, s) -> bool:
    return any(state == OPEN for _, state in s.tc)


PROPERTIES.leads_to("open-txn-ends",
                    "An open transaction eventually ends, if only by the coordinator's timeout",
                    "Pulsar documentation, transactions: a transaction 'is aborted' once its timeout expires",
                    trigger=_open, fair=SYSTEM)


def _plain_unread(m, s) -> bool:
    return any(kind == DATA and not txn and pos not in s.subs[topic].received
               for topic, log in enumerate(s.logs) for pos, (kind, txn) in enumerate(log))


PROPERTIES.leads_to("plain-message-delivered",
                    "A non-transactional message is eventually delivered to the subscription, whatever "
                    "transactions around it do",
                    "Background: the TB 'gates the dispatcher's read horizon (maxReadPosition)'; an open "
                    "transaction holds it only until it ends",
                    trigger=_plain_unread, fair=SYSTEM, about=("deliver",))


def standing_ack(s, txn, topic, pos) -> bool:
    """An ack of ``pos`` the broker accepted that still stands: committed, or of a transaction whose abort
    the subscription has not processed (its abort marker is not in the pending-ack store)."""
    return (txn, topic, pos) in s.acks_ok and (ABORT_MARKER, txn, -1) not in s.pending_logs[topic]


@PROPERTIES.action_property("first-ack-never-conflicts",
                            "A transactional ack of a delivered message fails with a conflict only if another "
                            "ack of it stands: a message whose earlier acks were all aborted, and the aborts "
                            "done, can be acknowledged again",
                            "Pulsar documentation, transactions: a message acknowledged in an aborted "
                            "transaction is redelivered; PendingAckHandleImpl: a conflict is an ack of a "
                            "position 'already acked before' or 'in pending ack status'", on=("ack_conflict",))
def first_ack_never_conflicts(m, s, a, t):
    topic, pos = a.param("topic"), a.param("pos")
    return (topic, pos) in s.cursors or any(standing_ack(s, x, tp, p) for x, tp, p in s.acks_ok
                                            if (tp, p) == (topic, pos))


FAILED = {ABORTED, NOT_FOUND, INVALID}  # what the application takes for "not committed" (Timeout says nothing)


@PROPERTIES.invariant("client-told-the-outcome",
                      "An application told its transaction committed has it committed; one whose commit or abort "
                      "failed (aborted, TransactionNotFound, InvalidTxnStatus) does not have it committed (it would "
                      "send its messages again)",
                      "Pulsar client API: Transaction.commit() completes exceptionally when the transaction did not "
                      "commit; apache/pulsar #19629 'Throw exception though transaction committed successfully'")
def client_told_the_outcome(m, s) -> bool:
    for t, c in s.clients.items():
        committed = s.decided.get(t) == COMMITTED
        if c.outcome == COMMITTED and not committed or c.outcome in FAILED and committed:
            return False
    return True


def _not_open(m, s, a, t) -> bool:
    """A refusal because the transaction is no longer open: the coordinator is aborting it or has aborted it."""
    return s.tc.get(a.param("txn")) in (ABORTING, ABORTED)


def _coordinator_down(m, s, a, t) -> bool:
    return not s.tc_up


def _message_queued(m, s, a, t) -> bool:
    return bool(s.reader.queue)


# Each answer of the ``answer`` kind and what makes it true; the end-txn outcomes are client-told-the-outcome's (an
# invariant over what the application was told, so it also holds them true after later steps), the conflict
# first-ack-never-conflicts', the last message id last-id-within-horizon's.
answers.declare(PROPERTIES, V4Impl,
                judges={"ack_refused": _not_open, "ack_rejected": _not_open, "add_partition_refused": _not_open,
                        "append_not_allowed": _not_open, "end_refused": _not_open,
                        "ack_unavailable": _coordinator_down, "add_partition_unavailable": _coordinator_down,
                        "end_timeout": answers.says_nothing, "crash": answers.says_nothing,
                        "has_message_queued": _message_queued},
                judged_by={"end_reply": "client-told-the-outcome", "tc_end": "client-told-the-outcome",
                           "ack_conflict": "first-ack-never-conflicts", "get_last_id": "last-id-within-horizon"},
                statement="Every answer a client or the reader is given is true when it is given: a request refused "
                          "because its transaction is not open is refused by a coordinator aborting it; "
                          "TransactionCoordinatorNotFound comes while the coordinator is down; a reader is told a "
                          "message is available from its receiver queue only when one is queued (end-txn outcomes, "
                          "conflicts and the last message id are judged by their own properties)",
                section="Pulsar client API: a failed send or ack of a transaction makes the application abort it; "
                        "TransactionCoordinatorClientException.InvalidTxnStatusException, "
                        "CoordinatorNotFoundException")


@PROPERTIES.target("reader-stuck-on-aborted-tail",
                   "a reader was told a message is available, its receiver queue is empty, and every entry "
                   "after the last one it read is a transaction marker or an aborted transaction's entry",
                   "apache/pulsar #11877; PR #22610 'Fix Reader can be stuck from transaction aborted messages'")
def reader_stuck_on_aborted_tail(m, s) -> bool:
    r = s.reader
    log = s.logs[0]
    aborted = aborted_in_log(log)
    return (r.phase == READING and not r.queue and len(log) > r.pos + 1
            and all(kind != DATA or txn in aborted for kind, txn in log[r.pos + 1:]))


@PROPERTIES.target("reader-told-available-beyond-horizon",
                   "a reader was told a message is available, its receiver queue is empty, and the last message "
                   "id it was given is past what it can read: the entry of a transaction not yet ended on the "
                   "topic, or any while the buffer recovered",
                   "apache/pulsar PR #21466 'Fix getting last message ID when there are ongoing transactions'")
def reader_told_available_beyond_horizon(m, s) -> bool:
    return s.reader.phase == READING and not s.reader.queue and s.reader.beyond


@PROPERTIES.target("commit-reported-failed",
                   "an application's commit completed with TransactionNotFound or InvalidTxnStatus, and the "
                   "transaction is committed",
                   "apache/pulsar #19629 'Throw exception though transaction committed successfully'")
def commit_reported_failed(m, s) -> bool:
    return any(c.outcome in (NOT_FOUND, INVALID) and s.decided.get(t) == COMMITTED
               for t, c in s.clients.items())


@PROPERTIES.target("txn-stranded-after-tc-reload",
                   "the reloaded coordinator serves, and a transaction it holds can be ended only by its client: "
                   "its timeout was lost, or nothing drives its commit or abort",
                   "apache/pulsar #19200 'Timeout transaction do not end', #18923; PR #19201")
def txn_stranded_after_tc_reload(m, s) -> bool:
    return s.tc_up and bool(s.untimed | s.orphaned)
