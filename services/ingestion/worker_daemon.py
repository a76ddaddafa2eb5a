"""The Spark Python worker daemon for strata: pyspark's own daemon, started with strata's
executor modules already imported, so every worker it forks inherits them.

Spark starts one daemon per executor (``spark.python.daemon.module``, default ``pyspark.daemon``)
and forks a worker from it for each Python task slot; a worker imports what its task needs after
the fork. For ingestion that is pyarrow, numpy, orjson, pyspark's worker and serializers and
strata's segment builder, text scan and nested-column split: about 0.7 s of CPU per worker, which
py-spy put at a third of all Python worker samples of a 200k-document JSON ingestion. Importing
them once in the daemon makes each fork start with them (the pages are shared copy-on-write).

pyspark imports its worker module only after the fork because some libraries start threads on
import and a fork copies only the calling thread. The modules below start none (checked when
preloading: a module that leaves another thread running is reported, and the tests check the
daemon stays single-threaded). Preloading is best effort: a module that fails to import is
reported on the daemon's stderr (the executor's log) and left to the task, whose own import then
fails with the usual traceback in the task's error.

session_conf sets ``spark.python.daemon.module`` to this module for every session it configures;
a Spark Connect server gets it at start (``--conf spark.python.daemon.module=...``), like its other
static settings. Executors must be able to import strata anyway (their tasks do).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time

MODULE = "services.ingestion.worker_daemon"
# What an ingestion task imports (the closures spark_job and text_scan ship import these when
# unpickled), heaviest first.
PRELOAD = (
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.ipc",
    "orjson",
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "common.segment.builder",
    "common.segment.nested_column",
    "common.segment.nested_native_split",  # imports the C split when it is built
    "services.deep_storage",
    "services.ingestion.build",
    "common.ingest.row_parser",
    "services.ingestion.source_reader",
    "services.ingestion.text_scan",
    "services.ingestion.arrow_scan",
    "services.ingestion.partitioning",
    "services.ingestion.spark_job",
)

# Threads that survive a fork correctly: pyarrow's jemalloc purges dirty pages in a background
# thread and restarts it in a forked child (jemalloc's own fork handlers). numpy's OpenBLAS starts
# none when OMP_NUM_THREADS is 1, which Spark sets for its Python workers (one core per task).
FORK_SAFE_THREADS = ("jemalloc_bg_thd",)

# Filled by preload() in the daemon; forked workers inherit it (what the tests look at).
PRELOADED: tuple[str, ...] = ()
FAILED: tuple[tuple[str, str], ...] = ()
PRELOAD_SECONDS = 0.0


def preload(modules: tuple[str, ...] = PRELOAD) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Import ``modules``; (the ones imported, (module, reason) of the ones that failed). Never
    raises: a module missing here fails the task that needs it, with that task's own error."""
    global PRELOADED, FAILED, PRELOAD_SECONDS
    started = time.process_time()
    done, failed = [], []
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - any failure is the task's to report, not the daemon's
            if isinstance(exc, KeyboardInterrupt):
                raise
            failed.append((name, f"{type(exc).__name__}: {exc}"))
        else:
            done.append(name)
    PRELOADED, FAILED = tuple(done), tuple(failed)
    PRELOAD_SECONDS = time.process_time() - started
    for name, reason in failed:
        print(f"strata worker daemon: could not pre-import {name} ({reason}); tasks import it themselves",
              file=sys.stderr, flush=True)
    others = [t for t in other_threads() if t not in FORK_SAFE_THREADS]
    if threading.active_count() > 1 or others:
        # A fork copies only this thread; say so, as a worker that then hangs would not.
        print(f"strata worker daemon: threads {others} run after pre-importing; forked workers get only the "
              "main one", file=sys.stderr, flush=True)
    return PRELOADED, FAILED


def other_threads() -> list[str]:
    """Names of this process's OS threads other than the calling one ([] where /proc is not)."""
    import os

    me = threading.get_native_id()
    names = []
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return []
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            continue
    return names


def main() -> None:
    preload()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    # Run as the real module (not __main__), so forked workers find PRELOADED under its name.
    importlib.import_module(MODULE).main()
