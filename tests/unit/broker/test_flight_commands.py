"""Flight SQL commands read from bytes: the broker's own DoGet tickets read without protobuf, and
GetFlightInfo commands remembered by their bytes, give what protobuf's parse gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import UnsupportedError, ValidationError
from services.broker import flight
from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql


@settings(max_examples=200, deadline=None)
@given(handle=st.binary(min_size=0, max_size=40))
def test_a_ticket_reads_as_protobuf_reads_it(handle):
    raw = flight._pack(fsql.TicketStatementQuery(statement_handle=handle))
    fast, slow = flight._ticket_command(raw), flight._flight_sql_command(raw)
    assert type(fast) is type(slow) and fast.statement_handle == slow.statement_handle == handle


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=80))
def test_any_ticket_bytes_read_as_protobuf_reads_them(raw):
    try:
        slow = flight._flight_sql_command(raw)
    except (ValidationError, UnsupportedError) as exc:
        with pytest.raises(type(exc)):
            flight._ticket_command(raw)
        return
    assert flight._ticket_command(raw) == slow


def test_statements_are_remembered_by_their_bytes_and_errors_are_not():
    raw = flight._pack(fsql.CommandStatementQuery(query="SELECT 1"))
    first = flight._descriptor_command(raw)
    assert first.query == "SELECT 1" and flight._descriptor_command(bytes(raw)) is first
    bad = raw.replace(b"CommandStatementQuery", b"CommandStatementQuerx")
    for _ in range(2):
        with pytest.raises(UnsupportedError):
            flight._descriptor_command(bad)
    assert bad not in flight._PARSED
    assert flight._descriptor_command(b"SELECT 1") is None  # plain SQL text is not a Flight SQL command


@settings(max_examples=100, deadline=None)
@given(handle=st.binary(min_size=0, max_size=40))
def test_ticket_bytes_are_what_protobuf_writes(handle):
    assert flight._ticket_bytes(handle) == flight._pack(fsql.TicketStatementQuery(statement_handle=handle))


def test_with_query_id_is_replace_for_every_field():
    import dataclasses

    from services.broker.core.call_origin import CallOrigin
    from services.broker.front_door import QueryRequest

    values = {"user": "u", "sql": "SELECT 1", "native": {"a": 1}, "parameter_rows": ((1,),), "context": {"k": 1},
              "timeout_s": 2.5, "query_id": "old", "origin": CallOrigin("grpc", "ipv4:1.2.3.4:5", "u"), "plan": object()}
    assert set(values) == {f.name for f in dataclasses.fields(QueryRequest)}  # a new field needs with_query_id too
    request = QueryRequest(**values)
    assert request.with_query_id("new") == dataclasses.replace(request, query_id="new")
    assert request.with_query_id("new").plan is request.plan
    other = object()
    assert request.with_plan(other).plan is other and request.with_plan(other) == request
    moved = CallOrigin("flight", "ipv6:[::1]:6", "u")
    assert request.with_origin(moved) == dataclasses.replace(request, origin=moved)
    assert request.with_origin(moved).origin is moved and request.with_query_id("new").origin is request.origin
