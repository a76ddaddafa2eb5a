"""ResumableWatch: the part of a prefix watch every Discovery implementation shares.

A subclass says how to read a snapshot and how to follow changes from a revision; this class
delivers the snapshot as puts, then the changes, all on one thread, and when following breaks it
retries with backoff, resuming after the last delivered revision. When the backend cannot resume
(history compacted, or the embedded store restarted and its revisions started again) the
subclass raises ResyncRequired and the watch delivers the difference between what it delivered
before and a fresh snapshot, so the callback's view converges on the store without a gap.
"""

from __future__ import annotations

import logging
import threading
from abc import abstractmethod

from services.discovery.discovery import Backoff, KeyValue, Watch, WatchCallback, WatchEvent

log = logging.getLogger("strata.discovery")


class ResyncRequired(Exception):
    """Raised by ``_follow`` when the backend cannot continue from the requested revision."""


class ResumableWatch(Watch):
    def __init__(self, prefix: str, callback: WatchCallback, *, backend: str,
                 backoff: Backoff | None = None) -> None:
        self.prefix = prefix
        self._callback = callback
        self._backend = backend
        self._backoff = backoff or Backoff(0.1, 2.0)
        # What the callback has been told, to compute the difference after a resync.
        self._known: dict[str, tuple[bytes, int]] = {}
        self._revision = 0
        self._floor = 0
        self._synced = threading.Event()
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"strata-watch {prefix}", daemon=True)

    def start(self) -> "ResumableWatch":
        self._thread.start()
        return self

    @property
    def revision(self) -> int:
        """The last revision delivered (or the snapshot's)."""
        return self._revision

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def wait_synced(self, timeout_s: float) -> bool:
        return self._synced.wait(timeout_s)

    def cancel(self) -> None:
        self._cancelled.set()
        self._interrupt()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
            if self._thread.is_alive():
                log.warning("watch on '%s' (%s) did not stop within 10s", self.prefix, self._backend)

    @abstractmethod
    def _snapshot(self) -> tuple[dict[str, KeyValue], int]:
        """Current keys under the prefix and the revision they are as of."""

    @abstractmethod
    def _follow(self, start_revision: int) -> None:
        """Deliver changes from ``start_revision`` via ``_deliver`` until the stream ends (return or
        raise) or the watch is cancelled. Call ``_connected`` once the stream is established."""

    def _interrupt(self) -> None:
        """Make a blocked ``_follow`` return soon; called from ``cancel`` on another thread."""

    def _run(self) -> None:
        need_resync = True
        failures = 0
        while not self._cancelled.is_set():
            try:
                if need_resync:
                    snapshot, revision = self._snapshot()
                    self._resync(snapshot, revision)
                    need_resync = False
                self._floor = self._revision
                self._follow(self._revision + 1)
            except ResyncRequired as exc:
                if not self._cancelled.is_set():
                    log.info("watch on '%s' (%s): resyncing from current state: %s", self.prefix, self._backend, exc)
                need_resync = True
                continue
            except Exception as exc:
                if self._cancelled.is_set():
                    break
                failures += 1
                # The first failure of a streak is worth a warning; the retries are noise.
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(level, "watch on '%s' (%s) broke, retrying: %s", self.prefix, self._backend, exc)
            else:
                failures = 0
            self._cancelled.wait(self._backoff.next())

    def _connected(self) -> None:
        self._backoff.reset()

    def _resync(self, snapshot: dict[str, KeyValue], revision: int) -> None:
        for key in sorted(set(self._known) - set(snapshot)):
            self._emit(WatchEvent("delete", key, b"", revision))
        for key in sorted(snapshot):
            kv = snapshot[key]
            if self._known.get(key) != (kv.value, kv.lease_id):
                self._emit(WatchEvent("put", key, kv.value, revision, kv.lease_id))
        self._known = {key: (kv.value, kv.lease_id) for key, kv in snapshot.items()}
        self._revision = revision
        self._synced.set()

    def _deliver(self, event: WatchEvent) -> None:
        # etcd gives every key a lease revoke deletes the same revision, so only events at or below
        # where this stream started are duplicates.
        if event.revision and event.revision <= self._floor:
            return
        if event.type == "put":
            self._known[event.key] = (event.value, event.lease_id)
        else:
            self._known.pop(event.key, None)
        self._revision = max(self._revision, event.revision)
        self._emit(event)

    def _progress(self, revision: int) -> None:
        """Nothing under the prefix changed up to ``revision``: resume from there next time, which
        keeps a quiet prefix's resume point inside the store's retained history."""
        self._revision = max(self._revision, revision)

    def _emit(self, event: WatchEvent) -> None:
        if self._cancelled.is_set():
            return
        try:
            self._callback(event)
        except Exception:
            log.exception("watch on '%s' (%s): callback failed on %s %s", self.prefix, self._backend,
                          event.type, event.key)
