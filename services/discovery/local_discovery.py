"""LocalDiscovery: the Discovery interface directly on a MemoryStore, for unit tests, single-process
use, and the coordinator itself in embedded mode (it serves the same store to everyone else)."""

from __future__ import annotations

import threading

from services.discovery.discovery import (
    CompactedError,
    Discovery,
    DiscoveryError,
    KeyValue,
    Lease,
    LeaseLostError,
    Watch,
    WatchCallback,
)
from services.discovery.memory_store import LeaseReaper, MemoryStore, StoreWatcher
from services.discovery.resumable_watch import ResumableWatch, ResyncRequired


class LocalLease(Lease):
    def __init__(self, store: MemoryStore, lease_id: int, ttl_s: int) -> None:
        self._store = store
        self.id = lease_id
        self.ttl_s = ttl_s

    def refresh(self) -> None:
        if not self._store.keepalive(self.id):
            raise LeaseLostError(f"lease {self.id:#x} expired or was revoked; grant a new lease")

    def revoke(self) -> None:
        self._store.revoke_lease(self.id)


class _LocalWatch(ResumableWatch):
    def __init__(self, owner: "LocalDiscovery", prefix: str, callback: WatchCallback) -> None:
        super().__init__(prefix, callback, backend="local store")
        self._owner = owner
        self._store = owner.store
        self._watcher: StoreWatcher | None = None
        self._lock = threading.Lock()

    def _snapshot(self) -> tuple[dict[str, KeyValue], int]:
        return self._store.get_prefix(self.prefix)

    def _follow(self, start_revision: int) -> None:
        try:
            watcher = self._store.watch(self.prefix, start_revision)
        except CompactedError as exc:
            raise ResyncRequired(str(exc)) from None
        with self._lock:
            self._watcher = watcher
            if self.cancelled:
                watcher.close()
        self._connected()
        try:
            while not self.cancelled and not watcher.closed:
                try:
                    events, through = watcher.get(timeout_s=1.0)
                except CompactedError as exc:
                    raise ResyncRequired(str(exc)) from None
                for event in events:
                    self._deliver(event)
                if not events:
                    self._progress(through)
        finally:
            watcher.close()

    def _interrupt(self) -> None:
        with self._lock:
            if self._watcher is not None:
                self._watcher.close()

    def cancel(self) -> None:
        super().cancel()
        self._owner._forget(self)


class LocalDiscovery(Discovery):
    """``reap_interval_s``: how often a background thread expires leases; None leaves expiry to
    whoever calls ``store.expire()`` (tests with a manual clock, or a server that already reaps)."""

    def __init__(self, store: MemoryStore | None = None, *, reap_interval_s: float | None = 0.1) -> None:
        self.store = store if store is not None else MemoryStore()
        self._reaper = LeaseReaper(self.store, reap_interval_s).start() if reap_interval_s else None
        self._watches: set[_LocalWatch] = set()
        self._lock = threading.Lock()
        self._closed = False

    def put(self, key: str, value: bytes, lease: Lease | None = None) -> None:
        self._check_open()
        self.store.put(key, value, lease.id if lease else 0)

    def put_if_absent(self, key: str, value: bytes, lease: Lease | None = None) -> bool:
        self._check_open()
        created, _ = self.store.put_if_absent(key, value, lease.id if lease else 0)
        return created

    def delete(self, key: str) -> bool:
        self._check_open()
        return self.store.delete(key) > 0

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        self._check_open()
        kvs, _ = self.store.get_prefix(prefix)
        return {key: kv.value for key, kv in kvs.items()}

    def grant_lease(self, ttl_s: int) -> Lease:
        self._check_open()
        return LocalLease(self.store, self.store.grant_lease(ttl_s), ttl_s)

    def watch_prefix(self, prefix: str, callback: WatchCallback) -> Watch:
        self._check_open()
        watch = _LocalWatch(self, prefix, callback)
        with self._lock:
            self._watches.add(watch)
        return watch.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watches, self._watches = self._watches, set()
        for watch in watches:
            watch.cancel()
        if self._reaper is not None:
            self._reaper.close()

    def _forget(self, watch: _LocalWatch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _check_open(self) -> None:
        if self._closed:
            raise DiscoveryError("this LocalDiscovery is closed; create a new one")
