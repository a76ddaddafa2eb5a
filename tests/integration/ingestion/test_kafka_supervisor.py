"""A Kafka supervisor end to end: real Kafka-protocol broker (Tansu), a cluster whose coordinator
runs the supervisor's tasks in its warm task drivers (each a process of its own with its Spark
driver JVM, as in a deployment; the killed task kills its driver) doing real Spark micro-batches,
and queries through the broker. After every step the row count and a checksum equal what was produced, exactly:
suspend (the task is cancelled) and resume (a new task starts from the committed offsets) lose
and duplicate nothing. Lag (status and /metrics) builds up while suspended, to exactly what was
produced meanwhile, and goes back to 0 on resume; unparseable messages show in recentErrors with
their partition and offset."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import FINAL, rows

pytestmark = pytest.mark.integration
DEADLINE_S = 300.0  # a loaded 2-core machine: the first task waits for its driver's JVM


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Two warm drivers, one Spark session each for the module's tasks: the one after the killed
    # task's takes the next task at once while the killed one is replaced.
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("kafka")), historicals=1, coordinator={"warm_task_drivers": 2})
    try:
        c.supervisor_url = f"http://127.0.0.1:{c.coordinator.http.port}/druid/indexer/v1/supervisor"
        yield c
    finally:
        c.stop()


def events(first: int, n: int) -> list[dict]:
    return [{"ts": f"2024-05-0{1 + i % 3}T{i % 24:02d}:00:00Z", "id": i, "page": None if i % 7 == 0 else f"p{i % 5}",
             "added": i / 2 if i % 2 else i} for i in range(first, first + n)]


def wait_for(cluster, want_count: int, want_sum: int, datasource: str = "stream_wiki") -> None:
    deadline = time.monotonic() + DEADLINE_S
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, f"SELECT COUNT(*) AS c, SUM(id) AS s, COUNT(DISTINCT id) AS d FROM {datasource}")
            if got == [{"c": want_count, "s": want_sum, "d": want_count}]:
                return
            assert got[0]["c"] <= want_count, f"more rows than produced: {got}"  # a duplicate never heals
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - the datasource is not served yet
            got = exc
        time.sleep(0.5)
    status = requests.get(f"{cluster.supervisor_url}/{datasource}/status", timeout=30).json()
    tasks = [(t.id, t.state, t.error[:500]) for t in cluster.client.tasks(datasource)]
    raise AssertionError(f"wanted {want_count} rows (id sum {want_sum}), last got {got}; status {status}; "
                         f"tasks {tasks}")


def supervisor_status(cluster, datasource: str) -> dict:
    response = requests.get(f"{cluster.supervisor_url}/{datasource}/status", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["payload"]


def lag_metrics(cluster, supervisor: str) -> tuple[float | None, dict[str, float]]:
    """(strata_ingest_kafka_lag, partition -> strata_ingest_kafka_partition_lag) on the coordinator's /metrics."""
    text = requests.get(f"http://127.0.0.1:{cluster.coordinator.http.port}/metrics", timeout=30).text
    total, parts = None, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("supervisor") != supervisor:
                continue
            if sample.name == "strata_ingest_kafka_lag":
                total = sample.value
            elif sample.name == "strata_ingest_kafka_partition_lag":
                parts[sample.labels["partition"]] = sample.value
    return total, parts


def wait_for_lag(cluster, datasource: str, per_partition: dict[str, int]) -> dict:
    """Waits until the status and the gauges both say ``per_partition``; returns the status."""
    want_total = sum(per_partition.values())
    deadline = time.monotonic() + 60
    while True:
        status = supervisor_status(cluster, datasource)
        metrics = lag_metrics(cluster, datasource)
        if (status["aggregateLag"] == want_total and status["minimumLag"] == per_partition
                and metrics == (want_total, {p: float(v) for p, v in per_partition.items()})):
            return status
        assert time.monotonic() < deadline, f"wanted lag {per_partition}; status {status}, metrics {metrics}"
        time.sleep(0.2)


def spec_for(datasource: str, topic: str, bootstrap: str) -> dict:
    return {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": datasource, "timestampSpec": {"column": "ts", "format": "iso"},
                       "granularitySpec": {"segmentGranularity": "DAY"}},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H"},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 50}}}


def test_task_killed_mid_stream_loses_and_duplicates_nothing(cluster, kafka_broker):  # noqa: F811
    kafka_broker.create_topic("killed", 2)
    produced = events(0, 100)
    kafka_broker.produce("killed", [(e["id"] % 2, json.dumps(e).encode()) for e in produced])
    response = requests.post(cluster.supervisor_url, json=spec_for("killed_wiki", "killed", kafka_broker.bootstrap),
                             timeout=30)
    assert response.status_code == 200, response.text
    wait_for(cluster, 100, sum(e["id"] for e in produced), "killed_wiki")
    # Many small micro-batches (maxRowsInMemory 50) are under way when the task is SIGKILLed.
    more = events(100, 400)
    kafka_broker.produce("killed", [(e["id"] % 2, json.dumps(e).encode()) for e in more])
    produced += more
    [task] = [t for t in cluster.client.tasks("killed_wiki") if t.state not in FINAL]
    pid = cluster.coordinator.task_runner.pid(task.id)
    assert pid is not None and pid in [d["pid"] for d in cluster.coordinator.task_runner.drivers()]
    os.kill(pid, signal.SIGKILL)  # the warm driver running the task: a real process and its JVM die
    deadline = time.monotonic() + DEADLINE_S
    while cluster.client.task(task.id).state not in FINAL:
        assert time.monotonic() < deadline, "the killed task was not settled"
        time.sleep(0.2)
    # The coordinator starts the next task from the committed offsets (after its retry pause).
    wait_for(cluster, len(produced), sum(e["id"] for e in produced), "killed_wiki")
    assert len(cluster.client.tasks("killed_wiki")) >= 2
    requests.post(f"{cluster.supervisor_url}/killed_wiki/terminate", timeout=30)


def test_supervisor_streams_exactly_once_across_suspend_and_resume(cluster, kafka_broker):  # noqa: F811
    kafka_broker.create_topic("stream-wiki", 3)
    produced = events(0, 300)
    kafka_broker.produce("stream-wiki", [(e["id"] % 3, json.dumps(e).encode()) for e in produced])
    spec = {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "stream_wiki", "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "DAY"}},
        "ioConfig": {"topic": "stream-wiki", "consumerProperties": {"bootstrap.servers": kafka_broker.bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H"},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 1000, "offsetFetchPeriod": "PT1S"}}}
    response = requests.post(cluster.supervisor_url, json=spec, timeout=30)
    assert response.status_code == 200, response.text
    wait_for(cluster, 300, sum(e["id"] for e in produced))

    more = events(300, 120)
    kafka_broker.produce("stream-wiki", [(e["id"] % 3, json.dumps(e).encode()) for e in more])
    produced += more
    wait_for(cluster, len(produced), sum(e["id"] for e in produced))
    status = supervisor_status(cluster, "stream_wiki")
    assert status["state"] == "RUNNING" and len(status["activeTasks"]) == 1
    assert sum(status["committedOffsets"].values()) == len(produced)

    # Suspend: the task is cancelled; events produced meanwhile wait in Kafka.
    assert requests.post(f"{cluster.supervisor_url}/stream_wiki/suspend", timeout=30).status_code == 200
    deadline = time.monotonic() + DEADLINE_S
    while any(t.state not in FINAL for t in cluster.client.tasks("stream_wiki")):
        assert time.monotonic() < deadline, "the suspended supervisor's task did not end"
        time.sleep(0.2)
    later = events(420, 60)
    committed = status["committedOffsets"]
    # One record per batch, so Tansu's latest offset is the log end (see tests/fixtures/kafka_broker.py),
    # and after the good ones two that do not parse, in partitions 0 and 1.
    before_ms = time.time_ns() // 1_000_000
    kafka_broker.produce("stream-wiki", [(e["id"] % 3, json.dumps(e).encode()) for e in later]
                         + [(0, b"{not json"), (1, b'{"id": -1, "page": "no timestamp"}')], one_per_batch=True)
    after_ms = time.time_ns() // 1_000_000
    assert rows(cluster, "SELECT COUNT(*) AS c FROM stream_wiki") == [{"c": len(produced)}]
    assert rows(cluster, "SELECT state, suspended FROM sys.supervisors") == [{"state": "SUSPENDED", "suspended": 1}]
    # Lag: exactly what came while suspended, per partition, on the status and on /metrics.
    waiting = {"0": 21, "1": 21, "2": 20}
    status = wait_for_lag(cluster, "stream_wiki", waiting)
    assert status["latestOffsets"] == {p: committed[p] + n for p, n in waiting.items()}
    assert status["state"] == "SUSPENDED" and status["healthy"] is True and status["offsetsLastUpdated"]
    # Lag in time: the oldest unread message was produced between before_ms and after_ms, and the
    # age is taken when the offsets were read.
    fetched_ms = int(datetime.fromisoformat(status["offsetsLastUpdated"].replace("Z", "+00:00")).timestamp() * 1000)
    assert set(status["minimumLagMillis"]) == {"0", "1", "2"}
    assert fetched_ms - after_ms <= status["aggregateLagMillis"] <= fetched_ms - before_ms, status
    assert status["aggregateLagMillis"] == max(status["minimumLagMillis"].values())
    assert requests.get(f"{cluster.supervisor_url}/stream_wiki/health", timeout=30).json() == {"healthy": True}

    # Resume: a new task starts from the committed offsets and loads just what came meanwhile.
    assert requests.post(f"{cluster.supervisor_url}/stream_wiki/resume", timeout=30).status_code == 200
    produced += later
    wait_for(cluster, len(produced), sum(e["id"] for e in produced))
    status = wait_for_lag(cluster, "stream_wiki", {"0": 0, "1": 0, "2": 0})
    assert status["state"] == "RUNNING" and status["healthy"] is True
    assert status["aggregateLagMillis"] == 0 and status["minimumLagMillis"] == {"0": 0, "1": 0, "2": 0}
    # The task's own view arrives with its progress report, just after its publish.
    deadline = time.monotonic() + 60
    while True:
        status = supervisor_status(cluster, "stream_wiki")
        [task] = status["activeTasks"]
        stats = requests.get(f"{cluster.supervisor_url}/stream_wiki/stats", timeout=30).json()
        totals = stats.get("0", {}).get(task["id"], {}).get("totals", {})
        unparseable = totals.get("buildSegments", {}).get("unparseable")
        if task["currentOffsets"] == status["latestOffsets"] and unparseable == 2:
            break
        assert time.monotonic() < deadline, f"the task's offsets and stats never caught up: {status}, {stats}"
        time.sleep(0.2)
    assert task["lag"] == {"0": 0, "1": 0, "2": 0}
    # The two bad messages: parse exceptions naming partition, offset and reason.
    bad = sorted((e["partition"], e["offset"], e["reason"]) for e in status["recentErrors"]
                 if e["exceptionClass"] == "ParseException")
    assert [(p, o) for p, o, _ in bad] == [(0, committed["0"] + 20), (1, committed["1"] + 20)], status["recentErrors"]
    assert bad[0][2].startswith("not JSON") and "no timestamp" in bad[1][2]
    got = rows(cluster, "SELECT page, COUNT(*) AS c, SUM(added) AS a FROM stream_wiki GROUP BY page ORDER BY page")
    want: dict = {}
    for e in produced:
        c, a = want.get(e["page"], (0, 0.0))
        want[e["page"]] = (c + 1, a + e["added"])
    assert sorted(((r["page"], r["c"], r["a"]) for r in got), key=repr) == sorted(
        ((p, c, a) for p, (c, a) in want.items()), key=repr)
    assert requests.post(f"{cluster.supervisor_url}/stream_wiki/terminate", timeout=30).status_code == 200
    # A terminated supervisor's lag gauges go.
    deadline = time.monotonic() + 30
    while lag_metrics(cluster, "stream_wiki") != (None, {}):
        assert time.monotonic() < deadline, "the terminated supervisor's lag gauges stayed"
        time.sleep(0.2)


def test_rollup_supervisor_with_the_catalogs_projection(cluster, kafka_broker):  # noqa: F811
    """Through the coordinator's task (in a warm driver): the catalog entry (read by the task at
    its start) gives every streamed segment its projection; rollup metrics show on the broker's Druid API;
    late messages (by the task's creation time) are thrown away and counted in /stats."""
    by_page = {"type": "aggregate", "name": "by_page", "groupingColumns": [{"type": "string", "name": "page"}],
               "aggregators": [{"type": "longSum", "name": "rows", "fieldName": "n"}]}
    table = {"type": "datasource", "properties": {"projections": [by_page]},
             "columns": [{"name": "page", "sqlType": "VARCHAR"}]}
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1/catalog/tables/druid/rolled_wiki"
    assert requests.post(url, json=table, timeout=30).status_code == 200
    kafka_broker.create_topic("rolled", 2)
    now = time.time_ns() // 1_000_000
    fresh = [{"ts": now - 600_000 + i, "id": i, "page": f"p{i % 3}"} for i in range(90)]
    late = [{"ts": now - 3 * 3_600_000, "id": 1000 + i, "page": "p0"} for i in range(10)]
    kafka_broker.produce("rolled", [(e["id"] % 2, json.dumps(e).encode()) for e in fresh + late])
    spec = {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "rolled_wiki", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"dimensions": ["page"]},
                       "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "DAY"},
                       "metricsSpec": [{"type": "count", "name": "n"},
                                       {"type": "longSum", "name": "id_sum", "fieldName": "id"}],
                       "transformSpec": {"transforms": [{"name": "page", "expression": "upper(page)"}]}},
        "ioConfig": {"topic": "rolled", "consumerProperties": {"bootstrap.servers": kafka_broker.bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H", "lateMessageRejectionPeriod": "PT1H"},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 1000}}}
    response = requests.post(cluster.supervisor_url, json=spec, timeout=30)
    assert response.status_code == 200, response.text
    want = sorted((f"P{k}", 30, sum(e["id"] for e in fresh if e["id"] % 3 == k)) for k in range(3))
    deadline = time.monotonic() + DEADLINE_S
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, "SELECT page, SUM(n) AS n, SUM(id_sum) AS s FROM rolled_wiki GROUP BY page "
                                "ORDER BY page")
            if sorted((r["page"], r["n"], r["s"]) for r in got) == want:
                break
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        time.sleep(0.5)
    else:
        raise AssertionError(f"wanted {want}, last got {got}; tasks "
                             f"{[(t.state, t.error[:300]) for t in cluster.client.tasks('rolled_wiki')]}")
    # Rolled up: at most one row per page and day per micro-batch, never one per message.
    [count] = rows(cluster, "SELECT COUNT(*) AS c FROM rolled_wiki")
    assert count["c"] < len(fresh)
    segments = rows(cluster, "SELECT projections FROM sys.segments WHERE datasource = 'rolled_wiki'")
    assert segments and all([p["name"] if isinstance(p, dict) else p for p in json.loads(s["projections"])]
                            == ["by_page"] for s in segments)
    broker = f"http://127.0.0.1:{cluster.broker.http.port}/druid/v2/datasources/rolled_wiki/metrics"
    assert sorted(requests.get(broker, timeout=30).json()) == ["id_sum", "n"]
    [meta] = requests.post(f"http://127.0.0.1:{cluster.broker.http.port}/druid/v2", timeout=30, json={
        "queryType": "segmentMetadata", "dataSource": "rolled_wiki", "merge": True,
        "analysisTypes": ["aggregators"]}).json()
    assert {n: a["type"] for n, a in meta["aggregators"].items()} == {"n": "count", "id_sum": "longSum"}
    deadline = time.monotonic() + 60
    while True:
        stats = requests.get(f"{cluster.supervisor_url}/rolled_wiki/stats", timeout=30).json()
        totals = [t.get("totals", {}).get("buildSegments", {}) for t in stats.get("0", {}).values()]
        if totals and totals[0].get("thrownAway") == len(late):
            break
        assert time.monotonic() < deadline, f"thrownAway never reached {len(late)}: {stats}"
        time.sleep(0.2)
    requests.post(f"{cluster.supervisor_url}/rolled_wiki/terminate", timeout=30)


def test_handoff_swaps_realtime_segments_while_queries_run(cluster, kafka_broker):  # noqa: F811
    """Micro-batches are realtime in sys.segments; once the day's realtime rows reach
    maxRowsPerSegment the task hands them off into full-size segments, and every query racing the
    swap (and the coordinator dropping the small ones) answers exactly the rows produced."""
    kafka_broker.create_topic("handoff", 2)
    produced = [{"ts": f"2024-06-01T{i % 24:02d}:{i % 60:02d}:00Z", "id": i,
                 "page": None if i % 7 == 0 else f"p{i % 5}", "added": i / 2 if i % 2 else i} for i in range(120)]
    spec = spec_for("handoff_wiki", "handoff", kafka_broker.bootstrap)
    spec["spec"]["tuningConfig"]["maxRowsPerSegment"] = len(produced)
    first, second = produced[:60], produced[60:]
    kafka_broker.produce("handoff", [(e["id"] % 2, json.dumps(e).encode()) for e in first])
    response = requests.post(cluster.supervisor_url, json=spec, timeout=30)
    assert response.status_code == 200, response.text
    wait_for(cluster, len(first), sum(e["id"] for e in first), "handoff_wiki")
    segments_sql = "SELECT is_realtime, is_active, is_published FROM sys.segments WHERE datasource = 'handoff_wiki'"
    assert {(s["is_realtime"], s["is_active"]) for s in rows(cluster, segments_sql)} == {(1, 1)}
    kafka_broker.produce("handoff", [(e["id"] % 2, json.dumps(e).encode()) for e in second])
    want = {"c": len(produced), "s": sum(e["id"] for e in produced), "d": len(produced)}
    deadline = time.monotonic() + DEADLINE_S
    answers = 0
    while True:
        [got] = rows(cluster, "SELECT COUNT(*) AS c, SUM(id) AS s, COUNT(DISTINCT id) AS d FROM handoff_wiki")
        if answers or got == want:  # from the first complete answer on, every answer is exact
            assert got == want, f"answer {answers + 1} after all rows were visible: {got}"
            answers += 1
        else:
            assert got["c"] <= want["c"] and got["d"] == got["c"], got  # never a row twice
        segments = rows(cluster, segments_sql)
        active = [s for s in segments if s["is_active"]]
        if answers and active and not any(s["is_realtime"] and s["is_published"] for s in segments):
            break  # handed off, served, and the small segments dropped (unused)
        assert time.monotonic() < deadline, f"no handoff: segments {segments}; status " \
            f"{supervisor_status(cluster, 'handoff_wiki')}"
        time.sleep(0.1)
    [got] = rows(cluster, "SELECT COUNT(*) AS c, SUM(id) AS s, COUNT(DISTINCT id) AS d FROM handoff_wiki")
    assert got == want
    requests.post(f"{cluster.supervisor_url}/handoff_wiki/terminate", timeout=30)
