"""One exploration on either engine, and the files a run leaves: each violation's ITF trace and
``summary.json``. The Spark engine is imported only when it is asked for."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .explorer import explore
from .results import Result
from .itf import trace_document, write_trace
from .outdir import write_text


def run_exploration(model, engine: str, *, max_depth=None, max_states=None, stop_at_first=False, liveness=True,
                    master="local[*]", progress=None, out: Path | None = None, fresh=False,
                    conf: dict | None = None, partitions: int | None = None, spark=None, workers: int = 1,
                    search: str = "auto", checkpoint_seconds: float | None = None, until=None) -> Result:
    """``out`` is where the Spark engine keeps its checkpoint (``out/spark``); the local engine writes nothing.
    ``spark``: a session already started (``start_spark``), else one is started for ``master``. ``workers``:
    the local engine's processes. ``search``: the Spark engine's, ``levels`` (``bfs.py``), ``resident``
    (``resident.py``, which checkpoints at least every ``checkpoint_seconds``, by default its own) or ``auto``
    (``explore_spark``). ``until``: the local engine's (``Explorer``)."""
    if engine == "spark":
        from .spark_checks.bfs import explore_spark
        spark = spark or start_spark(master, conf, models=(model.name,))
        return explore_spark(model, max_depth=max_depth, max_states=max_states, master=master,
                             progress=progress, out=out, fresh=fresh, stop_at_first=stop_at_first,
                             graph=None if liveness else False, spark=spark, partitions=partitions, search=search,
                             checkpoint_seconds=checkpoint_seconds)
    result, _ = explore(model, max_depth=max_depth, max_states=max_states, stop_at_first=stop_at_first,
                        check_liveness=liveness, progress=progress, workers=workers, until=until)
    return result


def start_spark(master: str, conf: dict | None = None, start_timeout: float | None = None, ship: str = "auto",
                models: tuple[str, ...] = ()):
    """A Spark session for ``master``; a master that does not run a first job within ``start_timeout``
    seconds is a one-line error. ``ship``: how the executors get the code of ``models``
    (``spark_checks/ship.py``); the archives are made before the session starts, so a failure costs no
    cluster time."""
    from .spark_checks import ship as shipping
    from .spark_checks.session import FIRST_JOB_SECONDS, check_reachable, spark_session
    wait = start_timeout or FIRST_JOB_SECONDS
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit's session: its master and its Python decide
        spark = spark_session(master, conf_pairs=conf, first_job_seconds=wait)
        archives = shipping.archives(shipping.route_for(ship, spark.sparkContext.master), models)
    else:
        check_reachable(master)  # before the archives are built: a wrong URL is a one-line error at once
        archives = shipping.archives(shipping.route_for(ship, master), models)
        spark = spark_session(master, conf_pairs=conf, first_job_seconds=wait,
                              worker_python=shipping.worker_python() if archives else None)
    shipping.ship(spark.sparkContext, archives)
    return spark


def write_results(model, result, into: Path, final: Path | None = None, info=lambda v: {}) -> None:
    """Each violation's counterexample as ``<property>.itf.json`` (its ``#meta.violation`` with ``info(v)``
    added; a ``sometimes`` property's violation has none), then ``summary.json``, written ``into`` a
    staging directory that will become ``final`` (where the summary says they are). ``result``: an
    exploration's or a swarm's."""
    final = final if final is not None else Path(into)  # a Path, or a Location (a URI --out)
    for v in result.violations:
        if not v.traced:
            continue
        doc = trace_document(model, v.states, v.actions, {**v.as_dict(), **info(v)}, v.loop)
        name = f"{v.prop.id}.itf.json"
        write_trace(Path(into) / name, doc)
        result.trace_files.append(final / name)
    write_text(Path(into) / "summary.json", json.dumps(result.summary(), indent=2) + "\n")
