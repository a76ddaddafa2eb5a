"""BrokerService.CancelQuery: end a running query by id (as ``KILL QUERY 'id'``), as a mixin of the
broker's gRPC servicer, so the query path's edge (server.py) stays as it is."""

from __future__ import annotations

from common.errors import NotFoundError, UnsupportedError, ValidationError
from services.rpc.gen.strata.v1 import broker_pb2


class QueryControl:
    queries = None  # the QueryRegistry (services/broker/query_registry.py), set by the broker's wiring
    authorizer = None

    def CancelQuery(self, request, context):
        # Errors leave with their kind's status (services/grpc_server.ErrorStatusInterceptor).
        user = None
        if self.authorizer is not None and self.authorizer.enabled:
            user = self.authorizer.user_from_headers(context.invocation_metadata())
        if self.queries is None:
            raise UnsupportedError("this broker keeps no query registry")
        try:
            return broker_pb2.CancelQueryResponse(message=self.queries.kill(request.query_id, user))
        except ValidationError as exc:  # no such running query
            raise NotFoundError(str(exc)) from None


__all__ = ["QueryControl"]
