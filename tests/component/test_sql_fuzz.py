"""A grammar fuzzer for SQL through Flight SQL (the unmodified ADBC driver) and the gRPC BrokerService
against one cluster.

Hypothesis builds statements from a small grammar over a small dataset: real and misspelled
tables and columns, the function catalog plus unknown functions, literals of every type (huge
integers, -0.0, NaN-producing math, bad timestamps, unicode strings, NULL, booleans, intervals,
arrays), operators, aggregates, GROUP BY / HAVING / ORDER BY / LIMIT / OFFSET, EXPLAIN and SET
prefixes; then breaks some of them (tokens dropped, swapped or inserted, text cut short).

Every failure must be a user error (INVALID_ARGUMENT, NOT_IMPLEMENTED, NOT_FOUND, TIMEOUT) or an
internal error carrying an error id; no message may carry a traceback or a server path; and the
server keeps answering. Examples are bounded and derandomized, so the run is the same every time
and takes seconds.
"""

from __future__ import annotations

import os
import re

import adbc_driver_flightsql.dbapi as adbc
import adbc_driver_manager
import grpc
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc
from tests.harness.embedded_cluster import EmbeddedCluster

Status = adbc_driver_manager.AdbcStatusCode
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START = 1442016000000  # 2015-09-12
ROWS = 240
USER_STATUSES = {Status.INVALID_ARGUMENT, Status.NOT_IMPLEMENTED, Status.NOT_FOUND, Status.TIMEOUT}
ERROR_ID = re.compile(r"internal error [0-9a-f]{12}")


def _dataset() -> pa.Table:
    words = ["alpha", "Beta", "gamma_1", "δέλτα", "", "e%f", "a'b"]
    return pa.table({
        "__time": pa.array([START + i * 600_000 for i in range(ROWS)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "s": pa.array([None if i % 11 == 0 else words[i % len(words)] for i in range(ROWS)]),
        "n": pa.array([None if i % 13 == 0 else (i % 17) - 8 for i in range(ROWS)], pa.int64()),
        "d": pa.array([None if i % 7 == 0 else ((i % 9) - 4) / 4 for i in range(ROWS)], pa.float64()),
        "tags": pa.array([None if i % 5 == 0 else [words[i % 3], words[(i + 1) % 3]] for i in range(ROWS)],
                         pa.list_(pa.string())),
    })


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("fuzz")), historicals=2)
    try:
        segments = c.publish(_dataset(), "fz", segment_granularity="hour")
        c.wait_queryable("fz", len(segments), replicas=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    try:
        yield connection
    finally:
        connection.close()


# ---- the grammar ---------------------------------------------------------------------------------------

# Real names come up most often, so most statements get past name resolution to the functions.
COLUMNS = ["__time", "s", "n", "d"] * 3 + ["tags", '"s"', '"N"', "nope", "fz.n"]
TABLES = ["fz"] * 8 + ["druid.fz", '"fz"', "nope", "sys.segments", "INFORMATION_SCHEMA.COLUMNS", "sys.servers"]
FUNCTIONS = ["UPPER", "LOWER", "CHAR_LENGTH", "SUBSTRING", "REPLACE", "REPEAT", "LPAD", "RPAD", "REGEXP_LIKE",
             "REGEXP_EXTRACT", "REGEXP_REPLACE", "STRPOS", "CONCAT", "TRIM", "REVERSE", "LEFT", "RIGHT",
             "CONTAINS_STRING", "ABS", "ROUND", "FLOOR", "CEIL", "POWER", "SQRT", "LN", "LOG10", "EXP", "MOD",
             "SIGN", "GREATEST", "LEAST", "COALESCE", "NULLIF", "TIME_FLOOR", "TIME_CEIL", "TIME_FORMAT",
             "TIME_PARSE", "TIME_SHIFT", "TIME_EXTRACT", "MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS",
             "JSON_VALUE", "PARSE_JSON", "TO_JSON_STRING", "NO_SUCH_FUNCTION"]
AGGREGATES = ["COUNT", "SUM", "MIN", "MAX", "AVG", "APPROX_COUNT_DISTINCT"]
TYPES = ["BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP", "BOOLEAN", "FLOAT", "DATE", "NOPE"]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


literals = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "-0.0", "1e308", "-1e-320", "0.5", "9223372036854775807", "9223372036854775808"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.text(alphabet=st.sampled_from("ab%_\\'() é漢$^[]*+?{}|1"), max_size=8).map(_quoted),
    st.sampled_from(["NULL", "TRUE", "FALSE", "TIMESTAMP '2015-09-12 01:00:00'", "TIMESTAMP 'garbage'",
                     "INTERVAL '1' DAY", "INTERVAL '3' HOUR", "ARRAY['a', 'b']", "'P1D'", "'PT1H'", "'P0D'",
                     "'yyyy-MM-dd'", "'America/New_York'", "'Mars/Phobos'"]),
)
columns = st.sampled_from(COLUMNS)


def _call(draw_args, name: str) -> str:
    return f"{name}({', '.join(draw_args)})"


def expressions(max_leaves: int = 6):
    def extend(inner):
        return st.one_of(
            st.builds(_call, st.lists(inner, max_size=4), st.sampled_from(FUNCTIONS)),
            st.builds(lambda a, op, b: f"({a} {op} {b})", inner,
                      st.sampled_from(["+", "-", "*", "/", "%", "||", "=", "<>", "<", ">=", "AND", "OR"]), inner),
            st.builds(lambda a: f"NOT {a}", inner),
            st.builds(lambda a, t: f"CAST({a} AS {t})", inner, st.sampled_from(TYPES)),
            st.builds(lambda a, xs: f"{a} IN ({', '.join(xs)})", inner, st.lists(inner, min_size=1, max_size=4)),
            st.builds(lambda a, b, c: f"{a} BETWEEN {b} AND {c}", inner, inner, inner),
            st.builds(lambda a, p, e: f"{a} LIKE {p}" + (f" ESCAPE {e}" if e else ""), inner,
                      literals, st.one_of(st.none(), st.sampled_from(["'!'", "'\\'", "'xx'", "''"]))),
            st.builds(lambda a, neg: f"{a} IS {'NOT ' if neg else ''}NULL", inner, st.booleans()),
            st.builds(lambda c, a, b: f"CASE WHEN {c} THEN {a} ELSE {b} END", inner, inner, inner),
        )

    return st.recursive(st.one_of(literals, columns), extend, max_leaves=max_leaves)


# A typed corner of the grammar, so many statements plan and run on the historicals too.
numbers = st.recursive(
    st.one_of(st.sampled_from(["n", "d", "-0.0", "0", "3", "2.5", "NULL", "9223372036854775807"]),
              st.integers(-1000, 1000).map(str)),
    lambda inner: st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner),
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["ABS", "FLOOR", "CEIL", "SIGN", "SQRT", "LN", "EXP"]),
                  inner),
        st.builds(lambda a, b: f"ROUND({a}, {b})", inner, st.integers(-3, 3).map(str)),
        st.builds(lambda a, b: f"COALESCE({a}, {b})", inner, inner),
        st.builds(lambda a: f"CHAR_LENGTH({a})", st.sampled_from(["s", "'x'", "UPPER(s)"])),
        st.builds(lambda a: f"TIMESTAMP_TO_MILLIS({a})", st.sampled_from(["__time", "TIME_FLOOR(__time, 'PT1H')"])),
    ),
    max_leaves=4)
texts = st.recursive(
    st.one_of(st.sampled_from(["s", "'abc'", "''", "'é漢'", "NULL"]), st.text("ab%_é", max_size=4).map(_quoted)),
    lambda inner: st.one_of(
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["UPPER", "LOWER", "TRIM", "REVERSE"]), inner),
        st.builds(lambda a, b, c: f"SUBSTRING({a}, {b}, {c})", inner, st.integers(-2, 5).map(str),
                  st.integers(-1, 5).map(str)),
        st.builds(lambda a, b: f"CONCAT({a}, {b})", inner, inner),
        st.builds(lambda a, b: f"({a} || {b})", inner, inner),
        st.builds(lambda a, n, c: f"LPAD({a}, {n}, {c})", inner, st.sampled_from(["0", "3", "10", "-1"]),
                  st.sampled_from(["'*'", "''", "'ab'"])),
        st.builds(lambda a, n: f"REPEAT({a}, {n})", inner, st.sampled_from(["0", "2", "-1"])),
        st.builds(lambda a, p: f"REGEXP_EXTRACT({a}, {p})", inner, st.sampled_from(["'a.'", "'(b)'", "'['", "'^'"])),
        st.builds(lambda a: f"TIME_FORMAT(__time, {a})",
                  st.sampled_from(["'yyyy-MM-dd HH:mm'", "'EEE'", "'qqq'", "'xx'"])),
    ),
    max_leaves=4)
conditions = st.recursive(
    st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", numbers, st.sampled_from(["=", "<>", "<", ">=", "<=>"]), numbers),
        st.builds(lambda a, op, b: f"{a} {op} {b}", texts, st.sampled_from(["=", "<>", ">"]), texts),
        st.builds(lambda a, p: f"{a} LIKE {p}", texts, st.sampled_from(["'a%'", "'%_'", "'%'", "'a!%' ESCAPE '!'"])),
        st.builds(lambda a, xs: f"{a} IN ({', '.join(xs)})", numbers, st.lists(numbers, min_size=1, max_size=5)),
        st.builds(lambda a, xs: f"{a} NOT IN ({', '.join(xs)})", texts, st.lists(texts, min_size=1, max_size=3)),
        st.builds(lambda a: f"{a} IS NULL", st.one_of(numbers, texts)),
        st.builds(lambda a, p: f"REGEXP_LIKE({a}, {p})", texts, st.sampled_from(["'^a'", "'é'", "'(('", "'.*'"])),
        st.builds(lambda t: f"__time >= {t}", st.sampled_from(["TIMESTAMP '2015-09-12 10:00:00'",
                                                              "CURRENT_TIMESTAMP - INTERVAL '1' DAY"])),
    ),
    lambda inner: st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", inner, st.sampled_from(["AND", "OR"]), inner),
        st.builds(lambda a: f"NOT ({a})", inner)),
    max_leaves=4)


@st.composite
def typed_selects(draw) -> str:
    keys = draw(st.lists(st.one_of(texts, numbers, st.just("TIME_FLOOR(__time, 'PT6H')")), max_size=2))
    values = draw(st.lists(st.one_of(
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["SUM", "MIN", "MAX", "AVG"]), numbers),
        st.builds(lambda a: f"COUNT(DISTINCT {a})", st.one_of(texts, numbers)),
        st.builds(lambda a: f"APPROX_COUNT_DISTINCT({a})", texts),
        st.just("COUNT(*)")), min_size=1 if keys else 0, max_size=2))
    if not keys and not values:
        values = draw(st.lists(st.one_of(texts, numbers), min_size=1, max_size=3))
    sql = f"SELECT {', '.join(keys + values)} FROM fz"
    if draw(st.booleans()):
        sql += f" WHERE {draw(conditions)}"
    if keys:
        sql += " GROUP BY " + ", ".join(str(i + 1) for i in range(len(keys)))
    if draw(st.booleans()) and (keys or not values or "(" not in values[0]):
        sql += f" ORDER BY 1{draw(st.sampled_from(['', ' DESC']))} LIMIT {draw(st.integers(0, 20))}"
    return sql


aggregates = st.one_of(
    st.just("COUNT(*)"),
    st.builds(lambda f, d, e: f"{f}({'DISTINCT ' if d else ''}{e})", st.sampled_from(AGGREGATES), st.booleans(),
              expressions(3)),
)


@st.composite
def selects(draw) -> str:
    grouped = draw(st.booleans())
    keys = draw(st.lists(expressions(3), min_size=1, max_size=2)) if grouped else []
    items = keys + (draw(st.lists(aggregates, min_size=1, max_size=2)) if grouped else
                    draw(st.lists(st.one_of(expressions(), st.just("*")), min_size=1, max_size=3)))
    sql = f"SELECT {'DISTINCT ' if draw(st.booleans()) and not grouped else ''}{', '.join(items)} " \
          f"FROM {draw(st.sampled_from(TABLES))}"
    if draw(st.booleans()):
        sql += f" WHERE {draw(expressions())}"
    if grouped:
        sql += " GROUP BY " + ", ".join(draw(st.sampled_from([keys, [str(i + 1) for i in range(len(keys))]])))
        if draw(st.booleans()):
            sql += f" HAVING {draw(aggregates)} > {draw(literals)}"
    if draw(st.booleans()):
        sql += f" ORDER BY {draw(st.sampled_from(['1', '2', 'n', 's DESC', 'COUNT(*)', '__time']))}"
    if draw(st.booleans()):
        sql += f" LIMIT {draw(st.sampled_from(['0', '1', '10', '-1', '9223372036854775808', 'NULL', '1.5']))}"
        if draw(st.booleans()):
            sql += f" OFFSET {draw(st.sampled_from(['0', '3', '99999999999999999999', 'x']))}"
    prefix = draw(st.sampled_from(["", "", "", "EXPLAIN PLAN FOR ", "SET timeout = 10000; ",
                                   "SET sqlTimeZone = 'Asia/Kolkata'; ", "SET useCache = ; "]))
    return prefix + sql


GARBAGE = ["(", ")", ",", "'", '"', "SELECT", "FROM", "WHERE", "GROUP", "BY", ";", "*", "AS", "JOIN", "--", "/*"]


@st.composite
def statements(draw) -> str:
    sql = draw(st.one_of(typed_selects(), selects()))
    how = draw(st.sampled_from(["valid"] * 5 + ["drop", "insert", "swap", "cut"]))
    tokens = sql.split(" ")
    if how == "drop" and len(tokens) > 1:
        del tokens[draw(st.integers(0, len(tokens) - 1))]
    elif how == "insert":
        tokens.insert(draw(st.integers(0, len(tokens))), draw(st.sampled_from(GARBAGE)))
    elif how == "swap" and len(tokens) > 1:
        i = draw(st.integers(0, len(tokens) - 2))
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    elif how == "cut":
        return sql[:draw(st.integers(0, len(sql)))]
    return " ".join(tokens)


# ---- the property --------------------------------------------------------------------------------------

def check_failure(sql: str, err: adbc_driver_manager.Error) -> None:
    message = str(err)
    assert "Traceback" not in message and 'File "' not in message, (sql, message)
    assert ROOT not in message and "site-packages" not in message, (sql, message)
    if err.status_code in USER_STATUSES:
        return
    assert err.status_code == Status.INTERNAL and ERROR_ID.search(message), \
        f"neither a user error nor an internal error with an id:\n  {sql}\n  {err.status_code}: {message}"


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sql=statements())
def test_every_failure_is_a_user_error_or_an_internal_error_with_an_id(conn, sql):
    assume(sql.strip())  # the driver itself refuses empty text before it reaches the server
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
            cur.fetch_arrow_table()
        except adbc_driver_manager.Error as err:
            check_failure(sql, err)


GRPC_USER_CODES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED,
                   grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ALREADY_EXISTS}


@pytest.fixture(scope="module")
def broker_stub(cluster):
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker.grpc.port}") as ch:
        yield broker_pb2_grpc.BrokerServiceStub(ch)


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sql=statements())
def test_the_same_grammar_through_the_grpc_broker_service(broker_stub, sql):
    """The gRPC edge classifies with the same front door, and sends its own statuses."""
    try:
        list(broker_stub.Query(broker_pb2.QueryRequest(sql=sql, timeout_ms=30_000), timeout=60))
    except grpc.RpcError as err:
        message = err.details() or ""
        assert "Traceback" not in message and 'File "' not in message and ROOT not in message, (sql, message)
        if err.code() not in GRPC_USER_CODES:
            assert err.code() == grpc.StatusCode.INTERNAL and ERROR_ID.search(message), \
                f"neither a user error nor an internal error with an id:\n  {sql}\n  {err.code()}: {message}"


def test_the_server_still_answers(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS c FROM fz")
        assert cur.fetchall() == [(ROWS,)]
