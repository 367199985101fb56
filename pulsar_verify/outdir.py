"""Output directories that are replaced whole or not at all.

A run writes into a staging directory beside its ``--out``, made (and so checked writable)
before any work starts. When the run has finished, the staging directory takes the place of
``--out`` by two renames on one file system; if the run fails, ``--out`` is left as it was and
the staging directory is removed (one a killed run left is removed by the next run on the same
``--out``). So a reused ``--out`` never mixes two runs, and a failed run never loses what an
earlier one wrote.
"""
from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .model import UsageError

SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def is_uri(text) -> bool:
    """``scheme://...``: a place the Spark engine reaches through pyarrow (``spark_checks/location.py``)."""
    return SCHEME.match(str(text)) is not None


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--out {out}: {parent} is not a directory")
            break
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create its parent directory: {exc.strerror}") from None


@contextmanager
def replacing(out: Path, keep: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield a fresh staging directory for ``out``; on success it becomes ``out``, after the
    entries named in ``keep`` (state a later run resumes from, like the Spark checkpoint) are
    moved over from the old ``out``."""
    out = Path(out).absolute()
    _check_target(out)
    for kind in ("incoming", "replaced"):  # what a run that was killed left beside ``out``
        for stale in out.parent.glob(f".{out.name}.{kind}-*"):
            shutil.rmtree(stale, ignore_errors=True)
    staging = out.with_name(f".{out.name}.incoming-{os.getpid()}")
    try:
        staging.mkdir()
        probe = staging / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"--out {out}: the directory beside it is not writable: {exc.strerror}") from None
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for name in keep:
        if (out / name).exists() and not (staging / name).exists():
            (out / name).rename(staging / name)
    old = out.with_name(f".{out.name}.replaced-{os.getpid()}")
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def write_text(path: Path, text: str) -> Path:
    """Write a file atomically: a reader sees the old content or the new, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return path
