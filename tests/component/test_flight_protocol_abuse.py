"""Hostile protocol input on the broker's Flight SQL endpoint, its gRPC BrokerService and its HTTP
side, over a real cluster: forged, garbled and truncated tickets; malformed ``google.protobuf.Any``
commands in GetFlightInfo, DoAction and DoPut; unknown command and action types; messages over the
configured size limit (Flight and gRPC both say what the limit is); bad and huge HTTP bodies.

Every case must come back as a clean error: a user error (INVALID_ARGUMENT, NOT_FOUND,
UNIMPLEMENTED, RESOURCE_EXHAUSTED for a size limit) whose message has no traceback and no server
path, or an internal error that carries an error id; and after every case a normal query still
answers, so the node keeps serving."""

from __future__ import annotations

import http.client
import json
import re

import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2, wrappers_pb2

from services.broker.flight_limits import MAX_REQUEST_BYTES
from services.grpc_server import MAX_MESSAGE_BYTES
from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql
from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc
from tests.harness.embedded_cluster import EmbeddedCluster

START = 1442016000000
ROWS = 600
SERVER_DETAIL = re.compile(r"Traceback|File \"|\.py\b|/work/|site-packages")
ERROR_ID = re.compile(r"internal error [0-9a-f]{12}")
TIMEOUT = flight.FlightCallOptions(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("abuse")), historicals=1)
    try:
        table = pa.table({
            "__time": pa.array([START + i * 60_000 for i in range(ROWS)], pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")),
            "s": pa.array([f"v{i % 13}" for i in range(ROWS)]),
            "n": pa.array(range(ROWS), pa.int64())})
        c.wait_queryable("t", len(c.publish(table, "t")))
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def client(cluster):
    c = flight.FlightClient(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
    yield c
    c.close()


def _any(type_url: str, value: bytes) -> bytes:
    return any_pb2.Any(type_url=type_url, value=value).SerializeToString()


def _pack(message) -> bytes:
    wrapper = any_pb2.Any()
    wrapper.Pack(message)
    return wrapper.SerializeToString()


SQL_URL = "type.googleapis.com/arrow.flight.protocol.sql."


def assert_serving(client) -> None:
    """A normal query answers, right."""
    reader = client.do_get(flight.Ticket(b"SELECT COUNT(*) AS c, SUM(n) AS s FROM t"), TIMEOUT)
    assert reader.read_all().to_pylist() == [{"c": ROWS, "s": ROWS * (ROWS - 1) // 2}]


def assert_clean(exc: BaseException, *, user: bool = True) -> str:
    """The error is a user error (or, with user=False, either that or an internal error with an
    id), and its message shows nothing of the server's insides."""
    message = str(exc)
    assert not SERVER_DETAIL.search(message), message
    if isinstance(exc, flight.FlightInternalError) or "INTERNAL" in message[:40]:
        assert not user, f"an internal error where a user error belongs: {message}"
        assert ERROR_ID.search(message), message
    else:
        assert isinstance(exc, (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, flight.FlightServerError,
                                flight.FlightUnauthorizedError)) or "NOT_FOUND" in message, (type(exc), message)
    return message


def _error_of(call) -> BaseException:
    try:
        result = call()
        if hasattr(result, "read_all"):
            result.read_all()
        elif result is not None and not isinstance(result, (flight.FlightInfo, flight.SchemaResult)):
            list(result)
    except Exception as exc:  # noqa: BLE001 - the test inspects whatever came back
        return exc
    raise AssertionError("the call succeeded; expected a clean error")


BAD_TICKETS = {
    "garbage bytes": bytes(range(256)) * 4,
    "truncated Any": _pack(fsql.TicketStatementQuery(statement_handle=b"x" * 40))[:-7],
    "forged handle": _pack(fsql.TicketStatementQuery(statement_handle=b"\x00forged-handle\xff")),
    "empty handle": _pack(fsql.TicketStatementQuery()),
    "command as ticket": _pack(fsql.CommandGetCatalogs()),
    "unknown Flight SQL type": _any(SQL_URL + "CommandNoSuchThing", b"\x0a\x01x"),
    "right type, garbage value": _any(SQL_URL + "TicketStatementQuery", b"\xff\xff\xff\xff\x0f"),
    "right type, wrong wire type": _any(SQL_URL + "TicketStatementQuery", b"\x0d\x00\x00\x00\x00"),
    "foreign Any": _pack(wrappers_pb2.StringValue(value="SELECT 1")),
    "empty": b"",
    "whitespace": b"   \n\t ",
    "broken JSON": b'{"queryType": "scan", "dataSource": ',
    "JSON of the wrong shape": b'{"queryType": 7, "dataSource": ["t"], "intervals": {"a": 1}}',
    "deep JSON": b"[" * 100_000 + b"]" * 100_000,
    "deep JSON object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "not UTF-8": b"SELECT \xff\xfe FROM t",
    "NUL bytes": b"SELECT\x00 1",
}


@pytest.mark.parametrize("name", list(BAD_TICKETS))
def test_bad_tickets_to_do_get(client, name):
    assert_clean(_error_of(lambda: client.do_get(flight.Ticket(BAD_TICKETS[name]), TIMEOUT)))
    assert_serving(client)


def test_a_ticket_serves_one_do_get_and_forging_it_from_another_user_fails(client):
    info = client.get_flight_info(flight.FlightDescriptor.for_command(
        _pack(fsql.CommandStatementQuery(query="SELECT COUNT(*) AS c FROM t"))), TIMEOUT)
    ticket = info.endpoints[0].ticket
    assert client.do_get(ticket, TIMEOUT).read_all().to_pylist() == [{"c": ROWS}]
    message = assert_clean(_error_of(lambda: client.do_get(ticket, TIMEOUT)))
    assert "GetFlightInfo again" in message


BAD_COMMANDS = {
    "truncated Any": _pack(fsql.CommandStatementQuery(query="SELECT 1"))[:-3],
    "right type, garbage value": _any(SQL_URL + "CommandStatementQuery", b"\x0a\xff\xff\xff\xff\xff\xff"),
    "right type, invalid UTF-8 string": _any(SQL_URL + "CommandStatementQuery", b"\x0a\x02\xff\xfe"),
    "unknown Flight SQL type": _any(SQL_URL + "CommandGetXdbcTypeInfoPlus", b""),
    "ingest": _any(SQL_URL + "CommandStatementIngest", b""),
    "ticket as command": _pack(fsql.TicketStatementQuery(statement_handle=b"abc")),
    "forged prepared handle": _pack(fsql.CommandPreparedStatementQuery(prepared_statement_handle=b"\x01" * 16)),
    "transaction": _pack(fsql.CommandStatementQuery(query="SELECT 1", transaction_id=b"tx")),
    "garbage": b"\x0a\x80\x80\x80\x80\x80\x80",
    "empty": b"",
}


@pytest.mark.parametrize("name", list(BAD_COMMANDS))
def test_malformed_commands_to_get_flight_info_and_get_schema(client, name):
    descriptor = flight.FlightDescriptor.for_command(BAD_COMMANDS[name])
    assert_clean(_error_of(lambda: client.get_flight_info(descriptor, TIMEOUT)))
    assert_clean(_error_of(lambda: client.get_schema(descriptor, TIMEOUT)))
    assert_serving(client)


def test_path_descriptors_are_refused(client):
    message = assert_clean(_error_of(lambda: client.get_flight_info(flight.FlightDescriptor.for_path("t"),
                                                                    TIMEOUT)))
    assert "CMD" in message
    assert_serving(client)


BAD_ACTIONS = [
    ("NoSuchAction", b""),
    ("CreatePreparedStatement", b""),
    ("CreatePreparedStatement", b"\xff" * 64),
    ("CreatePreparedStatement", _pack(fsql.ActionClosePreparedStatementRequest(prepared_statement_handle=b"x"))),
    ("CreatePreparedStatement", _any(SQL_URL + "ActionCreatePreparedStatementRequest", b"\x0a\x09\xff")),
    ("ClosePreparedStatement", b"\x12\x34"),
    ("CreatePreparedStatement", _pack(fsql.ActionCreatePreparedStatementRequest(query="SELEC nonsense ("))),
    ("CancelQuery", b"\x00" * 10),
    ("", b""),
]


@pytest.mark.parametrize("kind,body", BAD_ACTIONS, ids=[f"{k or 'empty'}-{i}" for i, (k, _) in enumerate(BAD_ACTIONS)])
def test_malformed_actions(client, kind, body):
    assert_clean(_error_of(lambda: list(client.do_action(flight.Action(kind, body), TIMEOUT))))
    assert_serving(client)


def _do_put(client, command: bytes, table: pa.Table) -> None:
    writer, reader = client.do_put(flight.FlightDescriptor.for_command(command), table.schema, TIMEOUT)
    try:
        writer.write_table(table)
        writer.done_writing()
        reader.read()
    finally:
        writer.close()


@pytest.mark.parametrize("command", [
    b"\xff\x00garbage",
    _any(SQL_URL + "CommandStatementQuery", b"\x0a\xff"),
    _pack(fsql.CommandPreparedStatementQuery(prepared_statement_handle=b"forged")),
    _pack(fsql.CommandStatementUpdate(query="DELETE FROM t")),
    _any(SQL_URL + "CommandStatementIngest", b""),
    _pack(fsql.CommandGetCatalogs()),
    b"SELECT 1",
], ids=["garbage", "garbled-any", "forged-handle", "update", "ingest", "catalogs", "sql-text"])
def test_malformed_do_put(client, command):
    assert_clean(_error_of(lambda: _do_put(client, command, pa.table({"0": [1, 2, 3]}))))
    assert_serving(client)


def test_do_put_parameters_bound_to_the_right_statement_only(client):
    [result] = client.do_action(flight.Action("CreatePreparedStatement", _pack(
        fsql.ActionCreatePreparedStatementRequest(query="SELECT COUNT(*) AS c FROM t WHERE n < ?"))), TIMEOUT)
    prepared = fsql.ActionCreatePreparedStatementResult()
    any_pb2.Any.FromString(result.body.to_pybytes()).Unpack(prepared)
    command = _pack(fsql.CommandPreparedStatementQuery(prepared_statement_handle=prepared.prepared_statement_handle))
    message = assert_clean(_error_of(lambda: _do_put(client, command, pa.table({"0": [1], "1": [2]}))))
    assert "1 '?' parameter" in message
    assert_serving(client)


def test_oversized_flight_requests_are_refused_naming_the_limit(client):
    huge = b"SELECT " + b"1 + " * (MAX_REQUEST_BYTES // 4) + b"1"
    limit = f"{MAX_REQUEST_BYTES // (1 << 20)} MiB"
    for call in (lambda: client.do_get(flight.Ticket(huge), TIMEOUT),
                 lambda: client.get_flight_info(flight.FlightDescriptor.for_command(huge), TIMEOUT),
                 lambda: list(client.do_action(flight.Action("CreatePreparedStatement", huge), TIMEOUT))):
        message = assert_clean(_error_of(call))
        assert limit in message and "at most" in message, message
    assert_serving(client)


def test_oversized_do_put_parameters_are_refused_naming_the_limit(client):
    [result] = client.do_action(flight.Action("CreatePreparedStatement", _pack(
        fsql.ActionCreatePreparedStatementRequest(query="SELECT COUNT(*) AS c FROM t WHERE s = ?"))), TIMEOUT)
    prepared = fsql.ActionCreatePreparedStatementResult()
    any_pb2.Any.FromString(result.body.to_pybytes()).Unpack(prepared)
    command = _pack(fsql.CommandPreparedStatementQuery(prepared_statement_handle=prepared.prepared_statement_handle))
    rows = MAX_REQUEST_BYTES // (1 << 16) + 2
    big = pa.table({"0": pa.array(["x" * (1 << 16)] * rows)})
    message = assert_clean(_error_of(lambda: _do_put(client, command, big)))
    assert "at most" in message, message
    assert_serving(client)


# ---- the gRPC BrokerService --------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker_channel(cluster):
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker.grpc.port}",
                               options=[("grpc.max_send_message_length", -1)]) as ch:
        yield ch


def _grpc_error(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        result = call()
        if not isinstance(result, (bytes, broker_pb2.CancelQueryResponse)):
            list(result)
    assert not SERVER_DETAIL.search(err.value.details() or ""), err.value.details()
    return err.value


@pytest.mark.parametrize("request_", [
    broker_pb2.QueryRequest(),
    broker_pb2.QueryRequest(native_json="{not json"),
    broker_pb2.QueryRequest(native_json='{"queryType": "groupBy", "dataSource": "t", "dimensions": "s"}'),
    broker_pb2.QueryRequest(native_json="[" * 100_000),
    broker_pb2.QueryRequest(native_json='"just a string"'),
    broker_pb2.QueryRequest(sql="SELECT FROM WHERE"),
    broker_pb2.QueryRequest(sql="SELECT 1", timeout_ms=-5),
    broker_pb2.QueryRequest(sql="SELECT 1", context={"timeout": "soon"}),
    broker_pb2.QueryRequest(native_json='{"queryType": "scan", "dataSource": "t", "limit": ' + "9" * 5000 + "}"),
], ids=["empty", "broken-json", "dimensions-string", "deep-json", "json-string", "bad-sql", "negative-timeout",
        "bad-context", "huge-number"])
def test_bad_grpc_queries_are_user_errors(cluster, broker_channel, client, request_):
    stub = broker_pb2_grpc.BrokerServiceStub(broker_channel)
    error = _grpc_error(lambda: stub.Query(request_, timeout=30))
    assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                            grpc.StatusCode.UNIMPLEMENTED), (error.code(), error.details())
    assert_serving(client)


def test_garbled_protobuf_to_grpc_is_invalid_argument(broker_channel, client):
    raw = broker_channel.unary_stream("/strata.v1.BrokerService/Query", request_serializer=None,
                                      response_deserializer=None)
    for body in (b"\xff\xff\xff", b"\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", b"\x0a\x05ab"):
        error = _grpc_error(lambda: raw(body, timeout=30))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
        assert "not a valid" in error.details()
    cancel = broker_channel.unary_unary("/strata.v1.BrokerService/CancelQuery", request_serializer=None,
                                        response_deserializer=None)
    assert _grpc_error(lambda: cancel(b"\x0a\xff", timeout=30)).code() == grpc.StatusCode.INVALID_ARGUMENT
    unknown = broker_channel.unary_unary("/strata.v1.BrokerService/NoSuchMethod", request_serializer=None,
                                         response_deserializer=None)
    assert _grpc_error(lambda: unknown(b"", timeout=30)).code() == grpc.StatusCode.UNIMPLEMENTED
    assert_serving(client)


def test_oversized_grpc_message_is_refused_naming_the_limit(broker_channel, client):
    stub = broker_pb2_grpc.BrokerServiceStub(broker_channel)
    huge = broker_pb2.QueryRequest(sql="SELECT " + "1+" * (MAX_MESSAGE_BYTES // 2 + 8) + "1")
    error = _grpc_error(lambda: stub.Query(huge, timeout=60))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (error.code(), error.details())
    assert str(MAX_MESSAGE_BYTES) in error.details()
    assert_serving(client)


# ---- HTTP ----------------------------------------------------------------------------------------
def _http(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


TABLE_PATH = "/druid/coordinator/v1/catalog/tables/druid/abuse"


@pytest.mark.parametrize("body", [
    b"{not json", b"\xff\xfe\x00", b"[" * 100_000, b'"a string"', b"null", b'{"type": 5}',
    b'{"type": "datasource", "columns": "x"}', b'{"type": "datasource", "columns": [{"name": 1}]}',
    b'{"type": "datasource", "properties": {"segmentGranularity": ' + b"9" * 5000 + b"}}",
], ids=["broken", "binary", "deep", "string", "null", "type-number", "columns-string", "column-name-number",
        "huge-number"])
def test_bad_catalog_json_over_http_is_400(cluster, client, body):
    status, out = _http(cluster.coordinator.http.port, "POST", TABLE_PATH, body,
                        {"Content-Type": "application/json"})
    assert status == 400, (status, out)
    message = json.loads(out)["error"]
    assert message and not SERVER_DETAIL.search(message), message
    assert_serving(client)


def test_huge_and_lying_http_bodies(cluster, client):
    from services.http_endpoint import MAX_BODY_BYTES

    port = cluster.coordinator.http.port
    # A body over the limit is refused before it is read.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("POST", TABLE_PATH)
        conn.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 413
        assert f"{MAX_BODY_BYTES}" in json.loads(response.read())["error"]
    finally:
        conn.close()
    for length in ("-5", "lots", "1e9"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.putrequest("POST", TABLE_PATH)
            conn.putheader("Content-Length", length)
            conn.endheaders()
            response = conn.getresponse()
            assert response.status == 400, length
            assert "Content-Length" in json.loads(response.read())["error"]
        finally:
            conn.close()
    status, out = _http(port, "GET", "/status/ready")
    assert status == 200 and json.loads(out)["healthy"] is True
    assert_serving(client)


# ---- task specs on the coordinator ---------------------------------------------------------------
@pytest.mark.parametrize("spec_json,task_type,datasource", [
    ("{not json", "compact", "t"),
    ("[1, 2]", "compact", "t"),
    ('"compact"', "compact", "t"),
    ("[" * 5000 + "]" * 5000, "compact", "t"),
    ('{"n": ' + "9" * 5000 + "}", "compact", "t"),
    ("{}", "bogus", "t"),
    ("{}", "compact", ""),
], ids=["broken", "list", "string", "deep", "huge-number", "bad-type", "no-datasource"])
def test_bad_task_specs_are_invalid_argument(cluster, client, spec_json, task_type, datasource):
    from services.rpc.gen.strata.v1 import coordinator_pb2, coordinator_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{cluster.coordinator.grpc.port}") as ch:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
        error = _grpc_error(lambda: stub.SubmitTask(coordinator_pb2.SubmitTaskRequest(
            datasource=datasource, type=task_type, statement="COMPACT t", spec_json=spec_json), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
    assert_serving(client)
