"""Exit codes never lie: 0 holds, 1 violation (or reproduces), 2 bad input or environment in one line,
3 an internal error naming a log with the traceback. Inputs are checked before any work, outputs are
replaced whole or left untouched, and ``replay`` is as strict about a file as the CLI is about flags."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from pulsar_verify import cli as cli_module
from pulsar_verify.findings import FINDINGS_DIR

from .helpers import cli

LASSO = FINDINGS_DIR / "v4-txn" / "end-txn-stalls-on-sealed-segment.itf.json"
TRACE = FINDINGS_DIR / "pip-473" / "uncommitted-entry-dispatched.itf.json"


def one_line_error(proc, code=2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def test_out_that_is_a_regular_file_is_refused_before_exploring(tmp_path):
    target = tmp_path / "file"
    target.write_text("keep me")
    for out in (target, target / "below"):
        err = one_line_error(cli("explore", "toy-lock", "--out", str(out), "--quiet"))
        assert "--out" in err and "exploring" not in err
    assert target.read_text() == "keep me"


def test_a_reused_out_holds_one_run_only(tmp_path):
    assert cli("explore", "toy-lock", "--out", str(tmp_path), "--quiet").returncode == 1
    assert (tmp_path / "mutual-exclusion.itf.json").exists()
    assert cli("explore", "toy-lock", "--variant", "all-fixes", "--out", str(tmp_path), "--quiet").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    assert not list(tmp_path.parent.glob(f".{tmp_path.name}.*"))  # no staging directory left behind


def test_a_failed_run_leaves_the_earlier_output_untouched(tmp_path):
    assert cli("explore", "toy-lock", "--out", str(tmp_path), "--quiet").returncode == 1
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    err = one_line_error(cli("explore", "toy-lock", "--variant", "all-fixes", "--engine", "spark", "--master",
                             "spark://127.0.0.1:1", "--out", str(tmp_path), "--quiet"))
    assert "cannot reach Spark master" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_peer_that_is_no_spark_master_is_a_one_line_error_within_the_wait(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    threading.Thread(target=lambda: [accepted.append(server.accept()) for _ in range(8)], daemon=True).start()
    started = time.monotonic()
    proc = cli("explore", "toy-lock", "--engine", "spark", "--master", f"spark://127.0.0.1:{server.getsockname()[1]}",
               "--start-timeout", "15", "--out", str(tmp_path / "out"), "--quiet")
    assert "did not start a job within 15 s" in one_line_error(proc)
    assert time.monotonic() - started < 120
    server.close()


def test_an_internal_error_exits_3_and_names_a_log_with_the_traceback(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PULSAR_VERIFY_LOG_DIR", str(tmp_path))
    monkeypatch.setattr(cli_module.registry, "all_models", lambda: 1 / 0)
    assert cli_module.main(["list"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError" in err
    [log] = tmp_path.glob("pulsar-verify-*.log")
    assert str(log) in err and "Traceback" in log.read_text()


def _edited(tmp_path, source, edit) -> str:
    doc = json.loads(source.read_text())
    edit(doc)
    path = tmp_path / "edited.itf.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _set(path, value):
    def edit(doc):
        *keys, last = path
        node = doc
        for k in keys:
            node = node[k]
        node[last] = value
    return edit


BAD_TRACES = {
    "violation a string": (TRACE, _set(("#meta", "violation"), "read-committed"), "must be an object"),
    "config out of range": (TRACE, _set(("#meta", "config", "subs"), {"#bigint": "30000000"}), "out of range"),
    "config not an integer": (TRACE, _set(("#meta", "config", "subs"), 1.7), "not an ITF value"),
    "config a list": (TRACE, _set(("#meta", "config", "subs"), [1]), "expected int"),
    "config a record": (TRACE, _set(("#meta", "config", "subs"), {"a": 1}), "expected int"),
    "config key unknown": (TRACE, _set(("#meta", "config", "bogus"), True), "unknown setting 'bogus'"),
    "kind edited": (TRACE, _set(("#meta", "violation", "kind"), "deadlock"), "is of kind action"),
    "property unknown": (TRACE, _set(("#meta", "violation", "property"), "nope"), "has no property 'nope'"),
    "loop moved": (LASSO, _set(("loop",), 0), "not a fair lasso"),
    "cut before the cycle": (LASSO, lambda d: d.update(states=d["states"][:-2]), "not a fair lasso"),
    "loop index past the end": (LASSO, _set(("loop",), 99), "'loop' must be a state index"),
    "loop missing": (LASSO, lambda d: d.pop("loop"), "needs the index its loop returns to"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_replay_rejects_a_bad_trace_file_with_exit_2(case, tmp_path):
    source, edit, message = BAD_TRACES[case]
    assert message in one_line_error(cli("replay", _edited(tmp_path, source, edit)))


@pytest.mark.parametrize("content", [b"\xe9\xe9", b"[" * 200_000 + b"]" * 200_000, b"{}"], ids=["latin-1", "deep", "empty"])
def test_replay_rejects_unreadable_files_with_exit_2(content, tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    one_line_error(cli("replay", str(path)))


def test_replay_of_a_lasso_shows_its_loop():
    proc = cli("replay", str(LASSO))
    assert proc.returncode == 1
    assert "loop: from state 6 back to it, 2 steps" in proc.stdout
    assert "weakly fair actions taken in the loop: marker_rejected" in proc.stdout


@pytest.mark.parametrize("content", [None, b"\xff\xfe", b"[1, 2]", b'{"toy-lock": {"as-written": {"x": "maybe"}}}',
                                     b'{"toy-lock": {"no-such-variant": {}}}'],
                         ids=["missing", "not-utf8", "not-an-object", "bad-verdict", "unknown-variant"])
def test_review_checks_its_expectations_before_any_work(content, tmp_path):
    out, expectations = tmp_path / "report", tmp_path / "expectations.json"
    out.mkdir()
    (out / "index.md").write_text("the earlier review")
    if content is not None:
        expectations.write_bytes(content)
    proc = cli("review", "--models", "toy-lock", "--engines", "local", "--out", str(out),
               "--expectations", str(expectations))
    assert "--expectations" in one_line_error(proc) and "toy-lock" not in proc.stdout
    assert [p.name for p in out.iterdir()] == ["index.md"] and (out / "index.md").read_text() == "the earlier review"


def test_unknown_names_are_usage_errors():
    for args in (["explore", "no-such-model"], ["explore", "toy-lock", "--variant", "nope"],
                 ["explore", "toy-lock", "--bounds", "nope"], ["replay", "/no/such/file.json"],
                 ["mutation", "no-such-model"], ["review", "--mutation", "/no/such/mutation.json"]):
        one_line_error(cli(*args))


def test_a_killed_runs_staging_directory_is_cleared_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    left = tmp_path / ".out.incoming-99999999"
    left.mkdir()
    (left / "half.itf.json").write_text("{")
    assert cli("explore", "toy-lock", "--variant", "all-fixes", "--out", str(out), "--quiet").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
