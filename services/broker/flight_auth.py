"""Authentication for the broker's Arrow Flight server: basic credentials in, bearer token out.

Clients present ``authorization: Basic base64(user:password)`` once (pyarrow's
``authenticate_basic_token`` and the ADBC driver do it in a Handshake call). The pluggable
``authenticate(user, password) -> bool`` decides; on success the reply carries
``authorization: Bearer <token>``, which the client sends on every later call. Tokens are random,
live in memory and slide: each use pushes the expiry out again.

With no ``authenticate`` callable everybody is let in as user None, but a Handshake still answers
with a (meaningless) bearer token, because clients configured with credentials insist on one.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Callable

import pyarrow.flight as flight

from common.bounded_cache import BoundedCache
from services.broker.query_origin import QUERY_ID_HEADER

Authenticate = Callable[[str, str], bool]


class BearerTokens:
    """Issued tokens -> user, with sliding expiry and a cap on how many are kept."""

    def __init__(self, ttl_s: float = 3600.0, max_tokens: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_tokens = max_tokens
        self._tokens = BoundedCache(max_tokens, ttl_s=ttl_s, sliding=True, clock=clock)  # token -> (user,)

    def issue(self, user: str | None) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens.put(token, (user,))
        return token

    def user_of(self, token: str) -> tuple[bool, str | None]:
        """(valid, user); a valid token's expiry moves out by the TTL."""
        hit = self._tokens.get(token)
        return (False, None) if hit is None else (True, hit[0])

    def revoke(self, token: str) -> None:
        self._tokens.pop(token)


class CallIdentity(flight.ServerMiddleware):
    """Per call: who is calling (``user``), their session (``token``), and the headers to send back:
    the bearer token after a Handshake, and ``query_id`` (set by the query log, see query_origin)
    as the query id header. One middleware does both: each Python middleware costs every Flight
    call three calls from C++ into Python."""

    def __init__(self, user: str | None, token: str | None, send_token: bool) -> None:
        self.user = user
        self.token = token
        self._send_token = send_token
        self.query_id: str | None = None

    def sending_headers(self):
        headers = {"authorization": f"Bearer {self.token}"} if self._send_token and self.token else {}
        if self.query_id:
            headers[QUERY_ID_HEADER] = self.query_id
        return headers


class BasicAuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    def __init__(self, authenticate: Authenticate | None, tokens: BearerTokens) -> None:
        self._authenticate = authenticate
        self.tokens = tokens

    def start_call(self, info, headers):
        scheme, credentials = _authorization(headers)
        handshake = info.method == flight.FlightMethod.HANDSHAKE
        if scheme == "basic":
            user, password = _decode_basic(credentials)
            if self._authenticate is None:
                # Nothing to check, nothing to remember: the token only satisfies the client.
                return CallIdentity(None, secrets.token_urlsafe(32) if handshake else None, send_token=handshake)
            if not self._authenticate(user, password):
                raise flight.FlightUnauthenticatedError(f"invalid user name or password for '{user}'")
            # Only a Handshake mints a token: clients that send basic credentials on every call
            # would otherwise fill the token table.
            return CallIdentity(user, self.tokens.issue(user) if handshake else None, send_token=handshake)
        if scheme == "bearer":
            valid, user = self.tokens.user_of(credentials)
            if valid:
                return CallIdentity(user, credentials, send_token=False)
            if self._authenticate is not None:
                raise flight.FlightUnauthenticatedError(
                    "bearer token unknown or expired; authenticate again with basic credentials "
                    "(Handshake, e.g. authenticate_basic_token or the ADBC username/password options)")
        if self._authenticate is None:
            return CallIdentity(None, None, send_token=False)
        if handshake:
            raise flight.FlightUnauthenticatedError(
                "Handshake needs an 'authorization: Basic <base64 user:password>' header")
        raise flight.FlightUnauthenticatedError(
            "authentication required: send 'authorization: Basic ...' credentials or the bearer "
            "token a Handshake returned")


class HeaderAuthHandler(flight.ServerAuthHandler):
    """Lets Handshake succeed: the middleware above does the real work from headers, but pyarrow
    refuses Handshake outright when no auth handler is installed."""

    def authenticate(self, outgoing, incoming):
        pass

    def is_valid(self, token):
        return ""


def _authorization(headers: dict) -> tuple[str | None, str]:
    values = headers.get("authorization") or []
    if not values:
        return None, ""
    value = values[0].decode() if isinstance(values[0], bytes) else values[0]
    scheme, _, credentials = value.strip().partition(" ")
    return scheme.lower(), credentials.strip()


def _decode_basic(credentials: str) -> tuple[str, str]:
    # Go's Flight client encodes without '=' padding; restore it before decoding.
    padded = credentials + "=" * (-len(credentials) % 4)
    try:
        text = base64.b64decode(padded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise flight.FlightUnauthenticatedError(
            "malformed basic credentials: expected base64 of 'user:password'") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise flight.FlightUnauthenticatedError("malformed basic credentials: no ':' between user and password")
    return user, password
