"""The Discovery interface every strata process uses, and the two things built on it.

``Discovery`` is a small slice of etcd's API: a key-value store with revisions, leases and prefix
watches. Three implementations share one contract (see tests/integration/discovery): an
in-process ``LocalDiscovery``, ``EmbeddedDiscovery`` talking gRPC to the coordinator's
``DiscoveryServicer``, and ``EtcdDiscovery``.

``Announcer`` keeps keys alive under one lease and puts them back after the lease is lost;
``LeaderElection`` elects one holder of ``/strata/leader/{name}``.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from common.errors import StrataError, ValidationError
from services.discovery.keys import leader_key

log = logging.getLogger("strata.discovery")

class DiscoveryError(StrataError):
    """The discovery backend (etcd or the coordinator's embedded store) could not do what was asked;
    the message names the backend and what to check."""


class LeaseLostError(DiscoveryError):
    """The lease expired or was revoked (or the store that granted it restarted); grant a new one."""


class CompactedError(DiscoveryError):
    """A watch asked to start at a revision whose history is gone; resync from current state."""

    def __init__(self, message: str, compact_revision: int) -> None:
        super().__init__(message)
        self.compact_revision = compact_revision


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    lease_id: int = 0
    create_revision: int = 0
    mod_revision: int = 0


@dataclass(frozen=True)
class WatchEvent:
    """``type`` is 'put' or 'delete'; a delete's value is b''. ``lease_id`` lets a writer recognise
    its own put (LeaderElection does); ``revision`` is 0 only where the backend has none."""

    type: str
    key: str
    value: bytes
    revision: int = 0
    lease_id: int = 0


class Lease(ABC):
    """A TTL shared by keys; they are deleted when it expires or is revoked."""

    id: int
    ttl_s: int

    @abstractmethod
    def refresh(self) -> None:
        """Restart the TTL. Raises LeaseLostError if the lease is already gone."""

    @abstractmethod
    def revoke(self) -> None:
        """Delete the lease and its keys; a lease that is already gone is not an error."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id:#x}, ttl_s={self.ttl_s})"


class Watch(ABC):
    @abstractmethod
    def cancel(self) -> None:
        """Stop delivering events; returns once no callback will start any more."""

    @abstractmethod
    def wait_synced(self, timeout_s: float) -> bool:
        """True once the initial state has been delivered (False if ``timeout_s`` passed first)."""


WatchCallback = Callable[[WatchEvent], None]


class Discovery(ABC):
    """Keys are '/'-separated strings; values are bytes. Calls raise DiscoveryError when the backend
    is unreachable (after a bounded wait) and LeaseLostError for a lease that no longer exists."""

    @abstractmethod
    def put(self, key: str, value: bytes, lease: Lease | None = None) -> None: ...

    @abstractmethod
    def put_if_absent(self, key: str, value: bytes, lease: Lease | None = None) -> bool:
        """Put only if ``key`` does not exist; True if this call created it."""

    @abstractmethod
    def delete(self, key: str) -> bool:
        """True if the key existed."""

    @abstractmethod
    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        """Every key starting with ``prefix``, sorted by key."""

    @abstractmethod
    def grant_lease(self, ttl_s: int) -> Lease: ...

    @abstractmethod
    def watch_prefix(self, prefix: str, callback: WatchCallback) -> Watch:
        """Calls ``callback`` with the current keys under ``prefix`` as puts, then with every change
        after that snapshot's revision, in order, on one background thread per watch. If the
        backend is lost and comes back, the watch resumes after the last revision it delivered, or
        (if that history is gone, e.g. the embedded store restarted) delivers the difference
        between what it last delivered and the current state."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Backoff:
    """Exponential retry delays, so a lost backend is polled quickly at first and gently later."""

    def __init__(self, initial_s: float = 0.1, maximum_s: float = 2.0) -> None:
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self._next = initial_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.maximum_s)
        return delay

    def reset(self) -> None:
        self._next = self.initial_s


def _check_ttl(ttl_s: int, what: str) -> int:
    if not isinstance(ttl_s, int) or ttl_s < 1:
        raise ValidationError(f"{what}: ttl_s must be a whole number of seconds >= 1, got {ttl_s!r}")
    return ttl_s


class Announcer:
    """Keeps a set of keys alive under one lease that a background thread refreshes every ttl/3.

    If the lease is lost (etcd or the coordinator restarted, or this process paused past the TTL),
    it grants a new lease and puts every key again, so a node's announcements survive anything
    short of the node itself dying. ``set`` and ``remove`` write through when the backend is
    reachable; otherwise the thread writes them once it is.
    """

    def __init__(self, discovery: Discovery, ttl_s: int = 10, *, name: str = "announcer") -> None:
        self._discovery = discovery
        self._ttl_s = _check_ttl(ttl_s, f"Announcer '{name}'")
        self._name = name
        # One lock around every write: a re-put by the thread must not land after (and so undo) a
        # newer set() or remove() of the same key.
        self._lock = threading.RLock()
        self._keys: dict[str, bytes] = {}
        self._unwritten: set[str] = set()
        self._undeleted: set[str] = set()
        self._lease: Lease | None = None
        self._last_refresh = 0.0
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"strata-announcer-{name}", daemon=True)
        self._thread.start()

    @property
    def lease(self) -> Lease | None:
        """The current lease (None while there is none); changes after a loss."""
        return self._lease

    @property
    def keys(self) -> dict[str, bytes]:
        with self._lock:
            return dict(self._keys)

    def set(self, key: str, value: bytes) -> None:
        self._check_open()
        with self._lock:
            self._keys[key] = value
            self._undeleted.discard(key)
            self._unwritten.add(key)
            self._flush()

    def remove(self, key: str) -> None:
        self._check_open()
        with self._lock:
            if self._keys.pop(key, None) is None:
                return
            self._unwritten.discard(key)
            self._undeleted.add(key)
            self._flush()

    def wait_announced(self, timeout_s: float) -> bool:
        """True once every key set so far is written under a live lease."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if self._lease is not None and not self._unwritten and not self._undeleted:
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._closed.wait(min(0.02, remaining))

    def close(self) -> None:
        """Stop refreshing and revoke the lease, which deletes every key at once."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        with self._lock:
            lease, self._lease = self._lease, None
        if lease is not None:
            try:
                lease.revoke()
            except DiscoveryError as exc:
                log.warning("announcer '%s': could not revoke %r on close (its keys expire within %ss): %s",
                            self._name, lease, self._ttl_s, exc)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise DiscoveryError(f"announcer '{self._name}' is closed; create a new Announcer")

    def _flush(self) -> None:
        """Write pending changes (caller holds the lock); on failure leave them for the thread."""
        try:
            for key in sorted(self._undeleted):
                self._discovery.delete(key)
                self._undeleted.discard(key)
            if self._lease is None:
                return
            for key in sorted(self._unwritten):
                self._discovery.put(key, self._keys[key], self._lease)
                self._unwritten.discard(key)
        except LeaseLostError:
            self._lose_lease(self._lease)
        except DiscoveryError as exc:
            log.warning("announcer '%s': write failed, will retry: %s", self._name, exc)
            self._wake.set()

    def _lose_lease(self, lease: Lease | None) -> None:
        with self._lock:
            if lease is not None and self._lease is lease:
                log.warning("announcer '%s': %r was lost; granting a new lease and re-putting %d keys",
                            self._name, lease, len(self._keys))
                self._lease = None
                self._unwritten = set(self._keys)
        self._wake.set()

    def _run(self) -> None:
        backoff = Backoff(0.05, max(0.1, self._ttl_s / 3))
        while not self._closed.is_set():
            # Cleared before the work, so a wake-up that arrives during it is not lost.
            self._wake.clear()
            delay = self._ttl_s / 3
            lease = None
            try:
                with self._lock:
                    if self._lease is None:
                        self._lease = self._discovery.grant_lease(self._ttl_s)
                        self._last_refresh = time.monotonic()
                    lease = self._lease
                    self._flush()
                if time.monotonic() - self._last_refresh >= self._ttl_s / 3 and lease is self._lease:
                    lease.refresh()
                    self._last_refresh = time.monotonic()
                with self._lock:
                    if self._unwritten or self._undeleted or self._lease is None:
                        delay = backoff.next()
                    else:
                        backoff.reset()
                        delay = max(0.0, self._last_refresh + self._ttl_s / 3 - time.monotonic())
            except LeaseLostError:
                self._lose_lease(lease)
                delay = 0.0
            except DiscoveryError as exc:
                log.warning("announcer '%s': discovery unavailable, retrying: %s", self._name, exc)
                delay = backoff.next()
            except Exception:  # a bug must not silently stop announcements
                log.exception("announcer '%s': unexpected error", self._name)
                delay = backoff.next()
            self._wake.wait(delay)


class LeaderElection:
    """One leader among the candidates for ``name``: whoever creates ``/strata/leader/{name}``
    (holding its node id) under its lease. Candidates watch the key and campaign again when it goes.

    ``on_change(is_leader, leader)`` is called (never concurrently, in order) whenever either
    changes. A leader that cannot refresh its lease for a whole TTL steps down, because by then
    the key may have expired and another candidate may lead.
    """

    def __init__(self, discovery: Discovery, name: str, node_id: str,
                 on_change: Callable[[bool, str | None], None] | None = None, *, ttl_s: int = 10) -> None:
        self._discovery = discovery
        self._name = name
        self._node_id = node_id
        self._key = leader_key(name)
        self._on_change = on_change
        self._ttl_s = _check_ttl(ttl_s, f"LeaderElection '{name}'")
        self._lock = threading.Lock()
        self._notify_lock = threading.RLock()
        self._notified: tuple[bool, str | None] = (False, None)
        self._lease: Lease | None = None
        self._last_refresh = 0.0
        self._leader: str | None = None
        self._is_leader = False
        # The lease we won with, and whether our own put has come back through the watch. Events
        # older than our win can still be in flight; until our put arrives they say nothing new.
        self._won_lease_id = 0
        self._won_at = 0.0
        self._confirmed = False
        self._campaigning = True
        self._orphans: list[Lease] = []
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._watch = discovery.watch_prefix(self._key, self._on_event)
        self._thread = threading.Thread(target=self._run, name=f"strata-election-{name}", daemon=True)
        self._thread.start()

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    def is_leader_now(self) -> bool:
        """Whether this node leads and refreshed its lease within the last TTL. After the process
        was paused past its TTL (SIGSTOP, a frozen VM, a long swap storm) this is False at once,
        while ``is_leader`` still says True until the election thread gets to run and learns the
        lease is gone: leader-only work checks it before each step, so a resumed ex-leader does not
        act beside the new one in that window."""
        return self._is_leader and time.monotonic() - self._last_refresh < self._ttl_s

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def lease(self) -> Lease | None:
        return self._lease

    def leader(self) -> str | None:
        """The node id holding the key as last observed, or None when nobody does."""
        return self._leader

    def wait_leader(self, timeout_s: float) -> str | None:
        """The leader once there is one, or None if ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        while (leader := self._leader) is None and time.monotonic() < deadline:
            self._closed.wait(0.02)
        return leader

    def resign(self) -> None:
        """Stop campaigning and give up leadership (revoking the lease deletes the key, so another
        candidate takes over at once). ``leader()`` keeps tracking who leads."""
        with self._lock:
            self._campaigning = False
            lease, self._lease = self._lease, None
            self._is_leader = False
            self._won_lease_id = 0
        if lease is not None:
            try:
                lease.revoke()
            except DiscoveryError as exc:
                log.warning("election '%s': %s could not revoke %r on resign (the key expires within %ss): %s",
                            self._name, self._node_id, lease, self._ttl_s, exc)
        self._notify()

    def close(self) -> None:
        self.resign()
        self._closed.set()
        self._wake.set()
        self._watch.cancel()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _on_event(self, event: WatchEvent) -> None:
        if event.key != self._key:
            return  # the prefix watch also sees /strata/leader/{name}-suffixed keys
        with self._lock:
            holder = event.value.decode() if event.type == "put" else None
            ours = event.type == "put" and event.lease_id == self._won_lease_id != 0
            if self._is_leader and not self._confirmed:
                if ours:
                    self._confirmed = True
            elif not self._is_leader and event.type == "put" and self._lease is not None \
                    and event.lease_id == self._lease.id and self._campaigning:
                # Our put_if_absent created the key but its answer was lost (a retried call then
                # found the key taken): the key is ours all the same.
                self._is_leader = True
                self._confirmed = True
                self._won_lease_id = event.lease_id
                self._leader = holder
            elif self._is_leader and not ours:
                log.warning("election '%s': %s lost leadership (key now %s)", self._name, self._node_id,
                            holder or "deleted")
                self._is_leader = False
                self._won_lease_id = 0
                self._leader = holder
            else:
                self._leader = holder
        self._wake.set()
        self._notify()

    def _step_down(self, why: str) -> None:
        with self._lock:
            if self._is_leader:
                log.warning("election '%s': %s steps down: %s", self._name, self._node_id, why)
            self._is_leader = False
            self._won_lease_id = 0
        self._notify()

    def _run(self) -> None:
        backoff = Backoff(0.05, max(0.1, self._ttl_s / 3))
        while not self._closed.is_set():
            self._wake.clear()
            delay = self._ttl_s / 3
            lease = None
            try:
                if self._campaigning:
                    lease = self._lease
                    if lease is None:
                        lease = self._discovery.grant_lease(self._ttl_s)
                        with self._lock:
                            if not self._campaigning:  # resigned meanwhile
                                lease.revoke()
                                continue
                            self._lease = lease
                        self._last_refresh = time.monotonic()
                    elif time.monotonic() - self._last_refresh >= self._ttl_s / 3:
                        lease.refresh()
                        self._last_refresh = time.monotonic()
                    while self._orphans:
                        self._orphans[0].revoke()
                        self._orphans.pop(0)
                    if not self._is_leader and self._leader is None:
                        self._campaign(lease)
                    elif self._is_leader and not self._confirmed and time.monotonic() - self._won_at > self._ttl_s:
                        self._check_key()
                    backoff.reset()
                    delay = max(0.0, self._last_refresh + self._ttl_s / 3 - time.monotonic())
            except LeaseLostError:
                with self._lock:
                    if self._lease is lease:
                        self._lease = None
                self._step_down(f"its lease {lease!r} was lost")
                delay = 0.0
            except DiscoveryError as exc:
                log.warning("election '%s': discovery unavailable, retrying: %s", self._name, exc)
                if self._is_leader and time.monotonic() - self._last_refresh > self._ttl_s:
                    # The key may have expired by now; a fresh lease must campaign from scratch.
                    # The old one is revoked once the backend answers, in case it is still alive
                    # and holding the key (everyone would wait out its TTL otherwise).
                    with self._lock:
                        if self._lease is not None:
                            self._orphans.append(self._lease)
                        self._lease = None
                    self._step_down(f"no lease refresh for over {self._ttl_s}s")
                delay = backoff.next()
            except Exception:
                log.exception("election '%s': unexpected error", self._name)
                delay = backoff.next()
            self._wake.wait(delay)

    def _campaign(self, lease: Lease) -> None:
        if not self._discovery.put_if_absent(self._key, self._node_id.encode(), lease):
            return
        with self._lock:
            if self._lease is not lease or not self._campaigning:
                return  # resigned while the put was in flight; the revoke deletes the key
            self._is_leader = True
            self._confirmed = False
            self._won_lease_id = lease.id
            self._won_at = time.monotonic()
            self._leader = self._node_id
        log.info("election '%s': %s is the leader", self._name, self._node_id)
        self._notify()

    def _check_key(self) -> None:
        # Our put never came back through the watch (it can be folded into a resync that also
        # folded away a later change), so ask the store directly.
        value = self._discovery.get_prefix(self._key).get(self._key)
        if value == self._node_id.encode():
            with self._lock:
                self._confirmed = True
        else:
            self._step_down(f"the key holds {value!r}, not this node's id")

    def _notify(self) -> None:
        with self._notify_lock:
            state = (self._is_leader, self._leader)
            if state == self._notified:
                return
            self._notified = state
            if self._on_change is not None:
                try:
                    self._on_change(*state)
                except Exception:
                    log.exception("election '%s': on_change callback failed", self._name)
