"""TaskRunner: runs ingestion tasks as child processes of the leader coordinator.

Each task is one process (``python -m services.ingestion.task_main``) that drives a Spark job
and reports back over gRPC, so a crashing Spark driver or a cancel (SIGTERM, then SIGKILL after a
grace period) never takes the coordinator with it. A task whose process is gone without a final
state (crash, coordinator restart) is marked FAILED with its log's tail.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading

from services.node_process import log_tail

log = logging.getLogger("strata.tasks")


class TaskRunner:
    def __init__(self, tasks, coordinator_target, log_dir: str, env: dict[str, str], max_running: int = 2,
                 period_s: float = 0.5, cancel_grace_s: float = 30.0) -> None:
        self.tasks = tasks
        self.coordinator_target = coordinator_target  # () -> "host:port"
        self.log_dir = log_dir
        self.env = env
        self.max_running = max_running
        self.period_s = period_s
        self.cancel_grace_s = cancel_grace_s
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="strata-task-runner", daemon=True)
        os.makedirs(log_dir, exist_ok=True)

    def set_leader(self, is_leader: bool) -> None:
        if is_leader and not self._leader.is_set():
            self._orphans()
        (self._leader.set if is_leader else self._leader.clear)()

    def start(self) -> TaskRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            procs = dict(self._procs)
        for task_id, proc in procs.items():
            self._terminate(task_id, proc)

    def log_path(self, task_id: str) -> str:
        return os.path.join(self.log_dir, f"{task_id}.log")

    def _orphans(self) -> None:
        """RUNNING tasks no process of ours runs: their driver died with a previous coordinator."""
        with self._lock:
            mine = set(self._procs)
        for task in self.tasks.list(state="RUNNING"):
            if task.id not in mine:
                self.tasks.transition(task.id, "FAILED", error="the coordinator restarted while the task ran; "
                                                              "nothing was published, resubmit the statement")

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
            out = open(self.log_path(task.id), "ab")
            cmd = [sys.executable, "-m", "services.ingestion.task_main", "--task-id", task.id, "--coordinator", target]
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **self.env}, start_new_session=True)
            out.close()
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
            task = self.tasks.get(task_id)
            if not task.is_final:
                self.tasks.transition(task_id, "FAILED",
                                      error=f"task process exited with code {proc.returncode} before reporting; "
                                            f"log tail:\n{log_tail(self.log_path(task_id))}")

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
        task = self.tasks.get(task_id)
        if not task.is_final:
            self.tasks.transition(task_id, "CANCELED", error="canceled")

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._procs)



__all__ = ["TaskRunner"]
