"""BrokerService.CancelQuery: end a running query by id (as ``KILL QUERY 'id'``), as a mixin of the
broker's gRPC servicer, so the query path's edge (server.py) stays as it is."""

from __future__ import annotations

import grpc

from common.errors import StrataError, ValidationError
from services.rpc.gen.strata.v1 import broker_pb2


class QueryControl:
    queries = None  # the QueryRegistry (services/broker/query_registry.py), set by the broker's wiring
    authorizer = None

    def CancelQuery(self, request, context):
        from services.security.authorizer import Unauthenticated

        try:
            user = None
            if self.authorizer is not None and self.authorizer.enabled:
                user = self.authorizer.user_from_headers(context.invocation_metadata())
            if self.queries is None:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "this broker keeps no query registry")
            return broker_pb2.CancelQueryResponse(message=self.queries.kill(request.query_id, user))
        except Unauthenticated as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except ValidationError as exc:  # no such running query
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except StrataError as exc:
            context.abort(grpc.StatusCode.INTERNAL, str(exc))


__all__ = ["QueryControl"]
