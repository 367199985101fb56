"""The checkpoint of a Spark exploration, committed at level boundaries, at a local path or a
URI (``location.py``).

Layout of ``OUT/spark/`` (P partitions, fixed when the run starts)::

    manifest.json            what run this is, and its totals up to the last complete level
    level-0000K/links.parquet/part-0000q.parquet
                             fp, parent, action, liveness labels, bad (broke an invariant) and
                             state: one row per state of partition q first reached at depth K;
                             the last level's states (violating ones too) are the frontier a
                             resumed run expands
    level-0000K/visited-0000q.npy
                             the sorted fingerprints of partition q up to depth K (kept for the
                             last complete level only)
    edges/level-0000K.parquet/part-0000q.parquet
                             fp, action, succ: every transition out of level K (liveness only;
                             a level expanded again after a restart rewrites its files)
    level-0000K/summary-0000q, prime-0000K/summary-0000q
                             a task's figures (counts, coverage, first violations, bytes shipped),
                             read and removed by the driver when the stage ends
    stats.json, stats.parquet    per-level statistics
    violations.json, violations.parquet  each violated property with its ITF counterexample

Partition files are written by the Spark tasks that own them (write, then move over the final
name, so a retried task rewrites the same file); ``OUT`` must therefore be a place every executor
can reach: a shared mount, HDFS, an object store. The manifest is the commit point: it is
replaced (written, then moved) after a level's files are all written, and a resumed run first
removes every level beyond the one the manifest records. So a run killed at any moment leaves
the last complete level intact, with no directory rename, which object stores do not have. A
checkpoint of another model, variant or bound set, or one whose files disagree with its
manifest, is refused with a one-line error, never silently restarted.
"""
from __future__ import annotations

import io
import json
import marshal

from pulsar_verify.model import Action, UsageError

from .location import Location

# 3: Merkle fingerprints; 4: the symmetry; 5: no .partial levels; 6: MurmurHash3 nodes; 7: violating states expanded
FORMAT = "pulsar-verify/spark-checkpoint/7"


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


def rows(table, columns):
    """A pyarrow table's columns as Python rows."""
    return zip(*(table.column(c).to_pylist() for c in columns))


def write_table(where: Location, columns: dict, schema) -> None:
    pa, pq = _pa()
    with where.replacing() as tmp:
        pq.write_table(pa.table(columns, schema=schema), tmp.path, filesystem=tmp.fs, compression="zstd")


def write_visited(where: Location, fps) -> None:
    import numpy as np
    buffer = io.BytesIO()
    np.save(buffer, fps, allow_pickle=False)
    where.write_bytes(buffer.getvalue())


def read_visited(where: Location):
    import numpy as np
    return np.load(io.BytesIO(where.read_bytes()), allow_pickle=False)


def summary_name(q: int) -> str:
    return f"summary-{q:05d}"


def write_summary(where: Location, summary: dict) -> None:
    """A task's figures, for the driver (``marshal``: plain data, no code runs when read)."""
    where.write_bytes(marshal.dumps(summary))


def read_summaries(directory: Location, parts: int) -> list[dict]:
    """Every task's summary, removed once read (a level directory keeps only its data)."""
    out = []
    for q in range(parts):
        where = directory / summary_name(q)
        out.append(marshal.loads(where.read_bytes()))
        where.unlink()
    return out


def read_parts(directory: Location, columns: list[str], what: str, parts: int | None = None):
    """The rows of every partition file of ``directory`` as one pyarrow table; a missing or
    damaged file is a one-line error naming ``what``."""
    pa, pq = _pa()
    try:
        files = [directory / part_name(q) for q in range(parts)] if parts else directory.glob("part-*.parquet")
        return pa.concat_tables([pq.read_table(f.path, filesystem=f.fs, columns=columns) for f in files]) \
            if files else None
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"corrupted checkpoint: cannot read {what} at {directory}: "
                         f"{str(exc).strip().splitlines()[0][:200]}") from None


class Checkpoint:
    def __init__(self, root: Location):
        self.root = root
        self.manifest_path = root / "manifest.json"

    # -- paths --------------------------------------------------------------
    def level_dir(self, level: int) -> Location:
        return self.root / f"level-{level:05d}"

    def edges_path(self, level: int) -> Location:
        return self.root / "edges" / f"level-{level:05d}.parquet"

    def edges_file(self, level: int, q: int) -> Location:
        return self.edges_path(level) / part_name(q)

    def prime_dir(self, level: int) -> Location:
        """Where the tasks expanding a committed level again put their summaries."""
        return self.root / f"prime-{level:05d}"

    @staticmethod
    def summary(where: Location, q: int) -> Location:
        return where / summary_name(q)

    @staticmethod
    def links(level_dir: Location, q: int) -> Location:
        return level_dir / "links.parquet" / part_name(q)

    @staticmethod
    def visited(level_dir: Location, q: int) -> Location:
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
                count = 0
                for q in range(parts):
                    links = self.links(where, q)
                    with links.fs.open_input_file(links.path) as f:
                        count += pq.read_metadata(f).num_rows
            except Exception as exc:  # a missing or damaged file: OSError or an ArrowException
                raise UsageError(f"corrupted checkpoint: cannot read level {level} at {where}: "
                                 f"{str(exc).strip().splitlines()[0][:200]}") from None
            if count != size:
                raise UsageError(f"corrupted checkpoint: level {level} at {where} holds {count:,} states, "
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
        """Replace the manifest: the commit of everything written before it."""
        self.manifest_path.write_text(json.dumps({"format": FORMAT, **manifest}, indent=1) + "\n")

    # -- levels -------------------------------------------------------------
    def start(self, fresh: bool) -> None:
        if fresh:
            self.root.rmtree()
        self.root.mkdir()

    def discard_uncommitted(self, last: int) -> None:
        """Remove what a killed run left beyond the last committed level (the files of a level it
        was writing, task summaries), and visited sets older than it."""
        for where in self.root.glob("prime-*"):
            where.rmtree()
        for where in self.root.glob("level-*"):
            if int(where.name.split("-")[1]) > last:
                where.rmtree()
        for where in self.root.glob("level-*/summary-*"):
            where.unlink()
        self.drop_visited_before(last)

    def drop_visited_before(self, level: int) -> None:
        for where in self.root.glob("level-*/visited-*.npy"):
            if int(where.parent.name.split("-")[1]) < level:
                where.unlink()


def load_action(blob: bytes) -> Action:
    name, params = marshal.loads(blob)
    return Action(name, params)
