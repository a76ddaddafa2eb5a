"""The same broker Flight server from a plain ``pyarrow.flight`` client: SQL text and native JSON
as command bytes or tickets, the JSON envelope with query context, Flight SQL messages sent by
hand, result-ticket lifecycle, batch limits and basic-token authentication."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql
from services.broker.flight import MAX_BATCH_BYTES, MAX_BATCH_ROWS, record_batches
from tests.component.flight_sql.conftest import uri
from tests.component.flight_sql.duckdb_backend import NUMBERS_ROWS

NATIVE = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
          "granularity": "all", "aggregations": [{"type": "count", "name": "count"}]}

# GetSqlInfo's result schema as the Flight SQL specification (and its C++ reference) defines it.
SQL_INFO_SCHEMA = pa.schema([
    pa.field("info_name", pa.uint32(), nullable=False),
    pa.field("value", pa.dense_union([
        pa.field("string_value", pa.utf8(), nullable=False),
        pa.field("bool_value", pa.bool_(), nullable=False),
        pa.field("bigint_value", pa.int64(), nullable=False),
        pa.field("int32_bitmask", pa.int32(), nullable=False),
        pa.field("string_list", pa.list_(pa.utf8()), nullable=False),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32())), nullable=False),
    ]), nullable=False),
])


@pytest.fixture
def client(server):
    with flight.connect(uri(server)) as c:
        yield c


def command(message) -> flight.FlightDescriptor:
    packed = any_pb2.Any()
    packed.Pack(message)
    return flight.FlightDescriptor.for_command(packed.SerializeToString())


def fetch(client, info: flight.FlightInfo) -> pa.Table:
    assert len(info.endpoints) == 1
    reader = client.do_get(info.endpoints[0].ticket)
    table = reader.read_all()
    assert reader.schema.equals(info.schema, check_metadata=True)
    return table


def test_sql_command_bytes_flight_info_then_do_get(client, backend):
    sql = "SELECT channel, SUM(added) AS added FROM wiki GROUP BY channel ORDER BY channel NULLS LAST"
    info = client.get_flight_info(flight.FlightDescriptor.for_command(sql.encode()))
    assert info.total_records == -1  # planned, not run: the count is known only once DoGet runs it
    table = fetch(client, info)
    assert table.equals(backend.execute(sql))
    assert table.to_pylist()[0] == {"channel": "#en.wikipedia", "added": 17}


def test_each_ticket_runs_its_query_once(client, backend):
    """GetFlightInfo may start the query (prefetch) or leave it to DoGet: either way it runs once."""
    def runs() -> int:
        return len([call for call in backend.calls if call["op"] == "execute"])

    before = runs()
    info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT n FROM numbers WHERE n < 1000"))
    assert info.schema.names == ["n"]
    assert fetch(client, info).num_rows == 1000
    assert runs() == before + 1
    # A ticket serves one DoGet: a second would run the statement again (think CREATE TABLE).
    with pytest.raises(pa.ArrowKeyError, match="already fetched.*call GetFlightInfo again"):
        client.do_get(info.endpoints[0].ticket).read_all()
    assert runs() == before + 1


def test_without_prefetch_get_flight_info_only_plans(backend, native):
    from services.broker.flight import BrokerFlightServer
    from tests.component.flight_sql.conftest import front_door, running

    def runs() -> int:
        return len([call for call in backend.calls if call["op"] == "execute"])

    server = BrokerFlightServer("grpc://127.0.0.1:0", front_door(backend, native), prefetch_workers=0)
    with running(server), flight.connect(uri(server)) as client:
        before = runs()
        info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT n FROM numbers WHERE n < 1000"))
        assert runs() == before  # GetFlightInfo only planned
        assert fetch(client, info).num_rows == 1000
        assert runs() == before + 1


def test_an_unknown_ticket_is_not_found(client):
    ticket = flight.Ticket(command(fsql.TicketStatementQuery(statement_handle=b"nope")).command)
    # pyarrow raises ArrowKeyError for a NOT_FOUND status.
    with pytest.raises(pa.ArrowKeyError, match="result ticket unknown, expired or already fetched.*call GetFlightInfo again"):
        client.do_get(ticket).read_all()


def test_sql_text_as_a_ticket(client):
    table = client.do_get(flight.Ticket(b"SELECT n FROM numbers WHERE n < 3 ORDER BY n")).read_all()
    assert table.column("n").to_pylist() == [0, 1, 2]


def test_native_json_ticket_and_command(client, native):
    payload = json.dumps(NATIVE).encode()
    table = client.do_get(flight.Ticket(payload)).read_all()
    assert native.queries[-1] == NATIVE
    assert table.column("channel").to_pylist() == ["#en", "#fr", "#de", "#en"]
    info = client.get_flight_info(flight.FlightDescriptor.for_command(payload))
    assert fetch(client, info).column("count").to_pylist() == [len(native.queries)] * 4


def test_each_call_hands_its_origin_and_id_to_the_backends(client, backend, native):
    """Who called travels explicitly, on the request (issue 24): GetFlightInfo plans under the id
    it announces, DoGet runs under that id with its own call's origin and answers with the id."""
    info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT n FROM numbers WHERE n < 2"))
    planned = backend.last("describe")
    assert fetch(client, info).num_rows == 2
    ran = backend.last("execute")
    assert planned["query_id"] and ran["query_id"] == planned["query_id"]
    for call in (planned, ran):
        assert call["origin"].protocol == "flight" and call["origin"].user is None
        assert re.match(r"ipv[46]:", call["origin"].remote_address), call["origin"]
    assert ran["origin"] is not planned["origin"]  # DoGet's own call
    assert ran["origin"].reply is not None and ran["origin"].reply.query_id == ran["query_id"]
    client.do_get(flight.Ticket(json.dumps(NATIVE).encode())).read_all()
    assert native.origins[-1].protocol == "flight" and re.match(r"ipv[46]:", native.origins[-1].remote_address)


def test_json_envelope_carries_context_and_parameters(client, backend):
    envelope = {"sql": "SELECT page FROM wiki WHERE added > ? ORDER BY page", "parameters": [5],
                "context": {"sqlTimeZone": "America/Los_Angeles", "priority": 10}}
    info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(envelope).encode()))
    assert fetch(client, info).column("page").to_pylist() == ["Main_Page", "Talk:Main"]
    call = backend.last("execute")
    assert call["context"] == {"sqlTimeZone": "America/Los_Angeles", "priority": 10}
    assert call["parameters"] == [5]


@pytest.mark.parametrize("envelope, text", [
    ({"sql": 42}, "'sql' in the SQL envelope must be a non-empty string"),
    ({"sql": "SELECT 1", "context": "x"}, "'context' in the SQL envelope must be an object"),
    ({"sql": "SELECT 1", "params": [1]}, r"unknown key\(s\) \['params'\].*allowed: sql, context, parameters"),
])
def test_json_envelope_mistakes_are_invalid_arguments(client, envelope, text):
    with pytest.raises(pa.ArrowInvalid, match=text):
        client.do_get(flight.Ticket(json.dumps(envelope).encode())).read_all()


def test_bad_sql_is_invalid_argument(client):
    with pytest.raises(pa.ArrowInvalid, match='syntax error at or near "SELEC"'):
        client.get_flight_info(flight.FlightDescriptor.for_command(b"SELEC 1"))


def test_path_descriptors_are_refused_with_a_hint(client):
    with pytest.raises(pa.ArrowInvalid, match="use a command \\(CMD\\) descriptor"):
        client.get_flight_info(flight.FlightDescriptor.for_path("wiki"))


def test_large_results_stream_in_batches_of_bounded_rows(client):
    info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT * FROM numbers"))
    reader = client.do_get(info.endpoints[0].ticket)
    sizes = [chunk.data.num_rows for chunk in reader]
    assert sum(sizes) == NUMBERS_ROWS and max(sizes) <= MAX_BATCH_ROWS
    assert reader.schema.equals(info.schema)


def test_wide_rows_are_split_by_bytes():
    wide = pa.table({"blob": pa.array(["x" * (1 << 20)] * 40), "i": pa.array(range(40))})
    batches = list(record_batches(wide))
    assert sum(b.num_rows for b in batches) == 40
    assert all(b.nbytes <= MAX_BATCH_BYTES for b in batches)
    assert pa.Table.from_batches(batches).equals(wide)


def test_flight_sql_sql_info_has_the_spec_schema(client):
    info = client.get_flight_info(command(fsql.CommandGetSqlInfo(info=[
        fsql.FLIGHT_SQL_SERVER_NAME, fsql.FLIGHT_SQL_SERVER_READ_ONLY, fsql.FLIGHT_SQL_SERVER_TRANSACTION, 99_999])))
    assert info.schema.equals(SQL_INFO_SCHEMA)
    rows = {r["info_name"]: r["value"] for r in fetch(client, info).to_pylist()}
    assert rows == {fsql.FLIGHT_SQL_SERVER_NAME: "strata", fsql.FLIGHT_SQL_SERVER_READ_ONLY: True,
                    fsql.FLIGHT_SQL_SERVER_TRANSACTION: fsql.SQL_SUPPORTED_TRANSACTION_NONE}
    assert client.get_schema(command(fsql.CommandGetSqlInfo())).schema.equals(SQL_INFO_SCHEMA)


def test_flight_sql_statement_query_and_schema(client):
    sql = "SELECT label, third FROM numbers WHERE n = 3"
    schema = client.get_schema(command(fsql.CommandStatementQuery(query=sql))).schema
    info = client.get_flight_info(command(fsql.CommandStatementQuery(query=sql)))
    assert schema.equals(info.schema)
    assert fetch(client, info).to_pylist() == [{"label": "row-3", "third": 1.0}]


def test_unknown_prepared_statement_handle_is_not_found(client):
    with pytest.raises(pa.ArrowKeyError, match="prepared statement handle unknown.*prepare the statement again"):
        client.get_flight_info(command(fsql.CommandPreparedStatementQuery(prepared_statement_handle=b"nope")))


def test_transactions_are_unimplemented(client):
    with pytest.raises(pa.ArrowNotImplementedError, match="strata has no transactions"):
        client.get_flight_info(command(fsql.CommandStatementQuery(query="SELECT 1", transaction_id=b"t1")))


def test_errors_at_do_get_are_clean_statuses(client, backend):
    # Set before GetFlightInfo: the run may start there (prefetch); it fails at DoGet either way.
    backend.fail_next = RuntimeError("disk on fire at /var/lib/strata/x")
    info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT 1 AS one"))
    with pytest.raises(flight.FlightInternalError) as err:
        client.do_get(info.endpoints[0].ticket).read_all()
    message = str(err.value)
    assert re.search(r"internal error [0-9a-f]{12} on the broker: RuntimeError", message), message
    assert "Traceback" not in message and "/var/lib" not in message and ".py" not in message


def test_basic_token_authentication(auth_server, backend):
    with flight.connect(uri(auth_server)) as c:
        with pytest.raises(flight.FlightUnauthenticatedError, match="invalid user name or password for 'alice'"):
            c.authenticate_basic_token("alice", "wrong")
        with pytest.raises(flight.FlightUnauthenticatedError, match="authentication required"):
            c.do_get(flight.Ticket(b"SELECT 1")).read_all()
        header = c.authenticate_basic_token("alice", "s3cret")
        assert header[0] == b"authorization" and header[1].startswith(b"Bearer ")
        options = flight.FlightCallOptions(headers=[header])
        info = c.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT 7 AS seven"), options)
        assert c.do_get(info.endpoints[0].ticket, options).read_all().to_pylist() == [{"seven": 7}]
        assert backend.last("execute")["user"] == "alice"
        bad = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer forged")])
        with pytest.raises(flight.FlightUnauthenticatedError, match="bearer token unknown or expired"):
            c.do_get(flight.Ticket(b"SELECT 1"), bad).read_all()


def test_a_result_ticket_belongs_to_its_user(auth_server):
    with flight.connect(uri(auth_server)) as c:
        alice = flight.FlightCallOptions(headers=[c.authenticate_basic_token("alice", "s3cret")])
        bob = flight.FlightCallOptions(headers=[c.authenticate_basic_token("bob", "hunter2")])
        info = c.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT 1 AS one"), alice)
        with pytest.raises(flight.FlightUnauthorizedError, match="issued to another user"):
            c.do_get(info.endpoints[0].ticket, bob).read_all()
