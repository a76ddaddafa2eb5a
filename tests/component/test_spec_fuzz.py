"""Mutated specs through every API that takes one, against one real cluster: catalog table specs
through the coordinator's REST API and its gRPC CatalogService, native query JSON through the
broker's gRPC BrokerService and plain Flight tickets (SQL's own grammar fuzzer is
tests/component/test_sql_fuzz.py).

Hypothesis starts from valid specs and breaks one thing at a time: a value replaced by one of the
wrong type (null, booleans, huge and negative numbers, -0.0, NaN and infinities, empty and unicode
strings with NUL, long strings, lists, objects), a key removed, an unknown key added, a value wrapped
in a list, nested far too deep. Every answer must be a success or a user error (HTTP 400/404/409,
gRPC INVALID_ARGUMENT/NOT_FOUND/ALREADY_EXISTS/UNIMPLEMENTED) whose message is clean (no traceback,
no server path) and names the field that was broken (the key, or the key that holds it); never an
internal error. Examples are bounded and derandomized: the same run every time, in seconds.
"""

from __future__ import annotations

import copy
import http.client
import itertools
import json
import math
import re

import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc, catalog_pb2, catalog_pb2_grpc
from tests.harness.embedded_cluster import EmbeddedCluster

START = 1442016000000
ROWS = 200
SERVER_DETAIL = re.compile(r"Traceback|File \"|\.py\b|/work/|site-packages")
FUZZ = settings(max_examples=200, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

CATALOG_SPECS = [
    {"type": "datasource",
     "properties": {"description": "edits", "segmentGranularity": "PT1H", "targetSegmentRows": 4000000,
                    "clusterKeys": [{"column": "channel"}, {"column": "added", "desc": True}],
                    "hiddenColumns": ["old"], "sealed": True},
     "columns": [{"name": "__time", "sqlType": "TIMESTAMP"}, {"name": "channel", "sqlType": "VARCHAR"},
                 {"name": "added", "sqlType": "BIGINT", "properties": {"description": "bytes"}},
                 {"name": "payload", "sqlType": "COMPLEX<json>", "properties": {"maxFields": 10}}]},
    {"type": "inline", "properties": {"format": "csv", "data": ["a,b,1", "c,d,2"], "skipHeaderRows": 0},
     "columns": [{"name": "x", "sqlType": "VARCHAR"}, {"name": "z", "sqlType": "BIGINT"}]},
    {"type": "local", "properties": {"format": "tsv", "delimiter": "|", "baseDir": "/data", "filePattern": "*.tsv",
                                     "skipHeaderRows": 1}},
    {"type": "http", "properties": {"format": "json", "uris": ["https://example.com/a.json"]},
     "columns": [{"name": "a"}]},
]
INTERVALS = ["2015-09-12/2015-09-13"]
NATIVE_QUERIES = [
    {"queryType": "timeseries", "dataSource": "f", "intervals": INTERVALS, "granularity": "hour",
     "filter": {"type": "selector", "dimension": "s", "value": "a"},
     "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"}],
     "context": {"timeout": 30000}},
    {"queryType": "topN", "dataSource": "f", "intervals": INTERVALS, "granularity": "all", "dimension": "s",
     "metric": "n", "threshold": 3, "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]},
    {"queryType": "groupBy", "dataSource": "f", "intervals": INTERVALS, "granularity": "all",
     "dimensions": ["s"], "aggregations": [{"type": "doubleMax", "name": "d", "fieldName": "d"}],
     "filter": {"type": "and", "fields": [{"type": "bound", "dimension": "n", "lower": "1", "ordering": "numeric"},
                                          {"type": "in", "dimension": "s", "values": ["a", "b"]}]},
     "limitSpec": {"type": "default", "limit": 5, "columns": [{"dimension": "d", "direction": "descending"}]}},
    {"queryType": "scan", "dataSource": "f", "intervals": INTERVALS, "columns": ["__time", "s", "n"], "limit": 4,
     "order": "ascending"},
]

WRONG_VALUES = [None, True, False, 0, -1, 10 ** 30, -(2 ** 63) - 1, -0.0, 1e308, 2.5, math.nan, math.inf,
                -math.inf, "", "ÿ 𝔘ni☃ode\u0000", "x" * 5000, "-1", "DAY", [], {}, [None], [[1]], {"a": {"b": []}},
                ["a", 1, None]]


def _paths(doc, prefix=()):
    """Every position in ``doc``, as the keys/indexes that lead to it."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for step in path:
        doc = doc[step]
    return doc


def _deep(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mutated(draw, bases):
    """(document, the keys naming the broken place, what was done)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    path = draw(st.sampled_from([p for p in _paths(doc) if p]))
    parent, last = _get(doc, path[:-1]), path[-1]
    kind = draw(st.sampled_from(["replace", "replace", "replace", "remove", "unknown key", "wrap", "deep"]))
    if kind == "replace":
        parent[last] = draw(st.sampled_from(WRONG_VALUES))
    elif kind == "remove":
        del parent[last]
    elif kind == "unknown key" and isinstance(parent, dict):
        key = draw(st.sampled_from(["bogus", "ünïcode", "", "__proto__", "x" * 300]))
        parent[key] = draw(st.sampled_from(WRONG_VALUES))
        path = path[:-1] + (key,)
    elif kind == "wrap":
        parent[last] = [parent[last]]
    else:
        parent[last] = _deep(draw(st.sampled_from([50, 150, 400])))
    names = [str(step) for step in path if isinstance(step, str)]
    return doc, names, f"{kind} at {'/'.join(map(str, path))}"


def _names_the_field(message: str, names: list[str], doc) -> bool:
    """The message names the broken key or one that holds it (or, for a column, its name, or a
    top-level field whose reference the change broke: a topN 'metric' naming a renamed aggregation)."""
    candidates = set(names)
    if isinstance(doc, dict):
        candidates.update(k for k in doc if isinstance(k, str) and len(k) > 3)
    if isinstance(doc, dict):
        for column in doc.get("columns") or [] if isinstance(doc.get("columns"), list) else []:
            if isinstance(column, dict) and isinstance(column.get("name"), str):
                candidates.add(column["name"])
    text = message.lower()
    stems = {name.lower()[:7] if len(name) >= 7 else name.lower() for name in candidates if name}
    return any(name and (name[:60].lower() in text or name.lower().rstrip("s") in text) for name in candidates) \
        or any(stem in text for stem in stems) \
        or "nest" in text


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("specfuzz")), historicals=1)
    try:
        table = pa.table({
            "__time": pa.array([START + i * 300_000 for i in range(ROWS)], pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")),
            "s": pa.array(["a", "b", "c", None][i % 4] for i in range(ROWS)),
            "n": pa.array(range(ROWS), pa.int64()),
            "d": pa.array([i / 3 for i in range(ROWS)], pa.float64())})
        c.wait_queryable("f", len(c.publish(table, "f")))
        yield c
    finally:
        c.stop()


_names = itertools.count()


def _dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True)  # NaN and Infinity go out as JSON's common extension


# ---- catalog specs -------------------------------------------------------------------------------
@FUZZ
@given(case=mutated(CATALOG_SPECS))
def test_catalog_specs_over_rest(cluster, case):
    doc, names, what = case
    schema = "druid" if doc.get("type") == "datasource" else "ext"
    conn = http.client.HTTPConnection("127.0.0.1", cluster.coordinator.http.port, timeout=30)
    try:
        conn.request("POST", f"/druid/coordinator/v1/catalog/tables/{schema}/fz{next(_names)}?action=Force",
                     body=_dumps(doc).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        status, body = response.status, response.read()
    finally:
        conn.close()
    assert status in (200, 400, 404, 409), (what, status, body[:300])
    if status != 200:
        message = json.loads(body)["error"]
        assert message and not SERVER_DETAIL.search(message), (what, message)
        assert _names_the_field(message, names, doc), (what, message)


@FUZZ
@given(case=mutated(CATALOG_SPECS))
def test_catalog_specs_over_grpc(cluster, case):
    doc, names, what = case
    schema = "druid" if doc.get("type") == "datasource" else "ext"
    with grpc.insecure_channel(f"127.0.0.1:{cluster.coordinator.grpc.port}") as ch:
        stub = catalog_pb2_grpc.CatalogServiceStub(ch)
        request = catalog_pb2.CreateTableRequest(id=catalog_pb2.TableId(schema=schema, name=f"fg{next(_names)}"),
                                                 spec_json=_dumps(doc), action="Force")
        try:
            stub.CreateTable(request, timeout=30)
            return
        except grpc.RpcError as exc:
            code, message = exc.code(), exc.details() or ""
    assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS,
                    grpc.StatusCode.UNIMPLEMENTED), (what, code, message)
    assert message and not SERVER_DETAIL.search(message), (what, message)
    assert _names_the_field(message, names, doc), (what, message)


# ---- native queries ------------------------------------------------------------------------------
USER_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED,
              grpc.StatusCode.DEADLINE_EXCEEDED)


@FUZZ
@given(case=mutated(NATIVE_QUERIES))
def test_native_queries_over_grpc(cluster, case):
    doc, names, what = case
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker.grpc.port}") as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        try:
            list(stub.Query(broker_pb2.QueryRequest(native_json=_dumps(doc), timeout_ms=30_000), timeout=60))
            return
        except grpc.RpcError as exc:
            code, message = exc.code(), exc.details() or ""
    assert code in USER_CODES, (what, code, message)
    assert message and not SERVER_DETAIL.search(message), (what, message)
    assert _names_the_field(message, names, doc), (what, message)


@FUZZ
@given(case=mutated(NATIVE_QUERIES))
def test_native_queries_over_flight(cluster, case):
    doc, names, what = case
    client = flight.FlightClient(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
    try:
        client.do_get(flight.Ticket(_dumps(doc).encode()), flight.FlightCallOptions(timeout=60)).read_all()
        return
    except flight.FlightInternalError as exc:
        pytest.fail(f"{what}: internal error {exc}")
    except (pa.ArrowException, KeyError) as exc:
        message = str(exc)
    finally:
        client.close()
    assert not isinstance(message, type(None))
    assert not SERVER_DETAIL.search(message), (what, message)
    assert _names_the_field(message, names, doc), (what, message)


def test_the_cluster_still_answers(cluster):
    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker.grpc.port}") as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        chunks = list(stub.Query(broker_pb2.QueryRequest(native_json=json.dumps(NATIVE_QUERIES[0])), timeout=60))
    assert chunks
