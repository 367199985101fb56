"""A real standalone Spark cluster on 127.0.0.1 (master and worker started from the scripts that
ship inside pyspark, stopped by process id): exploring on it, with executors in separate
processes whose Python workers each get a different PYTHONHASHSEED, gives the in-process answers,
both from the command line and through spark-submit."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pulsar_verify import registry
from pulsar_verify.explorer import explore

from pulsar_verify.spark_checks import submit

from .helpers import ROOT, free_port, wait_for

pyspark = pytest.importorskip("pyspark")
SPARK_HOME = Path(pyspark.__file__).parent
pytestmark = pytest.mark.xdist_group("spark-standalone")  # one cluster, its tests in one process




@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("spark-standalone")
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker")}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = [open(work / "master.log", "wb"), open(work / "worker.log", "wb")]
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env,
                              stdout=logs[0], stderr=subprocess.STDOUT)
    procs = [master]
    try:
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, "the master")
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                   "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                                   "--webui-port", str(free_port()), "--work-dir", str(work / "worker")],
                                  env=env, stdout=logs[1], stderr=subprocess.STDOUT)
        procs.append(worker)

        def alive_workers():
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                return json.load(page).get("aliveworkers", 0) >= 1
        wait_for(alive_workers, "the worker to register")
        # Each Python worker process logs the hash seed it runs with; the wrapper gives each its own.
        seeds = work / "seeds.log"
        wrapper = work / "python-random-hash-seed"
        wrapper.write_text(f'#!/bin/sh\nexport PYTHONHASHSEED=$$\necho "$$" >> {seeds}\n'
                           f'exec {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
        yield {"master": f"spark://127.0.0.1:{port}", "python": str(wrapper), "seeds": seeds, "work": work}
    finally:
        for proc in reversed(procs):  # stopped by process id: spark-class execs the JVM itself
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()


def _same_as_local(summary: dict, name: str, variant: str):
    local, _ = explore(registry.build(name, variant))
    assert (summary["distinct_states"], summary["transitions"], summary["depth"], summary["level_sizes"]) == \
        (local.distinct_states, local.transitions, local.depth, local.level_sizes)
    assert [(v["property"], v["length"]) for v in summary["violations"]] == \
        [(v.prop.id, v.length) for v in local.violations]


EXECUTORS = ["--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m"]


def test_explore_on_a_standalone_cluster_equals_in_process(cluster, tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": cluster["python"]}
    env.pop("PYTHONHASHSEED", None)
    r = subprocess.run([sys.executable, "-m", "pulsar_verify", "explore", "pip-473", "--engine", "spark",
                        "--master", cluster["master"], *EXECUTORS, "--out", str(tmp_path), "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stderr  # pip-473 as written has findings
    summary = json.loads(r.stdout)
    assert summary["engine"] == f"spark[{cluster['master']}]"
    _same_as_local(summary, "pip-473", "as-written")
    seeds = set(cluster["seeds"].read_text().split())
    assert len(seeds) >= 2  # Python workers in separate processes, each with its own hash seed
    executors = list((cluster["work"] / "worker").glob("app-*/*"))
    assert len(executors) >= 2  # two executor JVMs (one core each) ran the application


def test_spark_submit_entry_point_on_the_cluster(cluster, tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": cluster["python"], "SPARK_HOME": str(SPARK_HOME)}
    r = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster["master"], *EXECUTORS,
                        submit.__file__, "explore", "pip-477", "--engine", "spark",
                        "--out", str(tmp_path), "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    _same_as_local(summary, "pip-477", "as-written")
