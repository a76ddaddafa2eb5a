"""The SparkSession ingestion runs on: one per process, configured for strata's semantics.

- UTC everywhere (session time zone and the JVMs' default), so timestamps mean the same instant
  on the driver, on executors and in segments;
- case-sensitive column names, as Druid's are ("page" and "Page" are two columns);
- non-ANSI casts, so a bad cast in the SELECT is a null as in Druid, not a failed job (values
  that do not fit the declared input types are still counted as parse exceptions by the reader);
- Arrow transfer on; few shuffle partitions and no UI in local mode;
- Parquet dates and times read as written (proleptic Gregorian, as pyarrow writes and reads
  them), instead of failing on times before 1900 in files that carry no Spark writer metadata.

Python workers come from strata's worker daemon (``spark.python.daemon.module``, worker_daemon.py:
pyspark's daemon with pyarrow, numpy and the ingestion modules imported before it forks workers)
and are reused between tasks. In local mode a new session also starts its Python workers (one
per core), which otherwise costs the first ingestion a few seconds.

The master is the argument, else ``STRATA_SPARK_MASTER``, else ``local[*]``; any spark:// or
k8s:// master works the same, as long as executors can import strata (install the package in
their image, or point them at it: ``spark.executorEnv.PYTHONPATH``) and reach deep storage
(``spark.executorEnv.AWS_ACCESS_KEY_ID`` ...). Such settings go in ``STRATA_SPARK_CONF``, a JSON
object of Spark settings every session gets (e.g. ``{"spark.executor.memory": "2g"}``).

``STRATA_SPARK_REMOTE`` (``sc://host:15002``) makes every session a Spark Connect client of that
server instead: no JVM in the task process, the long-lived driver is the Connect server's. Its
executors must import strata and reach deep storage as above; the server's own settings (UTC,
case-sensitive names, non-ANSI casts) are given when it starts, and the per-session SQL settings
below are set on each session.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping

from common.errors import StrataError
from common.ingest.task_master import REMOTE_ENV, configured_remote, default_master

DRIVER_MEMORY_ENV = "STRATA_SPARK_DRIVER_MEMORY"
CONF_ENV = "STRATA_SPARK_CONF"
WARM_UP_TIMEOUT_S = 60.0
JVM_START_ATTEMPTS = 3
CONNECT_REACH_TIMEOUT_S = 15.0
# The task runner names the task's log here; the JVM writes its stderr to it.
TASK_LOG_ENV = "STRATA_TASK_LOG"
JVM_OUTPUT_LINES = 20
JVM_OUTPUT_BYTES = 4000

log = logging.getLogger(__name__)
# The Python worker daemon (services/ingestion/worker_daemon.py; a name, so the driver does not
# import what the daemon preloads).
WORKER_DAEMON = "services.ingestion.worker_daemon"

_BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.sql.caseSensitive": "true",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Workers fork from a daemon that has strata's executor modules imported, and serve task after
    # task (reuse is Spark's default; said here because the preload pays only with it).
    "spark.python.daemon.module": WORKER_DAEMON,
    "spark.python.worker.reuse": "true",
}


# A driver JVM that runs one ingestion and exits compiles with C1 only: C2 spent 2-3 s of CPU per
# job compiling Spark's code (half the JVM's CPU at 1M documents), and the driver's own work (moving
# Arrow blobs, the cache, the shuffle) ran no slower without it. A long-lived (warm) driver keeps
# the tiered compilers: it pays them once for all its tasks.
ONE_SHOT_JIT = "-XX:TieredStopAtLevel=1"


def session_conf(master: str, conf: Mapping[str, str] | None = None, long_lived: bool = False) -> dict[str, str]:
    """The configuration a new session gets; ``conf`` wins over the defaults. ``long_lived``: a
    driver that serves many tasks (keeps the JVM's optimizing compiler)."""
    out = dict(_BASE_CONF)
    if not long_lived:
        out["spark.driver.extraJavaOptions"] += " " + ONE_SHOT_JIT
    out["spark.driver.memory"] = os.environ.get(DRIVER_MEMORY_ENV, "").strip() or "2g"
    if master.startswith("local"):
        # Local shuffles are in-process; a handful of partitions beats the default 200 tiny tasks.
        out["spark.sql.shuffle.partitions"] = str(max(2, 2 * (os.cpu_count() or 2)))
        # Python workers must be this interpreter, which has pyarrow and strata installed.
        out["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
        out["spark.pyspark.driver.python"] = sys.executable
    out.update(configured_conf())
    out.update({k: str(v) for k, v in (conf or {}).items()})
    return out


def configured_conf() -> dict[str, str]:
    """The Spark settings of ``STRATA_SPARK_CONF`` (a JSON object; empty when unset)."""
    import json

    text = os.environ.get(CONF_ENV, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StrataError(f"{CONF_ENV} is not JSON ({exc}); set it to an object such as "
                          '{"spark.executor.memory": "2g"}') from None
    if not isinstance(value, dict):
        raise StrataError(f"{CONF_ENV} must be a JSON object of Spark settings, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


def get_or_create_session(app_name: str = "strata-ingestion", master: str | None = None,
                          conf: Mapping[str, str] | None = None, warm: bool = False):
    """The process's SparkSession, created on first use (later calls return the same one).
    A new session's Python workers are started ahead of use in local mode, or with ``warm`` on
    any master (a long-lived driver pays it once for all its tasks)."""
    from pyspark.sql import SparkSession

    remote = configured_remote()
    if remote is not None and master is None:
        return _connect_session(remote, app_name)
    master = master or default_master()
    settings = session_conf(master, conf, long_lived=warm)
    if "spark.pyspark.python" in settings:
        # pyspark picks the workers' Python from the environment, not from the setting.
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    new = SparkSession.getActiveSession() is None
    session = _start_with_retries(builder)
    session.sparkContext.setLogLevel(os.environ.get("STRATA_SPARK_LOG_LEVEL", "WARN"))
    if new and (warm or master.startswith("local")):
        warm_up(session)
    return session


def _connect_session(remote: str, app_name: str):
    """A Spark Connect client session of ``remote``, with strata's per-session SQL settings (the
    static ones, such as JVM options, belong to the server's start)."""
    from pyspark.sql import SparkSession

    _wait_reachable(remote)
    try:
        session = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        for key, value in _BASE_CONF.items():
            if key.startswith("spark.sql."):
                session.conf.set(key, value)
        for key, value in configured_conf().items():
            if key.startswith("spark.sql."):
                session.conf.set(key, value)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server is the same for the task
        raise SparkStartError(f"cannot use the Spark Connect server {remote} ({REMOTE_ENV}): {exc}. Check that "
                              "it runs and is reachable, or unset the variable to start a local driver") from exc
    return session


def _wait_reachable(remote: str, timeout_s: float = CONNECT_REACH_TIMEOUT_S) -> None:
    """Fail fast (SparkStartError naming the server) when nothing listens at ``remote``: the Connect
    client itself retries a refused connection with backoff for many minutes."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(remote if "://" in remote else f"sc://{remote}")
    if parsed.scheme != "sc" or not parsed.hostname:
        raise SparkStartError(f"{REMOTE_ENV} must look like sc://host:15002, got '{remote}'")
    host, port = parsed.hostname, parsed.port or 15002
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, timeout_s)):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise SparkStartError(f"cannot reach the Spark Connect server {remote} ({REMOTE_ENV}) within "
                                      f"{timeout_s:g}s: {exc}. Check that it runs and is reachable, or unset "
                                      "the variable to start a local driver") from None
            time.sleep(0.5)


class SparkStartError(StrataError):
    """The Spark driver (its JVM, or the session inside it) did not start, after every attempt.
    The message carries what the JVM printed, which is where the cause is (a bad memory setting,
    no Java, no free port), not only pyspark's "Java gateway process exited"."""


def _is_start_failure(exc: BaseException) -> bool:
    # The JVM exited before handing pyspark its port, or it started and the SparkContext inside it
    # failed (a py4j error from the JVM); a plain Python error (bad argument) is not retried.
    return "JAVA_GATEWAY_EXITED" in str(exc) or "Java gateway process exited" in str(exc) or \
        type(exc).__module__.startswith("py4j")


def _log_size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


# gRPC core's own log lines: "E1125 16:48:20.123456   1234 ev_epoll1_linux.cc:373] ...".
_GRPC_CORE_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+\.cc:\d+\]")


def _jvm_output(path: str | None, since: int, max_lines: int = JVM_OUTPUT_LINES) -> str:
    """What was appended to the task log since ``since``: the JVM writes its stderr (and the
    driver's log4j output) to the log it inherits, and its last lines say why it stopped."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read(JVM_OUTPUT_BYTES * 4).decode(errors="replace")
    except OSError:
        return ""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    # Our own log lines (the retry warnings) are not the JVM's, nor gRPC core's (this process
    # holds channels to the coordinator; its poller may log when the JVM's fork closes fds).
    lines = [ln for ln in lines if " strata." not in ln and " services." not in ln
             and not _GRPC_CORE_LINE.match(ln)]
    return "\n".join(lines[-max_lines:])[-JVM_OUTPUT_BYTES:]


def _reset_gateway() -> None:
    """Forget a JVM whose session failed to start, so the next attempt launches a fresh one."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    gateway = getattr(SparkContext, "_gateway", None)
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is not None:
        try:
            gateway.shutdown()
        except Exception:  # noqa: BLE001 - the JVM may already be gone
            pass
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _start_with_retries(builder, attempts: int = JVM_START_ATTEMPTS, backoff_s: float = 1.0,
                        log_path: str | None = None):
    """``builder.getOrCreate()``, retried (bounded, with backoff) when the driver JVM or the
    session inside it fails to start: usually transient (a loaded machine, a fork racing other
    threads, a port taken for a moment), and a task should not fail for it on the first try.

    The JVM's output goes to the task log it inherits (``log_path``, STRATA_TASK_LOG from the
    task runner); what it printed during the last attempt is put in the error, so the task's
    error names the cause. Other errors are raised at once."""
    log_path = log_path if log_path is not None else os.environ.get(TASK_LOG_ENV)
    said_last = ""  # the JVM's output of the latest attempt that printed any
    for attempt in range(1, attempts + 1):
        start = _log_size(log_path)
        try:
            return builder.getOrCreate()
        except Exception as exc:  # pyspark raises PySparkRuntimeError; keep pyspark out of the import path
            if not _is_start_failure(exc):
                raise
            _reset_gateway()
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            # An attempt can end with no output (seen once under a full test run's load, the
            # launcher gone before the JVM spoke); the reason an earlier one gave still names it.
            said_last = _jvm_output(log_path, start) or said_last
            if attempt == attempts:
                output = said_last
                said = f"; the JVM's last output:\n{output}" if output else \
                    "; the JVM printed nothing (see the task log)"
                raise SparkStartError(f"the Spark driver did not start after {attempt} attempts: "
                                      f"{first_line}{said}") from exc
            log.warning("Spark driver did not start (attempt %d of %d): %s; retrying in %.0fs",
                        attempt, attempts, first_line, backoff_s)
            time.sleep(backoff_s)
            backoff_s *= 2
    raise AssertionError("unreachable")


def _import_executor_modules(batches):
    import pyarrow as pa

    import services.ingestion.arrow_scan  # noqa: F401 - the import is the point
    import services.ingestion.build  # noqa: F401

    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([batch.num_rows], pa.int64())], names=["n"])


def warm_up(session, timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """Start a Python worker on every core and import what ingestion tasks import. Best effort:
    a failure (or no answer within ``timeout_s``) is logged and the session is used as it is."""
    sc = session.sparkContext
    group = f"strata-warm-up-{id(session)}"
    cores = max(1, sc.defaultParallelism)
    timer = threading.Timer(timeout_s, sc.cancelJobGroup, args=(group,))
    timer.daemon = True
    sc.setJobGroup(group, "start Python workers", interruptOnCancel=True)
    timer.start()
    try:
        session.range(cores, numPartitions=cores).mapInArrow(_import_executor_modules, "n BIGINT").collect()
    except Exception as exc:  # noqa: BLE001 - ingestion still works, only its first job is slower
        log.warning("could not start Spark's Python workers ahead of use (within %ss): %s", timeout_s, exc)
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)


__all__ = ["CONF_ENV", "DRIVER_MEMORY_ENV", "TASK_LOG_ENV", "SparkStartError", "configured_conf",
           "get_or_create_session", "session_conf", "warm_up"]
