"""Starting Spark: the embedded ``local[*]`` default, a standalone ``spark://`` master,
or the session ``spark-submit`` made. A master that cannot be reached, that is not a
Spark master, or that runs no job, is a one-line error within a bounded time."""
from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

from pulsar_verify.model import UsageError

CONNECT_SECONDS = 5.0
FIRST_JOB_SECONDS = 60.0  # spark://: the JVM, the context and a first job, all told
LOCAL_START_SECONDS = 300.0  # local[N]: the JVM on a busy machine


def check_reachable(master: str, timeout: float = CONNECT_SECONDS) -> None:
    """Every host:port of a ``spark://`` URL must accept a TCP connection within ``timeout``."""
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://"):].split(","):
        host, sep, port = hostport.rpartition(":")
        if not sep or not port.isdigit():
            raise UsageError(f"bad Spark master URL {master!r} (expected spark://HOST:PORT)")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except OSError as exc:
            raise UsageError(f"cannot reach Spark master {master}: {exc.strerror or exc} "
                             f"(waited at most {timeout:.0f} s)") from None


def _within(start, seconds: float, master: str):
    """``start()`` in a daemon thread, given at most ``seconds``: a peer that accepts TCP but is no
    Spark master, or a master with no worker, then ends the run with one line, not a hang or a
    Py4J traceback."""
    outcome: list = []

    def run():
        try:
            outcome.append((True, start()))
        except Exception as exc:  # pyspark and Py4J raise plain Exceptions
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise UsageError(f"Spark master {master} did not start a job within {seconds:.0f} s (not a Spark master, "
                         f"or no worker registered, or none with free cores)")
    ok, value = outcome[0]
    if not ok:
        first = next((line for line in str(value).splitlines() if line.strip()), type(value).__name__)
        raise UsageError(f"cannot start Spark with master {master}: {first}")
    return value


def spark_session(master: str, app: str = "pulsar-verify", log_path: Path | None = None,
                  conf_pairs: dict | None = None, first_job_seconds: float = FIRST_JOB_SECONDS,
                  worker_python: str | None = None):
    """A SparkSession whose JVM writes its own log to ``log_path`` (default: a temporary
    file), so the terminal shows pulsar-verify's output only. Under ``spark-submit`` the
    session it configured is used as it is. The executors run ``PYSPARK_PYTHON``, by default
    ``worker_python`` (a job that ships its code: the workers' own Python) or else the driver's
    interpreter (workers on this machine)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    if os.environ.get("PYSPARK_GATEWAY_PORT") and SparkContext._active_spark_context is None:
        return SparkSession.builder.appName(app).getOrCreate()  # spark-submit's JVM and conf
    active = SparkContext._active_spark_context
    if active is not None and (active.master == master or os.environ.get("PYSPARK_GATEWAY_PORT")):
        return SparkSession(active)
    check_reachable(master)
    if active is not None:
        active.stop()
    os.environ.setdefault("PYSPARK_PYTHON", worker_python or sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}"
    # One machine: compressing the shuffle (already compressed blobs) only costs the cores the tasks
    # need, and so does C2: the JVM here schedules and moves blobs, and compiling its hot code with
    # C2 took more CPU than it saved (v4-txn two-topics: 116 s against 118 s). So C1 only.
    local = master.startswith("local")
    conf = (SparkConf().setMaster(master).setAppName(app)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.driver.extraJavaOptions", log4j + (" -XX:TieredStopAtLevel=1" if local else ""))
            .set("spark.executor.extraJavaOptions", log4j)
            .set("spark.sql.parquet.compression.codec", "zstd")
            .set("spark.driver.memory", "4g"))  # local mode: the executors run in the driver JVM
    if local:
        conf.set("spark.shuffle.compress", "false").set("spark.shuffle.spill.compress", "false")
    for key, value in (conf_pairs or {}).items():
        conf.set(key, value)
    if log_path is None:
        log_path = Path(tempfile.gettempdir()) / "pulsar-verify-spark.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def start():
        with open(log_path, "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        sc = SparkContext(conf=conf, gateway=gateway)
        sc.setLogLevel("ERROR")
        if not local:
            sc.parallelize([0], 1).count()  # a master with no worker accepts the app but runs nothing
        return sc

    try:
        return SparkSession(_within(start, LOCAL_START_SECONDS if local else first_job_seconds, master))
    except UsageError as exc:
        raise UsageError(f"{exc} (JVM log: {log_path})") from None
