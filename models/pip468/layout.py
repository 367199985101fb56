"""The segment layout of a scalable topic as an immutable value (PIP-468 "SegmentLayout",
"SegmentInfo", "Metadata Store Schema").

Every operation returns a new ``SegmentLayout``; an invalid one raises ``LayoutError`` and,
the value being immutable, leaves the layout it was called on unchanged.
"""
from __future__ import annotations

import json
from typing import Iterable

import attrs

from pulsar_verify.values import ordered

HASH_MIN, HASH_MAX = 0x0000, 0xFFFF
ACTIVE, SEALED = "ACTIVE", "SEALED"


class LayoutError(ValueError):
    """An operation the PIP's validation rejects (split of a sealed segment, merge of non-adjacent ones...)."""


@ordered
@attrs.frozen
class HashRange:
    """An inclusive ``[start, end]`` range of ``[0x0000, 0xFFFF]``."""

    start: int
    end: int

    def __attrs_post_init__(self):
        if not HASH_MIN <= self.start <= self.end <= HASH_MAX:
            raise LayoutError(f"invalid hash range [{self.start:#06x}, {self.end:#06x}]")

    def contains(self, h: int) -> bool:
        return self.start <= h <= self.end

    @property
    def size(self) -> int:
        return self.end - self.start + 1


@attrs.frozen
class SegmentInfo:
    """PIP-468 "SegmentInfo": ``sealed_at_epoch`` is 0 while ACTIVE ("a segment can never be sealed at epoch 0")."""

    segment_id: int
    hash_range: HashRange
    state: str = ACTIVE
    parent_ids: tuple = ()
    child_ids: tuple = ()
    created_at_epoch: int = 0
    sealed_at_epoch: int = 0

    @property
    def active(self) -> bool:
        return self.state == ACTIVE

    def sealed(self, epoch: int, children: tuple) -> "SegmentInfo":
        return attrs.evolve(self, state=SEALED, child_ids=children, sealed_at_epoch=epoch)


@attrs.frozen
class SegmentLayout:
    """PIP-468 "SegmentLayout": ``epoch``, ``nextSegmentId`` and the DAG (``segments``, sorted by id)."""

    epoch: int
    next_segment_id: int
    segments: tuple  # SegmentInfo, sorted by segment_id

    # -- views -------------------------------------------------------------------
    @property
    def all_segments(self) -> dict[int, SegmentInfo]:
        return {s.segment_id: s for s in self.segments}

    @property
    def active_segments(self) -> list[SegmentInfo]:
        """The ACTIVE segments sorted by range start (the order round-robin assignment uses)."""
        return sorted((s for s in self.segments if s.active), key=lambda s: s.hash_range.start)

    def segment(self, segment_id: int) -> SegmentInfo:
        for s in self.segments:
            if s.segment_id == segment_id:
                return s
        raise LayoutError(f"no segment {segment_id}")

    def find_active_segment(self, h: int) -> SegmentInfo:
        """``findActiveSegment(hash)``: the active segment whose range contains ``h`` (producers route by it)."""
        for s in self.segments:
            if s.active and s.hash_range.contains(h):
                return s
        raise LayoutError(f"no active segment covers hash {h:#06x}")

    def lineage(self, segment_id: int) -> tuple:
        """``getLineage``: every ancestor and descendant of the segment, and the segment, by id."""
        by_id = self.all_segments
        seen = {segment_id}
        for links in ("parent_ids", "child_ids"):
            todo = [segment_id]
            while todo:
                for nxt in getattr(by_id[todo.pop()], links):
                    if nxt in by_id and nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
        return tuple(sorted(seen))

    def ancestors(self, segment_id: int) -> tuple:
        by_id = self.all_segments
        out, todo = set(), list(by_id[segment_id].parent_ids)
        while todo:
            p = todo.pop()
            if p in by_id and p not in out:
                out.add(p)
                todo.extend(by_id[p].parent_ids)
        return tuple(sorted(out))

    # -- operations ---------------------------------------------------------------
    @classmethod
    def create(cls, n: int) -> "SegmentLayout":
        """``createInitialMetadata(N)``: "Divides [0x0000, 0xFFFF] into N equal ranges", epoch 0."""
        size = HASH_MAX - HASH_MIN + 1
        if not 1 <= n <= size:
            raise LayoutError(f"cannot divide the hash range into {n} segments")
        segs = tuple(SegmentInfo(i, HashRange(i * size // n, (i + 1) * size // n - 1)) for i in range(n))
        return cls(0, n, segs)

    def _active(self, segment_id: int) -> SegmentInfo:
        seg = self.segment(segment_id)
        if not seg.active:
            raise LayoutError(f"segment {segment_id} is sealed")
        return seg

    def _with(self, changed: Iterable[SegmentInfo], added: Iterable[SegmentInfo], next_id: int) -> "SegmentLayout":
        by_id = self.all_segments
        for s in list(changed) + list(added):
            by_id[s.segment_id] = s
        return SegmentLayout(self.epoch + 1, next_id, tuple(by_id[k] for k in sorted(by_id)))

    def split(self, segment_id: int) -> "SegmentLayout":
        """``splitSegment``: children ``[start, mid]`` and ``[mid+1, end]``, parent sealed, epoch + 1."""
        parent = self._active(segment_id)
        r = parent.hash_range
        if r.size < 2:
            raise LayoutError(f"segment {segment_id} covers one hash and cannot be split")
        mid = (r.start + r.end) // 2
        epoch, a, b = self.epoch + 1, self.next_segment_id, self.next_segment_id + 1
        children = (SegmentInfo(a, HashRange(r.start, mid), parent_ids=(segment_id,), created_at_epoch=epoch),
                    SegmentInfo(b, HashRange(mid + 1, r.end), parent_ids=(segment_id,), created_at_epoch=epoch))
        return self._with([parent.sealed(epoch, (a, b))], children, b + 1)

    def merge(self, id1: int, id2: int) -> "SegmentLayout":
        """``mergeSegments``: two active, adjacent segments ("the end of one equals start - 1 of the other")."""
        s1, s2 = self._active(id1), self._active(id2)
        if id1 == id2:
            raise LayoutError(f"cannot merge segment {id1} with itself")
        lo, hi = sorted((s1, s2), key=lambda s: s.hash_range.start)
        if lo.hash_range.end + 1 != hi.hash_range.start:
            raise LayoutError(f"segments {id1} and {id2} are not adjacent")
        epoch, m = self.epoch + 1, self.next_segment_id
        merged = SegmentInfo(m, HashRange(lo.hash_range.start, hi.hash_range.end),
                             parent_ids=(lo.segment_id, hi.segment_id), created_at_epoch=epoch)
        return self._with([lo.sealed(epoch, (m,)), hi.sealed(epoch, (m,))], [merged], m + 1)

    def adjacent_pairs(self) -> list[tuple[int, int]]:
        act = self.active_segments
        return [(a.segment_id, b.segment_id) for a, b in zip(act, act[1:])]

    def prune(self, segment_id: int) -> "SegmentLayout":
        """``pruneSegment``: drop a sealed segment with no remaining parent (the oldest history) from
        the DAG; its children forget it. The PIP names the operation without its rules: these are ours."""
        seg = self.segment(segment_id)
        if seg.active:
            raise LayoutError(f"segment {segment_id} is active and cannot be pruned")
        by_id = self.all_segments
        if any(p in by_id for p in seg.parent_ids):
            raise LayoutError(f"segment {segment_id} still has parents in the DAG")
        children = [attrs.evolve(by_id[c], parent_ids=tuple(p for p in by_id[c].parent_ids if p != segment_id))
                    for c in seg.child_ids if c in by_id]
        out = self._with(children, [], self.next_segment_id)
        return attrs.evolve(out, segments=tuple(s for s in out.segments if s.segment_id != segment_id))

    # -- metadata JSON ("Metadata Store Schema") -----------------------------------
    def to_metadata(self) -> dict:
        return {"epoch": self.epoch, "nextSegmentId": self.next_segment_id,
                "segments": {str(s.segment_id): {
                    "segmentId": s.segment_id, "hashRange": {"start": s.hash_range.start, "end": s.hash_range.end},
                    "state": s.state, "parentIds": list(s.parent_ids), "childIds": list(s.child_ids),
                    "createdAtEpoch": s.created_at_epoch, "sealedAtEpoch": s.sealed_at_epoch}
                    for s in self.segments},
                "properties": {}}

    @classmethod
    def from_metadata(cls, doc: dict | str) -> "SegmentLayout":
        """Load ``ScalableTopicMetadata`` JSON; a malformed document raises ``LayoutError``."""
        try:
            doc = json.loads(doc) if isinstance(doc, str) else doc
            segs = []
            for key, s in doc["segments"].items():
                if int(key) != s["segmentId"] or s["state"] not in (ACTIVE, SEALED):
                    raise LayoutError(f"segment entry {key!r} is inconsistent")
                segs.append(SegmentInfo(int(s["segmentId"]), HashRange(int(s["hashRange"]["start"]),
                                                                       int(s["hashRange"]["end"])),
                                        s["state"], tuple(s["parentIds"]), tuple(s["childIds"]),
                                        int(s["createdAtEpoch"]), int(s["sealedAtEpoch"])))
            return cls(int(doc["epoch"]), int(doc["nextSegmentId"]), tuple(sorted(segs, key=lambda s: s.segment_id)))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, LayoutError):
                raise
            raise LayoutError(f"malformed scalable topic metadata: {exc}") from None

