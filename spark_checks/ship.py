"""The code a Spark job's executors run, shipped with the job, so that a cluster's workers need
only a Python of the driver's minor version (PySpark requires that anyway) and their Spark
installation, which puts PySpark on the Python workers' path itself.

Routes (``--ship``; the README's "Spark on a cluster" shows both in use):

- ``env``, the default on a cluster master: two zip archives go with the job
  (``SparkContext.addArchive``, which unpacks each into every executor's working directory) and
  are put first on the executors' ``PYTHONPATH``:
  ``pv-code``, the installed files of pulsar-verify and of the package that registers the model
  (an editable install is built into its wheel first), and ``pv-deps``, the third-party
  distributions the executors import (``EXECUTOR_DEPENDENCIES`` and what they require), copied
  from the driver's environment and cached by their versions. Their compiled parts (numpy,
  pyarrow, the fingerprint and replace extensions) need workers of the driver's platform (Linux x86_64
  for the wheels of a Linux x86_64 driver).
- ``code``: ``pv-code`` only, for workers whose Python already has the dependencies (the
  cluster's own Python, with ``pip install attrs networkx numpy pyarrow protobuf``).
- ``none``: nothing is shipped; the workers' Python has pulsar-verify installed. The only route
  for ``local[N]``, whose executors are processes of the driver's machine and Python.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib.metadata import Distribution, distributions, entry_points
from pathlib import Path

from pulsar_verify.model import UsageError

ROUTES = ("auto", "env", "code", "none")
# What executors import beyond pulsar-verify (tests/test_spark_ship.py runs every model from the archives alone).
EXECUTOR_DEPENDENCIES = ("attrs", "networkx", "numpy", "pyarrow", "protobuf")
ON_THE_WORKERS = {"pyspark", "py4j"}  # the Spark installation's own
CODE, DEPS = "pv-code", "pv-deps"  # the archives' directories in an executor's working directory


def route_for(route: str, master: str) -> str:
    """``auto``: ``env`` on a cluster master, ``none`` on ``local[N]``."""
    if route not in ROUTES:
        raise UsageError(f"--ship: unknown route {route!r} (known: {', '.join(ROUTES)})")
    local = master.startswith("local")
    if route == "auto":
        return "none" if local else "env"
    if local and route != "none":
        raise UsageError(f"--ship {route}: {master} runs the executors in the driver's own Python; "
                         f"shipping is for a cluster master (spark://, yarn, k8s://)")
    return route


def worker_python() -> str:
    """The Python a shipped job asks the workers for: the driver's minor version, by name on the
    workers' PATH (``PYSPARK_PYTHON`` overrides it)."""
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def _name(requirement: str) -> str | None:
    """The distribution a requirement line names, or None for one that only an extra asks for."""
    if re.search(r"extra\s*==", requirement):
        return None
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else None


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(name: str) -> Distribution | None:
    """The installed distribution ``name``: the first on the path that an installer recorded (a RECORD),
    not the ``.egg-info`` a build leaves in a source tree that happens to be the current directory."""
    return next((d for d in distributions(name=name) if d.read_text("RECORD") is not None), None)


def _closure(names, skip: set[str]) -> list[Distribution]:
    """The installed distributions ``names`` need, their requirements included, less ``skip``."""
    found: dict[str, Distribution] = {}
    todo = [_key(n) for n in names]
    while todo:
        key = todo.pop()
        if key in found or key in skip:
            continue
        dist = _installed(key)
        if dist is None:
            continue  # an optional requirement not installed: the driver runs without it too
        found[key] = dist
        todo += [_key(n) for n in map(_name, dist.requires or ()) if n]
    return [found[k] for k in sorted(found)]


def _editable_project(dist: Distribution) -> Path | None:
    """The source directory of an editable (or otherwise not copied) install, else None."""
    text = dist.read_text("direct_url.json")
    info = json.loads(text) if text else {}
    if info.get("dir_info", {}).get("editable") and info.get("url", "").startswith("file://"):
        return Path(info["url"][len("file://"):])
    return None


def build_wheel(project: Path, into: Path) -> Path:
    """``pip wheel`` of a source directory into ``into``, one build at a time on this machine (setuptools
    builds in the project's own ``build/``); a failure raises RuntimeError with pip's last line."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(into), str(project)],
                               capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError((built.stderr.strip().splitlines() or ["pip wheel failed"])[-1])
    return max(into.glob("*.whl"), key=lambda w: w.stat().st_mtime)


def _files(dist: Distribution, scratch: Path):
    """(name in the archive, file) for every installed file of ``dist`` that an import reads; an
    editable install's files come from its wheel, built from its source directory."""
    project = _editable_project(dist)
    if project is not None:
        wheels = Path(tempfile.mkdtemp(dir=scratch))
        try:
            wheel = build_wheel(project, wheels)
        except RuntimeError as exc:
            raise UsageError(f"cannot build the wheel of {dist.metadata['Name']} (an editable install at "
                             f"{project}) to ship it: {exc}") from None
        unpacked = wheels / "unpacked"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(unpacked)
        for path in sorted(unpacked.rglob("*")):
            if path.is_file():
                yield path.relative_to(unpacked).as_posix(), path
        return
    for entry in dist.files or ():
        if entry.parts[0] == ".." or "__pycache__" in entry.parts:
            continue  # scripts, byte code
        path = Path(dist.locate_file(entry))
        if path.is_file():
            yield entry.as_posix(), path


def _zip(into: Path, dists: list[Distribution], scratch: Path) -> Path:
    """One archive of ``dists``' files, written whole (a temporary file renamed over ``into``)."""
    tmp = into.with_name(f".{into.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for dist in dists:
            for name, path in _files(dist, scratch):
                zf.write(path, name)
    tmp.replace(into)
    return into


def _fingerprint(dists: list[Distribution]) -> str:
    """Names, versions and RECORDs: what the cached archive of third-party code is made of."""
    h = hashlib.sha256()
    for dist in dists:
        h.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
        h.update((dist.read_text("RECORD") or "").encode())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pulsar-verify" / "ship"


def code_distributions(models) -> list[Distribution]:
    """pulsar-verify and the packages that register ``models``."""
    from pulsar_verify.registry import GROUP
    names = {"pulsar-verify"} | {_key(ep.dist.metadata["Name"]) for ep in entry_points(group=GROUP)
                                 if ep.name in set(models) and ep.dist is not None}
    return [_installed(n) for n in sorted(names)]


def dependency_distributions(models) -> list[Distribution]:
    """The third-party distributions executors import, and what the model packages require
    beyond pulsar-verify (whose own requirements are mostly for the driver)."""
    code = code_distributions(models)
    extra = [n for d in code if _key(d.metadata["Name"]) != "pulsar-verify" for n in map(_name, d.requires or ()) if n]
    return _closure([*EXECUTOR_DEPENDENCIES, *extra], skip={_key(d.metadata["Name"]) for d in code} | ON_THE_WORKERS)


def archives(route: str, models) -> list[tuple[Path, str]]:
    """(archive, directory name on the executors), for ``route``. The code's archive is made for
    this run, in a directory removed when the driver ends (it serves the archive until then)."""
    if route == "none":
        return []
    scratch = Path(tempfile.mkdtemp(prefix="pulsar-verify-ship-"))
    atexit.register(shutil.rmtree, scratch, True)
    out = [(_zip(scratch / f"{CODE}.zip", code_distributions(models), scratch), CODE)]
    if route == "env":
        deps = dependency_distributions(models)
        cached = cache_dir() / f"{DEPS}-{_fingerprint(deps)}.zip"
        if not cached.exists():
            cached.parent.mkdir(parents=True, exist_ok=True)
            _zip(cached, deps, scratch)
        out.append((cached, DEPS))
    return out


def ship(sc, shipped: list[tuple[Path, str]]) -> None:
    """Send ``shipped`` (``archives()``) with every job of ``sc``, first on the executors' Python path
    (relative: each executor unpacks them in its working directory)."""
    for path, alias in shipped:
        sc.addArchive(f"{path}#{alias}")
    if shipped:
        earlier = sc.environment.get("PYTHONPATH")
        sc.environment["PYTHONPATH"] = os.pathsep.join([alias for _, alias in shipped] + ([earlier] if earlier else []))
