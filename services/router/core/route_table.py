"""Where the router sends a request, as Druid's router does, and which requests it refuses.

    /druid/v2/*            a broker (SQL, native queries, datasource listings)
    /druid/indexer/*       a broker: strata serves Druid's task API (the overlord's) there, but
                           /druid/indexer/v1/supervisor* (Kafka supervisors) and a task's log
                           (/druid/indexer/v1/task/{id}/log, the file its process wrote) are the
                           leading coordinator's
    /druid/coordinator/*   the leading coordinator
    /proxy/coordinator/*   the leading coordinator, with the /proxy/coordinator prefix dropped
    /proxy/overlord/*      the task API's holder (a broker), with the /proxy/overlord prefix dropped
    anything else          the console's static files

Pure: no sockets; the router's main module turns a ``Route`` into a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

BROKER = "broker"
COORDINATOR = "coordinator"

# (path prefix, upstream role, prefix dropped before forwarding); longest first.
_TABLE = (
    ("/proxy/coordinator/", COORDINATOR, "/proxy/coordinator"),
    ("/proxy/overlord/", BROKER, "/proxy/overlord"),
    ("/druid/coordinator/", COORDINATOR, ""),
    ("/druid/indexer/", BROKER, ""),
    ("/druid/v2/", BROKER, ""),
)

# Hop-by-hop headers (RFC 9110 7.6.1) are the connection's, never forwarded; the rest of the
# dropped ones are set by each HTTP endpoint itself (the authenticated user, the peer address)
# and must not be taken from a client through the router.
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "x-strata-user", "x-strata-remote-address",
})
# Of an upstream answer: its framing is the router's own (it re-chunks streamed bodies).
_NOT_RETURNED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "content-type",
                           "date", "server", "www-authenticate"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Route:
    role: str  # BROKER or COORDINATOR
    path: str  # the path the upstream sees


# The overlord's paths strata serves on the coordinator rather than the broker: supervisors run
# as a leader duty there (services/coordinator/supervisor_http.py).
_SUPERVISORS = "/druid/indexer/v1/supervisor"
_TASK = "/druid/indexer/v1/task/"


def _coordinators(upstream: str) -> bool:
    if upstream == _SUPERVISORS or upstream.startswith((_SUPERVISORS + "/", _SUPERVISORS + "?")):
        return True
    parts = upstream.split("?", 1)[0][len(_TASK):].split("/") if upstream.startswith(_TASK) else []
    return len(parts) == 2 and parts[1] == "log"


def route_for(path: str) -> Route | None:
    """The upstream serving ``path``, or None when the console's files answer it."""
    for prefix, role, dropped in _TABLE:
        if path.startswith(prefix) or path == prefix.rstrip("/"):
            upstream = path[len(dropped):] or "/"
            if _coordinators(upstream):
                role = COORDINATOR
            return Route(role, upstream)
    return None


def forwarded_headers(headers: dict) -> dict:
    """The request headers an upstream gets: Authorization passes through unchanged (the upstream
    authenticates and authorizes with the cluster's users and grants, as if called directly)."""
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}


def returned_headers(headers: list[tuple[str, str]], request_headers: dict) -> dict:
    """The upstream answer's headers the client gets. To the console (it sends X-Requested-With)
    a 401 comes without its WWW-Authenticate challenge (None: HttpEndpoint sends none), so the
    browser never opens its own login dialog over the console's; other clients get the challenge."""
    out = {k: v for k, v in headers if k.lower() not in _NOT_RETURNED}
    challenge = [v for k, v in headers if k.lower() == "www-authenticate"]
    if any(k.lower() == "x-requested-with" for k in request_headers):
        out["WWW-Authenticate"] = None
    elif challenge:
        out["WWW-Authenticate"] = challenge[0]
    return out


def cross_site_refusal(method: str, headers: dict) -> str | None:
    """Why a state-changing request is refused as a cross-site one (None: it may go through).

    A browser sends the session's credentials with a form another site posts; such a request
    carries an ``Origin`` (or ``Sec-Fetch-Site: cross-site``) that is not this router. Clients
    that are not browsers (curl, pydruid) send neither, and pass. The console also sends
    ``X-Requested-With``, which a cross-site form cannot set without a CORS preflight the router
    never grants."""
    if method.upper() in SAFE_METHODS:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if lower.get("sec-fetch-site", "").lower() == "cross-site":
        return "a cross-site request may not change anything (Sec-Fetch-Site: cross-site)"
    origin = lower.get("origin")
    if origin is None:
        return None
    host = lower.get("host", "")
    parts = urlsplit(origin)
    if origin == "null" or not parts.netloc or parts.netloc.lower() != host.lower():
        return (f"a {method.upper()} from origin {origin[:100]!r} is refused: only pages served by this router "
                f"({host or 'its own host'}) may change anything")
    return None
