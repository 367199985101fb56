"""The dispatcher, unchanged by PIP-473: it "polls tb.getMaxReadPosition() and
filters by tb.isTxnAborted(msg)" (PIP-473 "Subscribe / dispatch").

``isTxnAborted`` reads the buffer's header cache; for a txn the buffer does not
know it reads the header, and with no header at all it "falls back to 'abort'
for unknown txnIds" (PIP-473 "Recovery: Broker crash mid-publish"). Each
subscription's read position is in memory; its consumer's observations are
the ghosts ``received`` and ``filtered``.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from .buffer import max_read_position, txn_status
from .state import ABORTED, OPEN, State


def decision(m, s: State, seg: int, pos: int) -> str | None:
    """``deliver``, ``filter`` (skipped as aborted) or None (the dispatcher must wait)."""
    if pos > max_read_position(m, s, seg):
        return None
    txn = s.logs[seg][pos]
    if txn == 0:
        return "deliver"
    status = txn_status(s, seg, txn)
    if status == OPEN and "open-entry-barrier" in m.fixes:
        return None
    if m.config.variant == "mutant:deliver-aborted":
        return "deliver"
    return "filter" if status in (ABORTED, None) else "deliver"


def actions(m, s: State):
    nsubs = m.config.subs + m.config.late_subs
    for i, sub in enumerate(s.subs):
        seg = i // nsubs
        if not sub.exists or not s.up[seg] or sub.read >= len(s.logs[seg]):
            continue
        if sub.read in sub.acked and m.config.variant != "mutant:read-acked":
            yield act("skip_acked", seg=seg, sub=i % nsubs)
            continue
        what = decision(m, s, seg, sub.read)
        if what is not None:
            yield act(what, seg=seg, sub=i % nsubs, pos=sub.read)


def _sub(m, s, a):
    i = a.param("seg") * (m.config.subs + m.config.late_subs) + a.param("sub")
    return i, s.subs[i]


def deliver(m, s, a):
    i, sub = _sub(m, s, a)
    new = replace(sub, read=sub.read + 1, received=sub.received | {sub.read})
    return replace(s, subs=put(s.subs, i, new))


def filter(m, s, a):  # noqa: A001 - the dispatcher's word for it
    i, sub = _sub(m, s, a)
    new = replace(sub, read=sub.read + 1, filtered=sub.filtered | {sub.read})
    return replace(s, subs=put(s.subs, i, new))


def skip_acked(m, s, a):
    i, sub = _sub(m, s, a)
    return replace(s, subs=put(s.subs, i, replace(sub, read=sub.read + 1)))


APPLY = {"deliver": deliver, "filter": filter, "skip_acked": skip_acked}
