"""TaskRunner: runs ingestion tasks as child processes of the leader coordinator.

Each task is one process (``python -m services.ingestion.task_main``) that drives a Spark job
and reports back over gRPC, so a crashing Spark driver or a cancel (SIGTERM, then SIGKILL after a
grace period) never takes the coordinator with it.

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

from common.errors import ValidationError
from services.ingestion.upload_folder import ingest_root, task_key_prefix
from services.node_process import log_tail
from services.node_process import process_group_alive

log = logging.getLogger("strata.tasks")

# Read by services.ingestion.spark_session: the log the task's JVM writes its stderr to.
TASK_LOG_ENV = "STRATA_TASK_LOG"
_TASK_MODULE = "services.ingestion.task_main"


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
                 task_command: Callable[[str, str], list[str]] | None = None) -> None:
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
        # task id -> (datasource, its process group or None): uploads still to delete.
        self._cleanup: dict[str, tuple[str, int | None]] = {}
        self._lock = threading.Lock()
        self._leader = threading.Event()
        self._stop = threading.Event()
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
        self._thread.join(timeout=5)
        self._cleaner.join(timeout=5)
        with self._lock:
            procs = dict(self._procs)
        # All at once: one grace period for every task, not one each.
        stoppers = [threading.Thread(target=self._terminate, args=(task_id, proc), daemon=True)
                    for task_id, proc in procs.items()]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(self.cancel_grace_s + 15)

    def log_path(self, task_id: str) -> str:
        return os.path.join(self.log_dir, f"{task_id}.log")

    def pid_path(self, task_id: str) -> str:
        return os.path.join(self.log_dir, f"{task_id}.pid")

    def pending_cleanup(self) -> list[str]:
        """Tasks whose uploads the cleanup duty has yet to delete."""
        with self._lock:
            return sorted(self._cleanup)

    def _orphans(self) -> None:
        """RUNNING tasks no process of ours runs: their driver ran under a previous coordinator.
        A process that outlived it is stopped first, so it cannot upload after the cleanup."""
        with self._lock:
            mine = set(self._procs)
        for task in self.tasks.list(state="RUNNING"):
            if task.id in mine:
                continue
            stopped = self._kill_leftover(task.id)  # also waits for its process group to end
            settled = self.tasks.settle_exited(
                task.id, task_key_prefix(task.datasource, task.id),
                failed_error="the coordinator restarted while the task ran"
                             + (" (its process was stopped)" if stopped else "")
                             + "; nothing was published, resubmit the statement",
                published_error="the coordinator restarted after the task published its {segments} segment(s); "
                                "they are served, only the task's report was lost")
            self._after_settled(settled, None)

    def _kill_leftover(self, task_id: str) -> bool:
        pid = _read_pid(self.pid_path(task_id))
        if pid is None or not _is_task_process(pid, task_id):
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

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._reap()
                if self._leader.is_set():
                    self._launch()
            except Exception:  # one bad pass must not stop task scheduling
                log.exception("task runner pass failed")

    def _launch(self) -> None:
        with self._lock:
            free = self.max_running - len(self._procs)
        if free <= 0:
            return
        for task in self.tasks.list(state="PENDING")[:free]:
            target = self.coordinator_target()
            path = self.log_path(task.id)
            out = open(path, "ab")
            cmd = self._task_command(task.id, target)
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **self.env, TASK_LOG_ENV: path}, start_new_session=True)
            out.close()
            with open(self.pid_path(task.id), "w") as f:
                f.write(f"{proc.pid}\n")
            with self._lock:
                self._procs[task.id] = proc
            self.tasks.transition(task.id, "RUNNING")
            log.info("task %s started (pid %d)", task.id, proc.pid)

    def _reap(self) -> None:
        with self._lock:
            finished = [(tid, p) for tid, p in self._procs.items() if p.poll() is not None]
            for tid, _ in finished:
                del self._procs[tid]
        for task_id, proc in finished:
            _unlink(self.pid_path(task_id))
            task = self.tasks.get(task_id)
            if task.is_final:
                continue
            how = exit_description(proc.returncode)
            # Its JVM and Python workers may outlive it and keep uploading: stop the whole group.
            _kill_group(proc.pid)
            settled = self.tasks.settle_exited(
                task_id, task_key_prefix(task.datasource, task_id),
                failed_error=f"task process {how} before reporting; nothing was published and its uploads are "
                             f"deleted. Log tail:\n{log_tail(self.log_path(task_id))}",
                published_error=f"task process {how} after publishing its {{segments}} segment(s); they are "
                                "served, only the task's report was lost")
            log.warning("task %s: process %s; now %s", task_id, how, settled.state)
            self._after_settled(settled, proc.pid)

    def _after_settled(self, task, group: int | None) -> None:
        if task.state != "SUCCESS":
            with self._lock:
                self._cleanup[task.id] = (task.datasource, group)

    # ---- the cleanup duty ----------------------------------------------------------------------
    def _cleanup_loop(self) -> None:
        while not self._stop.wait(self.period_s):
            with self._lock:
                pending = dict(self._cleanup)
            for task_id, (datasource, group) in pending.items():
                if group is not None and process_group_alive(group):
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
        if proc is None:
            return self.tasks.transition(task_id, "CANCELED", error="canceled before it ran")
        threading.Thread(target=self._terminate, args=(task_id, proc), daemon=True).start()
        return task

    def _terminate(self, task_id: str, proc: subprocess.Popen) -> None:
        """SIGTERM lets the driver delete what it uploaded; SIGKILL after the grace period."""
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

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._procs)

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
    """Whether ``pid`` is still the task's process (pids are reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return _TASK_MODULE.encode() in args and task_id.encode() in args


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["TASK_LOG_ENV", "TaskRunner", "exit_description"]
