"""A cluster as a user's team has one, on 127.0.0.1: a standalone master and two workers (from the
scripts inside pyspark, stopped by process id), each worker with its own work directory and its
own Python environment that has the dependencies but not pulsar-verify. The driver is the
installed wheel, started outside the checkout; the run's state goes to a ``file://`` URI through
the code path a remote filesystem takes.

- ``--ship env`` (the default): the workers' Python is started isolated (``-S``: no site-packages,
  so only the standard library and the Spark installation's PySpark), so everything else the
  executors import must come with the job.
- ``--ship code``: the workers' own environments give the dependencies.
- A worker and the driver are killed mid-level; the same command resumes from the URI on the
  worker left and gives the same counts.

What this does not cover: the workers share this machine's filesystem and network namespace, so a
file the job forgot to ship would still be readable by path. The isolated Python and the checks
that nothing on a worker's own path holds pulsar-verify are what stand in for separate hosts.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
import venv
from pathlib import Path

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import explore
from pulsar_verify.spark_checks.ship import build_wheel

from .helpers import ROOT, free_port, wait_for

pyspark = pytest.importorskip("pyspark")
SPARK_HOME = Path(pyspark.__file__).parent
SITE = SPARK_HOME.parent  # the test venv's site-packages
WORKER_DEPS = ("attrs", "attr", "networkx", "numpy", "numpy.libs", "pyarrow", "protobuf", "google")
pytestmark = pytest.mark.xdist_group("spark-cluster")  # one cluster, its tests in one process




def _view(into: Path, keep) -> Path:
    """A directory of links to the entries of this venv's site-packages that ``keep`` accepts (each
    package with its dist-info): an environment holding those packages, without copying them."""
    into.mkdir(parents=True)
    for entry in SITE.iterdir():
        top = entry.name.split("-")[0] if entry.name.endswith(".dist-info") else entry.name
        if keep(top.lower(), entry.name):
            (into / entry.name).symlink_to(entry)
    return into


def _environment(where: Path, view: Path) -> Path:
    """A venv whose site-packages also reads ``view``; returns its Python."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "view.pth").write_text(f"{view}\n")
    return python


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
                        "PYTHONHASHSEED")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    """The ``pulsar-verify`` command of a venv with the project's wheel installed (no checkout on its
    path) and the third-party packages of this venv."""
    base = tmp_path_factory.mktemp("driver")
    build_wheel(ROOT, base / "wheels")
    view = _view(base / "deps", lambda top, name: not top.startswith(("pulsar_verify", "__editable__", "_pytest",
                                                                        "pytest", "xdist")))
    python = _environment(base / "venv", view)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    *map(str, (base / "wheels").glob("*.whl"))], check=True, capture_output=True, cwd=base,
                   env=_clean_env())
    return base / "venv" / "bin" / "pulsar-verify"


def _start_worker(cluster: dict, name: str) -> subprocess.Popen:
    """Worker ``name``: its own work directory, and on its PATH a ``python3.x`` of its own venv (with
    the dependencies, not pulsar-verify) that logs each start; isolated (``-S``) when the job's
    executors have PV_TEST_ISOLATED set."""
    work = cluster["work"]
    home = work / name
    if not (home / "bin").exists():
        python = _environment(home / "venv", cluster["deps"])
        (home / "bin").mkdir(parents=True)
        wrapper = home / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        wrapper.write_text(f'#!/bin/sh\necho "{name} $PWD ${{PV_TEST_ISOLATED:-0}}" >> {work / "pythons.log"}\n'
                           f'exec {python} ${{PV_TEST_ISOLATED:+-S}} "$@"\n')
        wrapper.chmod(0o755)
    env = _clean_env(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(home),
                     PATH=f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
    log = open(home / "worker.log", "ab")
    proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                             cluster["master"], "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                             "--webui-port", str(free_port()), "--work-dir", str(home / "work")],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return proc


def _alive(cluster: dict) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster['ui']}/json/", timeout=2) as page:
        return json.load(page).get("aliveworkers", 0)


def _stop(proc: subprocess.Popen) -> None:
    """A process and everything it started (its own session): a worker's executors and Python workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("spark-cluster")
    port, ui = free_port(), free_port()
    cluster = {"master": f"spark://127.0.0.1:{port}", "ui": ui, "work": work, "workers": {},
               "deps": _view(work / "deps", lambda top, name: top in WORKER_DEPS)}
    env = _clean_env(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work))
    with open(work / "master.log", "wb") as log:
        master = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, "the master")
        for name in ("w1", "w2"):
            cluster["workers"][name] = _start_worker(cluster, name)
        wait_for(lambda: _alive(cluster) >= 2, "two workers to register")
        yield cluster
    finally:
        for proc in [*cluster["workers"].values(), master]:
            _stop(proc)


def _explore(driver: Path, cluster: dict, cwd: Path, *args: str, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    command = [str(driver), "explore", *args, "--engine", "spark", "--master", cluster["master"],
               "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m", "--json"]
    if kw.get("background"):
        return subprocess.Popen(command, cwd=cwd, env=_clean_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    return subprocess.run(command, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=900)


def _same_as_local(summary: dict, name: str, variant: str = "as-written", bounds: str = "default"):
    local, _ = explore(registry.build(name, variant, preset=bounds))
    assert (summary["distinct_states"], summary["transitions"], summary["depth"], summary["level_sizes"]) == \
        (local.distinct_states, local.transitions, local.depth, local.level_sizes)
    assert [(v["property"], v["length"]) for v in summary["violations"]] == \
        [(v.prop.id, v.length) for v in local.violations]


def _pythons(cluster: dict) -> list[list[str]]:
    path = cluster["work"] / "pythons.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_nothing_on_the_workers_holds_pulsar_verify(cluster):
    for name in ("w1", "w2"):
        python = cluster["work"] / name / "venv" / "bin" / "python"
        probe = subprocess.run([str(python), "-c", "import attrs, networkx, numpy, pyarrow, google.protobuf; import pulsar_verify"],
                               capture_output=True, text=True, cwd=cluster["work"], env=_clean_env())
        assert "No module named 'pulsar_verify'" in probe.stderr, probe.stderr


def test_shipped_environment_on_isolated_workers_equals_in_process(cluster, driver, tmp_path):
    before = len(_pythons(cluster))
    r = _explore(driver, cluster, tmp_path, "pip-473", "--out", f"file://{tmp_path}/run",
                 "--conf", "spark.executorEnv.PV_TEST_ISOLATED=1")
    assert r.returncode == 1, r.stderr[-3000:]  # pip-473 as written has findings
    summary = json.loads(r.stdout)
    assert summary["engine"] == f"spark[{cluster['master']}]"
    _same_as_local(summary, "pip-473")
    ran = _pythons(cluster)[before:]
    assert {name for name, _, isolated in ran if isolated == "1"} == {"w1", "w2"}  # both workers, isolated
    for name in ("w1", "w2"):  # each executor unpacked the job's archives in its own directory
        assert list((cluster["work"] / name / "work").glob("app-*/*/pv-code/pulsar_verify/spark_checks/bfs.py"))
        assert list((cluster["work"] / name / "work").glob("app-*/*/pv-deps/pyarrow"))
    assert (tmp_path / "run" / "spark" / "manifest.json").exists() and (tmp_path / "run" / "summary.json").exists()


def test_shipped_code_with_the_workers_own_dependencies_equals_in_process(cluster, driver, tmp_path):
    r = _explore(driver, cluster, tmp_path, "pip-477", "--ship", "code", "--out", f"file://{tmp_path}/run")
    assert r.returncode == 1, r.stderr[-3000:]
    _same_as_local(json.loads(r.stdout), "pip-477")


def test_a_run_that_lost_a_worker_and_its_driver_resumes_from_the_uri(cluster, driver, tmp_path):
    out = f"file://{tmp_path}/run"
    args = ("v4-txn", "--bounds", "faults", "--out", out)
    manifest = tmp_path / "run" / "spark" / "manifest.json"
    run = _explore(driver, cluster, tmp_path, *args, background=True)
    try:
        wait_for(lambda: json.loads(manifest.read_text())["levels"] >= 4, "level 4", seconds=600)
    finally:
        _stop(cluster["workers"]["w2"])  # a worker and its executors, mid-level
        _stop(run)  # and the driver with its JVM
    levels = json.loads(manifest.read_text())["levels"]
    try:
        wait_for(lambda: _alive(cluster) == 1, "the master to drop the lost worker")
        r = _explore(driver, cluster, tmp_path, *args)
        assert r.returncode in (0, 1), r.stderr[-3000:]
        summary = json.loads(r.stdout)
        _same_as_local(summary, "v4-txn", bounds="faults")
        assert levels < summary["depth"]  # it was killed before the end, and continued
        stats = json.loads((tmp_path / "run" / "spark" / "stats.json").read_text())
        assert len(stats) == summary["depth"] + 2
    finally:
        cluster["workers"]["w2"] = _start_worker(cluster, "w2")
        wait_for(lambda: _alive(cluster) >= 2, "the worker to register again")


def test_spark_submit_of_the_installed_launcher(cluster, driver, tmp_path):
    """The README's cluster command: spark-submit of the launcher inside the installed package, the
    workers' Python named by ``spark.pyspark.python``, the code shipped, the results at a URI."""
    python = driver.parent / "python"
    launcher = subprocess.run([str(python), "-c", "import pulsar_verify.spark_checks.submit as m; print(m.__file__)"],
                              capture_output=True, text=True, check=True, cwd=tmp_path, env=_clean_env()).stdout.strip()
    assert not launcher.startswith(str(ROOT))
    worker = f"python{sys.version_info.major}.{sys.version_info.minor}"
    r = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster["master"],
                        "--conf", f"spark.pyspark.python={worker}", "--conf", f"spark.pyspark.driver.python={python}",
                        "--conf", "spark.executorEnv.PV_TEST_ISOLATED=1", "--conf", "spark.executor.cores=1",
                        "--conf", "spark.executor.memory=512m",
                        launcher, "explore", "pip-373", "--engine", "spark", "--out", f"file://{tmp_path}/run", "--json"],
                       cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    _same_as_local(json.loads(r.stdout[r.stdout.index("{"):]), "pip-373")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["distinct_states"] > 0
