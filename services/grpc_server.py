"""GrpcServer: how every role serves gRPC: a thread pool, large-message limits, the standard
health service and server reflection, bound to a host and port (0 picks a free one)."""

from __future__ import annotations

from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from services.query_errors import abort
from services.transport_security import (NO_SECURITY, CredentialClientInterceptor, InternalCredentialInterceptor,
                                         TransportSecurity)

# Results stream in ~1 MiB chunks, but requests (segment lists, SQL) and old clients may be larger.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
# A peer that stops answering without closing its connections (a stopped or wedged process, a
# dead host behind a live network path) would hold a call until its deadline. While calls are
# open, clients ping every KEEPALIVE_MS and drop the connection when no answer comes within
# KEEPALIVE_TIMEOUT_MS, so the call fails as UNAVAILABLE and the caller (the broker's replica
# retry) moves on; a connection whose handshake does not finish within CONNECT_TIMEOUT_MS fails
# the same way. gRPC answers pings from its own threads, so a busy Python process still answers.
KEEPALIVE_MS = 2_000
KEEPALIVE_TIMEOUT_MS = 3_000
CONNECT_TIMEOUT_MS = 3_000
CHANNEL_OPTIONS = MESSAGE_OPTIONS + [
    ("grpc.keepalive_time_ms", KEEPALIVE_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),  # a long query sends no data for a while: keep pinging
    # Any ping unanswered this long ends the connection (the flow-control probe's pings too,
    # which otherwise wait a minute and hold back the keepalive ping behind them).
    ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),  # also gRPC's minimum connect timeout
]
# gRPC turns on SO_REUSEPORT by default on Linux, so a second server on a taken port would bind
# it too and silently take half the connections; a port in use must be an error instead. (Like
# every server, gRPC still binds with SO_REUSEADDR: a port left in TIME_WAIT is free.) Servers
# accept the clients' keepalive pings instead of answering them with GOAWAY "too_many_pings".
SERVER_OPTIONS = MESSAGE_OPTIONS + [
    ("grpc.so_reuseport", 0),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
    ("grpc.http2.max_ping_strikes", 0),
]


class GrpcServer:
    """``security``: TLS when it has a certificate, and the internal credential required on the
    internal services when it has a secret (``also_accept`` may admit other callers, see
    services/transport_security.py)."""

    def __init__(self, host: str, port: int, workers: int = 64, *, security: TransportSecurity = NO_SECURITY,
                 also_accept=None, client_streams: tuple[str, ...] = (), role: str = "server") -> None:
        # Each open watch or result stream holds a worker for its whole life (the embedded
        # discovery service serves one watch per node per prefix), so the pool is generous.
        self.credential = InternalCredentialInterceptor(
            security.internal_secret, also_accept, ca=security.ca if security.mtls else b"") \
            if security.guards_internal else None
        interceptors = [ErrorStatusInterceptor(role), MalformedRequestInterceptor()]
        # Result streams clients open (the broker's Query) are bounded per connection and in all,
        # below the worker count: a stream a client does not read holds a worker until it ends.
        self.client_streams = StreamLimitInterceptor(client_streams, total=max(1, workers * 3 // 4)) \
            if client_streams else None
        if self.client_streams is not None:
            interceptors.append(self.client_streams)
        if self.credential is not None:
            interceptors.append(self.credential)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="strata-grpc"),
                                  options=SERVER_OPTIONS, interceptors=interceptors)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self._services = [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME]
        try:
            if security.serves_tls:
                self.port = self.server.add_secure_port(f"{host}:{port}", security.server_credentials())
            else:
                self.port = self.server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:  # grpc's way of saying the bind failed
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot bind gRPC to {host}:{port}: the port is in use (or the address is not local)")

    def add(self, register, servicer, service_full_name: str) -> None:
        register(servicer, self.server)
        self._services.append(service_full_name)

    def start(self) -> GrpcServer:
        reflection.enable_server_reflection(self._services, self.server)
        self.server.start()
        self.set_serving(True)
        return self

    def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ["", *self._services]:
            self.health.set(name, status)

    def stop(self, grace: float = 1.0) -> None:
        self.set_serving(False)
        self.server.stop(grace).wait(grace + 1)


class ErrorStatusInterceptor(grpc.ServerInterceptor):
    """Every exception a handler lets escape ends its call with the status of its kind
    (common/errors.STATUSES) and a clean message: a user error as its own text, anything else as
    an error id the log has (services/query_errors.py). Without it gRPC answers UNKNOWN
    "Exception calling application" whatever went wrong. A handler that already aborted keeps
    its status. ``role`` names the node in an internal error's message."""

    def __init__(self, role: str) -> None:
        self.role = role
        self._wrapped: dict[str, tuple] = {}  # method -> (its handler, the wrapper): built once

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        cached = self._wrapped.get(handler_call_details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = _mapping_errors(handler, self.role)
        self._wrapped[handler_call_details.method] = (handler, wrapped)
        return wrapped


def _mapping_errors(handler, role: str):
    def fail(context, exc: Exception):
        if context.code() is not None:  # the handler aborted (or set its status) itself
            raise exc
        abort(context, exc, role)

    def unary(behavior):
        def call(request, context):
            try:
                return behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - every failure leaves with a mapped status
                fail(context, exc)
        return call

    def streaming(behavior):
        def call(request, context):
            try:
                yield from behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - every failure leaves with a mapped status
                fail(context, exc)
        return call

    kwargs = {"request_deserializer": handler.request_deserializer,
              "response_serializer": handler.response_serializer}
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), **kwargs)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **kwargs)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), **kwargs)


class _Malformed:
    """What a request deserializes to when its bytes are not the method's message."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class MalformedRequestInterceptor(grpc.ServerInterceptor):
    """A request whose bytes are not the method's protobuf message is the caller's error: gRPC
    itself answers it as INTERNAL "Exception deserializing request!" (and logs a traceback); this
    answers INVALID_ARGUMENT naming the message type instead."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple] = {}  # method -> (its handler, the wrapper): built once

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        cached = self._wrapped.get(handler_call_details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = _tolerant(handler)
        self._wrapped[handler_call_details.method] = (handler, wrapped)
        return wrapped


def _tolerant(handler):
    parse = handler.request_deserializer
    message_type = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)
    name = message_type.full_name if message_type is not None else "request"

    def deserialize(data: bytes):
        try:
            return parse(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, or a string field that is not UTF-8
            return _Malformed(exc)

    def refuse(context, request: _Malformed):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      f"the request is not a valid {name} protobuf message ({type(request.error).__name__}); "
                      "send it with the generated client of protos/strata/v1")

    def unary(behavior):
        def call(request, context):
            if isinstance(request, _Malformed):
                refuse(context, request)
            return behavior(request, context)
        return call

    def streaming(behavior):
        def checked(requests, context):
            for request in requests:
                if isinstance(request, _Malformed):
                    refuse(context, request)
                yield request

        def call(requests, context):
            return behavior(checked(requests, context), context)
        return call

    kwargs = {"request_deserializer": deserialize, "response_serializer": handler.response_serializer}
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(unary(handler.unary_stream), **kwargs)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(streaming(handler.stream_unary), **kwargs)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), **kwargs)


STREAMS_PER_CONNECTION = 16


class StreamLimitInterceptor(grpc.ServerInterceptor):
    """Caps the open calls of ``methods`` (server-streaming) at ``per_connection`` per client
    connection and ``total`` in all; past either, a call fails at once with RESOURCE_EXHAUSTED
    naming the limit. Without it, a client that opens streams and never reads them holds one of
    the server's worker threads each, and once they are all held every other caller waits."""

    def __init__(self, methods: tuple[str, ...], per_connection: int = STREAMS_PER_CONNECTION,
                 total: int = 48) -> None:
        import threading

        self.methods = frozenset(methods)
        self.per_connection, self.total = per_connection, total
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}

    def open_count(self) -> int:
        with self._lock:
            return sum(self._open.values())

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_stream is None or handler_call_details.method not in self.methods:
            return handler
        behavior = handler.unary_stream

        def limited(request, context):
            peer = context.peer()
            refusal = self._acquire(peer)
            if refusal is not None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            try:
                yield from behavior(request, context)
            finally:
                self._release(peer)

        return grpc.unary_stream_rpc_method_handler(limited, request_deserializer=handler.request_deserializer,
                                                    response_serializer=handler.response_serializer)

    def _acquire(self, peer: str) -> str | None:
        with self._lock:
            mine, everyone = self._open.get(peer, 0), sum(self._open.values())
            if mine >= self.per_connection:
                return (f"this connection already has {mine} result streams open, the most one connection may "
                        f"have ({self.per_connection}): read or cancel them, then retry")
            if everyone >= self.total:
                return f"the server has {everyone} result streams open, its limit ({self.total}); retry shortly"
            self._open[peer] = mine + 1
            return None

    def _release(self, peer: str) -> None:
        with self._lock:
            left = self._open.get(peer, 0) - 1
            if left > 0:
                self._open[peer] = left
            else:
                self._open.pop(peer, None)


# For a client that reads server streams on its own thread: without it gRPC starts a thread per
# streaming call (its "channel spin thread"), about 0.8 ms of a small query's time. The key is
# grpc's Python-level option name (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream);
# a core-style "grpc.experimental.*" key is passed to C core, which ignores it.
SINGLE_THREADED_STREAMS = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]


def channel(target: str, security: TransportSecurity = NO_SECURITY, options=None) -> grpc.Channel:
    """A channel to ``target``: TLS when ``security`` says so, and the internal credential on every
    call when it has one."""
    options = CHANNEL_OPTIONS if options is None else options
    if security.tls:
        ch = grpc.secure_channel(target, security.channel_credentials(), options=options)
    else:
        ch = grpc.insecure_channel(target, options=options)
    metadata = security.call_metadata()
    return grpc.intercept_channel(ch, CredentialClientInterceptor(metadata)) if metadata else ch
