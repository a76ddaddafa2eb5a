"""MemoryStore: the embedded key-value store (revisions, leases, prefix watches with history) that
stands in for etcd when strata runs without it. Pure and thread-safe; no gRPC.

Every change gets its own revision, including each key a lease expiry deletes (etcd deletes them
in one revision; one event per revision makes "resume after revision N" exact). Lease expiry is
driven by ``expire()`` against an injectable clock, so tests control time; ``LeaseReaper`` calls
it periodically for real servers.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from common.errors import ValidationError
from services.discovery.discovery import CompactedError, KeyValue, LeaseLostError, WatchEvent

# Enough history for a watcher to ride out a restart of its server or client (seconds of churn
# on a large cluster); a watcher further behind resyncs from a snapshot instead.
DEFAULT_HISTORY = 100_000
# A watcher this far behind is cut off (and resyncs) rather than buffering without bound.
MAX_PENDING = 100_000


@dataclass
class _LeaseRecord:
    ttl_s: int
    deadline: float
    keys: set[str] = field(default_factory=set)


class StoreWatcher:
    """Events for one prefix, buffered until the consumer takes them with ``get``."""

    def __init__(self, store: "MemoryStore", prefix: str, through: int) -> None:
        self.prefix = prefix
        self._store = store
        self._cond = threading.Condition()
        self._events: deque[WatchEvent] = deque()
        self._through = through
        self._closed = False
        self._overflowed = False

    def _offer(self, event: WatchEvent) -> None:
        """Called by the store, under its lock, for every change in revision order."""
        with self._cond:
            if event.key.startswith(self.prefix) and not self._overflowed:
                if len(self._events) >= MAX_PENDING:
                    self._overflowed = True
                    self._events.clear()
                else:
                    self._events.append(event)
            self._through = event.revision
            self._cond.notify_all()

    def get(self, timeout_s: float) -> tuple[list[WatchEvent], int]:
        """Pending events (waiting up to ``timeout_s`` for one) and the revision the store had
        reached when they were taken: with no events, nothing under the prefix changed up to it.
        Raises CompactedError if the consumer fell too far behind."""
        with self._cond:
            if not self._events and not self._closed and not self._overflowed:
                self._cond.wait(timeout_s)
            if self._overflowed:
                raise CompactedError(f"watch on '{self.prefix}' fell more than {MAX_PENDING} events behind; "
                                     "resync from current state", self._through)
            events = list(self._events)
            self._events.clear()
            return events, self._through

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._store._remove_watcher(self)
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class MemoryStore:
    def __init__(self, clock: Callable[[], float] = time.monotonic, *, history: int = DEFAULT_HISTORY) -> None:
        # Identifies this incarnation: a client that sees a different id after reconnecting knows
        # revisions restarted and it must resync rather than resume.
        self.store_id = uuid.uuid4().hex
        self._clock = clock
        self._lock = threading.Lock()
        self._revision = 0
        self._kvs: dict[str, KeyValue] = {}
        self._leases: dict[int, _LeaseRecord] = {}
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._watchers: set[StoreWatcher] = set()

    @property
    def revision(self) -> int:
        with self._lock:
            return self._revision

    @property
    def compact_revision(self) -> int:
        """Revisions at or below this are no longer in the history."""
        with self._lock:
            return self._compact_revision_locked()

    def _compact_revision_locked(self) -> int:
        if len(self._history) < (self._history.maxlen or 0):
            return 0
        return self._history[0].revision - 1

    def put(self, key: str, value: bytes, lease_id: int = 0) -> int:
        """Returns the new revision. Raises LeaseLostError for a lease that does not exist."""
        with self._lock:
            self._check_put(key, value, lease_id)
            return self._put_locked(key, value, lease_id)

    def put_if_absent(self, key: str, value: bytes, lease_id: int = 0) -> tuple[bool, KeyValue | None]:
        """(True, None) if this created the key, else (False, the existing entry)."""
        with self._lock:
            self._check_put(key, value, lease_id)
            existing = self._kvs.get(key)
            if existing is not None:
                return False, existing
            self._put_locked(key, value, lease_id)
            return True, None

    def delete(self, key: str) -> int:
        """The number of keys deleted (0 or 1)."""
        with self._lock:
            return self._delete_locked(key)

    def get(self, key: str) -> KeyValue | None:
        with self._lock:
            return self._kvs.get(key)

    def get_prefix(self, prefix: str) -> tuple[dict[str, KeyValue], int]:
        """Keys under ``prefix`` (sorted) and the revision they are as of."""
        with self._lock:
            return {k: self._kvs[k] for k in sorted(self._kvs) if k.startswith(prefix)}, self._revision

    def grant_lease(self, ttl_s: int) -> int:
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise ValidationError(f"lease ttl_s must be a whole number of seconds >= 1, got {ttl_s!r}")
        with self._lock:
            # Random ids: a client holding a lease from a previous incarnation of the store must
            # not find it alive again (or mistake another's put for its own) after a restart.
            while (lease_id := secrets.randbits(62) + 1) in self._leases:
                pass
            self._leases[lease_id] = _LeaseRecord(ttl_s, self._clock() + ttl_s)
            return lease_id

    def keepalive(self, lease_id: int) -> int:
        """Restart the lease's TTL; returns it, or 0 if the lease does not exist (any more)."""
        with self._lock:
            record = self._leases.get(lease_id)
            if record is None or record.deadline <= self._clock():
                return 0
            record.deadline = self._clock() + record.ttl_s
            return record.ttl_s

    def time_to_live(self, lease_id: int) -> float:
        """Seconds until the lease expires (0 if it does not exist)."""
        with self._lock:
            record = self._leases.get(lease_id)
            return 0.0 if record is None else max(0.0, record.deadline - self._clock())

    def revoke_lease(self, lease_id: int) -> bool:
        """Delete the lease and its keys; False if it did not exist."""
        with self._lock:
            return self._revoke_locked(lease_id)

    def expire(self) -> list[int]:
        """Revoke every lease whose TTL has run out by the clock; returns their ids."""
        with self._lock:
            now = self._clock()
            expired = [lid for lid, rec in self._leases.items() if rec.deadline <= now]
            for lease_id in expired:
                self._revoke_locked(lease_id)
            return expired

    def watch(self, prefix: str, start_revision: int = 0) -> StoreWatcher:
        """A watcher for changes under ``prefix`` from ``start_revision`` (0: after now), with the
        retained history replayed first so nothing between a snapshot and the watch is lost.
        Raises CompactedError when that history is gone."""
        with self._lock:
            compacted = self._compact_revision_locked()
            if 0 < start_revision <= compacted:
                raise CompactedError(f"watch on '{prefix}' from revision {start_revision}: history before "
                                     f"revision {compacted + 1} is gone; resync from current state", compacted)
            watcher = StoreWatcher(self, prefix, self._revision)
            if start_revision:
                for event in self._history:
                    if event.revision >= start_revision:
                        watcher._offer(event)
                watcher._through = self._revision
            self._watchers.add(watcher)
            return watcher

    def _remove_watcher(self, watcher: StoreWatcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def _check_put(self, key: str, value: bytes, lease_id: int) -> None:
        if not isinstance(key, str) or not key:
            raise ValidationError(f"discovery key must be a non-empty string, got {key!r}")
        if not isinstance(value, (bytes, bytearray)):
            raise ValidationError(f"discovery value for '{key}' must be bytes, got {type(value).__name__}")
        record = self._leases.get(lease_id) if lease_id else None
        if lease_id and (record is None or record.deadline <= self._clock()):
            raise LeaseLostError(f"lease {lease_id:#x} for '{key}' does not exist (expired, revoked, or granted "
                                 "by a previous incarnation of the store); grant a new lease")

    def _put_locked(self, key: str, value: bytes, lease_id: int) -> int:
        self._revision += 1
        old = self._kvs.get(key)
        if old is not None and old.lease_id and old.lease_id != lease_id:
            record = self._leases.get(old.lease_id)
            if record is not None:
                record.keys.discard(key)
        if lease_id:
            self._leases[lease_id].keys.add(key)
        created = old.create_revision if old is not None else self._revision
        self._kvs[key] = KeyValue(key, bytes(value), lease_id, created, self._revision)
        self._commit(WatchEvent("put", key, bytes(value), self._revision, lease_id))
        return self._revision

    def _delete_locked(self, key: str) -> int:
        old = self._kvs.pop(key, None)
        if old is None:
            return 0
        if old.lease_id:
            record = self._leases.get(old.lease_id)
            if record is not None:
                record.keys.discard(key)
        self._revision += 1
        self._commit(WatchEvent("delete", key, b"", self._revision))
        return 1

    def _revoke_locked(self, lease_id: int) -> bool:
        record = self._leases.pop(lease_id, None)
        if record is None:
            return False
        for key in sorted(record.keys):
            self._delete_locked(key)
        return True

    def _commit(self, event: WatchEvent) -> None:
        self._history.append(event)
        for watcher in self._watchers:
            watcher._offer(event)


class LeaseReaper:
    """Calls ``store.expire()`` every ``interval_s`` on a daemon thread until closed."""

    def __init__(self, store: MemoryStore, interval_s: float = 0.25) -> None:
        self._store = store
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="strata-lease-reaper", daemon=True)

    def start(self) -> "LeaseReaper":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._store.expire()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
