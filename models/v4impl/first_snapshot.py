"""The transaction buffer's NoSnapshot state, its first snapshot, and an abort that writes no marker.

apache/pulsar ``TopicTransactionBuffer``: a recovery that finds no snapshot of the topic
(``noNeedToRecover``: "Transaction is not use for this topic") reads no log: ``maxReadPosition`` is the last
confirmed entry and the buffer is in NoSnapshot, where a non-transactional publish moves ``maxReadPosition``
(``syncMaxReadPositionForNormalPublish``) and ``getMaxReadPosition`` answers it. The first transactional
publish is queued (``pendingAppendingTxnBufferTasks``) and starts the first snapshot (FirstSnapshotting,
``takeFirstSnapshot``; PR #21406, PR #24945). Once the snapshot is written the buffer is Ready and the queued
publishes are appended. In FirstSnapshotting, ``getMaxReadPosition`` answers EARLIEST and a plain publish
moves nothing. So a snapshot precedes the topic's first transactional entry, and a recovery without one has
nothing to rebuild.

``abortTxn`` in any state but Ready appends no marker and records nothing ("no message sent, need not to add
abort mark by txn timeout"); it answers success. ``commitTxn`` appends its marker in every state. A send of
the aborted transaction still in flight (the timeout does not wait for it) then lands on a buffer that has no
record of the abort, and the transaction is ongoing there for good (finding
``late-send-after-markerless-abort-blocks-topic``). Fix variant ``abort-marker-always`` (this model's minimal
fix, no upstream PR claimed): ``abortTxn`` appends its marker and records the abort in every recovered
state, as ``commitTxn`` does.

Leaving FirstSnapshotting does not catch ``maxReadPosition`` up, as leaving a recovery does
(``updateMaxReadPositionAfterRecovery``): a plain message published meanwhile stays unreadable until the
next move, and none comes if the queued send does not make its transaction ongoing (the second path of
the finding above, once ``abort-marker-always`` drops the late send as aborted). Fix variant
``first-snapshot-catches-up`` (this model's minimal fix): the first snapshot's completion moves
``maxReadPosition`` to the last confirmed entry, as nothing is ongoing then.
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.models.v4txn.state import COMMITTED, PARTITION
from pulsar_verify.values import put, replace

from .state import ImplState

FIX = "abort-marker-always"
FIX_CATCH_UP = "first-snapshot-catches-up"
READY, NO_SNAPSHOT, FIRST_SNAPSHOTTING = "", "NoSnapshot", "FirstSnapshotting"


def actions(m, s: ImplState):
    for topic, phase in enumerate(s.tb_phase):
        if phase == NO_SNAPSHOT and any(tp == topic for _, tp in s.publishes):
            yield act("first_snapshot_start", topic=topic)
        elif phase == FIRST_SNAPSHOTTING:
            yield act("first_snapshot_written", topic=topic)


def route(m, s: ImplState, a):
    """On a buffer without a snapshot a transactional send waits in the queue (its arrival starts the first
    snapshot), no periodic snapshot is taken, and an abort appends no marker (before the fix)."""
    if a is None or a.name not in ("append", "take_snapshot", "end_on_partition") or \
            s.tb_phase[a.param("topic")] == READY:
        return a
    if a.name == "end_on_partition" and s.decided[a.param("txn")] != COMMITTED and FIX not in m.fixes:
        return act("abort_without_marker", **dict(a.params))
    return a if a.name == "end_on_partition" else None


def first_snapshot_start(m, s: ImplState, a):
    """A transactional send reaches a NoSnapshot buffer: it is queued and the first snapshot starts
    (FirstSnapshotting). The snapshot holds ``maxReadPosition`` and the aborted set as they are now; neither
    can change until it is written (plain publishes do not move ``maxReadPosition`` in FirstSnapshotting, and
    a commit needs its own sends, which wait in the queue), so ``first_snapshot_written`` reads them then."""
    return replace(s, tb_phase=put(s.tb_phase, a.param("topic"), FIRST_SNAPSHOTTING))


def first_snapshot_written(m, s: ImplState, a):
    """The first snapshot is written (``changeToReadyStateFromNoSnapshot``): the buffer is Ready, and the
    queued sends are appended, each in its own ``append``. A crash before this step finds no snapshot."""
    topic = a.param("topic")
    snap = (s.max_read[topic], s.buffers[topic].aborted)
    mrp = len(s.logs[topic]) - 1 if FIX_CATCH_UP in m.fixes else s.max_read[topic]
    return replace(s, snapshots=put(s.snapshots, topic, snap), tb_phase=put(s.tb_phase, topic, READY),
                   max_read=put(s.max_read, topic, mrp))


def abort_without_marker(m, s: ImplState, a):
    """END_TXN_ON_PARTITION (abort) on a buffer that is not Ready: success, no marker, nothing recorded; the
    reply to the TC is ``partition_reply``, as after a marker."""
    return replace(s, rpcs=s.rpcs.set((a.param("txn"), PARTITION, a.param("topic")), "written"))


def readable(s: ImplState, topic: int) -> int:
    """``getMaxReadPosition``: EARLIEST (nothing readable) in FirstSnapshotting, else the stored position."""
    return -1 if s.tb_phase[topic] == FIRST_SNAPSHOTTING else s.max_read[topic]


APPLY = {"first_snapshot_start": first_snapshot_start, "first_snapshot_written": first_snapshot_written,
         "abort_without_marker": abort_without_marker}
