"""One exploration on either engine, and the files a run leaves: each violation's ITF trace and
``summary.json``. The Spark engine is imported only when it is asked for."""
from __future__ import annotations

import json
from pathlib import Path

from .explorer import explore
from .results import Result
from .itf import trace_document, write_trace
from .outdir import write_text


def run_exploration(model, engine: str, *, max_depth=None, max_states=None, stop_at_first=False, liveness=True,
                    master="local[*]", progress=None, out: Path | None = None, fresh=False,
                    conf: dict | None = None, partitions: int | None = None, spark=None, workers: int = 1) -> Result:
    """``out`` is where the Spark engine keeps its checkpoint (``out/spark``); the local engine writes nothing.
    ``spark``: a session already started (``start_spark``), else one is started for ``master``. ``workers``:
    the local engine's processes."""
    if engine == "spark":
        from .spark_checks.bfs import explore_spark
        spark = spark or start_spark(master, conf)
        return explore_spark(model, max_depth=max_depth, max_states=max_states, master=master,
                             progress=progress, out=out, fresh=fresh, stop_at_first=stop_at_first,
                             graph=None if liveness else False, spark=spark, partitions=partitions)
    result, _ = explore(model, max_depth=max_depth, max_states=max_states, stop_at_first=stop_at_first,
                        check_liveness=liveness, progress=progress, workers=workers)
    return result


def start_spark(master: str, conf: dict | None = None, start_timeout: float | None = None):
    """A Spark session for ``master``; a master that does not run a first job within ``start_timeout``
    seconds is a one-line error."""
    from .spark_checks.session import FIRST_JOB_SECONDS, spark_session
    return spark_session(master, conf_pairs=conf, first_job_seconds=start_timeout or FIRST_JOB_SECONDS)


def write_results(model, result, into: Path, final: Path | None = None, info=lambda v: {}) -> None:
    """Each violation's counterexample as ``<property>.itf.json`` (its ``#meta.violation`` with ``info(v)``
    added), then ``summary.json``, written ``into`` a staging directory that will become ``final`` (where
    the summary says they are). ``result``: an exploration's or a swarm's."""
    final = Path(final or into)
    for v in result.violations:
        doc = trace_document(model, v.states, v.actions, {**v.as_dict(), **info(v)}, v.loop)
        name = f"{v.prop.id}.itf.json"
        write_trace(Path(into) / name, doc)
        result.trace_files.append(final / name)
    write_text(Path(into) / "summary.json", json.dumps(result.summary(), indent=2) + "\n")
