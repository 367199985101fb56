"""The compiled liveness search (``_liveness.c``) against its Python reference (``liveness._Search``):
the same answer on random graphs and on every model's explored graphs, whatever order a graph was
recorded in."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_verify import liveness, registry
from pulsar_verify.explorer import Explorer
from pulsar_verify.model import act

pytestmark = pytest.mark.skipif(liveness._liveness is None, reason="the _liveness extension is not built")

ACTIONS = [act("step", i=i) for i in range(3)] + [act("tick"), act("crash", node=0)]
FAIRS = [frozenset({"step"}), frozenset({"step", "tick"}), frozenset()]


def normal(answer):
    """An answer with its fair edges in a fixed order (both searches leave it open)."""
    unreachable, found = answer
    if found is None:
        return unreachable, None
    nodes, entry, root, tail, must, first = found
    return unreachable, (nodes, entry, root, tail, sorted(must, key=lambda e: str(e[0])), first)


def both(graph: dict, labels: dict, fairs: list) -> list:
    prepared = liveness._liveness.prepare(graph, labels, fairs)
    reference = liveness._Search(graph, labels, fairs)
    out = []
    for index in range(len(fairs)):
        compiled = normal(liveness._liveness.search(prepared, index))
        assert compiled == normal(reference.search(index)), index
        out.append(compiled)
    return out


@st.composite
def graphs(draw):
    """A graph over up to 12 states (some not expanded), with depths, labels per property, and
    fingerprints anywhere in the signed 64-bit range."""
    n = draw(st.integers(1, 12))
    fps = draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n + 2, max_size=n + 2, unique=True))
    expanded = fps[:n]
    graph = {fp: [(ACTIONS[draw(st.integers(0, len(ACTIONS) - 1))], fps[draw(st.integers(0, n + 1))])
                  for _ in range(draw(st.integers(0, 4)))] for fp in expanded}
    labels = {fp: (draw(st.integers(0, 6)), tuple((draw(st.booleans()), draw(st.booleans())) for _ in FAIRS))
              for fp in fps}
    return graph, labels


@settings(max_examples=400, deadline=None)
@given(graphs(), st.randoms(use_true_random=False))
def test_compiled_search_is_the_reference_on_random_graphs(g, rnd):
    graph, labels = g
    answers = both(graph, labels, FAIRS)
    keys = list(graph)
    rnd.shuffle(keys)
    assert both({fp: graph[fp] for fp in keys}, labels, FAIRS) == answers  # the order it was recorded in


@pytest.mark.parametrize("name", registry.names())
def test_compiled_search_is_the_reference_on_every_model(name):
    """Every variant at the default bound set, and as-written at each in-process bound set whose graph
    stays small; the graph shuffled once gives the same lasso parts."""
    cls = registry.model_class(name)
    runs = [(v, "default") for v in cls.variant_names()] + [(cls.baseline(), p) for p in cls.in_process_presets()]
    for variant, preset in runs:
        model = registry.build(name, variant, preset=preset)
        if not model.liveness:
            continue
        ex = Explorer(model, max_states=20_000)
        if not ex.run().complete:
            continue
        fairs = [frozenset(p.fair) for p in model.liveness]
        answers = both(ex.graph, ex.labels, fairs)
        keys = list(ex.graph)
        random.Random(7).shuffle(keys)
        assert both({fp: ex.graph[fp] for fp in keys}, ex.labels, fairs) == answers


def test_a_released_trigger_is_evaluated_once_per_state_and_agrees_with_its_negation():
    """``leads_to`` without a goal: the goal is the trigger released, and a state's label calls the
    trigger once for both."""
    from pulsar_verify.explorer import goal_flags
    from pulsar_verify.model import ModelDefinitionError, PropertySet, Released

    calls = []

    def trigger(m, s):
        calls.append(s)
        return s % 2 == 0

    props = PropertySet()
    props.leads_to("p", "-", "-", trigger=trigger, fair=("go",))
    goal = props.items[0].goal
    assert type(goal) is Released and [goal(None, s) for s in range(4)] == [False, True, False, True]
    calls.clear()
    assert [goal_flags(None, [(trigger, goal)], s) for s in range(4)] == \
        [((True, False),), ((False, True),), ((True, False),), ((False, True),)]
    assert calls == [0, 1, 2, 3]
    with pytest.raises(ModelDefinitionError):
        props.leads_to("q", "-", "-", fair=("go",))
