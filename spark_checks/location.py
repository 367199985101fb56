"""Where a Spark run keeps its files: a local path, or a URI of any filesystem pyarrow's
filesystem layer opens (``file://``, ``s3://``, ``s3a://``, ``gs://``, ``hdfs://``, ``abfs://``).

``Location`` is a path on one of those filesystems, with the few ``pathlib`` operations the
checkpoint needs. A bare local path and a URI take the same code path (pyarrow's ``FileSystem``
calls), so a ``file://`` run exercises what an object store or HDFS run does. Nothing here needs
an atomic directory rename, which object stores do not have: a file is written under a temporary
name and moved over its final name (a rename on POSIX and HDFS, a copy on object stores, where an
object appears whole), and the checkpoint's manifest, one such file, is the commit point.

A ``Location`` pickles as its text, so executors reopen the filesystem themselves.
"""
from __future__ import annotations

import fnmatch
import os
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from pulsar_verify.model import UsageError
from pulsar_verify.outdir import SCHEME

ALIASES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for the S3 connector; pyarrow's is s3


@lru_cache(maxsize=None)
def _open(where: str):
    """(filesystem, root path) for a local path or a URI; one filesystem per URI per process."""
    from pyarrow import fs
    match = SCHEME.match(where)
    if match is None:
        return fs.LocalFileSystem(), str(Path(where).absolute())
    scheme = match.group(1).lower()
    uri = ALIASES.get(scheme, scheme) + where[match.end(1):]
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
    except Exception as exc:  # ArrowInvalid, ArrowNotImplementedError, OSError: unknown scheme, no credentials
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise UsageError(f"cannot open {where}: {first}") from None
    return filesystem, path.rstrip("/") or "/"


class Location:
    """A file or directory at ``root`` joined with ``parts``, on the filesystem ``root`` names."""

    def __init__(self, root: str | Path, parts: tuple[str, ...] = ()):
        self.root = str(root)
        self.parts = parts
        self.fs, base = _open(self.root)
        self.path = "/".join([base.rstrip("/"), *parts]) if parts else base

    def __reduce__(self):
        return Location, (self.root, self.parts)

    def __truediv__(self, name: str) -> "Location":
        return Location(self.root, self.parts + tuple(p for p in str(name).split("/") if p))

    def __str__(self) -> str:
        return "/".join([self.root.rstrip("/"), *self.parts]) if self.parts else self.root

    def __repr__(self) -> str:
        return f"Location({str(self)!r})"

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> "Location":
        if self.parts:
            return Location(self.root, self.parts[:-1])
        return Location(self.root.rstrip("/").rsplit("/", 1)[0] or "/")

    # -- queries ---------------------------------------------------------------------------------
    def _type(self):
        from pyarrow import fs
        return self.fs.get_file_info(self.path).type, fs.FileType

    def exists(self) -> bool:
        kind, types = self._type()
        return kind != types.NotFound

    def is_dir(self) -> bool:
        kind, types = self._type()
        return kind == types.Directory

    def iterdir(self) -> list["Location"]:
        """The entries of this directory (none if it does not exist), sorted by name."""
        from pyarrow import fs
        infos = self.fs.get_file_info(fs.FileSelector(self.path, allow_not_found=True))
        return [self / info.base_name for info in sorted(infos, key=lambda i: i.base_name)]

    def glob(self, pattern: str) -> list["Location"]:
        """Entries matching ``pattern``, one ``fnmatch`` pattern per path component."""
        head, _, rest = pattern.partition("/")
        found = [entry for entry in self.iterdir() if fnmatch.fnmatchcase(entry.name, head)]
        if not rest:
            return found
        return [deeper for entry in found if entry.is_dir() for deeper in entry.glob(rest)]

    # -- reading ---------------------------------------------------------------------------------
    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path, compression=None) as f:
            return f.read()

    def read_text(self) -> str:
        return self.read_bytes().decode()

    # -- writing ---------------------------------------------------------------------------------
    def mkdir(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def rmtree(self) -> None:
        if self.is_dir():
            self.fs.delete_dir(self.path)

    def unlink(self) -> None:
        self.fs.delete_file(self.path)

    @contextmanager
    def replacing(self):
        """A temporary location to write this file's new content to; it is moved over this file
        once written, so a reader (or a retried task) sees the old file or the new one whole."""
        self.parent.mkdir()
        tmp = self.parent / f".{self.name}.{os.getpid()}.tmp"
        yield tmp
        self.fs.move(tmp.path, self.path)

    def write_bytes(self, data: bytes) -> None:
        with self.replacing() as tmp, tmp.fs.open_output_stream(tmp.path, compression=None) as f:
            f.write(data)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())


@contextmanager
def publishing(where: Location, keep: tuple[str, ...] = ()):
    """``outdir.replacing`` for a URI: a local staging directory whose files are written to
    ``where`` once the run has finished, each whole; then whatever an earlier run left there, other
    than ``keep`` (the checkpoint), is removed. ``where`` is checked writable before the work
    starts, and a failed run leaves it as it was."""
    import shutil
    import tempfile
    try:
        where.mkdir()
        (where / ".writable").write_text("")
        (where / ".writable").unlink()
    except OSError as exc:
        raise UsageError(f"--out {where}: not writable: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    staging = Path(tempfile.mkdtemp(prefix="pulsar-verify-out-"))
    try:
        yield staging
        written = set()
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                name = path.relative_to(staging).as_posix()
                (where / name).write_bytes(path.read_bytes())
                written.add(name.split("/")[0])
        for entry in where.iterdir():
            if entry.name not in written and entry.name not in keep:
                entry.rmtree() if entry.is_dir() else entry.unlink()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
