"""TransportSecurity: how one node secures its connections: TLS on gRPC, Flight and HTTP, and the
cluster's internal credential on the RPCs nodes make to each other.

TLS is on when ``[tls] cert`` and ``key`` are set (PEM text; ``cert_file``/``key_file`` in the TOML
or ``STRATA_TLS_CERT_FILE``/``STRATA_TLS_KEY_FILE`` read it from files, like any key). ``ca`` is
the PEM bundle clients verify servers with (empty: the system's roots); a node with only ``ca``
set (a client) still speaks TLS. Every node of a cluster must agree, since servers then accept
only TLS.

The internal credential: with ``[auth] enabled``, the historical's HistoricalService and the
coordinator's CoordinatorService and DiscoveryService answer only calls carrying
``x-strata-internal: <secret>`` (or, on the coordinator, the admin's own credentials, so the
admin's command line keeps working). Users reach data only through the broker, which checks their
grants; calling a historical's RunQuery or the coordinator's PublishSegments directly is refused
with UNAUTHENTICATED. The secret is ``[auth] internal_secret`` (give it by file or environment);
when unset it is derived from the admin password, which every node of an authenticated cluster
already shares.

mTLS (``[tls] mtls = true``, with cert, key and ca set): every node presents its own certificate
as a client certificate on the connections it opens. The historicals' and the coordinator's gRPC
servers serve only the cluster, so they require one at the TLS handshake and verify it against
``ca``: a client without a certificate, or with one another CA signed, cannot connect at all.
(gRPC's Python servers can require a client certificate or not ask for one; they cannot ask and
let a client without one in, so the broker, which users reach, asks for none: its gRPC and Flight
services authenticate users by password and it serves no internal service.) With ``[auth]
enabled`` the certificate is the internal credential: the interceptor admits a call whose
connection carries a certificate the CA signed, and no shared secret is derived from the admin
password (an ``internal_secret`` set explicitly is still accepted, for a rolling change from the
secret to certificates). Users' and the admin's own command-line calls to the coordinator present
a certificate too (STRATA_TLS_CERT_FILE and STRATA_TLS_KEY_FILE, with STRATA_TLS_CA_FILE), and still
send their password, which the coordinator's task and catalog calls check as before. Since any
certificate this CA signs opens the internal services, the CA signs only nodes and operators.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from common.errors import ValidationError

log = logging.getLogger(__name__)

INTERNAL_METADATA = "x-strata-internal"
# The services only other nodes may call (health, reflection, the broker and the catalog, which
# authorize users themselves, stay open).
INTERNAL_SERVICES = ("/strata.v1.HistoricalService/", "/strata.v1.CoordinatorService/",
                     "/strata.v1.DiscoveryService/")


@dataclass(frozen=True)
class TransportSecurity:
    cert: bytes = field(default=b"", repr=False)
    key: bytes = field(default=b"", repr=False)
    ca: bytes = field(default=b"", repr=False)
    internal_secret: str = field(default="", repr=False)  # "" = internal calls carry no credential
    client_tls: bool = False  # a client of TLS servers trusting the system's roots (no ca)
    mtls: bool = False  # present cert/key as a client certificate; servers ask for and verify one
    auth: bool = False  # [auth] enabled: the internal services need the internal credential
    require_client_cert: bool = False  # mTLS on a historical or the coordinator: no certificate, no connection

    @property
    def guards_internal(self) -> bool:
        """Whether this node's servers refuse the internal services to callers without the
        internal credential (the shared secret, or with mTLS a client certificate)."""
        return bool(self.internal_secret) or (self.mtls and self.auth)

    @property
    def tls(self) -> bool:
        """Whether connections use TLS (this node serves it, or as a client was given a CA)."""
        return bool(self.cert or self.ca or self.client_tls)

    @property
    def serves_tls(self) -> bool:
        return bool(self.cert and self.key)

    # ---- gRPC --------------------------------------------------------------------------------
    def server_credentials(self) -> grpc.ServerCredentials:
        if self.require_client_cert:
            return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                               require_client_auth=True)
        return grpc.ssl_server_credentials([(self.key, self.cert)])

    def channel_credentials(self) -> grpc.ChannelCredentials:
        if self.mtls and self.cert and self.key:
            return grpc.ssl_channel_credentials(root_certificates=self.ca or None, private_key=self.key,
                                                certificate_chain=self.cert)
        return grpc.ssl_channel_credentials(root_certificates=self.ca or None)

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((INTERNAL_METADATA, self.internal_secret),) if self.internal_secret else ()

    # ---- Flight and HTTP ---------------------------------------------------------------------
    def flight_location(self, host: str, port: int) -> str:
        return f"{'grpc+tls' if self.serves_tls else 'grpc'}://{host}:{port}"

    @property
    def http_scheme(self) -> str:
        return "https" if self.tls else "http"

    def http_server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # The ssl module loads a certificate chain only from files: a private temporary copy,
        # removed as soon as it is read.
        with tempfile.TemporaryDirectory(prefix="strata-tls-") as tmp:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            for path, data in ((cert, self.cert), (key, self.key)):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                    f.write(data)
            try:
                context.load_cert_chain(cert, key)
            except ssl.SSLError as exc:
                raise ValidationError(f"config [tls]: cert/key are not a PEM certificate and its private key ({exc})") from None
        return context

    def http_client_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context()
        if self.ca:
            context.load_verify_locations(cadata=self.ca.decode())
        return context


NO_SECURITY = TransportSecurity()


def transport_security_from_config(config) -> TransportSecurity:
    """From ``[tls]`` and ``[auth]``; ValidationError when only one of cert and key is set, or when
    auth is on with neither an internal secret nor an admin password to derive it from."""
    tls, auth = config.tls, config.auth
    if bool(tls.cert) != bool(tls.key):
        raise ValidationError("config [tls]: set both cert and key (cert_file/key_file: PEM files) or neither")
    mtls = bool(getattr(tls, "mtls", False))
    if mtls and not (tls.cert and tls.key and tls.ca):
        raise ValidationError("config [tls]: mtls needs cert, key and ca (the node's certificate, which must allow "
                              "client authentication, and the cluster's CA that signed every node's)")
    secret = ""
    if auth.enabled and mtls:
        secret = auth.internal_secret  # the certificate is the credential; a secret only when given
    elif auth.enabled:
        secret = auth.internal_secret or _derived_secret(auth.admin_password)
        if not secret:
            raise ValidationError("config [auth]: enabled needs internal_secret (or admin_password) on every node; "
                                  "set STRATA_AUTH_INTERNAL_SECRET or STRATA_AUTH_INTERNAL_SECRET_FILE")
    return TransportSecurity(tls.cert.encode(), tls.key.encode(), tls.ca.encode(), secret, mtls=mtls,
                             auth=bool(auth.enabled),
                             require_client_cert=mtls and getattr(config, "role", "") in ("coordinator", "historical"))


def transport_security_from_env(env=None) -> TransportSecurity:
    """A command-line client's view: the CA bundle in STRATA_TLS_CA_FILE (TLS on when set), and with
    STRATA_TLS_CERT_FILE and STRATA_TLS_KEY_FILE a client certificate (an mTLS cluster's coordinator
    takes no connection without one)."""
    env = os.environ if env is None else env
    path = env.get("STRATA_TLS_CA_FILE", "")
    if not path:
        return NO_SECURITY
    ca = _read_file("STRATA_TLS_CA_FILE", path)
    cert_path, key_path = env.get("STRATA_TLS_CERT_FILE", ""), env.get("STRATA_TLS_KEY_FILE", "")
    if bool(cert_path) != bool(key_path):
        raise ValidationError("STRATA_TLS_CERT_FILE and STRATA_TLS_KEY_FILE: set both (a client certificate and "
                              "its key) or neither")
    if not cert_path:
        return TransportSecurity(ca=ca)
    # A client serves nothing: the certificate is only presented, as with mTLS.
    return TransportSecurity(cert=_read_file("STRATA_TLS_CERT_FILE", cert_path),
                             key=_read_file("STRATA_TLS_KEY_FILE", key_path), ca=ca, mtls=True)


def _read_file(variable: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValidationError(f"{variable}: cannot read '{path}' ({exc.strerror or exc})") from None


# A task process the coordinator starts reaches it with the coordinator's own view (the secret
# never goes on a command line; the child's environment is private to this user).
_TASK_SECRET_ENV, _TASK_TLS_ENV, _TASK_CA_ENV = "STRATA_TASK_INTERNAL_SECRET", "STRATA_TASK_TLS", "STRATA_TASK_TLS_CA"
_TASK_CERT_ENV, _TASK_KEY_ENV = "STRATA_TASK_TLS_CERT", "STRATA_TASK_TLS_KEY"  # mTLS: the node's client certificate


def task_env(security: TransportSecurity) -> dict[str, str]:
    env = {}
    if security.internal_secret:
        env[_TASK_SECRET_ENV] = security.internal_secret
    if security.tls:
        env[_TASK_TLS_ENV] = "1"
        env[_TASK_CA_ENV] = security.ca.decode()
    if security.mtls:
        env[_TASK_CERT_ENV], env[_TASK_KEY_ENV] = security.cert.decode(), security.key.decode()
    return env


def transport_security_for_task(env=None) -> TransportSecurity:
    env = os.environ if env is None else env
    cert, key = env.get(_TASK_CERT_ENV, "").encode(), env.get(_TASK_KEY_ENV, "").encode()
    # A task process serves nothing: with mTLS it only presents the coordinator's certificate.
    return TransportSecurity(ca=env.get(_TASK_CA_ENV, "").encode(), internal_secret=env.get(_TASK_SECRET_ENV, ""),
                             client_tls=env.get(_TASK_TLS_ENV) == "1", mtls=bool(cert and key), cert=cert, key=key)


def _derived_secret(admin_password: str) -> str:
    if not admin_password:
        return ""
    return hmac.new(b"strata-internal-credential", admin_password.encode(), hashlib.sha256).hexdigest()


# ---- the server side of the internal credential -----------------------------------------------
class InternalCredentialInterceptor(grpc.ServerInterceptor):
    """Refuses calls to INTERNAL_SERVICES without the internal credential (UNAUTHENTICATED): the
    shared ``secret`` in the call's metadata, or (``ca`` given, for mTLS) a client certificate that
    CA signed on the call's connection. ``also_accept(method, metadata)`` may admit a caller by
    other credentials (the coordinator: its admin, and users on the task calls it authorizes
    itself)."""

    def __init__(self, secret: str, also_accept: Callable[[str, dict], bool] | None = None, *,
                 ca: bytes = b"") -> None:
        self._secret = secret.encode()
        self._also_accept = also_accept
        self._ca = _ca_certificates(ca) if ca else ()

    def _admitted(self, method: str, metadata: dict) -> bool:
        if self.internal(metadata):
            return True
        if self._also_accept is not None:
            try:
                return bool(self._also_accept(method, metadata))
            except Exception:  # wrong credentials are simply not admitted
                return False
        return False

    def internal(self, metadata: dict) -> bool:
        """Whether the call carries the internal secret (``metadata`` keys in lower case)."""
        given = metadata.get(INTERNAL_METADATA)
        return bool(self._secret) and given is not None and hmac.compare_digest(given.encode(), self._secret)

    def certified(self, context) -> bool:
        """Whether the call came with a client certificate the cluster's CA signed (mTLS)."""
        if not self._ca:
            return False
        try:
            pems = (context.auth_context() or {}).get("x509_pem_cert") or ()
        except Exception:  # noqa: BLE001 - no TLS on this call: no certificate
            return False
        return any(_signed_by(bytes(pem), self._ca) for pem in pems)

    def internal_call(self, context) -> bool:
        """Whether a running call holds the internal credential, either kind."""
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        return self.internal(metadata) or self.certified(context)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or not handler_call_details.method.startswith(INTERNAL_SERVICES):
            return handler
        metadata = {k.lower(): v for k, v in (handler_call_details.invocation_metadata or ())}
        if self._admitted(handler_call_details.method, metadata):
            return handler
        if self._ca:  # the certificate is known only once the call runs
            return _certificate_checked(handler, handler_call_details.method, self.certified)
        return _refusing(handler, handler_call_details.method)


def _ca_certificates(pem: bytes) -> tuple:
    from cryptography import x509

    try:
        return tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as exc:
        raise ValidationError(f"config [tls]: ca is not a PEM certificate bundle ({exc})") from None


@functools.lru_cache(maxsize=256)
def _signed_by(pem: bytes, cas: tuple) -> bool:
    """gRPC already verified the chain in the handshake; checked again here so that a server
    configured to request but not verify certificates could never admit a stranger."""
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return False
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
            return True
        except Exception:  # noqa: BLE001 - not this CA (wrong issuer or signature)
            continue
    return False


def _certificate_checked(handler, method: str, certified: Callable):
    """``handler`` run only for a call whose connection presented the cluster's certificate."""
    message = (f"{method} is internal to the cluster: it needs a client certificate from the cluster's CA "
               "(or the internal credential); query through the broker")

    def guard(behavior, streaming_response: bool):
        def call(request, context):
            if not certified(context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            return behavior(request, context)

        def call_streaming(request, context):
            if not certified(context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield from behavior(request, context)

        return call_streaming if streaming_response else call

    kwargs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(guard(handler.unary_unary, False), **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(guard(handler.unary_stream, True), **kwargs)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(guard(handler.stream_unary, False), **kwargs)
    return grpc.stream_stream_rpc_method_handler(guard(handler.stream_stream, True), **kwargs)


def _refusing(handler, method: str):
    message = (f"{method} is internal to the cluster: it needs the cluster's internal credential; "
               "query through the broker")

    def refuse(_request, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    kwargs = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse, **kwargs)
    return grpc.unary_unary_rpc_method_handler(refuse, **kwargs)


# ---- the client side ---------------------------------------------------------------------------
class _ClientCallDetails(grpc.ClientCallDetails):
    def __init__(self, details, metadata) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)


class CredentialClientInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the internal credential to every call on a channel."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _details(self, details):
        return _ClientCallDetails(details, tuple(details.metadata or ()) + self._metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)
