"""The cluster end to end in one process: publish, load with replication, query through the broker
over gRPC and Flight, and compare with the in-process engine over the same segments."""

from __future__ import annotations

import json
import urllib.request

import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from common.demo import table as demo_table
from common.query import execute
from common.segment import Segment
from services.cli.cluster_client import ClusterError
from tests.harness.embedded_cluster import EmbeddedCluster

IV = ["2015-09-12/2015-09-19"]
ROWS = 120_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("cluster")), historicals=2)
    data = demo_table(ROWS, days=7)
    c.descriptors = c.publish(data, "wiki", sort_columns=["channel"])
    c.wait_queryable("wiki", len(c.descriptors), replicas=2)
    c.local_segments = [Segment.open(c.storage().uri(d.location).removeprefix("file://")) for d in c.descriptors]
    yield c
    c.stop()


QUERIES = [
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": IV, "granularity": "hour",
     "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "added", "fieldName": "added"}]},
    {"queryType": "topN", "dataSource": "wiki", "intervals": IV, "granularity": "all", "dimension": "page",
     "metric": "added", "threshold": 10, "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]},
    {"queryType": "groupBy", "dataSource": "wiki", "intervals": IV, "granularity": "day",
     "dimensions": ["channel", "isRobot"], "filter": {"type": "equals", "column": "namespace", "matchValue": "Main"},
     "aggregations": [{"type": "count", "name": "c"}, {"type": "doubleMax", "name": "m", "fieldName": "delta"},
                      {"type": "stringFirst", "name": "first_user", "fieldName": "user"}],
     "limitSpec": {"columns": [{"dimension": "c", "direction": "descending"}, "channel", "isRobot", "__time"]}},
    {"queryType": "scan", "dataSource": "wiki", "intervals": IV, "columns": ["__time", "user", "added"],
     "filter": {"type": "in", "dimension": "channel", "values": ["#de.wikipedia", "#fr.wikipedia"]},
     "order": "descending", "limit": 50},
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": IV, "granularity": "day",
     "aggregations": [{"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "round": True}]},
]


def test_every_segment_is_served_twice(cluster):
    status = cluster.client.load_status("wiki")
    assert len(status) == len(cluster.descriptors) == 7
    assert all(len(s.servers) == 2 and s.wanted_replicas == 2 for s in status)


@pytest.mark.parametrize("query", QUERIES, ids=[q["queryType"] for q in QUERIES])
def test_broker_answers_like_the_in_process_engine(cluster, query):
    got, stats = cluster.client.native(query)
    want = execute(query, cluster.local_segments).table
    assert got.to_pylist() == want.to_pylist()
    assert stats.segments == 7


@pytest.mark.parametrize("query", QUERIES, ids=[q["queryType"] for q in QUERIES])
def test_execute_and_a_historical_make_identical_partials_through_the_runner(cluster, query):
    """One schedule: a historical's partial over its segments (bytes in, QueryRunner, bytes out)
    is the in-process runner's partial over the same segments, rows and statistics alike."""
    from common.query import query_runner
    from common.query.engine import union_schema
    from services.historical.client import HistoricalClient

    node = cluster.historicals[0]
    client = HistoricalClient(f"127.0.0.1:{node.grpc.port}")
    try:
        schema = union_schema(cluster.local_segments)
        text = json.dumps(query)
        remote = client.ask(text, "same-partials", [d.id for d in cluster.descriptors], schema, 30).read()
    finally:
        client.close()
    prepared = query_runner.prepare(query, cluster.local_segments)
    local = query_runner.QueryRunner().run(prepared)
    assert remote.table.schema.names == local.table.schema.names
    assert remote.table.to_pylist() == local.table.to_pylist()
    assert remote.stats == local.stats


@pytest.mark.parametrize("query", QUERIES, ids=[q["queryType"] for q in QUERIES])
def test_partials_too_large_for_one_message_are_streamed_without_running_twice(cluster, query, monkeypatch):
    import services.historical.server as historical_server

    def segments_run() -> float:
        return sum(s.value for h in cluster.historicals for m in h.metrics.segments_queried.collect()
                   for s in m.samples if s.name.endswith("_total"))

    monkeypatch.setattr(historical_server, "ONE_MESSAGE_BYTES", 0)  # every partial is "too large"
    before = segments_run()
    got, stats = cluster.client.native(query)
    assert got.to_pylist() == execute(query, cluster.local_segments).table.to_pylist()
    assert stats.segments == 7
    # Each segment ran once: the partials kept were streamed, not computed again, and forgotten.
    assert segments_run() - before == 7
    assert all(len(h.servicer.parked) == 0 for h in cluster.historicals)


def test_a_historical_answers_a_repeated_request_from_its_preparation_and_alike(cluster):
    """The broker writes a cached plan's request once (all but the query id, appended); the
    historical finds its preparation again by the query, declared types and segments, and answers
    every form of the request alike."""
    import dataclasses

    from common.query.engine import union_schema
    from services.historical.client import HistoricalClient, query_id_field
    from services.rpc.arrow_stream import chunks_to_table
    from services.rpc.gen.strata.v1 import types_pb2

    sids = [d.id for d in cluster.descriptors]
    node = cluster.historicals[0]
    client = HistoricalClient(f"127.0.0.1:{node.grpc.port}")
    try:
        schema = union_schema(cluster.local_segments)
        text = json.dumps(QUERIES[0])
        first = client.ask(text, "repeat-1", sids, schema, 30).read()
        kept = {key: p for key, p in node.servicer.prepared.items() if key.fingerprint == text}
        assert client.request_bytes(text, "a", sids, schema)[:-1] == client.request_bytes(text, "b", sids, schema)[:-1]
        second = client.ask(text, "repeat-2", sids, schema, 30).read()
        assert {key: p for key, p in node.servicer.prepared.items() if key.fingerprint == text} == kept  # found again
        assert first.stats.segments == 7 and first.table.num_rows == 7 * 24
        assert second.table.equals(first.table) and second.stats == first.stats
        # Fewer segments: another request, another answer.
        fewer = client.ask(text, "repeat-3", sids[:3], schema, 30).read()
        assert fewer.stats.segments == 3
        # A request over very many segments is written every time, not kept.
        written = len(client._written)
        many = [dataclasses.replace(sids[0], partition=p) for p in range(500)]
        assert client.request_bytes(text, "x", many, schema) == client.request_bytes(text, "x", many, schema)
        assert len(client._written) == written
        # The query id written first, as another client may: the same answer.
        raw = client._channel.unary_unary("/strata.v1.HistoricalService/RunQueryOnce",
                                          response_deserializer=types_pb2.ArrowChunk.FromString)
        reply = raw(query_id_field("repeat-4") + client.request_bytes(text, "", sids, schema), timeout=30)
        table, stats = chunks_to_table([reply])
        assert table.equals(first.table) and stats == first.stats
    finally:
        client.close()

def test_a_historical_call_answers_and_fails_with_the_status_of_each_error(cluster, monkeypatch):
    """RunQueryOnce (a one-message stream on the public API): the reply, the errors with their
    codes, cancellation."""
    import dataclasses
    import threading

    import services.historical.server as historical_server
    from common.query.engine import union_schema
    from services.historical.client import HistoricalClient

    node = cluster.historicals[0]
    client = HistoricalClient(f"127.0.0.1:{node.grpc.port}")
    try:
        sids = [d.id for d in cluster.descriptors]
        schema = union_schema(cluster.local_segments)
        text = json.dumps(QUERIES[0])
        got = client.ask(text, "either-1", sids, schema, 30).read()
        assert got.stats.segments == 7 and got.table.num_rows == 7 * 24
        absent = dataclasses.replace(sids[0], version="no-such-version")
        with pytest.raises(grpc.RpcError) as err:
            client.ask(text, "either-2", [absent], schema, 30).read()
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and "no-such-version" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            client.ask(text, "either-3", sids, schema, -1.0).read()  # a deadline already passed
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # Cancelled while the historical works on it (held until the cancel is in): CANCELLED.
        release, started = threading.Event(), threading.Event()
        real_run = historical_server.engine.run

        def held(*args, **kwargs):
            started.set()
            release.wait(30)
            return real_run(*args, **kwargs)

        monkeypatch.setattr(historical_server.engine, "run", held)
        try:
            call = client.ask(text, "either-4", sids[:1], schema, 30)
            assert started.wait(30)
            call.cancel()
            with pytest.raises(grpc.RpcError) as err:
                call.read()
            assert err.value.code() == grpc.StatusCode.CANCELLED
        finally:
            release.set()
            monkeypatch.undo()
        # A corrupt segment: DATA_LOSS (the broker asks another replica), through the taxonomy.
        from common.errors import SegmentCorruptError

        def corrupt(*args, **kwargs):
            raise SegmentCorruptError("segment x: part 'page' failed its checksum")

        reported = []
        monkeypatch.setattr(historical_server.engine, "run", corrupt)
        monkeypatch.setattr(node.node, "report_corrupt", reported.append)
        try:
            with pytest.raises(grpc.RpcError) as err:
                client.ask(text, "either-6", sids[:1], schema, 30).read()
            assert err.value.code() == grpc.StatusCode.DATA_LOSS and "checksum" in err.value.details()
            assert "Traceback" not in err.value.details() and len(reported) == 1
        finally:
            monkeypatch.undo()
        bad = json.dumps({**QUERIES[0], "granularity": "fortnightly"})
        with pytest.raises(grpc.RpcError) as err:
            client.ask(bad, "either-5", sids, schema, 30).read()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "fortnightly" in err.value.details()
    finally:
        client.close()

def test_garbled_bytes_to_a_historical_are_invalid_argument(cluster):
    from services.rpc.gen.strata.v1 import historical_pb2

    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.historicals[0].grpc.port}")
    try:
        once = channel.unary_unary("/strata.v1.HistoricalService/RunQueryOnce")
        for body in (b"\xff\xff\xff", b"\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", b"\x0a\x05ab"):
            with pytest.raises(grpc.RpcError) as err:
                once(body, timeout=30)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
            assert "not a valid strata.v1.RunQueryRequest" in err.value.details()
        bad = historical_pb2.RunQueryRequest(query_json='{"queryType": "nope", "dataSource": "wiki"}', query_id="q")
        with pytest.raises(grpc.RpcError) as err:
            once(bad.SerializeToString(), timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "bad query" in err.value.details()
    finally:
        channel.close()

def test_large_results_stream_past_the_grpc_message_limit(cluster):
    got, _ = cluster.client.native({"queryType": "scan", "dataSource": "wiki", "intervals": IV,
                                    "columns": ["__time", "page", "user", "comment", "added"]})
    assert got.num_rows == ROWS
    assert got.nbytes > 4 * 1024 * 1024


def test_errors_name_the_problem(cluster):
    with pytest.raises(ClusterError, match="INVALID_ARGUMENT.*unknown column 'pge'.*did you mean 'page'"):
        cluster.client.native({"queryType": "scan", "dataSource": "wiki", "intervals": IV, "columns": ["pge"]})
    with pytest.raises(ClusterError, match="unknown datasource 'wikki'"):
        cluster.client.native({"queryType": "scan", "dataSource": "wikki", "intervals": IV})
    with pytest.raises(ClusterError, match="not valid JSON"):
        cluster.client.native("{nope")


def test_timeout_is_a_clear_error(cluster):
    query = {"queryType": "groupBy", "dataSource": "wiki", "intervals": IV, "granularity": "minute",
             "dimensions": ["page", "user"], "aggregations": [{"type": "count", "name": "c"}]}
    with pytest.raises(ClusterError, match="DEADLINE_EXCEEDED.*timed out"):
        cluster.client.native(query, timeout_s=0.001)


def test_flight_runs_native_queries(cluster):
    client = flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
    ticket = flight.Ticket(json.dumps(QUERIES[0]).encode())
    table = client.do_get(ticket).read_all()
    assert table.to_pylist() == execute(QUERIES[0], cluster.local_segments).table.to_pylist()
    client.close()


def test_health_reflection_and_metrics(cluster):
    for port in (cluster.coordinator.grpc.port, cluster.broker.grpc.port, cluster.historicals[0].grpc.port):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
            reply = next(reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
            names = {s.name for s in reply.list_services_response.service}
            assert "grpc.health.v1.Health" in names and any(n.startswith("strata.v1.") for n in names)
    cluster.client.native(QUERIES[0])
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.broker.http.port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'strata_queries_total{datasource="wiki",query_type="timeseries",status="ok"}' in text
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.historicals[0].http.port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert "strata_segments_served 7.0" in text and "strata_segment_loads_total" in text
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.coordinator.http.port}/status/ready", timeout=5) as r:
        assert json.loads(r.read())["leader"] is True
    # The leader's view: nodes by role, replication per datasource, tasks by state.
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.coordinator.http.port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert f'strata_servers{{node_role="historical"}} {float(len(cluster.historicals))}' in text
    assert 'strata_segments_unavailable{datasource="wiki"} 0.0' in text
    assert 'strata_segments_under_replicated{datasource="wiki"}' in text
    assert 'strata_tasks{state="FAILED"}' in text and "process_start_time_seconds" in text


def test_a_newer_version_overshadows_and_old_segments_are_dropped(cluster):
    day = demo_table(ROWS, days=7).filter(pa.compute.less(pa.compute.field("__time").cast(pa.int64()),
                                                          1442102400000))  # 2015-09-12 only
    new = cluster.publish(day.slice(0, 1000), "wiki")
    assert len(new) == 1
    old = [d for d in cluster.descriptors if d.id.interval == new[0].id.interval][0]

    def switched():
        got, _ = cluster.client.native({"queryType": "timeseries", "dataSource": "wiki",
                                        "intervals": ["2015-09-12/2015-09-13"], "granularity": "all",
                                        "aggregations": [{"type": "count", "name": "c"}]})
        return got.column("c")[0].as_py() == 1000
    cluster.wait_until(switched, what="broker serving the new version")
    cluster.wait_until(lambda: all(cluster.historicals[i].node.segment(old.id) is None for i in range(2)),
                       what="old version dropped from historicals")
    records = {str(r.id): r.used for r in cluster.coordinator.store.list("wiki", include_unused=True)}
    assert records[str(old.id)] is False


def test_a_cancelled_query_stops_waiting_for_historicals(cluster):
    from services.broker.query_executor import Cancelled

    query = {"queryType": "groupBy", "dataSource": "wiki", "intervals": IV, "granularity": "minute",
             "dimensions": ["page", "user"], "aggregations": [{"type": "count", "name": "c"}]}
    with pytest.raises(Cancelled, match="cancelled"):
        cluster.broker.executor.execute(query, 30.0, "q-cancel", is_active=lambda: False)


def test_the_role_clients_over_real_servers(cluster):
    from common.errors import ValidationError
    from services.coordinator.client import CoordinatorClient
    from services.historical.client import HistoricalClient

    coordinator = CoordinatorClient(f"127.0.0.1:{cluster.coordinator.grpc.port}")
    try:
        published = coordinator.list_segments("wiki", include_unused=False)
        stored = cluster.coordinator.store.list("wiki", include_unused=False)
        assert sorted(r.id for r in published) == sorted(r.id for r in stored) and published
        assert all(r.used and r.descriptor.location for r in published)
        roles = sorted(s.info.role for s in coordinator.servers().servers)
        assert roles == ["broker", "coordinator", "historical", "historical"]
        with pytest.raises(ValidationError, match="task type must be"):  # a refused request stays a user error
            coordinator.submit_task("wiki", "no-such-type", "")
    finally:
        coordinator.close()
    # The broker reaches the coordinator through the same client (sys tables), not the CLI's.
    assert type(cluster.broker.node.coordinator_client()).__name__ == "CoordinatorClient"

    historical = HistoricalClient(f"127.0.0.1:{cluster.historicals[0].grpc.port}")
    try:
        served = cluster.historicals[0].node.status()["served"]
        sids = [s for s in served if s.datasource == "wiki"]
        call = historical.run_query(json.dumps(QUERIES[0]), "q-client", sids, dict(cluster.local_segments[0].schema),
                                    timeout_s=30)
        partial = historical.read_partial(call)
        assert partial.stats.segments == len(sids) and partial.table.num_rows > 0
    finally:
        historical.close()


def test_segment_allocation_over_grpc_reserves_what_each_appender_builds(cluster):
    from services.grpc_server import channel
    from services.ingestion.coordinator_publisher import CoordinatorPublisher
    from services.rpc.convert import interval_to_proto
    from services.rpc.gen.strata.v1 import coordinator_pb2, coordinator_pb2_grpc

    day = demo_table(2000, days=1)
    [published] = cluster.publish(day, "alloc", rows_per_segment=10_000)
    iv = published.id.interval
    with channel(f"127.0.0.1:{cluster.coordinator.grpc.port}") as ch:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
        first = CoordinatorPublisher(stub, "t1", "alloc").allocate("alloc", [iv], "insert", {iv: 3})[iv]
        second = CoordinatorPublisher(stub, "t2", "alloc").allocate("alloc", [iv], "insert", {iv: 2})[iv]
        # Appends keep the published set's version and core count, after each other's partitions.
        assert (first.version, first.first_partition, first.core_partitions) == (published.id.version, 1, 1)
        assert (second.version, second.first_partition, second.core_partitions) == (published.id.version, 4, 1)
        replaced = CoordinatorPublisher(stub, "t3", "alloc").allocate("alloc", [iv], "replace", {iv: 2})[iv]
        assert replaced.version > published.id.version and (replaced.first_partition, replaced.core_partitions) == (0, 0)
        with pytest.raises(grpc.RpcError) as refused:
            stub.AllocateSegments(coordinator_pb2.AllocateSegmentsRequest(
                datasource="alloc", intervals=[interval_to_proto(iv)], mode="insert", task_id="t4",
                partitions=[1, 2]), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "2 partition counts for 1 intervals" in refused.value.details()

