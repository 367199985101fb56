"""The Spark engine's resident search (``spark_checks/resident.py``) gives the in-process explorer's
answers and the stage-per-level search's stops, writes checkpoints either search resumes from, and fails
in one line keeping its last checkpoint."""
from __future__ import annotations

import json

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.itf import trace_document, write_trace
from pulsar_verify.model import UsageError
from pulsar_verify.replay import replay

from .test_spark_engine import MASTER, SAME, answers, assert_same, killed_at_level

pytest.importorskip("pyspark")
from pulsar_verify.spark_checks.bfs import explore_spark  # noqa: E402


def resident(model, **kw):
    return explore_spark(model, master=MASTER, search="resident", **kw)


@pytest.mark.parametrize("name,variant,preset", SAME + [("toy-lock", "no-release", "default")])
def test_default_bounds_resident_equals_local(name, variant, preset, tmp_path):
    model = registry.build(name, variant, preset=preset)
    local, _ = explore(model)
    spark = resident(model, out=tmp_path)
    assert_same(local, spark)
    assert spark.liveness_checked == local.liveness_checked
    for v in filter(lambda v: v.traced, spark.violations):
        path = write_trace(tmp_path / f"{v.prop.id}.itf.json",
                           trace_document(model, v.states, v.actions, v.as_dict(), v.loop))
        assert replay(path).reproduced, v.prop.id


def test_the_symmetry_reduced_search_without_liveness_equals_local(tmp_path):
    model = registry.build("v4-txn", preset="two-txns")
    assert model.reduction
    assert_same(explore(model, check_liveness=False)[0], resident(model, out=tmp_path, graph=False))


@pytest.mark.parametrize("stop", [{"max_depth": 5}, {"max_states": 3000}, {"stop_at_first": True}])
def test_a_bounded_run_stops_where_the_stage_per_level_search_does(stop, tmp_path):
    model = registry.build("pip-473", "as-written")
    levels = explore_spark(model, master=MASTER, out=tmp_path / "levels", **stop)
    ours = resident(model, out=tmp_path / "resident", **stop)
    assert not ours.complete
    assert answers(ours) == answers(levels)


@pytest.mark.parametrize("first,then", [("resident", "levels"), ("levels", "resident"), ("resident", "resident")])
def test_a_run_stopped_at_a_depth_continues_with_either_search_to_the_same_result(first, then, tmp_path):
    model = registry.build("pip-473", "as-written")
    local, _ = explore(model)
    stopped = explore_spark(model, master=MASTER, out=tmp_path, max_depth=6, search=first)
    assert not stopped.complete and stopped.depth == 6
    assert json.loads((tmp_path / "spark" / "manifest.json").read_text())["levels"] == 6
    assert_same(local, explore_spark(model, master=MASTER, out=tmp_path, search=then))


def test_a_killed_run_continues_from_its_last_checkpoint(tmp_path):
    model = registry.build("pip-473", "as-written")
    local, _ = explore(model)
    assert killed_at_level(tmp_path, "--spark-search", "resident", "--checkpoint-every", "0") < local.depth
    assert_same(local, resident(model, out=tmp_path))


def test_without_a_checkpoint_due_only_the_end_is_committed(tmp_path):
    model = registry.build("pip-473", "as-written")
    result = resident(model, out=tmp_path, checkpoint_seconds=1e9)
    links = sorted((tmp_path / "spark").glob("level-*/links.parquet"))
    import pyarrow.parquet as pq
    encoded = [pq.read_table(str(d)).column("state").null_count for d in links]
    sizes = result.level_sizes
    assert encoded[0] == 0  # level 0, written by the driver, holds its states
    assert all(nulls == size for nulls, size in zip(encoded[1:], sizes[1:]))  # no other level does
    assert json.loads((tmp_path / "spark" / "manifest.json").read_text())["done"]


def test_a_failed_task_is_a_one_line_error_and_keeps_the_last_checkpoint(tmp_path):
    model = registry.build("pip-473", "as-written")
    local, _ = explore(model)
    blocker = tmp_path / "spark" / "level-00005"
    blocker.parent.mkdir()
    blocker.write_text("not a directory")  # level 5's tasks cannot write their files there

    with pytest.raises(UsageError) as failed:
        resident(model, out=tmp_path, checkpoint_seconds=0)
    message = str(failed.value)
    assert message.startswith("the Spark job failed (") and "\n" not in message, message
    assert "run the same command again" in message
    assert json.loads((tmp_path / "spark" / "manifest.json").read_text())["levels"] in (3, 4)  # before level 5
    blocker.unlink()
    assert_same(local, resident(model, out=tmp_path))


def test_more_partitions_than_slots_is_refused_before_the_search(tmp_path):
    with pytest.raises(UsageError, match="--partitions 2 or fewer"):
        resident(registry.build("toy-lock"), out=tmp_path, partitions=3)


def test_a_level_is_evened_out_by_moving_the_fewest_states():
    from pulsar_verify.spark_checks.resident import _moves
    assert _moves([7, 7]) == [] and _moves([7, 8]) == []
    assert _moves([150, 50]) == [(0, 1, 50)]
    assert _moves([5, 5, 20]) == [(2, 0, 5), (2, 1, 5)]
    assert _moves([0, 0]) == []


def test_each_state_is_filed_under_the_parent_and_action_the_stage_per_level_search_chooses(tmp_path):
    import pyarrow.parquet as pq
    model = registry.build("pip-473", "as-written")

    def links(search):
        explore_spark(model, master=MASTER, out=tmp_path / search, search=search, graph=False)
        files = (tmp_path / search / "spark").glob("level-*/links.parquet/*.parquet")
        rows = [r for f in files for r in pq.read_table(f, columns=["fp", "parent", "action"]).to_pylist()]
        return sorted(rows, key=lambda r: r["fp"])

    assert links("resident") == links("levels")


def test_a_driver_waits_for_the_tasks_of_an_earlier_run_of_its_checkpoint(tmp_path, monkeypatch):
    import fcntl
    from pulsar_verify.spark_checks import resident as search
    from pulsar_verify.spark_checks.location import Location
    model = registry.build("toy-lock")
    (tmp_path / "spark").mkdir()
    lingering = search._hold(Location(tmp_path / "spark"), fcntl.LOCK_SH)  # a killed driver's task, still running
    monkeypatch.setattr(search, "LINGER", 0.5)
    with pytest.raises(UsageError, match="tasks of an earlier run still hold"):
        resident(model, out=tmp_path)
    lingering.close()
    assert_same(explore(model)[0], resident(model, out=tmp_path))
