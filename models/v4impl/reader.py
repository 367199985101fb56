"""A reader on topic 0 and the broker's ``getLastMessageId``, as the implementation has them.

Pulsar client ``Reader.hasMessageAvailable()`` (``ConsumerImpl.hasMessageAvailableAsync``): true
at once if the receiver queue holds a message; otherwise it asks the broker for the last message
id (``GetLastMessageId``) and answers whether that id is after the last message the application
read. ``readNext()`` blocks until the receiver queue holds a message; the broker's dispatcher
fills the queue (``deliver`` of the v4 model, which skips markers and aborted entries).

What the broker answers (``ServerCnx.handleGetLastMessageId``):
- as implemented before the fixes: the managed ledger's last confirmed entry, whatever the buffer's
  state (apache/pulsar #11877: a marker or an aborted entry can be that entry);
- ``pr-21466`` (apache/pulsar PR #21466): the buffer's ``maxReadPosition``, once its recovery
  has completed (``checkIfTBRecoverCompletely``); the request waits until then;
- ``pr-22610`` (apache/pulsar PR #22610, on top of #21466): the last position at or before
  ``maxReadPosition`` the dispatcher would deliver, skipping markers and aborted entries
  (``getLastDispatchablePosition``).

The broker computes its answer and the client compares it in one step: the client does nothing
between receiving the answer and comparing it, and an entry appended after the answer was
computed can only make a message available, never take one away.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn import buffer
from pulsar_verify.models.v4txn.state import ABORT_MARKER, DATA
from pulsar_verify.values import replace

from . import consumers, first_snapshot
from .recovery import lac
from .state import DONE, IDLE, READING, ImplState


def readable_horizon(s: ImplState, topic: int) -> int:
    """The last position a reader could be given now, from the log alone: before the first entry of a
    transaction that has no marker yet, else the last entry."""
    log = s.logs[topic]
    ended = {t for kind, t in log if kind != DATA}
    return next((pos - 1 for pos, (kind, t) in enumerate(log) if kind == DATA and t and t not in ended), len(log) - 1)


def aborted_in_log(log: tuple) -> set:
    return {t for kind, t in log if kind == ABORT_MARKER}


def last_id(m, s: ImplState) -> int:
    """The broker's answer to GetLastMessageId for topic 0, per variant."""
    if "pr-22610" in m.fixes:
        b, log = s.buffers[0], s.logs[0]
        pos = first_snapshot.readable(s, 0)
        while pos >= 0 and (log[pos][0] != DATA or log[pos][1] in b.aborted):
            pos -= 1
        return pos
    if "pr-21466" in m.fixes:
        return first_snapshot.readable(s, 0)
    return lac(s, 0)


def actions(m, s: ImplState):
    r = s.reader
    if s.consumers:
        return
    if r.phase == IDLE:
        if r.queue:
            yield act("has_message_queued")
        elif s.loaded[0] and (s.buffers[0].ready or not m.fixes & {"pr-21466", "pr-22610"}):
            yield act("get_last_id")
    elif r.phase == READING and r.queue:
        yield act("read_next", pos=r.queue[0])


def has_message_queued(m, s: ImplState, a):
    """hasMessageAvailable with a message in the receiver queue: true, without asking the broker."""
    return replace(s, reader=replace(s.reader, phase=READING))


def get_last_id(m, s: ImplState, a):
    """hasMessageAvailable with an empty queue: the broker's last message id against the last read."""
    answer = last_id(m, s)
    r = s.reader
    if answer <= r.pos:
        return replace(s, reader=replace(r, phase=DONE, beyond=False))
    return replace(s, reader=replace(r, phase=READING, beyond=answer > readable_horizon(s, 0)))


def read_next(m, s: ImplState, a):
    r = s.reader
    return replace(s, reader=replace(r, phase=IDLE, pos=r.queue[0], queue=r.queue[1:]))


def deliver(m, s: ImplState, a):
    """The v4 dispatcher's delivery; on topic 0 the entry lands in the reader's receiver queue (with
    consumers: in the consumer's)."""
    if s.consumers:
        return consumers.deliver(m, s, a)
    t = buffer.deliver(m, s, a)
    if a.param("topic"):
        return t
    return replace(t, reader=replace(t.reader, queue=t.reader.queue + (a.param("pos"),)))


APPLY = {"has_message_queued": has_message_queued, "get_last_id": get_last_id, "read_next": read_next,
         "deliver": deliver}
