"""The Spark engine (local master) gives the in-process explorer's answers."""
from __future__ import annotations

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.itf import trace_document, write_trace
from pulsar_verify.replay import replay

pytest.importorskip("pyspark")
from spark_checks.bfs import explore_spark  # noqa: E402


def same_answers(local, spark):
    assert (spark.distinct_states, spark.transitions, spark.depth, spark.level_sizes) == \
        (local.distinct_states, local.transitions, local.depth, local.level_sizes)
    assert spark.coverage == local.coverage
    assert [(v.prop.id, v.length) for v in spark.violations if v.loop is None] == \
        [(v.prop.id, v.length) for v in local.violations if v.loop is None]


@pytest.mark.parametrize("variant", ["as-written", "atomic-acquire", "no-release"])
def test_toy_lock_spark_equals_local(variant, tmp_path):
    model = registry.build("toy-lock", variant, values={"procs": 3})
    local, _ = explore(model)
    spark = explore_spark(model, master="local[2]")
    same_answers(local, spark)
    for v in spark.violations:
        path = write_trace(tmp_path / f"{v.prop.id}.itf.json",
                           trace_document(model, v.states, v.actions, v.as_dict()))
        assert replay(path).reproduced


def test_spark_respects_depth_bound():
    model = registry.build("toy-lock", "atomic-acquire")
    spark = explore_spark(model, master="local[2]", max_depth=2)
    local, _ = explore(model, max_depth=2)
    assert not spark.complete and (spark.distinct_states, spark.depth) == (local.distinct_states, 2) == (6, 2)


@pytest.mark.parametrize("name", ["pip-473", "pip-477"])
@pytest.mark.parametrize("variant", ["as-written", "all-fixes"])
def test_default_bounds_spark_equals_local(name, variant):
    model = registry.build(name, variant)
    local, _ = explore(model)
    spark = explore_spark(model, master="local[2]")
    same_answers(local, spark)
