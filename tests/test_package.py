"""A package that installs as a package: the wheel, installed into a fresh venv, works from any
directory (one with its own ``models/`` package included), finds its models through entry points,
and every finding replays from it."""
from __future__ import annotations

import json
import os
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

from pulsar_verify.findings import FINDINGS_DIR
from pulsar_verify.spark_checks.ship import build_wheel

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pulsar_verify", "models", "invariants", "properties", "spark_checks", "findings")


def test_every_package_folder_is_in_the_wheel_list():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = {folder: name for name, folder in config["package-dir"].items()}
    found = set()
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([where[folder], *rel.parts]))
    assert found == set(config["packages"])


REPLAY_ALL = """
import contextlib, io, json, sys
from pulsar_verify.cli import main
codes = {}
for path in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        codes[path] = main(["replay", path])
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheels of pulsar-verify and the example model package, and nothing else of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    wheels, env_dir = base / "wheels", base / "venv"
    for project in (ROOT, ROOT / "examples" / "toy-lock"):
        build_wheel(project, wheels)
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", *map(str, sorted(wheels.glob("*.whl")))],
                   check=True, capture_output=True, cwd=base)
    return python


def run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(python.parent / "pulsar-verify"), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


@pytest.fixture()
def elsewhere(tmp_path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("raise SystemExit('the checkout-less run imported ./models')\n")
    return tmp_path


def test_the_wheel_lists_explores_and_refuses_bad_input_from_any_directory(installed, elsewhere):
    listed = run(installed, elsewhere, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {m["model"] for m in json.loads(listed.stdout)} == {"pip-473", "v4-txn", "pip-373", "pip-468", "pip-477",
                                                               "v4-impl", "toy-lock"}
    explored = run(installed, elsewhere, "explore", "pip-473", "--bounds", "default", "--quiet", "--out", "o")
    assert explored.returncode == 1 and "VIOLATED read-committed" in explored.stdout
    assert (elsewhere / "o" / "read-committed.itf.json").exists()
    for args in (["explore", "no-such-model"], ["replay", "missing.itf.json"], ["explore", "toy-lock", "--set", "procs=99"]):
        bad = run(installed, elsewhere, *args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, args


def test_every_finding_replays_from_the_wheel(installed, elsewhere):
    files = sorted(str(p) for p in FINDINGS_DIR.glob("*/*.itf.json"))
    proc = subprocess.run([str(installed), "-c", REPLAY_ALL, *files], capture_output=True, text=True, cwd=elsewhere,
                          check=True, timeout=600)
    assert json.loads(proc.stdout) == {f: 1 for f in files}
