"""Transaction Coordinator V5 and the client's end of the transaction.

PIP-473 "Transaction Coordinator V5":
- ``newTxn``: create ``/txn/<txnId>`` with state=OPEN.
- ``endTxn(COMMIT|ABORT)``: "A single CAS on /txn/<txnId>.state. After it
  returns, the TC sets finalized_ms on the header and acks the client." The
  read that yields the expected version, the CAS, its BadVersion failure, the
  finalize put and the reply are separate actions; a TC crash between any two
  loses the request (the client retries).
- Timeout sweep: "Range-query idx:txn-by-deadline for entries with timeout_ms
  <= now, abort each (same single-CAS flow)"; as time is nondeterministic, the
  sweep may pick any OPEN txn at any moment.
- GC sweep: "Range-query idx:txn-by-final-state for entries past retention;
  for each, verify /txn-op/<txnId>/* is empty (force-delete leftovers);
  delete header"; likewise any finalized txn may be past retention.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, put, replace

from . import store
from .state import ABORTED, ACK, COMMITTED, OPEN, WRITE, End, Header, State


def actions(m, s: State):
    cfg = m.config
    for t in range(1, cfg.txns + 1):
        c = s.clients[t - 1]
        if c.phase == "idle":
            yield act("new_txn", txn=t)
        elif c.phase == "open" and not any(p.txn == t for p in s.publishes):
            # The client waits for its sends before ending; after a failed send it may only abort.
            if not c.failed:
                yield act("end_txn", txn=t, want=COMMITTED)
            yield act("end_txn", txn=t, want=ABORTED)
        elif c.phase == "ending" and not any(e.txn == t and e.origin == "client" for e in s.ends):
            yield act("retry_end", txn=t)
    if cfg.timeouts:
        for t in store.txn_by_deadline(s):
            if not any(e.txn == t and e.origin == "timeout" for e in s.ends):
                yield act("timeout_sweep", txn=t)
    if cfg.gc:
        for t in store.txn_by_final_state(s):
            listed = s.sweeps.get(t)
            if listed is None:
                if forced_deletions(m, s, t) or not _kept(m, s, t):
                    yield act("gc_list", txn=t)
            elif listed:
                yield act("gc_delete_ops", txn=t)
            elif not _kept(m, s, t):
                yield act("gc_delete_header", txn=t)
    for e in s.ends:
        if e.stage == "reply" and m.config.variant == "mutant:end-needs-append" and _marker_blocked(s, e.txn):
            continue  # a sealed segment rejects the commit/abort marker: no reply, ever
        if e.stage in ("cas", "finalize"):
            h = s.headers.get(e.txn)
            ok = h is not None and (h.version == e.version or "mutant:blind-cas" == m.config.variant)
            yield act(f"tc_{e.stage}" if ok else "tc_bad_version", txn=e.txn, origin=e.origin)
        else:
            yield act("tc_" + e.stage, txn=e.txn, origin=e.origin)
    if s.ends and s.tc_crashes < cfg.tc_crashes:
        yield act("tc_crash")


def _marker_blocked(s: State, txn: int) -> bool:
    return any(s.sealed[seg] and txn in log for seg, log in enumerate(s.logs))


def forced_deletions(m, s: State, txn: int) -> list:
    """The leftovers the GC sweep force-deletes. As written: every op record of the txn."""
    keys = store.ops_of(s, txn)
    if "gc-waits-for-participants" in m.fixes and s.headers[txn].state == COMMITTED:
        keys = [k for k in keys if s.ops[k].kind != ACK]  # committed acks wait for their store
    if "keep-decisions-with-data" in m.fixes:  # a write record lives exactly as long as its entry
        keys = [k for k in keys if s.ops[k].kind != WRITE or s.ops[k].pos < s.first[s.ops[k].seg]]
    return keys


def _kept(m, s: State, txn: int) -> list:
    """The txn's op records the sweep may not force-delete (none as written): it waits for them."""
    return sorted(set(store.ops_of(s, txn)) - set(forced_deletions(m, s, txn)))


def _end(s: State, txn: int, origin: str) -> End:
    for e in s.ends:
        if e.txn == txn and e.origin == origin:
            return e
    raise KeyError((txn, origin))


def _replace_end(s: State, old: End, new: End | None) -> tuple:
    """``s.ends`` with ``old``, the end ``_end`` found there, replaced by ``new`` (a txn has at most one end per
    origin: the client's and the timeout's are each started only when the txn has none)."""
    ends = [e for e in s.ends if e is not old] + ([new] if new is not None else [])
    return tuple(sorted(ends))


def _client(s: State, txn: int, **changes) -> tuple:
    return put(s.clients, txn - 1, replace(s.clients[txn - 1], **changes))


def new_txn(m, s, a):
    t = a.param("txn")
    s = store.set_header(s, t, Header(OPEN, False, 0))
    return replace(s, clients=_client(s, t, phase="open"))


def end_txn(m, s, a):
    t, want = a.param("txn"), a.param("want")
    ends = tuple(sorted(s.ends + (End(t, "client", want, "read"),)))
    return replace(s, ends=ends, clients=_client(s, t, phase="ending", want=want))


def retry_end(m, s, a):
    """The client's end-txn got no reply (the TC crashed): it asks again for the same outcome."""
    t = a.param("txn")
    return replace(s, ends=tuple(sorted(s.ends + (End(t, "client", s.clients[t - 1].want, "read"),))))


def tc_read(m, s, a):
    e = _end(s, a.param("txn"), a.param("origin"))
    h = s.headers.get(e.txn)
    if h is None:
        new = replace(e, stage="reply", outcome="NOT_FOUND")
    elif h.state == OPEN:
        new = replace(e, stage="cas", version=h.version)
    elif h.state == e.want and not h.finalized:
        new = replace(e, stage="finalize", version=h.version, outcome=h.state)
    else:
        new = replace(e, stage="reply", outcome=h.state)
    return replace(s, ends=_replace_end(s, e, new))


def tc_cas(m, s, a):
    e = _end(s, a.param("txn"), a.param("origin"))
    h = s.headers[e.txn]
    written = "finalize-in-cas" in m.fixes
    s = store.set_header(s, e.txn, Header(e.want, written, h.version + 1))
    new = replace(e, stage="reply" if written else "finalize", version=h.version + 1, outcome=e.want)
    return replace(s, ends=_replace_end(s, e, new), decided=s.decided.set(e.txn, e.want))


def tc_bad_version(m, s, a):
    """BadVersion (or NoNode) on the CAS or the finalize put: the header changed since the read; read again."""
    e = _end(s, a.param("txn"), a.param("origin"))
    return replace(s, ends=_replace_end(s, e, replace(e, stage="read", version=-1)))


def tc_finalize(m, s, a):
    e = _end(s, a.param("txn"), a.param("origin"))
    h = s.headers[e.txn]
    s = store.set_header(s, e.txn, Header(h.state, True, h.version + 1))
    return replace(s, ends=_replace_end(s, e, replace(e, stage="reply")))


def tc_reply(m, s, a):
    """The answer to the client (a timeout-driven end just completes)."""
    e = _end(s, a.param("txn"), a.param("origin"))
    s = replace(s, ends=_replace_end(s, e, None))
    if e.origin == "client":
        s = replace(s, clients=_client(s, e.txn, phase="done", outcome=e.outcome))
    return s


def tc_crash(m, s, a):
    """The TC loses its in-flight requests and its GC sweep's listings; its state is all in the store."""
    return replace(s, ends=(), sweeps=FrozenMap(), tc_crashes=s.tc_crashes + 1)


def timeout_sweep(m, s, a):
    t = a.param("txn")
    return replace(s, ends=tuple(sorted(s.ends + (End(t, "timeout", ABORTED, "read"),))))


def gc_list(m, s, a):
    """GC sweep: "list ``/txn-op/<txnId>/``" (the leftovers it will force-delete)."""
    t = a.param("txn")
    return replace(s, sweeps=s.sweeps.set(t, tuple(forced_deletions(m, s, t))))


def gc_delete_ops(m, s, a):
    """"delete": the records it listed, those still there; one written since the listing is not deleted."""
    t = a.param("txn")
    s = store.delete_ops(s, [k for k in s.sweeps[t] if k in s.ops])
    return replace(s, sweeps=s.sweeps.set(t, ()))


def gc_delete_header(m, s, a):
    """"then delete the header", without listing again."""
    t = a.param("txn")
    return replace(store.set_header(s, t, None), sweeps=s.sweeps.remove(t))


APPLY = {f.__name__: f for f in (new_txn, end_txn, retry_end, tc_read, tc_cas, tc_bad_version, tc_finalize,
                                 tc_reply, tc_crash, timeout_sweep, gc_list, gc_delete_ops,
                                 gc_delete_header)}
