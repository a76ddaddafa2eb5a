"""A warm task driver: one long-lived process (and Spark driver JVM) that runs ingestion tasks one
at a time, so a small INSERT does not pay for starting Python, a JVM, a SparkSession and Spark's
Python workers (about 15 s on a loaded machine)::

    python -m services.ingestion.task_driver --coordinator HOST:PORT --log-dir DIR --status-fd N

Started and fed by the leader coordinator's TaskRunner over stdin, one line per command:
``run TASK_ID`` (queued; run in order) and ``cancel TASK_ID`` (stops that task's Spark job group;
the task ends CANCELED). Each task reports to the coordinator itself, as a task process does
(task_main.run_task); its log lines also go to ``DIR/TASK_ID.log``. When a task is over the
driver writes ``done TASK_ID keep`` (ready for the next) or ``done TASK_ID retire`` (about to
exit) to the status pipe, so the runner never hands a task to a driver that is leaving.

Isolation: every task runs in its own Spark job group with its own temporary views and upload
folder. After a cancel that stopped a task's jobs, an unexpected error, a dead SparkContext or a
streaming query left running the driver exits (the runner starts a fresh one), so a task that
went wrong never leaves state behind for the next. A Kafka supervisor's task is cancelled as its
ordinary stop (suspend, terminate, a spec change); one that stops cleanly between micro-batches
leaves the driver serving. A crash
of the process (the JVM taking it down, the OOM killer) fails the running task through the
runner, exactly as a dead task process does. SIGTERM cancels the running task and exits; so does
end of input (the coordinator went away).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import sys
import threading

log = logging.getLogger("strata.task_driver")

APP_NAME = "strata-task-driver"
# Tasks one driver runs before it retires: bounds what a slow leak (JVM metaspace, Python heap)
# could grow to; the runner starts the next driver.
MAX_TASKS_ENV = "STRATA_TASK_DRIVER_MAX_TASKS"
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class TaskDriver:
    def __init__(self, coordinator: str, log_dir: str, max_tasks: int = 200, status=None) -> None:
        self.coordinator = coordinator
        self.status = status  # a text stream to the runner, or None
        self.log_dir = log_dir
        self.max_tasks = max_tasks
        self.commands: queue.Queue[str | None] = queue.Queue()
        self.current: str | None = None
        self.cancel = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.spark = None

    # ---- commands (a reader thread; the main thread runs tasks) --------------------------------
    def read_commands(self, stream) -> None:
        for line in stream:
            verb, _, task_id = line.strip().partition(" ")
            if verb == "run" and task_id:
                self.commands.put(task_id)
            elif verb == "cancel" and task_id:
                self.cancel_task(task_id)
            elif line.strip():
                log.warning("unknown command %r ignored", line.strip())
        self.stop()  # end of input: the coordinator is gone

    def cancel_task(self, task_id: str) -> None:
        with self._lock:
            if self.current == task_id:
                self.cancel.set()

    def stop(self) -> None:
        """Cancel the running task, run nothing more."""
        self.stopping.set()
        with self._lock:
            if self.current is not None:
                self.cancel.set()
        self.commands.put(None)

    # ---- the session ---------------------------------------------------------------------------
    def warm(self) -> None:
        """Start the session now, so the first task finds it ready. A failure is left for the
        first task to meet (and report, with the JVM's output) when it tries again."""
        from services.ingestion.spark_session import get_or_create_session

        try:
            self.spark = get_or_create_session(APP_NAME, warm=True)
        except Exception:  # noqa: BLE001 - reported by the task that needs the session
            log.warning("the Spark session did not start ahead of the first task", exc_info=True)

    def session(self):
        from services.ingestion.spark_session import get_or_create_session

        if self.spark is None:
            self.spark = get_or_create_session(APP_NAME, warm=True)
        return self.spark

    def healthy(self) -> bool:
        """The session is up and no task left a streaming query running in it."""
        try:
            if self.spark is None:
                return False
            if hasattr(self.spark, "is_stopped"):  # a Spark Connect client session
                return not self.spark.is_stopped and not self.spark.streams.active
            return not self.spark.sparkContext._jsc.sc().isStopped() and not self.spark.streams.active
        except Exception:  # noqa: BLE001 - a JVM that cannot answer is not healthy
            return False

    # ---- tasks ---------------------------------------------------------------------------------
    def serve(self) -> int:
        from services.ingestion.task_main import run_task

        done = 0
        while not self.stopping.is_set():
            task_id = self.commands.get()
            if task_id is None or self.stopping.is_set():
                break
            with self._lock:
                self.current = task_id
                self.cancel.clear()
            handler = _task_log(os.path.join(self.log_dir, f"{task_id}.log"))
            rc = 2
            try:
                log.info("task %s started in warm driver %d", task_id, os.getpid())
                try:
                    spark = self.session()
                except Exception:  # noqa: BLE001 - run_task starts it again and reports why it cannot
                    spark = None
                rc = run_task(task_id, self.coordinator, self.cancel, spark)
                self.spark = spark or _active_session()
                log.info("task %s ended (status %d)", task_id, rc)
            except Exception:  # noqa: BLE001 - e.g. the coordinator unreachable: the runner settles the task
                log.exception("task %s could not be run", task_id)
            finally:
                logging.getLogger().removeHandler(handler)
                handler.close()
                with self._lock:
                    self.current = None
            done += 1
            # A cancel that stopped a task's Spark jobs half-way (status 1: CANCELED by
            # IngestionCancelled) or an unexpected failure may have left the session in any state.
            # A task that ended cleanly despite a cancel (status 0: a Kafka task stopped between
            # micro-batches, its streaming query stopped; an INSERT whose publish came first) left
            # nothing running, so the driver keeps serving: a supervisor's suspend, spec change or
            # terminate does not cost the next task a JVM.
            retire = (self.cancel.is_set() and rc != 0) or rc == 2 or not self.healthy() \
                or done >= self.max_tasks or self.stopping.is_set()
            self.tell(f"done {task_id} {'retire' if retire else 'keep'}")
            if retire:
                log.info("warm driver %d retires after task %s (%d run)", os.getpid(), task_id, done)
                return 0
        return 0

    def tell(self, line: str) -> None:
        if self.status is None:
            return
        try:
            self.status.write(line + "\n")
            self.status.flush()
        except OSError:  # the runner is gone; stdin's end stops the driver
            pass


def _active_session():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _task_log(path: str) -> logging.Handler:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    return handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--status-fd", type=int, default=None, help="where 'done TASK keep|retire' lines go")
    ap.add_argument("--name", default="", help="the runner's name for this driver (its pid file)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    status = None
    if args.status_fd is not None:
        os.set_inheritable(args.status_fd, False)  # the JVM must not hold the pipe open
        status = os.fdopen(args.status_fd, "w", buffering=1)
    driver = TaskDriver(args.coordinator, args.log_dir, int(os.environ.get(MAX_TASKS_ENV, "") or 200), status)
    signal.signal(signal.SIGTERM, lambda *_: driver.stop())
    reader = threading.Thread(target=driver.read_commands, args=(sys.stdin,), name="commands", daemon=True)
    reader.start()
    driver.warm()
    rc = driver.serve()
    if driver.spark is not None:
        try:
            driver.spark.stop()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
