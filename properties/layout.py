"""PIP-468 segment layout, in bit-vectors over the full 16-bit hash range.

Ranges are inclusive ``[start, end]`` pairs of 16-bit values, as in "Hash Range Design"
(``[0x0000, 0xFFFF]``). The claim "findActiveSegment is total and unique" is that every hash
is covered by exactly one active range. It is proved for every number of operations and every
number of segments by induction:

- ``create-covers-each-hash-once``: ``createInitialMetadata(N)`` ("Divides [0x0000, 0xFFFF] into
  N equal ranges") covers each hash exactly once, for every N up to ``CREATE_MAX``;
- ``split-keeps-coverage`` and ``merge-keeps-coverage``: a split replaces one range by two that
  cover exactly its hashes, once each, and a merge replaces two adjacent ranges by one that
  covers exactly theirs; every other range is unchanged, so each hash's coverage count is
  unchanged, whatever the other segments are;

hence after any sequence of splits and merges every hash is covered exactly once. The
round-robin assignment ("Consumer Assignment") is checked for every number of active segments
up to ``SEGMENTS_MAX`` and consumers up to ``CONSUMERS_MAX``.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, all_of, valid

CREATE_MAX = 64
SEGMENTS_MAX = 32
CONSUMERS_MAX = 8
SECTION = "PIP-468 Hash Range Design; Segment Operations (split, merge); findActiveSegment"


def bv(name: str):
    return z3.BitVec(name, 16)


def midpoint(start, end, overflowing=False):
    """``(start + end) / 2`` as layout.py computes it (unbounded ints, so no overflow); the
    overflowing form, in 16 bits, is what a ``short``-typed implementation would do."""
    if overflowing:
        return z3.UDiv(start + end, 2)
    return z3.Extract(15, 0, z3.UDiv(z3.ZeroExt(1, start) + z3.ZeroExt(1, end), 2))


def inside(start, end, h):
    return z3.If(z3.And(z3.ULE(start, h), z3.ULE(h, end)), 1, 0)


def split_relation(s, e, children, overflowing=False):
    """``splitSegment`` on an active ``[s, e]`` of at least two hashes: children ``[s, mid]``
    and ``[mid+1, e]``. ``children`` is ``((a1, b1), (a2, b2))``: the relation admits exactly
    the children layout.py computes."""
    (a1, b1), (a2, b2) = children
    mid = midpoint(s, e, overflowing)
    return z3.And(z3.ULT(s, e), a1 == s, b1 == mid, a2 == mid + 1, b2 == e)


def merge_relation(lo, hi, merged, drops_last=False):
    """``mergeSegments`` of adjacent active ranges ("the end of one equals start - 1 of the
    other"): one range from the lower start to the higher end (``drops_last``: a broken merge
    whose range stops one hash short)."""
    (s1, e1), (s2, e2) = lo, hi
    m1, m2 = merged
    return z3.And(z3.ULE(s1, e1), z3.ULE(s2, e2), e1 != 0xFFFF, e1 + 1 == s2, m1 == s1,
                  m2 == (e2 - 1 if drops_last else e2))


def create_ranges(n: int, overlapping=False):
    """``createInitialMetadata(n)`` in bit-vector arithmetic: ``[i*65536/n, (i+1)*65536/n - 1]``
    (``overlapping``: a broken division whose ranges end where the next one starts)."""
    size = z3.BitVecVal(0x10000, 32)
    bound = [z3.UDiv(z3.BitVecVal(i, 32) * size, z3.BitVecVal(n, 32)) for i in range(n + 1)]
    return [(z3.Extract(15, 0, bound[i]), z3.Extract(15, 0, bound[i + 1] - (0 if overlapping else 1)))
            for i in range(n)]


def create_covers_each_hash_once(n_max=CREATE_MAX, overlapping=False):
    h = bv("h")
    return all_of(valid(z3.Sum([inside(s, e, h) for s, e in create_ranges(n, overlapping)]) == 1,
                        show=lambda m, n=n: f"createInitialMetadata({n}) covers hash {m[h]} not exactly once")
                  for n in range(1, n_max + 1))


def split_keeps_coverage(overflowing=False):
    s, e, h, a1, b1, a2, b2 = (bv(x) for x in ("s", "e", "h", "a1", "b1", "a2", "b2"))
    claim = z3.Implies(split_relation(s, e, ((a1, b1), (a2, b2)), overflowing),
                       z3.And(inside(a1, b1, h) + inside(a2, b2, h) == inside(s, e, h),
                              z3.ULE(a1, b1), z3.ULE(a2, b2)))
    return valid(claim, show=lambda m: (f"split of [{m.eval(s)}, {m.eval(e)}] gives [{m.eval(a1)}, {m.eval(b1)}] "
                                        f"and [{m.eval(a2)}, {m.eval(b2)}]: hash {m.eval(h)} is not covered as it was"))


def merge_keeps_coverage(drops_last=False):
    s1, e1, s2, e2, h, m1, m2 = (bv(x) for x in ("s1", "e1", "s2", "e2", "h", "m1", "m2"))
    claim = z3.Implies(merge_relation((s1, e1), (s2, e2), (m1, m2), drops_last),
                       inside(m1, m2, h) == inside(s1, e1, h) + inside(s2, e2, h))
    return valid(claim, show=lambda m: f"merge of [{m.eval(s1)}, {m.eval(e1)}] and [{m.eval(s2)}, {m.eval(e2)}] "
                                       f"changes the coverage of hash {m.eval(h)}")


def round_robin_loads(n, consumers: int, segments_max=SEGMENTS_MAX, wraps_to_first=False):
    """Segments sorted by start, consumers by name, segment i to consumer i mod c: the load of
    each consumer as a term in the symbolic number of active segments ``n`` (``wraps_to_first``:
    a broken assignment, i mod (c + 1), that gives the extra turn to the first consumer)."""
    def owner(i):
        return i % (consumers + 1) % consumers if wraps_to_first else i % consumers
    return [z3.Sum([z3.If(i < n, 1, 0) for i in range(segments_max) if owner(i) == k] or [z3.IntVal(0)])
            for k in range(consumers)]


def round_robin_balanced(wraps_to_first=False):
    n = z3.Int("segments")

    def claim(c):
        loads = round_robin_loads(n, c, wraps_to_first=wraps_to_first)
        balanced = [z3.And(a - b <= 1, b - a <= 1) for a in loads for b in loads]
        return z3.Implies(z3.And(0 <= n, n <= SEGMENTS_MAX), z3.And(z3.Sum(loads) == n, *balanced))
    return all_of(valid(claim(c), show=lambda m, c=c: f"{m[n]} segments over {c} consumers are unbalanced")
                  for c in range(1, CONSUMERS_MAX + 1))


OBLIGATIONS = [
    Obligation("pip-468", "create-covers-each-hash-once",
               f"createInitialMetadata(N) covers every 16-bit hash exactly once, for N = 1..{CREATE_MAX}",
               "PIP-468 Hash Range Design: 'Divides [0x0000, 0xFFFF] into N equal ranges'",
               create_covers_each_hash_once),
    Obligation("pip-468", "split-keeps-coverage",
               "A split's two children are non-empty and cover exactly the parent's hashes, once each, for every "
               "16-bit range of two or more hashes", SECTION, split_keeps_coverage),
    Obligation("pip-468", "merge-keeps-coverage",
               "A merge of two adjacent ranges covers exactly their hashes, once each, for every pair of 16-bit "
               "ranges", SECTION, merge_keeps_coverage),
    Obligation("pip-468", "round-robin-balanced",
               f"Round-robin gives every active segment exactly one consumer and loads that differ by at most one, "
               f"for up to {SEGMENTS_MAX} segments and 1..{CONSUMERS_MAX} consumers",
               "PIP-468 Consumer Assignment", round_robin_balanced),
]
