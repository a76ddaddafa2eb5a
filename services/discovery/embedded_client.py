"""EmbeddedDiscovery: the Discovery interface over gRPC to the coordinator's DiscoveryServicer.

Unary calls wait for the channel to be ready up to ``timeout_s`` (so a coordinator restart that
takes less than that is invisible) and then raise DiscoveryError. Watches are server streams
that reconnect with backoff and resume after the last revision they delivered; when the store
they reconnect to is a new incarnation (see STORE_ID_METADATA) they resync from its state.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time

import grpc

from common.errors import ValidationError
from services.discovery.discovery import (
    Discovery,
    DiscoveryError,
    KeyValue,
    Lease,
    LeaseLostError,
    Watch,
    WatchCallback,
    WatchEvent,
)
from services.discovery.embedded_service import STORE_ID_METADATA
from services.discovery.resumable_watch import ResumableWatch, ResyncRequired
from services.grpc_server import channel
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.gen.strata.v1 import discovery_pb2, discovery_pb2_grpc

log = logging.getLogger("strata.discovery")

# gRPC's default reconnect backoff grows to 2 minutes; a restarted coordinator should be found
# again in about a second.
# Transparent retries are off: with them (grpc 1.85), a stream started as the server goes away
# can end UNAVAILABLE without ever completing its pending reads, so the reading thread blocks
# forever and not even cancel() frees it. Every caller here retries on its own.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.enable_retries", 0),
]


class EmbeddedLease(Lease):
    def __init__(self, client: "EmbeddedDiscovery", lease_id: int, ttl_s: int) -> None:
        self._client = client
        self.id = lease_id
        self.ttl_s = ttl_s

    def refresh(self) -> None:
        response = self._client._call("KeepAlive", self._client._stub.KeepAlive,
                                      discovery_pb2.LeaseRequest(lease_id=self.id))
        if not response.alive:
            raise LeaseLostError(f"lease {self.id:#x} is gone from the embedded store at {self._client.target} "
                                 "(expired, revoked, or the coordinator restarted); grant a new lease")

    def revoke(self) -> None:
        self._client._call("RevokeLease", self._client._stub.RevokeLease, discovery_pb2.LeaseRequest(lease_id=self.id))


class _EmbeddedWatch(ResumableWatch):
    def __init__(self, client: "EmbeddedDiscovery", prefix: str, callback: WatchCallback) -> None:
        super().__init__(prefix, callback, backend=f"embedded discovery at {client.target}")
        self._client = client
        self._store_id: str | None = None
        self._lock = threading.Lock()
        self._call = None
        self.last_message = time.monotonic()

    def _snapshot(self) -> tuple[dict[str, KeyValue], int]:
        response, call = self._client._call("GetPrefix", self._client._stub.GetPrefix.with_call,
                                            discovery_pb2.KeyRequest(key=self.prefix))
        self._store_id = dict(call.initial_metadata() or ()).get(STORE_ID_METADATA)
        kvs = {kv.key: KeyValue(kv.key, kv.value, kv.lease_id, 0, kv.mod_revision) for kv in response.kvs}
        return kvs, response.revision

    def _follow(self, start_revision: int) -> None:
        call = self._client._stub.Watch(discovery_pb2.WatchRequest(prefix=self.prefix, start_revision=start_revision))
        with self._lock:
            self._call = call
            self.last_message = time.monotonic()
            if self.cancelled:
                call.cancel()
        try:
            # The server answers at once (events or a progress notification). Only after a message
            # is it safe to read the headers: initial_metadata() never returns for a call that
            # failed before the server sent any.
            first = next(call)
            store_id = dict(call.initial_metadata() or ()).get(STORE_ID_METADATA)
            if store_id != self._store_id:
                call.cancel()
                raise ResyncRequired(f"the embedded store at {self._client.target} restarted "
                                     f"(incarnation {self._store_id} -> {store_id})")
            self._connected()
            for message in itertools.chain([first], call):
                self.last_message = time.monotonic()
                if not message.HasField("kv"):
                    self._progress(message.revision)
                    continue
                kind = "put" if message.type == discovery_pb2.WatchEvent.PUT else "delete"
                self._deliver(WatchEvent(kind, message.kv.key, message.kv.value, message.revision,
                                         message.kv.lease_id))
            raise DiscoveryError(f"watch stream from {self._client.target} was closed by the server")
        except StopIteration:
            raise DiscoveryError(f"watch stream from {self._client.target} ended before it started") from None
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.OUT_OF_RANGE:
                raise ResyncRequired(exc.details()) from None
            raise DiscoveryError(f"watch stream from {self._client.target} broke: "
                                 f"{exc.code().name}: {exc.details()}") from None
        finally:
            with self._lock:
                self._call = None

    def _interrupt(self) -> None:
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def cancel(self) -> None:
        super().cancel()
        self._client._forget(self)

    def cancel_if_idle(self, idle_timeout_s: float) -> None:
        """A stream silent for longer than the server's progress interval is dead (e.g. the
        coordinator's host vanished without closing the connection); cancelling makes it reconnect."""
        with self._lock:
            if self._call is not None and time.monotonic() - self.last_message > idle_timeout_s:
                log.warning("watch on '%s': no message from %s for %.0fs; reconnecting", self.prefix,
                            self._client.target, idle_timeout_s)
                self._call.cancel()


class EmbeddedDiscovery(Discovery):
    """``target`` is the coordinator's gRPC ``host:port``. ``watch_idle_timeout_s`` must exceed the
    server's progress interval (2s by default)."""

    def __init__(self, target: str, *, timeout_s: float = 5.0, watch_idle_timeout_s: float = 10.0,
                 security: TransportSecurity = NO_SECURITY) -> None:
        if not target or ":" not in target:
            raise ValidationError(f"embedded discovery target must be host:port (the coordinator's gRPC port), "
                                  f"got {target!r}; set [discovery] coordinator")
        self.target = target
        self._timeout_s = timeout_s
        self._idle_timeout_s = watch_idle_timeout_s
        self._channel = channel(target, security, options=_CHANNEL_OPTIONS)  # TLS, internal credential
        self._stub = discovery_pb2_grpc.DiscoveryServiceStub(self._channel)
        self._lock = threading.Lock()
        self._watches: set[_EmbeddedWatch] = set()
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None

    def put(self, key: str, value: bytes, lease: Lease | None = None) -> None:
        self._call("Put", self._stub.Put, discovery_pb2.PutRequest(key=key, value=value, lease_id=_lease_id(lease)))

    def put_if_absent(self, key: str, value: bytes, lease: Lease | None = None) -> bool:
        response = self._call("PutIfAbsent", self._stub.PutIfAbsent,
                              discovery_pb2.PutRequest(key=key, value=value, lease_id=_lease_id(lease)))
        return response.put

    def delete(self, key: str) -> bool:
        return self._call("Delete", self._stub.Delete, discovery_pb2.KeyRequest(key=key)).deleted > 0

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        response = self._call("GetPrefix", self._stub.GetPrefix, discovery_pb2.KeyRequest(key=prefix))
        return {kv.key: kv.value for kv in response.kvs}

    def grant_lease(self, ttl_s: int) -> Lease:
        response = self._call("GrantLease", self._stub.GrantLease, discovery_pb2.GrantLeaseRequest(ttl_seconds=ttl_s))
        return EmbeddedLease(self, response.lease_id, response.ttl_seconds)

    def watch_prefix(self, prefix: str, callback: WatchCallback) -> Watch:
        self._check_open()
        watch = _EmbeddedWatch(self, prefix, callback)
        with self._lock:
            self._watches.add(watch)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch_dog, name="strata-discovery-watchdog",
                                                  daemon=True)
                self._watchdog.start()
        return watch.start()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            watches, self._watches = self._watches, set()
        for watch in watches:
            watch.cancel()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5)
        self._channel.close()

    def _forget(self, watch: _EmbeddedWatch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _watch_dog(self) -> None:
        while not self._closed.wait(1.0):
            with self._lock:
                watches = list(self._watches)
            for watch in watches:
                watch.cancel_if_idle(self._idle_timeout_s)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise DiscoveryError(f"this EmbeddedDiscovery ({self.target}) is closed; create a new one")

    def _call(self, what: str, method, request):
        self._check_open()
        try:
            return method(request, timeout=self._timeout_s, wait_for_ready=True)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()
            if code == grpc.StatusCode.NOT_FOUND:
                raise LeaseLostError(details) from None
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise ValidationError(details) from None
            raise DiscoveryError(
                f"embedded discovery at {self.target}: {what} failed ({code.name}: {details}); check that the "
                "coordinator is running and that [discovery] coordinator (STRATA_DISCOVERY_COORDINATOR) is its "
                "gRPC host:port") from None


def _lease_id(lease: Lease | None) -> int:
    return lease.id if lease is not None else 0
