"""The compiled modules (pulsar_verify/compiled.py): the same runs as the source, and never a stale build."""
import json
import os
import subprocess
import sys

import pytest

from pulsar_verify import cli, compiled

# a model module, the model's invariants and the core's values: each kind of module the cache holds
MODULES = ["pulsar_verify.models.pip473.dispatcher", "pulsar_verify.invariants.pip473", "pulsar_verify.values"]
RUN = f"""
import json, sys
from pulsar_verify import registry
from pulsar_verify.explorer import explore
r = explore(registry.build("pip-473", "as-written", preset="default"))[0]
files = {{name: sys.modules[name].__file__ for name in {MODULES!r}}}
print(json.dumps({{"files": files, "states": r.distinct_states, "transitions": r.transitions, "depth": r.depth,
                  "coverage": dict(r.coverage),
                  "violations": [(v.prop.id, [str(a) for a in v.actions]) for v in r.violations]}}))
"""


def _run(cache, on: bool) -> dict:
    env = {**os.environ, "PULSAR_VERIFY_COMPILED": "1" if on else "0", "PULSAR_VERIFY_COMPILED_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    where = tmp_path_factory.mktemp("compiled")
    os.environ["PULSAR_VERIFY_COMPILED_DIR"] = str(where)
    try:
        built, why = compiled.build(MODULES, say=lambda line: None)
    finally:
        del os.environ["PULSAR_VERIFY_COMPILED_DIR"]
    assert (built, why) == (len(MODULES), "")
    return where


def test_a_compiled_run_is_the_source_run(cache):
    fast, source = _run(cache, True), _run(cache, False)
    assert all(f.startswith(str(cache)) for f in fast.pop("files").values())
    assert not any(f.startswith(str(cache)) for f in source.pop("files").values())
    assert fast == source and source["violations"]


def test_a_module_edited_since_it_was_compiled_runs_from_source(cache, tmp_path):
    stale = tmp_path / "stale"
    stale.mkdir()
    for built in cache.iterdir():  # each file kept under a key its module's source no longer has
        name = compiled._module_of(built.name)
        (stale / f"{name}.{'0' * 20}{compiled.SUFFIX}").write_bytes(built.read_bytes())
    assert sorted(compiled._module_of(f.name) for f in stale.iterdir()) == sorted(MODULES)
    files = _run(stale, True)["files"]
    assert all(f.endswith(".py") for f in files.values())


def test_compile_says_in_one_line_when_it_is_turned_off(monkeypatch, capsys):
    monkeypatch.setenv("PULSAR_VERIFY_COMPILED", "0")
    assert cli.main(["compile"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_a_module_whose_super_call_would_break_compiled_stays_source():
    source = "import attrs\n@attrs.frozen\nclass A:\n    def __reduce__(self):\n        return super().__reduce__()\n"
    assert compiled.uncompilable(source) == "attrs class A calls super() (line 5)"
    assert compiled.uncompilable(source.replace("@attrs.frozen\n", "")) == ""
    nested = "class B(A):\n    def f(self):\n        return [x for x in super().f()]\n"
    assert compiled.uncompilable(nested) == "B.f calls super() in a nested scope (line 3)"
    assert [name for name, src in compiled.hot_modules().items() if compiled.uncompilable(src.read_text())] == []


def test_a_failed_compile_leaves_the_source_in_use(monkeypatch, tmp_path):
    def fails(*args, **kw):
        raise RuntimeError("Error compiling Cython file:\nvalues.py:1:0: a syntax Cython rejects")
    monkeypatch.setattr("Cython.Build.cythonize", fails)
    monkeypatch.setenv("PULSAR_VERIFY_COMPILED_DIR", str(tmp_path))
    assert compiled.build(["pulsar_verify.values"], say=lambda line: None) == (
        0, "compiling failed: values.py:1:0: a syntax Cython rejects")
    assert list(tmp_path.iterdir()) == []


def test_the_review_checks_its_input_before_compiling(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PULSAR_VERIFY_COMPILED", "1")
    monkeypatch.setenv("PULSAR_VERIFY_COMPILED_DIR", str(tmp_path / "cache"))
    assert cli.main(["review", "--expectations", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()
