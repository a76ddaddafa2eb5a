"""CallOrigin: where a query came from, as its front door saw the call.

Each front door (Arrow Flight / Flight SQL, the gRPC BrokerService, Druid's HTTP API and its
statements API) builds one for the call it serves and puts it on the ``QueryRequest``; the front
door hands it to the SQL and native backends with the statement, and the query log's wrappers
(``logged_backends``) give it to the query registry, which records it in ``sys.queries`` and the
query log. Nothing per call is ambient (issue 24): a query run on another thread (a stream's
producer, a Flight prefetch, an asynchronous statement) carries its origin in its request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class QueryIdReply(Protocol):
    """What answers the call with the id of the query it ran (Flight: the call's middleware, which
    sends it as the ``x-strata-query-id`` header)."""

    query_id: str | None


@dataclass(frozen=True)
class CallOrigin:
    protocol: str  # "flight", "grpc" or "http"
    remote_address: str | None = None
    user: str | None = None
    # The call's reply when it can still name the query it runs (Flight: a DoGet's middleware,
    # whose headers leave with the first batch); None when the id was sent already or goes back
    # another way (gRPC initial metadata, an HTTP response header).
    reply: QueryIdReply | None = None

    def without_reply(self) -> CallOrigin:
        """The same caller for a run whose outcome another call answers (a Flight prefetch)."""
        return CallOrigin(self.protocol, self.remote_address, self.user)


__all__ = ["CallOrigin", "QueryIdReply"]
