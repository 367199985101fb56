"""The Spark engine (local master) gives the in-process explorer's answers, checkpoints every
level, continues an interrupted run, and refuses a checkpoint that is not its own."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.itf import trace_document, write_trace
from pulsar_verify.model import UsageError
from pulsar_verify.replay import replay

from .helpers import ROOT, cli

pytest.importorskip("pyspark")
from pulsar_verify.spark_checks.bfs import explore_spark  # noqa: E402

MASTER = "local[2]"


def answers(r) -> tuple:
    return (r.distinct_states, r.transitions, r.depth, r.level_sizes, r.coverage, r.complete,
            [(v.prop.id, v.length, v.loop) for v in r.violations], r.unreachable_goal, r.examples)


def assert_same(local, spark):
    assert answers(spark) == answers(local)


@pytest.mark.parametrize("variant", ["as-written", "atomic-acquire", "no-release"])
def test_toy_lock_spark_equals_local_and_its_traces_replay(variant, tmp_path):
    model = registry.build("toy-lock", variant, values={"procs": 3})
    local, _ = explore(model)
    spark = explore_spark(model, master=MASTER)
    assert_same(local, spark)
    for v in spark.violations:
        path = write_trace(tmp_path / f"{v.prop.id}.itf.json",
                           trace_document(model, v.states, v.actions, v.as_dict(), v.loop))
        assert replay(path).reproduced


def test_spark_respects_depth_bound():
    model = registry.build("toy-lock", "atomic-acquire")
    spark = explore_spark(model, master=MASTER, max_depth=2)
    local, _ = explore(model, max_depth=2)
    assert not spark.complete and (spark.distinct_states, spark.depth) == (local.distinct_states, 2) == (6, 2)


# Every protocol model, as written and with its fixes, at the default bounds; liveness lassos included;
# pip-473's fixes where a segment can be sealed (the example of its sometimes property is 11 steps long).
SAME = [("pip-473", "as-written", "default"), ("pip-473", "all-fixes", "sealed"), ("v4-txn", "as-written", "default"),
        ("v4-txn", "off-segment-markers", "default"), ("pip-373", "as-written", "default"),
        ("pip-373", "all-fixes", "default"), ("pip-468", "as-written", "default"), ("pip-468", "all-fixes", "default"),
        ("pip-477", "as-written", "default"), ("pip-477", "all-fixes", "default"),
        ("pip-477", "as-written", "cursor")]  # position-not-rewound lies only beyond I11's and I8's violations


@pytest.mark.parametrize("name,variant,preset", SAME)
def test_default_bounds_spark_equals_local(name, variant, preset, tmp_path):
    model = registry.build(name, variant, preset=preset)
    local, _ = explore(model)
    spark = explore_spark(model, master=MASTER, out=tmp_path)
    assert_same(local, spark)
    assert spark.liveness_checked == local.liveness_checked
    for v in filter(lambda v: v.traced, spark.violations):  # a Spark counterexample is a real one
        path = write_trace(tmp_path / f"{v.prop.id}.itf.json",
                           trace_document(model, v.states, v.actions, v.as_dict(), v.loop))
        assert replay(path).reproduced, v.prop.id


def test_results_are_written_as_parquet_and_json(tmp_path):
    model = registry.build("pip-473", "as-written")
    result = explore_spark(model, master=MASTER, out=tmp_path)
    root = tmp_path / "spark"
    stats = json.loads((root / "stats.json").read_text())
    assert [s["level"] for s in stats] == list(range(0, result.depth + 2))  # the last level finds nothing
    assert sum(s["new"] for s in stats) == result.distinct_states
    assert sum(s["transitions"] for s in stats) == result.transitions
    violations = json.loads((root / "violations.json").read_text())
    assert [(v["property"], v["length"]) for v in violations] == [(v.prop.id, v.length) for v in result.violations]
    assert all(v["itf"]["states"] for v in violations)
    from pulsar_verify.spark_checks.session import spark_session
    spark = spark_session(MASTER)
    assert spark.read.parquet(str(root / "stats.parquet")).count() == len(stats)
    assert spark.read.parquet(str(root / "violations.parquet")).count() == len(violations)
    assert any((root / "edges").iterdir())  # pip-473 has liveness properties: the graph is on disk


def test_a_run_stopped_at_a_level_continues_to_the_same_result(tmp_path):
    model = registry.build("pip-473", "as-written")
    local, _ = explore(model)
    first = explore_spark(model, master=MASTER, out=tmp_path, max_depth=6)
    assert not first.complete and first.depth == 6
    stats_before = json.loads((tmp_path / "spark" / "manifest.json").read_text())["stats"]
    second = explore_spark(model, master=MASTER, out=tmp_path)
    assert_same(local, second)
    # levels 0-5 are not redone; level 6, stopped before its expansion, is expanded on resuming
    assert json.loads((tmp_path / "spark" / "stats.json").read_text())[:6] == stats_before[:6]


def killed_at_level(tmp_path, *options, level: int = 4) -> int:
    """Run pip-473 on Spark from the command line with ``options``, kill it (driver, JVM and tasks) once its
    manifest has committed ``level``; the level it had committed."""
    proc = subprocess.Popen([sys.executable, "-m", "pulsar_verify", "explore", "pip-473", "--engine", "spark",
                             *options, "--master", MASTER, "--out", str(tmp_path), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    manifest = tmp_path / "spark" / "manifest.json"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if manifest.exists() and json.loads(manifest.read_text())["levels"] >= level:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the run never reached level {level}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return json.loads(manifest.read_text())["levels"]


def test_a_killed_run_continues_from_its_last_complete_level(tmp_path):
    model = registry.build("pip-473", "as-written")
    local, _ = explore(model)
    assert killed_at_level(tmp_path, "--spark-search", "levels") < local.depth
    resumed = explore_spark(model, master=MASTER, out=tmp_path)
    assert_same(local, resumed)
    assert len(json.loads((tmp_path / "spark" / "stats.json").read_text())) == local.depth + 2


def test_a_failed_spark_job_is_a_one_line_error_and_keeps_the_checkpoint(tmp_path):
    model = registry.build("pip-473", "as-written")

    def sabotage(info):  # level 4's tasks will not find the visited set they read
        if info["depth"] == 3:
            for path in (tmp_path / "spark").glob("level-00003/visited-*.npy"):
                path.unlink()

    with pytest.raises(UsageError) as failed:
        explore_spark(model, master=MASTER, out=tmp_path, progress=sabotage)
    message = str(failed.value)
    assert message.startswith("the Spark job failed (FileNotFoundError: ") and "\n" not in message, message
    assert "run the same command again" in message
    assert json.loads((tmp_path / "spark" / "manifest.json").read_text())["levels"] == 3


def _checkpoint(tmp_path, variant="atomic-acquire"):
    r = cli("explore", "toy-lock", "--variant", variant, "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path), "--quiet")
    assert r.returncode in (0, 1), r.stderr
    return tmp_path / "spark"


def _one_line_error(r, *needles):
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("pulsar-verify: error:")]
    assert len(errors) == 1 and r.stderr.strip().splitlines()[-1] == errors[0], r.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    root = _checkpoint(tmp_path)
    before = (root / "manifest.json").read_text()
    r = cli("explore", "toy-lock", "--variant", "no-release", "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path))
    _one_line_error(r, "belongs to another run", "variant")
    assert (root / "manifest.json").read_text() == before  # nothing already written is lost
    r = cli("explore", "toy-lock", "--variant", "no-release", "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path), "--fresh", "--quiet")
    assert r.returncode == 1


def test_a_corrupted_manifest_is_refused(tmp_path):
    root = _checkpoint(tmp_path)
    (root / "manifest.json").write_text('{"format": "pulsar-verify/spark-checkpoint/1", "model": ')
    r = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path))
    _one_line_error(r, "corrupted checkpoint")


def test_a_damaged_level_file_is_refused(tmp_path):
    root = _checkpoint(tmp_path)
    data = next((root / "level-00002" / "links.parquet").glob("part-*.parquet"))
    data.write_bytes(data.read_bytes()[:20])
    r = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path))
    _one_line_error(r, "corrupted checkpoint", "level 2")


def test_a_missing_level_is_refused(tmp_path):
    root = _checkpoint(tmp_path)
    import shutil
    shutil.rmtree(root / "level-00001")
    r = cli("explore", "toy-lock", "--variant", "atomic-acquire", "--engine", "spark", "--master", MASTER,
            "--out", str(tmp_path))
    _one_line_error(r, "corrupted checkpoint", "level 1")


def test_an_unreachable_master_is_a_one_line_error_in_bounded_time(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    started = time.monotonic()
    r = cli("explore", "toy-lock", "--engine", "spark", "--master", f"spark://127.0.0.1:{port}",
            "--out", str(tmp_path))
    assert time.monotonic() - started < 30
    _one_line_error(r, "cannot reach Spark master", str(port))


def test_the_symmetry_reduced_search_on_spark_equals_local(tmp_path):
    """Executors rebuild the model with the driver's reduction: the same reduced run (two txns of
    ``v4-txn``, to depth 9), and a checkpoint of the reduced run is not continued as the full one."""
    model = registry.build("v4-txn", values={"txns": 2})
    local, _ = explore(model, max_depth=9)
    spark = explore_spark(model, master=MASTER, out=tmp_path, max_depth=9)
    assert_same(local, spark)
    assert spark.reduction == local.reduction == "2 txns interchangeable"
    with pytest.raises(UsageError, match="reduction"):
        explore_spark(registry.build("v4-txn", values={"txns": 2}, reduction=False), master=MASTER, out=tmp_path)


def test_a_task_ships_no_successor_its_receiver_would_drop():
    """Before it encodes a held successor, a task drops those its receiver would drop anyway: in the
    receiver's visited set, or shipped earlier in this expansion from a smaller parent. One shipped
    earlier from a larger parent goes again (the receiver keeps the smallest parent)."""
    from collections import Counter

    import numpy as np

    from pulsar_verify.spark_checks.bfs import _ship, _unpack_new

    held = {4: (10, b"a", 40), 6: (12, b"a", 60), 8: (11, b"a", 80), 9: (3, b"a", 90)}  # fp: parent, action, state
    visited = [np.array([4], dtype=np.int64), np.empty(0, dtype=np.int64)]  # two partitions: 9 goes to the second
    sent = (np.array([6, 8], dtype=np.int64), np.array([11, 20], dtype=np.int64))
    counted: Counter = Counter()
    ship, blobs = _ship(held, 2, counted, visited, sent), []
    while True:
        try:
            blobs.append(next(ship))
        except StopIteration as stop:
            sent = stop.value
            break
    got: dict = {}
    for _, blob in blobs:
        _unpack_new(blob, np.empty(0, dtype=np.int64), got)
    assert sorted(got) == [8, 9] and counted["shipped_records"] == 2 and [dest for dest, _ in blobs] == [0, 1]
    assert sent[0].tolist() == [6, 8, 9] and sent[1].tolist() == [11, 11, 3]


def test_past_the_limit_a_task_reads_only_its_own_visited_set_and_the_run_is_the_same(monkeypatch):
    from pulsar_verify.spark_checks import bfs
    monkeypatch.setattr(bfs, "KNOWN_LIMIT", 0)
    model = registry.build("pip-373", "as-written")
    assert_same(explore(model)[0], explore_spark(model, master=MASTER))
