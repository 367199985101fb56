"""The on-disk checkpoint of a Spark exploration, committed at level boundaries.

Layout of ``OUT/spark/``::

    manifest.json            what run this is, and its totals up to the last complete level
    level-0000K/links.parquet    fp, parent, action, liveness labels, bad (broke an invariant) and
                                 state: one row per state first reached at depth K; the last
                                 level's good states are the frontier a resumed run expands
    edges/level-0000K.parquet    fp, action, succ: every transition out of level K (liveness only;
                                 a level redone after a restart overwrites its file)
    stats.json, stats.parquet    per-level statistics
    violations.json, violations.parquet  each violated property with its ITF counterexample

A level is written to ``level-K.partial`` and renamed when complete; the manifest
is replaced (write, then rename) after that, so a run killed at any moment leaves
the last complete level intact. A checkpoint of another model, variant or bound
set, or one whose files disagree with its manifest, is refused with a one-line
error, never silently restarted.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pulsar_verify.model import UsageError

FORMAT = "pulsar-verify/spark-checkpoint/1"


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
        for key in ("levels", "level_sizes", "frontier_size", "transitions", "coverage", "violated", "stats"):
            if key not in manifest:
                raise UsageError(f"corrupted checkpoint {self.manifest_path}: no {key!r}")
        for level in range(manifest["levels"] + 1):
            if not (self.level_dir(level) / "links.parquet").is_dir():
                raise UsageError(f"corrupted checkpoint {self.root}: level {level} is missing")
        return manifest

    def save(self, manifest: dict) -> None:
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"format": FORMAT, **manifest}, indent=1) + "\n")
        os.replace(tmp, self.manifest_path)

    # -- levels -------------------------------------------------------------
    def start(self, fresh: bool) -> None:
        if fresh and self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True, exist_ok=True)

    def discard_uncommitted(self, last: int) -> None:
        """Remove what a killed run left beyond the last committed level."""
        for path in self.root.glob("level-*"):
            stem = path.name.split(".")[0]
            if path.name.endswith(".partial") or int(stem.split("-")[1]) > last:
                shutil.rmtree(path)

    def commit(self, level: int) -> None:
        os.replace(self.partial_dir(level), self.level_dir(level))
