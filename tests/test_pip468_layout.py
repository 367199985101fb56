"""The PIP-468 segment layout as a value: the PIP's JSON example, the layout properties over
arbitrary split/merge/prune sequences (Hypothesis; exhaustive for short ones), rejected operations."""
from __future__ import annotations

import itertools
import json

import attrs
import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_verify.invariants.pip468 import layout_problems
from pulsar_verify.models.pip468.layout import ACTIVE, HASH_MAX, HashRange, LayoutError, SegmentInfo, SegmentLayout

from .helpers import NIGHTLY

# "Metadata Store Schema", as printed in the PIP.
PIP_EXAMPLE = """{
  "epoch": 3,
  "nextSegmentId": 5,
  "segments": {
    "0": { "segmentId": 0, "hashRange": {"start": 0, "end": 65535}, "state": "SEALED", "parentIds": [], "childIds": [1, 2], "createdAtEpoch": 0, "sealedAtEpoch": 1 },
    "1": { "segmentId": 1, "hashRange": {"start": 0, "end": 32767}, "state": "SEALED", "parentIds": [0], "childIds": [3, 4], "createdAtEpoch": 1, "sealedAtEpoch": 3 },
    "2": { "segmentId": 2, "hashRange": {"start": 32768, "end": 65535}, "state": "ACTIVE", "parentIds": [0], "childIds": [], "createdAtEpoch": 1, "sealedAtEpoch": 0 },
    "3": { "segmentId": 3, "hashRange": {"start": 0, "end": 16383}, "state": "ACTIVE", "parentIds": [1], "childIds": [], "createdAtEpoch": 3, "sealedAtEpoch": 0 },
    "4": { "segmentId": 4, "hashRange": {"start": 16384, "end": 32767}, "state": "ACTIVE", "parentIds": [1], "childIds": [], "createdAtEpoch": 3, "sealedAtEpoch": 0 }
  },
  "properties": {}
}"""


def test_pip_example_loads_and_round_trips():
    layout = SegmentLayout.from_metadata(PIP_EXAMPLE)
    assert layout_problems(layout) == []
    assert layout.to_metadata() == json.loads(PIP_EXAMPLE)
    assert [s.segment_id for s in layout.active_segments] == [3, 4, 2]
    assert layout.find_active_segment(0x7FFF).segment_id == 4
    assert layout.lineage(3) == (0, 1, 3) and layout.lineage(0) == (0, 1, 2, 3, 4)


def test_pip_example_is_two_splits_with_an_epoch_between():
    """The operations the example implies are split(0) then split(1). Splits bump the epoch by one, so they
    give epoch 2, not 3: the example has a layout change between them that left no segment behind. With that
    epoch bump (and only then) the operations serialise to the example exactly."""
    two_splits = SegmentLayout.create(1).split(0).split(1)
    assert two_splits.epoch == 2 and two_splits.to_metadata() != json.loads(PIP_EXAMPLE)
    with_gap = attrs.evolve(SegmentLayout.create(1).split(0), epoch=2).split(1)
    assert with_gap.to_metadata() == json.loads(PIP_EXAMPLE)


def apply(layout: SegmentLayout, op: tuple) -> SegmentLayout:
    kind, *args = op
    return {"split": layout.split, "merge": layout.merge, "prune": layout.prune}[kind](*args)


def check(layout: SegmentLayout, before: SegmentLayout | None = None):
    """Every layout property of issue 4, with the DAG checked by networkx."""
    assert layout_problems(layout) == []
    act = layout.active_segments
    for h in {0, HASH_MAX, *(s.hash_range.start for s in act), *(s.hash_range.end for s in act)}:
        assert sum(1 for s in act if s.hash_range.contains(h)) == 1
        assert layout.find_active_segment(h).hash_range.contains(h)
    dag = nx.DiGraph((s.segment_id, c) for s in layout.segments for c in s.child_ids)
    assert nx.is_directed_acyclic_graph(dag)
    if before is not None:
        assert layout.epoch > before.epoch and layout.next_segment_id >= before.next_segment_id


def candidate_ops(layout: SegmentLayout) -> list[tuple]:
    """Every operation name with every argument the layout has, valid or not."""
    ids = [s.segment_id for s in layout.segments] + [layout.next_segment_id]
    return ([("split", i) for i in ids] + [("merge", a, b) for a in ids for b in ids] +
            [("prune", i) for i in ids])


def run_sequence(layout: SegmentLayout, ops) -> SegmentLayout:
    for op in ops:
        try:
            after = apply(layout, op)
        except LayoutError:
            continue  # rejected: ``layout`` is immutable, so it is unchanged by construction
        check(after, layout)
        layout = after
    return layout


def test_every_short_sequence_from_one_and_two_segments():
    """Exhaustive: every sequence of up to 3 operations (all arguments, valid or not)."""
    count = 0
    for n in (1, 2):
        level = [SegmentLayout.create(n)]
        for _ in range(3):
            nxt = []
            for layout in level:
                for op in candidate_ops(layout):
                    try:
                        after = apply(layout, op)
                    except LayoutError:
                        continue
                    check(after, layout)
                    nxt.append(after)
                    count += 1
            level = nxt
    assert count > 100


ops = st.lists(st.tuples(st.sampled_from(["split", "merge", "prune"]), st.integers(0, 12), st.integers(0, 12)),
               max_size=25)


@settings(max_examples=10_000 if NIGHTLY else 300)
@given(st.integers(1, 8), ops)
def test_layout_properties_hold_over_arbitrary_sequences(n, seq):
    layout = SegmentLayout.create(n)
    check(layout)
    run_sequence(layout, [(k, a) if k != "merge" else (k, a, b) for k, a, b in seq])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 256])
def test_initial_segments_divide_the_range(n):
    layout = SegmentLayout.create(n)
    check(layout)
    assert len(layout.active_segments) == n and layout.next_segment_id == n and layout.epoch == 0


def test_invalid_operations_are_rejected_and_change_nothing():
    base = SegmentLayout.create(3).split(0)  # active: 3 [0, 10922], 4, 1, 2; 0 sealed
    snapshot = base.to_metadata()
    one_hash = SegmentLayout(0, 1, (SegmentInfo(0, HashRange(5, 5)),))
    for layout, op in [(base, ("split", 0)),  # sealed
                       (base, ("split", 99)),  # unknown
                       (one_hash, ("split", 0)),  # size 1
                       (base, ("merge", 3, 1)),  # not adjacent
                       (base, ("merge", 0, 1)),  # sealed
                       (base, ("merge", 1, 1)),  # itself
                       (base, ("prune", 3))]:  # active
        with pytest.raises(LayoutError):
            apply(layout, op)
    assert base.to_metadata() == snapshot
    assert layout_problems(base.prune(0)) == [] and 0 not in base.prune(0).all_segments


@pytest.mark.parametrize("doc", ['{"epoch": 1}', "not json", '{"epoch": 0, "nextSegmentId": 1, "segments": '
                                 '{"0": {"segmentId": 0, "hashRange": {"start": 0, "end": 70000}, "state": "ACTIVE", '
                                 '"parentIds": [], "childIds": [], "createdAtEpoch": 0, "sealedAtEpoch": 0}}}'])
def test_malformed_metadata_is_one_clear_error(doc):
    with pytest.raises(LayoutError):
        SegmentLayout.from_metadata(doc)


def test_layout_problems_sees_each_kind_of_damage():
    """The checker itself can fail: a gap, an overlap, a dangling link, a cycle, a bad seal epoch."""
    good = SegmentLayout.create(1).split(0)
    segs = {s.segment_id: s for s in good.segments}
    damaged = [
        attrs.evolve(good, segments=(segs[0], segs[1])),  # gap
        attrs.evolve(good, segments=(segs[0], segs[1], attrs.evolve(segs[2], hash_range=HashRange(0, HASH_MAX)))),
        attrs.evolve(good, segments=(attrs.evolve(segs[0], child_ids=(1, 2, 7)), segs[1], segs[2])),
        attrs.evolve(good, segments=(attrs.evolve(segs[0], parent_ids=(1,)), attrs.evolve(segs[1], child_ids=(0,)),
                                     segs[2])),
        attrs.evolve(good, segments=(attrs.evolve(segs[0], sealed_at_epoch=0), segs[1], segs[2])),
        attrs.evolve(good, next_segment_id=2),
    ]
    for layout in damaged:
        assert layout_problems(layout), layout
    assert all(s.state == ACTIVE for s in good.active_segments)


def test_every_pair_of_adjacent_active_segments_merges():
    layout = SegmentLayout.create(4)
    for a, b in itertools.pairwise([s.segment_id for s in layout.active_segments]):
        check(layout.merge(a, b), layout)
