"""Arrow Flight on the broker (default port 8815).

Today: a ticket or command holding a native query (Druid JSON) returns its result; the SQL issue
extends this server with Flight SQL.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight

from common.errors import QueryTimeoutError, StrataError, UnsupportedError, ValidationError

MAX_BATCH_ROWS = 65_536


def flight_error(exc: Exception) -> Exception:
    if isinstance(exc, ValidationError):
        return flight.FlightServerError(f"invalid query: {exc}")
    if isinstance(exc, QueryTimeoutError):
        return flight.FlightTimedOutError(str(exc))
    if isinstance(exc, UnsupportedError):
        return flight.FlightServerError(f"unsupported: {exc}")
    return flight.FlightInternalError(str(exc))


class BrokerFlightServer(flight.FlightServerBase):
    def __init__(self, location: str, run_native, **kwargs) -> None:
        super().__init__(location, **kwargs)
        self._run_native = run_native  # (query dict) -> pa.Table

    def _run(self, payload: bytes) -> pa.Table:
        try:
            query = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise flight.FlightServerError("the ticket must be a native query in JSON") from None
        try:
            return self._run_native(query)
        except StrataError as exc:
            raise flight_error(exc) from None

    def get_flight_info(self, context, descriptor):
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise flight.FlightServerError("describe a query with a command descriptor holding native JSON")
        table = self._run(descriptor.command)
        endpoint = flight.FlightEndpoint(descriptor.command, [])
        return flight.FlightInfo(table.schema, descriptor, [endpoint], table.num_rows, table.nbytes)

    def do_get(self, context, ticket):
        table = self._run(ticket.ticket)
        batches = table.to_batches(max_chunksize=MAX_BATCH_ROWS)
        return flight.RecordBatchStream(pa.Table.from_batches(batches, schema=table.schema))
