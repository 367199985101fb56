"""The on-disk checkpoint of a Spark exploration, committed at level boundaries.

Layout of ``OUT/spark/`` (P partitions, fixed when the run starts)::

    manifest.json            what run this is, and its totals up to the last complete level
    level-0000K/links.parquet/part-0000q.parquet
                             fp, parent, action, liveness labels, bad (broke an invariant) and
                             state: one row per state of partition q first reached at depth K;
                             the last level's good states are the frontier a resumed run expands
    level-0000K/visited-0000q.npy
                             the sorted fingerprints of partition q up to depth K (kept for the
                             last complete level only)
    edges/level-0000K.parquet/part-0000q.parquet
                             fp, action, succ: every transition out of level K (liveness only;
                             a level expanded again after a restart rewrites its files)
    level-0000K.partial/summary-0000q, prime-0000K.partial/summary-0000q
                             a task's figures (counts, coverage, first violations), read and
                             removed by the driver when the stage ends
    stats.json, stats.parquet    per-level statistics
    violations.json, violations.parquet  each violated property with its ITF counterexample

Partition files are written by the Spark tasks that own them (write, then rename, so a retried
task rewrites the same file); ``OUT`` must therefore be a directory every executor can reach.
A level is written to ``level-K.partial`` and renamed when complete; the manifest is replaced
(write, then rename) after that, so a run killed at any moment leaves the last complete level
intact. A checkpoint of another model, variant or bound set, or one whose files disagree with
its manifest, is refused with a one-line error, never silently restarted.
"""
from __future__ import annotations

import json
import marshal
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from pulsar_verify.model import Action, UsageError

FORMAT = "pulsar-verify/spark-checkpoint/4"  # 3: Merkle fingerprints; 4: the symmetry in the identity


def _pa():
    import pyarrow as pa
    import pyarrow.parquet as pq
    return pa, pq


def links_schema():
    pa, _ = _pa()
    return pa.schema([("fp", pa.int64(), False), ("parent", pa.int64()), ("action", pa.binary()),
                      ("labels", pa.binary()), ("bad", pa.bool_(), False), ("state", pa.binary())])


def edges_schema():
    pa, _ = _pa()
    return pa.schema([("fp", pa.int64(), False), ("action", pa.binary(), False), ("succ", pa.int64(), False)])


def part_name(q: int) -> str:
    return f"part-{q:05d}.parquet"


@contextmanager
def replacing(path: Path):
    """A temporary path to write ``path``'s new content to; it replaces ``path`` whole once
    written, so a retried task rewrites a file and a killed one leaves no half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    yield tmp
    os.replace(tmp, path)


def rows(table, columns):
    """A pyarrow table's columns as Python rows."""
    return zip(*(table.column(c).to_pylist() for c in columns))


def write_table(path: Path, columns: dict, schema) -> None:
    pa, pq = _pa()
    with replacing(path) as tmp:
        pq.write_table(pa.table(columns, schema=schema), tmp, compression="zstd")


def write_visited(path: Path, fps) -> None:
    import numpy as np
    with replacing(path) as tmp, open(tmp, "wb") as f:
        np.save(f, fps, allow_pickle=False)


def read_visited(path: Path):
    import numpy as np
    return np.load(path, allow_pickle=False)


def summary_name(q: int) -> str:
    return f"summary-{q:05d}"


def write_summary(path: Path, summary: dict) -> None:
    """A task's figures, for the driver (``marshal``: plain data, no code runs when read)."""
    with replacing(path) as tmp:
        tmp.write_bytes(marshal.dumps(summary))


def read_summaries(directory: Path, parts: int) -> list[dict]:
    """Every task's summary, removed once read (a level directory keeps only its data)."""
    out = []
    for q in range(parts):
        path = directory / summary_name(q)
        out.append(marshal.loads(path.read_bytes()))
        path.unlink()
    return out


def read_parts(directory: Path, columns: list[str], what: str, parts: int | None = None):
    """The rows of every partition file of ``directory`` as one pyarrow table; a missing or
    damaged file is a one-line error naming ``what``."""
    pa, pq = _pa()
    try:
        files = [directory / part_name(q) for q in range(parts)] if parts else sorted(directory.glob("part-*.parquet"))
        return pa.concat_tables([pq.read_table(f, columns=columns) for f in files]) if files else None
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"corrupted checkpoint: cannot read {what} at {directory}: "
                         f"{str(exc).strip().splitlines()[0][:200]}") from None


class Checkpoint:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.manifest_path = self.root / "manifest.json"

    # -- paths --------------------------------------------------------------
    def level_dir(self, level: int) -> Path:
        return self.root / f"level-{level:05d}"

    def partial_dir(self, level: int) -> Path:
        return self.root / f"level-{level:05d}.partial"

    def edges_path(self, level: int) -> Path:
        return self.root / "edges" / f"level-{level:05d}.parquet"

    def edges_file(self, level: int, q: int) -> Path:
        return self.edges_path(level) / part_name(q)

    def prime_dir(self, level: int) -> Path:
        """Where the tasks expanding a committed level again put their summaries."""
        return self.root / f"prime-{level:05d}.partial"

    @staticmethod
    def summary(where: Path, q: int) -> Path:
        return where / summary_name(q)

    @staticmethod
    def links(level_dir: Path, q: int) -> Path:
        return level_dir / "links.parquet" / part_name(q)

    @staticmethod
    def visited(level_dir: Path, q: int) -> Path:
        return level_dir / f"visited-{q:05d}.npy"

    # -- manifest -----------------------------------------------------------
    def exists(self) -> bool:
        return self.manifest_path.exists()

    def load(self, identity: dict) -> dict:
        """The manifest, after checking it belongs to this run and is readable."""
        try:
            manifest = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"corrupted checkpoint {self.manifest_path}: {exc}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise UsageError(f"corrupted checkpoint {self.manifest_path}: not a {FORMAT} manifest")
        theirs = {k: manifest.get(k) for k in identity}
        if theirs != identity:
            differ = ", ".join(f"{k}={theirs[k]!r} here, {identity[k]!r} requested"
                               for k in identity if theirs[k] != identity[k])
            raise UsageError(f"checkpoint {self.root} belongs to another run ({differ}); "
                             f"use another --out, or --fresh to discard it")
        for key in ("partitions", "levels", "level_sizes", "frontier_size", "expanded", "transitions",
                    "coverage", "violated", "stats"):
            if key not in manifest:
                raise UsageError(f"corrupted checkpoint {self.manifest_path}: no {key!r}")
        return manifest

    def verify(self, manifest: dict) -> None:
        """Every level's files hold the states the manifest records; the last level's visited
        files hold them all."""
        _, pq = _pa()
        parts = manifest["partitions"]
        for level, size in enumerate(manifest["level_sizes"]):
            where = self.level_dir(level)
            if not where.is_dir():
                raise UsageError(f"corrupted checkpoint {self.root}: level {level} is missing")
            try:
                rows = sum(pq.read_metadata(self.links(where, q)).num_rows for q in range(parts))
            except Exception as exc:  # a missing or damaged file: OSError or an ArrowException
                raise UsageError(f"corrupted checkpoint: cannot read level {level} at {where}: "
                                 f"{str(exc).strip().splitlines()[0][:200]}") from None
            if rows != size:
                raise UsageError(f"corrupted checkpoint: level {level} at {where} holds {rows:,} states, "
                                 f"its manifest records {size:,}")
        last = self.level_dir(manifest["levels"])
        try:
            held = sum(len(read_visited(self.visited(last, q))) for q in range(parts))
        except (OSError, ValueError) as exc:
            raise UsageError(f"corrupted checkpoint: cannot read the visited set at {last}: "
                             f"{str(exc).strip().splitlines()[0][:200]}") from None
        if held != sum(manifest["level_sizes"]):
            raise UsageError(f"corrupted checkpoint: the visited set at {last} holds {held:,} states, "
                             f"the manifest records {sum(manifest['level_sizes']):,}")

    def save(self, manifest: dict) -> None:
        with replacing(self.manifest_path) as tmp:
            tmp.write_text(json.dumps({"format": FORMAT, **manifest}, indent=1) + "\n")

    # -- levels -------------------------------------------------------------
    def start(self, fresh: bool) -> None:
        if fresh and self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True, exist_ok=True)

    def discard_uncommitted(self, last: int) -> None:
        """Remove what a killed run left beyond the last committed level, and visited sets
        older than it."""
        for path in self.root.glob("prime-*.partial"):
            shutil.rmtree(path)
        for path in self.root.glob("level-*"):
            stem = path.name.split(".")[0]
            if path.name.endswith(".partial") or int(stem.split("-")[1]) > last:
                shutil.rmtree(path)
        self.drop_visited_before(last)

    def drop_visited_before(self, level: int) -> None:
        for path in self.root.glob("level-*/visited-*.npy"):
            if int(path.parent.name.split("-")[1]) < level:
                path.unlink()

    def commit(self, level: int) -> None:
        os.replace(self.partial_dir(level), self.level_dir(level))


def load_action(blob: bytes) -> Action:
    name, params = marshal.loads(blob)
    return Action(name, params)
