"""The broker's gRPC edge: BrokerService.Query streams a query's result as Arrow IPC chunks.

Queries go through the QueryFrontDoor, as Flight's do: the same authorization, the same place a
query starts and ends, the same error classification (``query_errors``), sent here as the gRPC
status of its kind.
"""

from __future__ import annotations


from common.errors import ValidationError
from common.json.json_text import loads_json
from common.query.partial import RunStats
from services.rpc.arrow_stream import table_to_chunks
from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc
from services.broker.core.call_origin import CallOrigin
from services.broker.front_door import QueryFrontDoor, QueryRequest
from services.query_errors import client_error, grpc_status
from services.broker.query_control import QueryControl
from services.broker.query_origin import announce_query_id



class BrokerServicer(QueryControl, broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self, front_door: QueryFrontDoor, default_timeout_ms: int, authorizer=None) -> None:
        self.front_door = front_door
        self.default_timeout_ms = default_timeout_ms
        self.authorizer = authorizer

    def request_of(self, request, remaining: float | None, user: str | None, query_id: str | None = None,
                   origin: CallOrigin | None = None) -> QueryRequest:
        """The front door's request for a gRPC QueryRequest, run under ``query_id`` (the one
        ``announce_query_id`` sent back; else the request's own) for the call ``origin``."""
        query_id = query_id or request.query_id or None
        timeout_s = (request.timeout_ms or self.default_timeout_ms) / 1000
        if remaining is not None:
            timeout_s = min(timeout_s, remaining)
        which = request.WhichOneof("statement")
        if which == "native_json":
            query = loads_json(request.native_json, "native query")
            if not isinstance(query, dict):
                raise ValidationError(f"native_json must be a JSON object (a Druid native query with "
                                      f"\"queryType\"), got a {type(query).__name__}")
            return QueryRequest(user, native=query, timeout_s=timeout_s, query_id=query_id, origin=origin)
        if which == "sql":
            # The request's timeout is the default; SET timeout / context "timeout" win.
            context = dict(request.context)
            context.setdefault("timeout", int(timeout_s * 1000))
            return QueryRequest(user, sql=request.sql, context=context, query_id=query_id, origin=origin)
        raise ValidationError("QueryRequest needs native_json or sql")

    def Query(self, request, context):
        try:
            user = None
            if self.authorizer is not None and self.authorizer.enabled:
                user = self.authorizer.user_from_headers(context.invocation_metadata())
            query_id = announce_query_id(context, request)  # sent back before the query runs
            query = self.request_of(request, context.time_remaining(), user, query_id,
                                    CallOrigin("grpc", context.peer(), user))
            result = self.front_door.run(query, context.is_active)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as its status
            error = client_error(exc)
            context.abort(grpc_status(error), error.message)
        yield from table_to_chunks(result.table, result.stats if result.stats is not None else RunStats())


def add_to_server(grpc_server, servicer: BrokerServicer) -> None:
    grpc_server.add(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer,
                    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name)
