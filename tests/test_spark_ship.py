"""What a Spark job ships to its executors (``spark_checks/ship.py``) is all they import: the
archives alone, on a Python with no site-packages, run every registered model through the
engine's own level tasks, with the compiled fingerprint; and the routes are chosen as documented."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from pulsar_verify import registry
from pulsar_verify.model import UsageError
from pulsar_verify.spark_checks import ship

EXECUTOR = """
import json, sys
sys.path[:0] = sys.argv[1:3]
from pulsar_verify import registry
from pulsar_verify.fingerprint import fingerprint
from pulsar_verify.spark_checks.bfs import SparkExplorer, _advance, _prime
from pulsar_verify.spark_checks.checkpoint import read_summaries

class NoSpark:  # what SparkExplorer reads of a session, for its level-0 files
    class sparkContext:
        defaultParallelism, master = 1, "none"

found = {}
for name in registry.names():
    engine = SparkExplorer(registry.build(name), out=sys.argv[3] + "/" + name, fresh=True, spark=NoSpark,
                           partitions=1)
    engine.ckpt.start(True)
    engine._initial()
    engine.ckpt.prime_dir(0).mkdir()
    shipped = list(_prime(engine._job(0, True, len(engine.init_by_fp)), 0))
    engine.ckpt.level_dir(1).mkdir()
    list(_advance(engine._job(1, True, len(engine.init_by_fp)), 0, shipped))
    found[name] = read_summaries(engine.ckpt.level_dir(1), 1)[0]["new"]
import pulsar_verify, pulsar_verify.merkle as merkle
print(json.dumps({"new": found, "code": pulsar_verify.__file__, "compiled": merkle._merkle is not None,
                  "outside": [m.__file__ for m in list(sys.modules.values())
                              if getattr(m, "__file__", None) and "site-packages" in m.__file__]}))
"""


def test_the_shipped_archives_are_all_an_executor_imports(tmp_path):
    models = registry.names()
    dirs = {}
    for path, alias in ship.archives("env", models):
        with zipfile.ZipFile(path) as zf:
            zf.extractall(tmp_path / alias)
        dirs[alias] = str(tmp_path / alias)
    r = subprocess.run([sys.executable, "-S", "-c", EXECUTOR, dirs[ship.CODE], dirs[ship.DEPS], f"file://{tmp_path}/out"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert set(report["new"]) == set(models) and all(n > 0 for n in report["new"].values())
    assert report["code"].startswith(dirs[ship.CODE])  # not the checkout's
    assert report["compiled"]  # the Merkle extension travels in the wheel
    assert report["outside"] == []  # nothing came from an installed site-packages


def test_the_code_archive_holds_pulsar_verify_and_the_model_packages_only(tmp_path):
    (code, alias), = ship.archives("code", ["toy-lock"])
    assert alias == ship.CODE
    with zipfile.ZipFile(code) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"pulsar_verify", "toy_lock.py"}
    assert any(t.startswith("pulsar_verify-") for t in tops)  # its entry points name the models


def test_routes():
    assert ship.route_for("auto", "local[2]") == "none"
    assert ship.route_for("auto", "spark://h:7077") == "env"
    assert ship.route_for("code", "yarn") == "code"
    assert ship.archives("none", ["pip-473"]) == []
    for route, master in (("env", "local[*]"), ("bogus", "spark://h:7077")):
        with pytest.raises(UsageError):
            ship.route_for(route, master)
