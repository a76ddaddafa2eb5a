"""TaskRunner: runs ingestion tasks as child processes of the leader coordinator.

Each task runs in a process that drives a Spark job and reports back over gRPC, so a crashing
Spark driver or a cancel (SIGTERM, then SIGKILL after a grace period) never takes the
coordinator with it. With ``warm_drivers`` > 0 the runner keeps that many warm task drivers
(``services.ingestion.task_driver``: one process, JVM and SparkSession each, started when this
coordinator leads and restarted when one exits) and hands each task to an idle one, so a small
task costs its Spark jobs only, not a JVM start. A task no idle driver can take (all busy, or one
needing its own local master) gets a process of its own (``services.ingestion.task_main``), the
cold path. A driver whose task's cancel stopped its Spark jobs, or whose task failed unexpectedly
or broke its session, retires (a Kafka task stopped between micro-batches leaves it serving); one
that dies mid-task fails that task exactly as a dead task process does.

A task whose process is gone without a final state (killed, out of memory, a coordinator
restart) is settled within one reaping period: FAILED with its exit status and log tail, unless
its publish had already committed (then SUCCESS: only the report was lost). A FAILED task can no
longer publish (the store refuses it), and the cleanup duty deletes what it uploaded to deep
storage, keeping any key a published segment references. Each task's pid is kept in
``<log_dir>/<task>.pid`` so a new leader (or ``strata down``) can stop a task process that
outlived its coordinator.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from common.errors import StrataError, ValidationError
from common.ingest.task_master import task_master
from services.deep_storage.upload_folder import ingest_root, task_key_prefix
from services.node_process import log_tail
from services.node_process import process_group_alive

log = logging.getLogger("strata.tasks")

# Read by services.ingestion.spark_session: the log the task's JVM writes its stderr to.
TASK_LOG_ENV = "STRATA_TASK_LOG"
_TASK_MODULE = "services.ingestion.task_main"
_DRIVER_MODULE = "services.ingestion.task_driver"
_DRIVER_BACKOFF_MAX_S = 60.0
# How long after its task's final state a warm driver is still expected to say "done": a task
# submitted meanwhile waits for that driver rather than start a JVM of its own (15-70 s).
_FINISHING_GRACE_S = 10.0


class _Driver:
    """One warm task driver process, as the runner sees it."""

    def __init__(self, name: str, proc: subprocess.Popen, status, log_path: str) -> None:
        self.name = name
        self.proc = proc
        self.status = status  # the read end of its status pipe
        self.log_path = log_path
        self.task: str | None = None
        self.retiring = False
        self.told_to_stop = False
        self.reader: threading.Thread | None = None

    def send(self, line: str) -> bool:
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):  # it exited (or is exiting): the reaper settles it
            return False


def exit_description(returncode: int) -> str:
    """How a process ended, as a task error says it."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    text = f"was killed by {name} (exit status {returncode})"
    if -returncode == signal.SIGKILL:
        text += "; the kernel's out-of-memory killer also sends SIGKILL (see dmesg, or lower the task's memory use)"
    return text


class TaskRunner:
    def __init__(self, tasks, coordinator_target, log_dir: str, env: dict[str, str], max_running: int = 2,
                 period_s: float = 0.5, cancel_grace_s: float = 30.0, storage_factory: Callable | None = None,
                 cleanup_period_s: float = 2.0,
                 task_command: Callable[[str, str], list[str]] | None = None, warm_drivers: int = 0,
                 leadership_fresh: Callable[[], bool] | None = None,
                 local_tasks: dict[str, Callable] | None = None) -> None:
        self.tasks = tasks
        self.coordinator_target = coordinator_target  # () -> "host:port"
        self.log_dir = log_dir
        self.env = env
        self.max_running = max_running
        self.period_s = period_s
        self.cancel_grace_s = cancel_grace_s
        self.cleanup_period_s = cleanup_period_s
        self._storage_factory = storage_factory  # () -> DeepStorage, made on first cleanup
        self._storage = None
        self._task_command = task_command or _task_command  # (task id, coordinator) -> argv
        self._procs: dict[str, subprocess.Popen] = {}
        self.warm_drivers = warm_drivers
        # () -> whether this node's lease is fresh right now; checked before each launch, since the
        # leader flag lags behind a lease lost while the process was paused.
        self.leadership_fresh = leadership_fresh or (lambda: True)
        self._drivers: list[_Driver] = []
        # Task types run in a thread of this process, not Spark (a kill only talks to the metadata
        # DB and deep storage): type -> (task, should_stop) -> (report, error or None).
        self.local_tasks = dict(local_tasks or {})
        self._local: dict[str, threading.Event] = {}  # running local task -> its cancel flag
        self._driven: dict[str, _Driver] = {}  # task id -> the warm driver running it
        self._driver_done: list[tuple[_Driver, str]] = []  # (driver, task) it said it finished
        self._driver_seq = 0
        self._driver_failures = 0
        self._driver_retry_at = 0.0
        # task id -> (datasource, its process group or None, the warm driver that ended it or None):
        # uploads still to delete.
        self._cleanup: dict[str, tuple[str, int | None, _Driver | None]] = {}
        self._lock = threading.Lock()
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="strata-task-runner", daemon=True)
        self._cleaner = threading.Thread(target=self._cleanup_loop, name="strata-task-cleanup", daemon=True)
        os.makedirs(log_dir, exist_ok=True)

    def set_leader(self, is_leader: bool) -> None:
        if is_leader and not self._leader.is_set():
            self._orphans()
        (self._leader.set if is_leader else self._leader.clear)()

    def start(self) -> TaskRunner:
        self._thread.start()
        self._cleaner.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self._cleaner.join(timeout=5)
        with self._lock:
            procs = dict(self._procs)
            for flag in self._local.values():
                flag.set()
        # All at once: one grace period for every task, not one each.
        stoppers = [threading.Thread(target=self._terminate, args=(task_id, proc), daemon=True)
                    for task_id, proc in procs.items()]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(self.cancel_grace_s + 15)
        self._stop_drivers()

    def log_path(self, task_id: str) -> str:
        return os.path.join(self.log_dir, f"{task_id}.log")

    def pid_path(self, task_id: str) -> str:
        return os.path.join(self.log_dir, f"{task_id}.pid")

    def drivers(self) -> list[dict]:
        """The warm task drivers: name, pid, the task each runs (None when idle)."""
        with self._lock:
            return [{"name": d.name, "pid": d.proc.pid, "task": d.task, "retiring": d.retiring}
                    for d in self._drivers]

    def pending_cleanup(self) -> list[str]:
        """Tasks whose uploads the cleanup duty has yet to delete."""
        with self._lock:
            return sorted(self._cleanup)

    def _orphans(self) -> None:
        """RUNNING tasks no process of ours runs: their driver ran under a previous coordinator.
        A process that outlived it is stopped first, so it cannot upload after the cleanup."""
        with self._lock:
            mine = set(self._procs) | set(self._local)
        for task in self.tasks.list(state="RUNNING"):
            if task.id in mine:
                continue
            stopped = self._kill_leftover(task.id)  # also waits for its process group to end
            failed_error = ("the coordinator restarted while the task ran"
                            + (" (its process was stopped)" if stopped else "")
                            + "; nothing was published, resubmit the statement")
            if task.type in self.local_tasks:
                failed_error = ("the coordinator restarted while the task ran; what it deleted is gone and the rest "
                                "is untouched: submit it again")
            settled = self.tasks.settle_exited(
                task.id, task_key_prefix(task.datasource, task.id),
                failed_error=failed_error,
                published_error="the coordinator restarted after the task published its {segments} segment(s); "
                                "they are served, only the task's report was lost")
            self._after_settled(settled, None)

    def _kill_leftover(self, task_id: str) -> bool:
        pid = _read_pid(self.pid_path(task_id))
        with self._lock:
            ours = {d.proc.pid for d in self._drivers}
        if pid is None or pid in ours or not _is_task_process(pid, task_id):
            return False
        try:
            os.killpg(pid, signal.SIGKILL)  # each task leads its own process group (its JVM included)
        except (ProcessLookupError, PermissionError):
            return False
        deadline = time.monotonic() + 10
        while process_group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        _unlink(self.pid_path(task_id))
        return True

    def wake(self) -> None:
        """A task was submitted: run a pass now instead of at the end of the period."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.period_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._reap()
                if self._leader.is_set():
                    self._keep_drivers()
                    self._launch()
            except Exception:  # one bad pass must not stop task scheduling
                log.exception("task runner pass failed")

    def _launch(self) -> None:
        with self._lock:
            free = self.max_running - len(self._procs)
        pending = self.tasks.list(state="PENDING")
        for task in pending:  # cheap, and they take no Spark slot: all start now
            if task.type in self.local_tasks and self.leadership_fresh() and self.tasks.claim(task.id):
                self._start_local(task)
        if free <= 0:
            return
        for task in [t for t in pending if t.type not in self.local_tasks][:free]:
            warm = task_master(task.spec or {}) is None
            if warm and self._idle_driver() is None and self._driver_finishing():
                break  # left PENDING: the driver's "done" wakes the pass that hands it this task
            # Claim before starting anything: the claim is atomic in the store, so a coordinator
            # that lost its lease while paused cannot start a second driver for a task the new
            # leader has started, and a driver never reports a final state on a PENDING task.
            if not self.leadership_fresh() or not self.tasks.claim(task.id):
                continue
            driver = self._idle_driver() if warm else None
            if driver is None:
                self._spawn_claimed(task.id)
                continue
            if self._hand_over(driver, task.id):
                log.info("task %s started in warm driver %s (pid %d)", task.id, driver.name, driver.proc.pid)
            else:
                self._spawn_claimed(task.id)

    def _spawn_claimed(self, task_id: str) -> None:
        """Start a claimed (RUNNING) task's own process; a task whose process cannot start fails
        with the reason instead of staying RUNNING with nothing running it."""
        try:
            self._spawn(task_id)
        except OSError as exc:
            log.exception("task %s: could not start its process", task_id)
            self.tasks.transition(task_id, "FAILED", error=f"the task process could not start: {exc}")

    def _spawn(self, task_id: str) -> None:
        """The cold path: a process of the task's own."""
        path = self.log_path(task_id)
        out = open(path, "ab")
        cmd = self._task_command(task_id, self.coordinator_target())
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **self.env, TASK_LOG_ENV: path}, start_new_session=True)
        out.close()
        with open(self.pid_path(task_id), "w") as f:
            f.write(f"{proc.pid}\n")
        with self._lock:
            self._procs[task_id] = proc
        log.info("task %s started (pid %d)", task_id, proc.pid)

    def _start_local(self, task) -> None:
        stop = threading.Event()
        with self._lock:
            self._local[task.id] = stop
        threading.Thread(target=self._run_local, args=(task, stop), name=f"strata-task-{task.id}",
                         daemon=True).start()
        log.info("task %s started in the coordinator", task.id)

    def _run_local(self, task, stop: threading.Event) -> None:
        try:
            report, error = self.local_tasks[task.type](task, stop.is_set)
            if stop.is_set():
                self.tasks.transition(task.id, "CANCELED", report=report, error="canceled; the report counts what "
                                                                                 "was done before the cancel")
            else:
                self.tasks.transition(task.id, "FAILED" if error else "SUCCESS", report=report, error=error)
        except StrataError as exc:
            self.tasks.transition(task.id, "FAILED", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - the task fails with the reason; the runner goes on
            log.exception("task %s failed", task.id)
            self.tasks.transition(task.id, "FAILED", error=f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._local.pop(task.id, None)

    # ---- warm task drivers ---------------------------------------------------------------------
    def _idle_driver(self) -> _Driver | None:
        with self._lock:
            for driver in self._drivers:
                if driver.task is None and not driver.retiring and driver.proc.poll() is None:
                    return driver
        return None

    def _driver_finishing(self) -> bool:
        """Whether a warm driver that keeps serving is busy with a task that already has its final
        state: the task reports it to the coordinator just before the driver says "done", so a
        task submitted right after another one ended would otherwise find no idle driver and pay
        for a JVM of its own."""
        with self._lock:
            busy = [d.task for d in self._drivers if d.task is not None and not d.retiring and d.proc.poll() is None]
        now_ms = time.time() * 1000
        for task_id in busy:
            try:
                task = self.tasks.get(task_id)
            except Exception:  # noqa: BLE001 - unknown or unreadable: not a driver about to be free
                continue
            if task.is_final and now_ms - task.finished_ms < _FINISHING_GRACE_S * 1000:
                return True
        return False

    def _hand_over(self, driver: _Driver, task_id: str) -> bool:
        with self._lock:
            driver.task = task_id
            self._driven[task_id] = driver
            self._procs[task_id] = driver.proc
        with open(self.pid_path(task_id), "w") as f:
            f.write(f"{driver.proc.pid}\n")
        if driver.send(f"run {task_id}"):
            return True
        with self._lock:  # it is gone: the task goes the cold way
            driver.task = None
            driver.retiring = True
            self._driven.pop(task_id, None)
            self._procs.pop(task_id, None)
        _unlink(self.pid_path(task_id))
        return False

    def _keep_drivers(self) -> None:
        with self._lock:
            missing = self.warm_drivers - sum(1 for d in self._drivers if not d.retiring)
        if missing <= 0 or time.monotonic() < self._driver_retry_at:
            return
        for _ in range(missing):
            self._start_driver()

    def _start_driver(self) -> None:
        self._driver_seq += 1
        name = f"driver-{self._driver_seq}"
        path = self.log_path(name)
        out = open(path, "ab")
        read_end, write_end = os.pipe()
        cmd = [sys.executable, "-m", _DRIVER_MODULE, "--coordinator", self.coordinator_target(),
               "--log-dir", self.log_dir, "--status-fd", str(write_end), "--name", name]
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                                    pass_fds=(write_end,), env={**os.environ, **self.env, TASK_LOG_ENV: path},
                                    start_new_session=True)
        finally:
            out.close()
            os.close(write_end)
        with open(self.pid_path(name), "w") as f:
            f.write(f"{proc.pid}\n")
        driver = _Driver(name, proc, os.fdopen(read_end, "r"), path)
        driver.reader = threading.Thread(target=self._read_status, args=(driver,), name=f"strata-{name}", daemon=True)
        driver.reader.start()
        with self._lock:
            self._drivers.append(driver)
        log.info("warm task driver %s started (pid %d)", name, proc.pid)

    def _read_status(self, driver: _Driver) -> None:
        with driver.status:
            for line in driver.status:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "done":
                    with self._lock:
                        if parts[2] != "keep":
                            driver.retiring = True
                        self._driver_done.append((driver, parts[1]))
                    self._wake.set()  # free for the next task now, not at the next pass

    def _settle_driver_tasks(self) -> None:
        """Tasks their driver said are over: the driver is free again (or retiring). A task the
        driver ended without a final state (it could not reach the coordinator) fails here."""
        with self._lock:
            done, self._driver_done = self._driver_done, []
        for driver, task_id in done:
            with self._lock:
                if self._driven.get(task_id) is not driver:
                    continue
                del self._driven[task_id]
                self._procs.pop(task_id, None)
                driver.task = None
            _unlink(self.pid_path(task_id))
            task = self.tasks.get(task_id)
            if not task.is_final:
                task = self.tasks.settle_exited(
                    task_id, task_key_prefix(task.datasource, task_id),
                    failed_error=f"warm task driver {driver.name} could not run the task; nothing was published. "
                                 f"Log tail:\n{log_tail(self.log_path(task_id))}",
                    published_error="the task published its {segments} segment(s); only its report was lost")
                self._after_settled(task, None)

    def _reap_drivers(self) -> None:
        with self._lock:
            gone = [d for d in self._drivers if d.proc.poll() is not None]
            self._drivers = [d for d in self._drivers if d.proc.poll() is None]
            # Retired by the runner (its stdin failed at a hand-over) but idle: stop it.
            idle_retired = [d for d in self._drivers if d.retiring and d.task is None and not d.told_to_stop]
        for driver in idle_retired:
            driver.told_to_stop = True
            try:
                os.killpg(driver.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for driver in gone:
            _unlink(self.pid_path(driver.name))
            _kill_group(driver.proc.pid)  # its JVM and Python workers go with it
            if driver.proc.returncode == 0 and driver.retiring:
                self._driver_failures = 0
            else:
                self._driver_failures += 1
                delay = min(_DRIVER_BACKOFF_MAX_S, 2.0 ** (self._driver_failures - 1))
                self._driver_retry_at = time.monotonic() + delay
                log.warning("warm task driver %s %s; the next starts in %.0fs", driver.name,
                            exit_description(driver.proc.returncode), delay)

    def _stop_drivers(self) -> None:
        with self._lock:
            drivers = list(self._drivers)
        for driver in drivers:
            try:
                os.killpg(driver.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self.cancel_grace_s
        for driver in drivers:
            try:
                driver.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _kill_group(driver.proc.pid)
            try:
                driver.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("warm task driver %s (pid %d) did not exit", driver.name, driver.proc.pid)
            _unlink(self.pid_path(driver.name))
        with self._lock:
            self._drivers = [d for d in self._drivers if d not in drivers]

    def _reap(self) -> None:
        self._settle_driver_tasks()
        with self._lock:
            finished = [(tid, p, self._driven.pop(tid, None)) for tid, p in self._procs.items() if p.poll() is not None]
            for tid, _, driver in finished:
                del self._procs[tid]
                if driver is not None:
                    driver.task = None
        for task_id, proc, driver in finished:
            _unlink(self.pid_path(task_id))
            task = self.tasks.get(task_id)
            if task.is_final:
                continue
            how = exit_description(proc.returncode)
            # Its JVM and Python workers may outlive it and keep uploading: stop the whole group.
            _kill_group(proc.pid)
            tail = log_tail(self.log_path(task_id))
            if driver is not None:  # the JVM's output is in the driver's log
                how = f"(warm driver {driver.name}, pid {proc.pid}) {how}"
                tail += f"\nDriver log tail:\n{log_tail(driver.log_path)}"
            settled = self.tasks.settle_exited(
                task_id, task_key_prefix(task.datasource, task_id),
                failed_error=f"task process {how} before reporting; nothing was published and its uploads are "
                             f"deleted. Log tail:\n{tail}",
                published_error=f"task process {how} after publishing its {{segments}} segment(s); they are "
                                "served, only the task's report was lost")
            log.warning("task %s: process %s; now %s", task_id, how, settled.state)
            self._after_settled(settled, proc.pid)
        self._reap_drivers()

    def _after_settled(self, task, group: int | None, driver: _Driver | None = None) -> None:
        """``driver``: the warm driver in which the task ended by itself; once it says it is done
        with the task and stays, its process group no longer holds the cleanup back."""
        if task.state != "SUCCESS":
            with self._lock:
                self._cleanup[task.id] = (task.datasource, group, driver)

    def _moved_on(self, driver: _Driver | None, task_id: str) -> bool:
        """Whether ``driver`` said it is done with ``task_id`` and keeps serving: nothing of that
        task runs in it any more (a retiring driver is waited for until it exits)."""
        with self._lock:
            return driver is not None and driver.task != task_id and not driver.retiring

    # ---- the cleanup duty ----------------------------------------------------------------------
    def _cleanup_loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._clean_up()

    def _clean_up(self) -> None:
        """One pass of the cleanup duty over the tasks whose uploads are still to delete."""
        with self._lock:
            pending = dict(self._cleanup)
        for task_id, (datasource, group, driver) in pending.items():
            if group is not None and process_group_alive(group) and not self._moved_on(driver, task_id):
                continue  # a worker of the dead task could still upload: wait until it is gone
            try:
                removed = self.remove_uploads(datasource, task_id)
            except Exception:  # deep storage down: tried again next period
                log.warning("could not delete the uploads of task %s yet", task_id, exc_info=True)
                self._stop.wait(self.cleanup_period_s)
                continue
            with self._lock:
                self._cleanup.pop(task_id, None)
            if removed:
                log.info("task %s: deleted %d uploaded file(s) it left in deep storage", task_id, removed)

    def _deep_storage(self):
        if self._storage is None and self._storage_factory is not None:
            self._storage = self._storage_factory()
        return self._storage

    def remove_uploads(self, datasource: str, task_id: str) -> int:
        """Deletes what ``task_id`` uploaded under its run folders, except keys a published
        segment references. Returns how many files were deleted."""
        storage = self._deep_storage()
        if storage is None:
            return 0
        prefix = task_key_prefix(datasource, task_id)
        keys = [k for k in storage.list(ingest_root(datasource), partial=True) if k.startswith(prefix)]
        if not keys:
            return 0
        referenced = {r.location for r in self.tasks.store.list(datasource, include_unused=True)}
        folders: dict[str, list[str]] = {}
        for key in keys:
            rest = key[len(prefix):]
            folder = prefix + rest.split("/", 1)[0] + "/" if "/" in rest else key
            folders.setdefault(folder, []).append(key)
        removed = 0
        for folder, inside in folders.items():
            if folder.endswith("/") and not any(k in referenced for k in inside):
                removed += storage.delete_prefix(folder)  # the folder itself goes too
                continue
            for key in inside:
                if key in referenced:
                    continue
                try:
                    removed += bool(storage.delete(key))
                except ValidationError:
                    continue  # an upload in progress next to published keys: not a key, left alone
        return removed

    # ---- cancel --------------------------------------------------------------------------------
    def cancel(self, task_id: str):
        task = self.tasks.get(task_id)
        if task.is_final:
            return task
        with self._lock:
            proc = self._procs.get(task_id)
            local = self._local.get(task_id)
        if local is not None:
            local.set()  # it stops before its next batch and ends CANCELED
            return task
        if proc is None:
            return self.tasks.transition(task_id, "CANCELED", error="canceled before it ran")
        threading.Thread(target=self._terminate, args=(task_id, proc), daemon=True).start()
        return task

    def _terminate(self, task_id: str, proc: subprocess.Popen) -> None:
        """SIGTERM lets the driver delete what it uploaded; SIGKILL after the grace period."""
        with self._lock:
            # Nothing is handed to it while it runs the task; whether it stays after the cancel is
            # its call ("done ID keep|retire"): it retires when the cancel stopped Spark jobs.
            driver = self._driven.get(task_id)
        if driver is not None:
            self._cancel_driven(task_id, driver)
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=self.cancel_grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        _kill_group(proc.pid)
        task = self.tasks.get(task_id)
        if not task.is_final:
            task = self.tasks.transition(task_id, "CANCELED", error="canceled")
        self._after_settled(task, proc.pid)

    def _cancel_driven(self, task_id: str, driver: _Driver) -> None:
        """A task in a warm driver: its job group is cancelled, the task ends CANCELED and the
        driver retires; a driver that does not manage within the grace period is killed."""
        if not driver.send(f"cancel {task_id}") and driver.proc.poll() is None:
            try:
                os.killpg(driver.proc.pid, signal.SIGTERM)  # its stdin is unusable: SIGTERM cancels too
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self.cancel_grace_s
        while time.monotonic() < deadline and driver.proc.poll() is None and not self.tasks.get(task_id).is_final:
            time.sleep(0.05)
        ended_itself = self.tasks.get(task_id).is_final
        if not ended_itself:
            _kill_group(driver.proc.pid)
            try:
                driver.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        task = self.tasks.get(task_id)
        if not task.is_final:
            task = self.tasks.transition(task_id, "CANCELED", error="canceled")
        self._after_settled(task, driver.proc.pid, driver if ended_itself else None)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(set(self._procs) | set(self._local))

    def pid(self, task_id: str) -> int | None:
        with self._lock:
            proc = self._procs.get(task_id)
        return proc.pid if proc is not None else None


def _task_command(task_id: str, coordinator: str) -> list[str]:
    return [sys.executable, "-m", _TASK_MODULE, "--task-id", task_id, "--coordinator", coordinator]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _is_task_process(pid: int, task_id: str) -> bool:
    """Whether ``pid`` is still the task's process (pids are reused): its own task process, or a
    warm driver (of a previous leader: the caller skips its own)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return (_TASK_MODULE.encode() in args and task_id.encode() in args) or _DRIVER_MODULE.encode() in args


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["TASK_LOG_ENV", "TaskRunner", "exit_description"]
