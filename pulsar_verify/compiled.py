"""The explorer and the models compiled with Cython, used only while their source is the one compiled.

The same Python source, untyped and unchanged, compiled to C (``pulsar-verify compile``; ``review`` does it
first): a step of pip-473 runs about 1.3-1.5 times faster. Each module is compiled into a cache directory
under a key of its source bytes, Cython's version and this Python's ABI, and ``install`` puts a finder first
on ``sys.meta_path`` that imports a module from the cache only when a file is there under the key of its
source as it is now. An edited module is imported from its source until it is compiled again, so an
editable install never runs code other than what its files say (the reason a compiled module built in
place, which would shadow its edited source, is not used).

``PULSAR_VERIFY_COMPILED=0`` turns the compiled modules off (the tests run the source unless a test asks);
``PULSAR_VERIFY_COMPILED_DIR`` moves the cache (default ``~/.cache/pulsar-verify/compiled``).
"""
from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from hashlib import blake2b
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# the explorer's hot path beside the models: the search loop, actions and values, fingerprints, symmetry
CORE = ("explorer", "model", "values", "fingerprint", "merkle", "symmetry")
# a third of the default -O3 -g's compile time (23 s against 73 s for pip-473's modules and the core), and a run
# within this machine's noise of it
FLAGS = ("-O1", "-g0")
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}


def enabled() -> bool:
    return os.environ.get("PULSAR_VERIFY_COMPILED", "1") != "0"


def cache_dir() -> Path:
    given = os.environ.get("PULSAR_VERIFY_COMPILED_DIR")
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pulsar-verify" / "compiled"


def hot_modules() -> dict[str, Path]:
    """Module name -> source file of every module compiled: the core above, the resident Spark search, and
    each model package's and invariants' modules (package ``__init__`` files stay source)."""
    out = {f"pulsar_verify.{name}": PACKAGE / f"{name}.py" for name in CORE}
    spark = importlib.util.find_spec("pulsar_verify.spark_checks").submodule_search_locations[0]
    out["pulsar_verify.spark_checks.resident"] = Path(spark) / "resident.py"  # the resident Spark search's loop
    for pkg in ("pulsar_verify.models", "pulsar_verify.invariants"):
        for root in importlib.util.find_spec(pkg).submodule_search_locations:
            for path in sorted(Path(root).rglob("*.py")):
                if path.name != "__init__.py" and "__pycache__" not in path.parts:
                    rel = path.relative_to(root).with_suffix("")
                    out[".".join((pkg, *rel.parts))] = path
    return out


def _key(source: bytes) -> str:
    import Cython
    tag = f"{Cython.__version__}|{sysconfig.get_config_var('EXT_SUFFIX')}|{FLAGS}|{sorted(DIRECTIVES.items())}"
    return blake2b(tag.encode() + b"\0" + source, digest_size=10).hexdigest()


SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _cached(name: str, source: Path, cache: Path, text: bytes | None = None) -> Path:
    """Where the cache keeps ``name`` compiled from ``text`` (default: the source file as it is now)."""
    return cache / f"{name}.{_key(source.read_bytes() if text is None else text)}{SUFFIX}"


def _module_of(filename: str) -> str:
    return filename[:-len(SUFFIX)].rsplit(".", 1)[0] if filename.endswith(SUFFIX) else ""


def uncompilable(source: str) -> str:
    """Why the module cannot run compiled with the same meaning, or "". A compiled function has no ``__class__``
    cell where Python makes one implicitly, so ``super()`` without arguments fails or names another class:
    - in a method of an attrs class (attrs makes a slotted class anew and repoints its methods' cell, which a
      compiled method does not have: its ``super()`` names the class attrs discarded);
    - in a comprehension, lambda or function nested in a method (Cython gives it no cell: a RuntimeError)."""
    def calls_super(node) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
            and not node.args

    nested = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef)
    for cls in ast.walk(ast.parse(source)):
        if not isinstance(cls, ast.ClassDef):
            continue
        if any("attr" in ast.unparse(d) for d in cls.decorator_list):
            for inner in ast.walk(cls):
                if calls_super(inner) or (isinstance(inner, ast.Name) and inner.id == "__class__"):
                    return f"attrs class {cls.name} calls super() (line {inner.lineno})"
        for method in cls.body:
            if isinstance(method, ast.FunctionDef):
                for scope in ast.walk(method):
                    if isinstance(scope, nested) and scope is not method:
                        for inner in ast.walk(scope):
                            if calls_super(inner):
                                return f"{cls.name}.{method.name} calls super() in a nested scope (line " \
                                       f"{inner.lineno})"
    return ""


class _Finder(importlib.abc.MetaPathFinder):
    """Imports a hot module from the cache when a file compiled from its current source is there."""

    def __init__(self, cache: Path):
        self.cache = cache
        try:
            self.names = {_module_of(f) for f in os.listdir(cache)}
        except OSError:
            self.names = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        source = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                source = finder.find_spec(fullname, path, target)
                if source is not None:
                    break
        if source is None or not source.origin or not source.origin.endswith(".py"):
            return None
        try:
            built = _cached(fullname, Path(source.origin), self.cache)
        except (OSError, ImportError):  # no Cython to name the key with: the source
            return None
        if not built.is_file():
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(built))
        return importlib.util.spec_from_file_location(fullname, built, loader=loader)


def install() -> None:
    """The finder first on ``sys.meta_path`` (once), unless turned off."""
    if enabled() and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(cache_dir()))


def loaded_from_source() -> list[str]:
    """The hot modules this process imported from source though the cache now has them compiled."""
    cache = cache_dir()
    return [name for name, src in hot_modules().items()
            if name in sys.modules and str(getattr(sys.modules[name], "__file__", "")).endswith(".py")
            and _cached(name, src, cache).is_file()]


def build(names: list[str] | None = None, *, jobs: int | None = None, say=print) -> tuple[int, str]:
    """Compile the hot modules (or ``names``) the cache does not have for their current source. Returns
    (modules compiled, why none could be: empty when they could). Nothing is written to the cache but
    whole files, each moved in place when built, under the key of the bytes compiled (each source is read once:
    an edit made while it compiles is not filed under the build of the text before it)."""
    try:
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
    except ImportError as exc:
        return 0, f"Cython or setuptools is not installed ({exc.name})"
    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        return 0, "no C compiler"
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    hot = hot_modules()
    todo = {}  # name -> (its source file, the bytes compiled)
    for name in names or hot:
        text = hot[name].read_bytes()
        if _cached(name, hot[name], cache, text).is_file():
            continue
        why = uncompilable(text.decode())
        if why:
            say(f"{name} stays source: {why}")
        else:
            todo[name] = hot[name], text
    if not todo:
        return 0, ""
    started = time.perf_counter()
    say(f"compiling {len(todo)} modules with Cython (once per version of their source) ...")
    with tempfile.TemporaryDirectory(prefix="pv-compile-") as tmp:
        exts = []
        for name, (_, text) in todo.items():  # laid out as packages, so each module knows its full name
            where = Path(tmp, *name.split(".")).with_suffix(".py")
            where.parent.mkdir(parents=True, exist_ok=True)
            for d in where.relative_to(tmp).parents:
                if d != Path("."):
                    Path(tmp, d, "__init__.py").touch()
            where.write_bytes(text)
            exts.append(Extension(name, [str(where)], extra_compile_args=list(FLAGS)))
        jobs = jobs or os.cpu_count() or 1
        try:
            exts = cythonize(exts, compiler_directives=DIRECTIVES, nthreads=jobs, quiet=True,
                             build_dir=str(Path(tmp, "c")))
            cmd = Distribution({"ext_modules": exts}).get_command_obj("build_ext")
            cmd.build_lib, cmd.build_temp, cmd.parallel = str(Path(tmp, "lib")), str(Path(tmp, "o")), jobs
            cmd.ensure_finalized()
            cmd.run()
        except Exception as exc:  # noqa: BLE001 - Cython's or the C compiler's error: the models run from source
            lines = str(exc).strip().splitlines()
            return 0, f"compiling failed: {lines[-1] if lines else type(exc).__name__}"
        for name, (src, text) in todo.items():
            out, part = _cached(name, src, cache, text), cache / f".{name}.{os.getpid()}.part"
            shutil.copyfile(cmd.get_ext_fullpath(name), part)
            os.replace(part, out)
            for old in cache.iterdir():  # the module's earlier versions
                if _module_of(old.name) == name and old != out:
                    old.unlink(missing_ok=True)
    say(f"compiled {len(todo)} modules in {time.perf_counter() - started:.0f} s into {cache}")
    return len(todo), ""
