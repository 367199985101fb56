"""The transaction coordinator's crash and reload, and the client's end-txn request across them.

apache/pulsar: the TC (``MLTransactionMetadataStore``) lives on the broker that owns its
``__transaction_log_*`` partition. A crash loses its memory (the transactions it drives, its timeout
tracker, the replies it has not sent); its log survives. Another broker loads it: the store replays the
log and is registered in ``TransactionMetadataStoreService.stores`` (``openStore`` -> ``store.init``);
until then every request is answered ``TransactionCoordinatorNotFound``. The replay drops ended
transactions from memory (``updateTxnStatus`` to COMMITTED / ABORTED removes them), re-arms the timeout of
each open one, and ``TransactionRecoverTracker.handleCommittingAndAbortingTransaction`` calls
``endTransaction`` again for each COMMITTING / ABORTING one.

Before apache/pulsar PR #19201 (#18923, #19200), the recovery and the timeout tracker ran before the store
was registered: their ``endTransaction`` failed with ``CoordinatorNotFoundException``, which
``isRetryableException`` does not retry, so a committing or aborting transaction was no longer driven and
a timeout already due at the reload was lost. The fix variant ``pr-19201`` runs them once the store serves.

The client (``TransactionMetaStoreHandler``) keeps each request pending: it retries on
``TransactionCoordinatorNotFound`` and resends on reconnect (with retry), until its operation timeout
fails it (without retry). A resent END_TXN for a transaction the TC has already ended and dropped is
answered ``TransactionNotFound``; one for a transaction ending the other way, ``InvalidTxnStatus``
(apache/pulsar #19629). Fix variant ``idempotent-end`` (PIP-255, PR #19662): the TC keeps an ended
transaction's outcome and answers a retried end-txn that asks for it with success.

``ends`` holds each client's END_TXN as (status, asked for, answer): ``held`` (the TC runs its
``endTransaction``), ``retrying`` (the client's handler will resend it) or ``reply`` (the answer is on its
way).
"""
from __future__ import annotations

from itertools import combinations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import coordinator
from pulsar_verify.models.v4txn.state import ABORTED, COMMITTED, ENDING, OPEN
from pulsar_verify.values import replace

from . import consumers, timeout
from .state import ImplState, with_client

FIX_RECOVERY = "pr-19201"
FIX_IDEMPOTENT = "idempotent-end"
HELD, RETRYING, REPLY = "held", "retrying", "reply"
NOT_FOUND, INVALID, TIMEOUT = "TransactionNotFound", "InvalidTxnStatus", "Timeout"
# A client request while the TC is down: END_TXN stays pending (retried); the others fail at the operation timeout
UNAVAILABLE = {"end_txn": "end_deferred", "add_partition": "add_partition_unavailable", "txn_ack": "ack_unavailable",
               "ack_refused": "ack_unavailable"}
# The TC's own steps: none runs while it is down, nor for a transaction no one drives any more
TC_STEPS = {"new_txn", "tc_retry", "partition_reply", "tc_end", "txn_timeout"}


def actions(m, s: ImplState):
    if not s.tc_up:
        yield from _reloads(m, s)
    elif s.tc_crashes < m.config.tc_crashes:
        yield act("tc_crash")
    for t, (status, want, _) in s.ends:
        if status == REPLY:
            yield act("end_reply", txn=t)
        elif status == RETRYING:
            yield act("end_timeout", txn=t)
            if s.tc_up:
                yield act(_resend(m, s, t, want), txn=t)


def route(m, s: ImplState, a):
    """A client request while the TC is down is held by the client (``UNAVAILABLE``); the TC's own steps
    need it up, and a driver for the transaction."""
    if not s.tc_up:
        if a.name in UNAVAILABLE:
            return act(UNAVAILABLE[a.name], **dict(a.params))
        return None if a.name in TC_STEPS else a
    if a.name in TC_STEPS and (a.param("txn") in s.orphaned or
                               a.name == "txn_timeout" and a.param("txn") in s.untimed):
        return None
    return a


def _reloads(m, s: ImplState):
    """Pre-fix, a timeout that fell due while the TC was down fires during the replay and is lost: one
    reload for each set of open transactions that can be."""
    if FIX_RECOVERY in m.fixes:
        yield act("tc_reload", expired=())
        return
    open_ = sorted(t for t, st in s.tc if st == OPEN and t not in s.untimed)
    for k in range(len(open_) + 1):
        for expired in combinations(open_, k):
            yield act("tc_reload", expired=expired)


def _resend(m, s: ImplState, t: int, want: str) -> str:
    """The TC's answer to a resent END_TXN, by the transaction's state in its log."""
    state = s.tc.get(t, OPEN)
    if state in (OPEN, ENDING[want]):
        return "end_resend"
    if state in (COMMITTED, ABORTED) and FIX_IDEMPOTENT not in m.fixes:
        return "end_not_found"
    return "end_resend" if state == want else "end_invalid_status"


def _redriven(s: ImplState, t: int) -> ImplState:
    """``endTransaction`` again: every END_TXN_ON_PARTITION / _SUBSCRIPTION is sent anew."""
    rpcs = s.rpcs
    for key, _ in s.rpcs:
        if key[0] == t:
            rpcs = rpcs.set(key, "sent")
    return replace(s, rpcs=rpcs, orphaned=s.orphaned - {t})


def end_txn(m, s: ImplState, a):
    """The client's END_TXN reaches the TC, which logs COMMITTING / ABORTING and drives the end (v4's step);
    the TC holds the request until it answers."""
    t = coordinator.end_txn(m, s, a)
    return replace(t, ends=t.ends.set(a.param("txn"), (HELD, a.param("want"), "")))


def end_deferred(m, s: ImplState, a):
    """END_TXN while the TC is down: ``TransactionCoordinatorNotFound``; the client's handler keeps the request
    and retries it."""
    t = a.param("txn")
    s = with_client(s, t, phase="ending")
    return replace(s, ends=s.ends.set(t, (RETRYING, a.param("want"), "")))


def end_resend(m, s: ImplState, a):
    """The resent END_TXN reaches a serving TC. An open transaction is ended as by ``end_txn``; one ending
    the same way is driven again (``endTransaction`` sends the participants' RPCs anew); with
    ``idempotent-end``, one that has ended that way is answered at once."""
    t = a.param("txn")
    want = s.ends[t][1]
    state = s.tc.get(t, OPEN)
    if state == OPEN:
        return end_txn(m, s, act("end_txn", txn=t, want=want))
    if state == want:
        return _answered(s, t, want)
    return replace(_redriven(s, t), ends=s.ends.set(t, (HELD, want, "")))


def _answered(s: ImplState, t: int, answer: str) -> ImplState:
    return replace(s, ends=s.ends.set(t, (REPLY, s.ends[t][1], answer)))


def end_not_found(m, s: ImplState, a):
    """The TC has ended the transaction and dropped it from memory: ``TransactionNotFound``."""
    return _answered(s, a.param("txn"), NOT_FOUND)


def end_invalid_status(m, s: ImplState, a):
    """The transaction is ending the other way (its timeout aborted it): ``InvalidTxnStatus``."""
    return _answered(s, a.param("txn"), INVALID)


def end_reply(m, s: ImplState, a):
    """The TC's answer reaches the client: the application's commit or abort completes with it."""
    t = a.param("txn")
    return replace(with_client(s, t, phase="done", outcome=s.ends[t][2]), ends=s.ends.remove(t))


def end_timeout(m, s: ImplState, a):
    """The client's operation timeout fails the pending END_TXN (``TimeoutException``): the outcome is
    unknown to the application."""
    t = a.param("txn")
    return replace(with_client(s, t, phase="done", outcome=TIMEOUT), ends=s.ends.remove(t))


def tc_end(m, s: ImplState, a):
    """v4's final TC step (COMMITTED / ABORTED logged, the transaction dropped from memory); a request the TC
    holds is answered. With TC crashes the answer is a step of its own (``end_reply``); without them,
    nothing can come between (the client only waits), so it is merged."""
    t = a.param("txn")
    done = coordinator.tc_end(m, s, a)
    if s.ends.get(t, ("",))[0] != HELD:
        return replace(done, clients=s.clients)
    if m.config.tc_crashes:
        return replace(_answered(done, t, done.tc[t]), clients=s.clients)
    return replace(done, ends=s.ends.remove(t))


def tc_crash(m, s: ImplState, a):
    """The TC's broker crashes: the requests it held and the replies it had not delivered are lost (the
    clients' handlers will resend them); the RPCs it sent may still be served by the topics."""
    ends = s.ends
    for t, (status, want, _) in s.ends:
        if status != RETRYING:
            ends = ends.set(t, (RETRYING, want, ""))
    return replace(s, tc_up=False, tc_crashes=s.tc_crashes + 1, ends=ends)


def tc_reload(m, s: ImplState, a):
    """Another broker loads the TC: its log replayed, the store registered (merged: until then every request
    is answered ``TransactionCoordinatorNotFound``, as while it is down). With ``pr-19201`` each committing or
    aborting transaction is driven again; before it, none is, and the ``expired`` timeouts are lost."""
    ending = [t for t, st in s.tc if st in ENDING.values()]
    s = replace(s, tc_up=True)
    if FIX_RECOVERY in m.fixes:
        for t in ending:
            s = _redriven(s, t)
        return s
    return replace(s, orphaned=s.orphaned | set(ending), untimed=s.untimed | set(a.param("expired")))


APPLY = {"end_txn": end_txn, "end_deferred": end_deferred, "end_resend": end_resend, "end_not_found": end_not_found,
         "end_invalid_status": end_invalid_status, "end_reply": end_reply, "end_timeout": end_timeout,
         "tc_end": tc_end, "tc_crash": tc_crash, "tc_reload": tc_reload,
         "add_partition_unavailable": timeout.add_partition_refused, "ack_unavailable": consumers.ack_refused}
