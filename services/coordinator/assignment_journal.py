"""AssignmentJournal: keeps the embedded discovery store's assignments across coordinator restarts.

etcd persists assignment keys by itself; the embedded store lives in the coordinator's memory.
Without this journal a restarted coordinator would come back with no assignments, and every
historical would see its segments unassigned and drop them.
"""

from __future__ import annotations

import base64
import json
import os
import threading

from services.discovery.keys import assignments_prefix


class AssignmentJournal:
    def __init__(self, directory: str, store, discovery, flush_interval_s: float = 0.2) -> None:
        self.path = os.path.join(directory, "assignments.json")
        os.makedirs(directory, exist_ok=True)
        self.store = store
        self.discovery = discovery
        self.flush_interval_s = flush_interval_s
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="strata-journal", daemon=True)
        self._watch = None

    def restore(self) -> int:
        if not os.path.exists(self.path):
            return 0
        with open(self.path) as f:
            data = json.load(f)
        for key, value in data.items():
            self.store.put(key, base64.b64decode(value))
        return len(data)

    def start(self) -> AssignmentJournal:
        self._watch = self.discovery.watch_prefix(assignments_prefix(), lambda _event: self._dirty.set())
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._dirty.wait(0.5):
                self._stop.wait(self.flush_interval_s)  # batch bursts of changes into one write
                self._dirty.clear()
                self.flush()

    def flush(self) -> None:
        current = {k: base64.b64encode(v).decode() for k, v in self.discovery.get_prefix(assignments_prefix()).items()}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(current, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._stop.set()
        self._thread.join(timeout=5)
        self.flush()
