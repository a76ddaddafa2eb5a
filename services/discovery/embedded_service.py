"""DiscoveryServicer: the gRPC edge of a MemoryStore, hosted by the coordinator in embedded mode.

Two conventions on top of discovery.proto, both readable by any gRPC client:
  * every GetPrefix and Watch response carries initial metadata ``strata-discovery-store`` with
    the store's incarnation id, so a client that reconnects can tell a restarted store (whose
    revisions started again) from a brief disconnect;
  * a WatchEvent without ``kv`` is a progress notification: nothing under the prefix changed up
    to its ``revision``. The server sends one first thing on a stream with no history to replay
    (so the client knows the stream is up) and whenever the stream has been idle for
    ``progress_interval_s``, which keeps quiet watchers' resume points current and lets clients
    detect a dead connection by silence.

Each open Watch stream occupies one server worker thread for its lifetime, so the hosting
server's thread pool must be larger than the number of watchers (nodes x watches per node) plus
the unary calls in flight.
"""

from __future__ import annotations

from contextlib import contextmanager

import grpc

from common.errors import ValidationError
from services.discovery.discovery import CompactedError, KeyValue, LeaseLostError
from services.discovery.memory_store import LeaseReaper, MemoryStore
from services.rpc.gen.strata.v1 import discovery_pb2, discovery_pb2_grpc

STORE_ID_METADATA = "strata-discovery-store"


def kv_message(kv: KeyValue) -> discovery_pb2.KeyValue:
    return discovery_pb2.KeyValue(key=kv.key, value=kv.value, lease_id=kv.lease_id, mod_revision=kv.mod_revision)


class DiscoveryServicer(discovery_pb2_grpc.DiscoveryServiceServicer):
    def __init__(self, store: MemoryStore, *, reap_interval_s: float = 0.25, progress_interval_s: float = 2.0) -> None:
        self.store = store
        self._progress_interval_s = progress_interval_s
        self._reaper = LeaseReaper(store, reap_interval_s).start()

    def close(self) -> None:
        """Stop the lease reaper (the server's own stop ends the watch streams)."""
        self._reaper.close()

    def Put(self, request, context):
        with _status(context):
            return discovery_pb2.PutResponse(revision=self.store.put(request.key, request.value, request.lease_id))

    def PutIfAbsent(self, request, context):
        with _status(context):
            created, existing = self.store.put_if_absent(request.key, request.value, request.lease_id)
        response = discovery_pb2.PutIfAbsentResponse(put=created)
        if existing is not None:
            response.existing.CopyFrom(kv_message(existing))
        return response

    def Delete(self, request, context):
        return discovery_pb2.DeleteResponse(deleted=self.store.delete(request.key))

    def GetPrefix(self, request, context):
        context.send_initial_metadata(((STORE_ID_METADATA, self.store.store_id),))
        kvs, revision = self.store.get_prefix(request.key)
        return discovery_pb2.GetPrefixResponse(kvs=[kv_message(kv) for kv in kvs.values()], revision=revision)

    def GrantLease(self, request, context):
        with _status(context):
            lease_id = self.store.grant_lease(request.ttl_seconds)
        return discovery_pb2.LeaseResponse(lease_id=lease_id, ttl_seconds=request.ttl_seconds, alive=True)

    def KeepAlive(self, request, context):
        ttl = self.store.keepalive(request.lease_id)
        return discovery_pb2.LeaseResponse(lease_id=request.lease_id, ttl_seconds=ttl, alive=ttl > 0)

    def RevokeLease(self, request, context):
        self.store.revoke_lease(request.lease_id)
        return discovery_pb2.LeaseResponse(lease_id=request.lease_id, alive=False)

    def Watch(self, request, context):
        context.send_initial_metadata(((STORE_ID_METADATA, self.store.store_id),))
        try:
            watcher = self.store.watch(request.prefix, request.start_revision)
        except CompactedError as exc:
            context.abort(grpc.StatusCode.OUT_OF_RANGE, str(exc))
        # Wakes the loop below as soon as the client cancels or the server stops.
        context.add_callback(watcher.close)
        # The first answer goes out at once (history or a progress notification), so the client
        # knows the stream is up and can read this store's incarnation from the headers.
        wait_s = 0.0
        try:
            while context.is_active() and not watcher.closed:
                try:
                    events, through = watcher.get(wait_s)
                    wait_s = self._progress_interval_s
                except CompactedError as exc:
                    context.abort(grpc.StatusCode.OUT_OF_RANGE, str(exc))
                for event in events:
                    kv = discovery_pb2.KeyValue(key=event.key, value=event.value, lease_id=event.lease_id,
                                                mod_revision=event.revision)
                    kind = discovery_pb2.WatchEvent.PUT if event.type == "put" else discovery_pb2.WatchEvent.DELETE
                    yield discovery_pb2.WatchEvent(type=kind, kv=kv, revision=event.revision)
                if not events and not watcher.closed:
                    yield discovery_pb2.WatchEvent(revision=through)
        finally:
            watcher.close()


@contextmanager
def _status(context):
    """Maps store errors to gRPC status codes that the client maps back (NOT_FOUND: lease lost)."""
    try:
        yield
    except LeaseLostError as exc:
        context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except ValidationError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


def add_to_server(server: grpc.Server, store: MemoryStore, **options) -> DiscoveryServicer:
    """Register a DiscoveryServicer for ``store`` on ``server``; call its ``close()`` at shutdown."""
    servicer = DiscoveryServicer(store, **options)
    discovery_pb2_grpc.add_DiscoveryServiceServicer_to_server(servicer, server)
    return servicer
