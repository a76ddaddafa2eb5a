"""EtcdDiscovery: the Discovery interface on etcd v3 (through the ``etcd3`` client library).

put_if_absent is a transaction on ``create_revision == 0``; watches use
``add_watch_prefix_callback`` from a start revision. The library calls every watch's callback on
one shared thread and ends all watches when its stream breaks, so each of our watches only queues
what it is given and does the delivering (and the re-watching) on its own thread.
"""

from __future__ import annotations

import queue
import threading
import time
from urllib.parse import urlsplit

import etcd3
import etcd3.events
import etcd3.exceptions
import etcd3.watch
import grpc

from common.errors import UnsupportedError, ValidationError
from services.discovery.discovery import (
    Backoff,
    CompactedError,
    Discovery,
    DiscoveryError,
    KeyValue,
    Lease,
    LeaseLostError,
    Watch,
    WatchCallback,
    WatchEvent,
)
from services.discovery.resumable_watch import ResumableWatch, ResyncRequired

# gRPC's default reconnect backoff grows to 2 minutes; a restarted etcd should be found again in
# about a second.
# Transparent retries are off: with them (grpc 1.85), a stream started as the server goes away
# can end UNAVAILABLE without ever completing its pending reads, so the reading thread blocks
# forever and not even cancel() frees it. Every caller here retries on its own.
_GRPC_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.enable_retries", 0),
]
_STOP = object()


def parse_etcd_url(url: str) -> list[tuple[str, int]]:
    """``http://host:port`` (or bare ``host:port``), comma-separated for a cluster."""
    endpoints = []
    for part in (p.strip() for p in (url or "").split(",")):
        if not part:
            continue
        split = urlsplit(part if "://" in part else f"http://{part}")
        if split.scheme != "http":
            raise UnsupportedError(f"etcd URL '{part}': only http:// is supported (no TLS client certificates "
                                   "yet); put etcd behind a local TLS proxy or use http on a private network")
        try:
            port = split.port or 2379
        except ValueError:
            raise ValidationError(f"etcd URL '{part}' has an invalid port; expected http://host:2379") from None
        if not split.hostname:
            raise ValidationError(f"etcd URL '{part}' has no host; expected http://host:2379")
        endpoints.append((split.hostname, port))
    if not endpoints:
        raise ValidationError(f"etcd URL {url!r} names no endpoint; set [discovery] etcd = \"http://host:2379\"")
    return endpoints


class EtcdLease(Lease):
    def __init__(self, owner: "EtcdDiscovery", lease_id: int, ttl_s: int) -> None:
        self._owner = owner
        self.id = lease_id
        self.ttl_s = ttl_s

    def refresh(self) -> None:
        responses = self._owner._etcd("refresh lease", lambda: list(self._owner.client.refresh_lease(self.id)))
        if not responses or responses[0].TTL <= 0:
            raise LeaseLostError(f"etcd at {self._owner.url}: lease {self.id:#x} expired or was revoked; "
                                 "grant a new lease")

    def revoke(self) -> None:
        try:
            self._owner._etcd("revoke lease", lambda: self._owner.client.revoke_lease(self.id))
        except LeaseLostError:
            pass


class _EtcdWatch(ResumableWatch):
    def __init__(self, owner: "EtcdDiscovery", prefix: str, callback: WatchCallback) -> None:
        super().__init__(prefix, callback, backend=f"etcd at {owner.url}")
        self._owner = owner
        self._lock = threading.Lock()
        self._queue: queue.Queue | None = None

    def _snapshot(self) -> tuple[dict[str, KeyValue], int]:
        response = self._owner._etcd("get prefix", lambda: self._owner.client.get_prefix_response(self.prefix))
        kvs = {}
        for kv in response.kvs:
            key = kv.key.decode()
            kvs[key] = KeyValue(key, kv.value, kv.lease, kv.create_revision, kv.mod_revision)
        return kvs, response.header.revision

    def _follow(self, start_revision: int) -> None:
        client = self._owner.client
        current = self._owner._etcd(
            "get revision", lambda: client.get_prefix_response(self.prefix, count_only=True)).header.revision
        if current < self.revision:
            # etcd would wait for the revision to come round again and deliver nothing meanwhile.
            raise ResyncRequired(f"etcd at {self._owner.url} is at revision {current}, behind the {self.revision} "
                                 "this watch had seen: its data was reset")
        events: queue.Queue = queue.Queue()
        with self._lock:
            self._queue = events
            if self.cancelled:
                return
        try:
            watch_id = self._owner._etcd("watch", lambda: client.add_watch_prefix_callback(
                self.prefix, events.put, start_revision=start_revision))
        except CompactedError as exc:
            raise ResyncRequired(str(exc)) from None
        self._connected()
        try:
            while not self.cancelled:
                try:
                    item = events.get(timeout=1.0)
                except queue.Empty:
                    continue
                if item is _STOP:
                    return
                if isinstance(item, etcd3.watch.WatchResponse):
                    for event in item.events:
                        kind = "put" if isinstance(event, etcd3.events.PutEvent) else "delete"
                        value = event.value if kind == "put" else b""
                        self._deliver(WatchEvent(kind, event.key.decode(), value, event.mod_revision, event.lease))
                elif isinstance(item, etcd3.exceptions.RevisionCompactedError):
                    raise ResyncRequired(f"etcd compacted history up to revision {item.compacted_revision}")
                else:
                    raise DiscoveryError(f"etcd watch stream from {self._owner.url} broke: {item!r}")
        finally:
            try:
                client.cancel_watch(watch_id)
            except Exception:  # the stream is gone already; nothing to cancel
                pass

    def _interrupt(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.put(_STOP)

    def cancel(self) -> None:
        super().cancel()
        self._owner._forget(self)


class EtcdDiscovery(Discovery):
    """``url``: ``http://host:2379`` or a comma-separated list of a cluster's client URLs."""

    def __init__(self, url: str, *, timeout_s: float = 5.0) -> None:
        self.url = url
        self._timeout_s = timeout_s
        endpoints = parse_etcd_url(url)
        if len(endpoints) == 1:
            host, port = endpoints[0]
            self.client = etcd3.client(host, port, timeout=timeout_s, grpc_options=_GRPC_OPTIONS)
            # After any UNAVAILABLE the library refuses to use a failed endpoint for 300 s (meant
            # for failing over); with only one endpoint that would outlast an etcd restart.
            for endpoint in self.client.endpoints.values():
                endpoint.time_retry = 0.0
        else:
            # Failover moves on from an endpoint that failed and retries it after time_retry.
            self.client = etcd3.MultiEndpointEtcd3Client(
                endpoints=[etcd3.Endpoint(h, p, secure=False, time_retry=2.0, opts=_GRPC_OPTIONS) for h, p in endpoints],
                timeout=timeout_s, failover=True)
        self._lock = threading.Lock()
        self._watches: set[_EtcdWatch] = set()
        self._closed = False

    def put(self, key: str, value: bytes, lease: Lease | None = None) -> None:
        self._etcd(f"put '{key}'", lambda: self.client.put(key, value, lease=_lease_id(lease)))

    def put_if_absent(self, key: str, value: bytes, lease: Lease | None = None) -> bool:
        txn = self.client.transactions

        def attempt():
            succeeded, _ = self.client.transaction(
                compare=[txn.create(key) == 0],
                success=[txn.put(key, value, lease=_lease_id(lease))],
                failure=[],
            )
            return succeeded

        return self._etcd(f"put_if_absent '{key}'", attempt)

    def delete(self, key: str) -> bool:
        return self._etcd(f"delete '{key}'", lambda: self.client.delete(key))

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        response = self._etcd(f"get prefix '{prefix}'", lambda: self.client.get_prefix_response(prefix))
        return {kv.key.decode(): kv.value for kv in response.kvs}

    def grant_lease(self, ttl_s: int) -> Lease:
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise ValidationError(f"lease ttl_s must be a whole number of seconds >= 1, got {ttl_s!r}")
        lease = self._etcd("grant lease", lambda: self.client.lease(ttl_s))
        return EtcdLease(self, lease.id, lease.ttl)

    def watch_prefix(self, prefix: str, callback: WatchCallback) -> Watch:
        self._check_open()
        watch = _EtcdWatch(self, prefix, callback)
        with self._lock:
            self._watches.add(watch)
        return watch.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watches, self._watches = self._watches, set()
        for watch in watches:
            watch.cancel()
        self.client.close()

    def _forget(self, watch: _EtcdWatch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _check_open(self) -> None:
        if self._closed:
            raise DiscoveryError(f"this EtcdDiscovery ({self.url}) is closed; create a new one")

    def _etcd(self, what: str, fn):
        """Run ``fn``, retrying while etcd is unreachable for up to ``timeout_s`` (so an etcd restart
        is as invisible as it is to EmbeddedDiscovery's wait-for-ready calls), mapping errors."""
        self._check_open()
        deadline = time.monotonic() + self._timeout_s
        backoff = Backoff(0.05, 0.5)
        while True:
            try:
                return fn()
            except etcd3.exceptions.RevisionCompactedError as exc:
                raise CompactedError(f"etcd at {self.url}: {what}: history up to revision {exc.compacted_revision} "
                                     "was compacted; resync from current state", exc.compacted_revision) from None
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.NOT_FOUND:  # etcd's "requested lease not found"
                    raise LeaseLostError(f"etcd at {self.url}: {what}: {exc.details()}; grant a new lease") from None
                error = self._unreachable(what, f"{exc.code().name}: {exc.details()}")
                retry = exc.code() == grpc.StatusCode.UNAVAILABLE
            except (etcd3.exceptions.ConnectionFailedError, etcd3.exceptions.NoServerAvailableError) as exc:
                error = self._unreachable(what, str(exc) or type(exc).__name__)
                retry = True
            except etcd3.exceptions.Etcd3Exception as exc:
                error = self._unreachable(what, str(exc) or type(exc).__name__)
                retry = False
            delay = backoff.next()
            if not retry or self._closed or time.monotonic() + delay > deadline:
                raise error
            time.sleep(delay)  # bounded by the deadline checked above

    def _unreachable(self, what: str, why: str) -> DiscoveryError:
        return DiscoveryError(f"etcd at {self.url}: {what} failed ({why}); check that etcd is running and reachable "
                              "there, and [discovery] etcd (STRATA_DISCOVERY_ETCD)")


def _lease_id(lease: Lease | None) -> int:
    return lease.id if lease is not None else 0
