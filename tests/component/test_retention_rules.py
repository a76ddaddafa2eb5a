"""Retention rules on a real cluster (in-process servers): hot and cold tiers, period drop rules
that take old segments off the historicals and out of query results, the rules REST API."""

from __future__ import annotations

import json
import time
import urllib.request

import pyarrow as pa
import pytest

from services.cli.cluster_client import ClusterError
from tests.harness.embedded_cluster import EmbeddedCluster

DAY = 86_400_000
# Day-aligned instants relative to the real clock: the rules judge segments by the coordinator's now.
TODAY = int(time.time() * 1000) // DAY * DAY
AGES = {"recent": 2, "old": 100, "ancient": 800}  # days ago
ROWS_PER_DAY = {"recent": 5, "old": 7, "ancient": 11}
ALL_TIME = ["1900-01-01/2200-01-01"]


def table() -> pa.Table:
    times, names, values = [], [], []
    for name, age in AGES.items():
        for i in range(ROWS_PER_DAY[name]):
            times.append(TODAY - age * DAY + i * 60_000)
            names.append(name)
            values.append(i)
    return pa.table({"__time": pa.array(times, pa.timestamp("ms", tz="UTC")), "age": names,
                     "value": pa.array(values, pa.int64())})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("rules")), historicals=2, tiers=["hot", "cold"])
    yield c
    c.stop()


def http(cluster, method: str, path: str, body=None, headers=None):
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}{path}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json",
                                                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def served(cluster, index: int) -> set[str]:
    return {f"{sid.interval.start}" for sid in cluster.historicals[index].node.status()["served"]}


def segment_days(cluster, index: int) -> set[str]:
    """Which of recent/old/ancient historical ``index`` serves."""
    by_start = {str(TODAY - age * DAY): name for name, age in AGES.items()}
    return {by_start[s] for s in served(cluster, index)}


def visible_counts(cluster) -> dict[str, int]:
    query = {"queryType": "groupBy", "dataSource": "wiki", "intervals": ALL_TIME, "granularity": "all",
             "dimensions": ["age"], "aggregations": [{"type": "count", "name": "n"}]}
    got, _ = cluster.client.native(query)  # a query racing a drop answers without the dropped segment
    return {row["age"]: row["n"] for row in got.to_pylist()}


def test_hot_cold_tiers_and_period_drop(cluster):
    rules = [{"type": "loadByPeriod", "period": "P30D", "tieredReplicants": {"hot": 1}},
             {"type": "loadByPeriod", "period": "P365D", "tieredReplicants": {"cold": 1}},
             {"type": "dropForever"}]
    status, out = http(cluster, "POST", "/druid/coordinator/v1/rules/wiki", rules,
                       {"X-Druid-Author": "ops", "X-Druid-Comment": "30 days hot, a year cold",
                        "X-Strata-Remote-Address": "6.6.6.6:1"})  # forged: the endpoint replaces it
    assert (status, out) == (200, {})
    descriptors = cluster.publish(table(), "wiki")
    assert len(descriptors) == 3
    ancient = next(d.id for d in descriptors if d.id.interval.start == TODAY - AGES["ancient"] * DAY)

    # New segments on the hot tier, old ones on the cold tier, the ancient one dropped (unused).
    cluster.wait_until(lambda: segment_days(cluster, 0) == {"recent"} and segment_days(cluster, 1) == {"old"},
                       what="recent on hot, old on cold")
    cluster.wait_until(lambda: cluster.coordinator.store.get(ancient) is not None
                       and not cluster.coordinator.store.get(ancient).used, what="the ancient segment marked unused")
    assert cluster.coordinator.store.get(ancient) is not None  # unused, not deleted
    cluster.wait_until(lambda: visible_counts(cluster) == {"recent": 5, "old": 7}, what="queries see recent+old")

    # Druid's views of it: sys.segments.replication_factor is what the rule wants (the ancient,
    # unused segment none); the datasource's tiers name where its segments are served.
    got, _ = cluster.client.sql("SELECT \"start\", replication_factor, num_replicas FROM sys.segments "
                                "WHERE datasource = 'wiki' ORDER BY \"start\"")
    assert [(r["replication_factor"], r["num_replicas"]) for r in got.to_pylist()] == [(0, 0), (1, 1), (1, 1)]
    # The retention metrics: one replica on each tier, the ancient segment unused but in deep storage.
    cluster.wait_until(lambda: (metric(cluster, "strata_tier_segments_loaded", "hot", "tier"),
                                metric(cluster, "strata_tier_segments_loaded", "cold", "tier"),
                                metric(cluster, "strata_segments_unused", "wiki")) == (1.0, 1.0, 1.0),
                       what="the tier and unused gauges")
    assert metric(cluster, "strata_deep_storage_bytes", "wiki") == sum(d.size for d in descriptors)
    assert metric(cluster, "strata_tier_segments_assigned_total", "hot", "tier") >= 1.0
    status, summary = http(cluster, "GET", "/druid/coordinator/v1/datasources/wiki")
    sizes = {d.id.interval.start: d.size for d in descriptors}
    recent, old = (sizes[TODAY - AGES[n] * DAY] for n in ("recent", "old"))
    assert status == 200 and summary["tiers"] == {
        "cold": {"segmentCount": 1, "size": old, "replicatedSize": old},
        "hot": {"segmentCount": 1, "size": recent, "replicatedSize": recent}}

    # A period drop rule first: the old segment leaves the cold historical and query results.
    status, _ = http(cluster, "POST", "/druid/coordinator/v1/rules/wiki",
                     [{"type": "dropBeforeByPeriod", "period": "P30D"}, *rules], {"X-Druid-Author": "ops"})
    assert status == 200
    cluster.wait_until(lambda: segment_days(cluster, 1) == set(), what="the old segment dropped from the cold tier")
    cluster.wait_until(lambda: visible_counts(cluster) == {"recent": 5}, what="queries stop seeing the old segment")
    assert segment_days(cluster, 0) == {"recent"}

    status, history = http(cluster, "GET", "/druid/coordinator/v1/rules/wiki/history")
    assert status == 200 and [h["auditInfo"]["author"] for h in history] == ["ops", "ops"]
    assert history[1]["auditInfo"]["comment"] == "30 days hot, a year cold"
    assert {h["auditInfo"]["ip"] for h in history} == {"127.0.0.1"}  # the peer, not what the client said
    status, full = http(cluster, "GET", "/druid/coordinator/v1/rules/wiki?full")
    assert [r["type"] for r in full] == ["dropBeforeByPeriod", "loadByPeriod", "loadByPeriod", "dropForever",
                                         "loadForever"]
    # Load status (used segments only) wants what the rule wants: one replica for the recent one.
    assert [(len(s.servers), s.wanted_replicas) for s in cluster.client.load_status("wiki")] == [(1, 1)]


def test_sys_rules_lists_every_rule_in_order(cluster):
    got, _ = cluster.client.sql("SELECT rule_order, rule_type, period, include_future, tiered_replicants "
                                "FROM sys.rules WHERE datasource = 'wiki' ORDER BY rule_order")
    assert got.to_pylist() == [
        {"rule_order": 0, "rule_type": "dropBeforeByPeriod", "period": "P30D", "include_future": None,
         "tiered_replicants": None},
        {"rule_order": 1, "rule_type": "loadByPeriod", "period": "P30D", "include_future": True,
         "tiered_replicants": '{"hot": 1}'},
        {"rule_order": 2, "rule_type": "loadByPeriod", "period": "P365D", "include_future": True,
         "tiered_replicants": '{"cold": 1}'},
        {"rule_order": 3, "rule_type": "dropForever", "period": None, "include_future": None,
         "tiered_replicants": None}]
    default, _ = cluster.client.sql("SELECT rule_type, tiered_replicants FROM sys.rules WHERE datasource = '_default'")
    assert default.to_pylist() == [{"rule_type": "loadForever", "tiered_replicants": '{"_default_tier": 2}'}]


def test_servers_carry_their_tier(cluster):
    tiers = {s.info.id: s.info.tier for s in cluster.client.servers().servers if s.info.role == "historical"}
    assert tiers == {"historical-1": "hot", "historical-2": "cold"}
    got, _ = cluster.client.sql("SELECT server_id, tier FROM sys.servers ORDER BY server_id")
    assert {r["server_id"]: r["tier"] for r in got.to_pylist() if r["server_id"].startswith("historical")} == tiers
    assert {r["tier"] for r in got.to_pylist() if not r["server_id"].startswith("historical")} == {None}


def test_bad_rules_are_refused_with_the_rule_and_field(cluster):
    status, out = http(cluster, "POST", "/druid/coordinator/v1/rules/wiki",
                       [{"type": "loadForever", "tieredReplicants": {"hot": -1}}])
    assert status == 400 and "rule 0 (loadForever): field 'tieredReplicants.hot'" in out["error"]


def test_strata_rules_cli(cluster, capsys, tmp_path):
    from services.cli.main import main

    url = ["--coordinator-http", f"http://127.0.0.1:{cluster.coordinator.http.port}"]
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps([{"type": "loadByInterval", "interval": "2020-01-01/2021-01-01",
                                       "tieredReplicants": {"cold": 1}}, {"type": "dropForever"}]))
    assert main(["rules", *url, "set", "other", "--rules", str(rules_file), "--author", "cli",
                 "--comment", "2020 only"]) == 0
    assert "set the rules of other" in capsys.readouterr().out
    assert main(["rules", *url, "get", "other", "--full"]) == 0
    assert [r["type"] for r in json.loads(capsys.readouterr().out)] == ["loadByInterval", "dropForever",
                                                                        "loadForever"]
    assert main(["rules", *url, "history", "other", "--count", "5"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [(h["auditInfo"]["author"], h["auditInfo"]["comment"]) for h in history] == [("cli", "2020 only")]
    assert main(["rules", *url, "list"]) == 0
    assert {"_default", "wiki", "other"} <= set(json.loads(capsys.readouterr().out))
    # A mistake is named before the round trip; a tier nobody has is a warning.
    assert main(["rules", *url, "set", "other", "--rules", '[{"type": "dropByPeriod", "period": "P1X"}]']) == 2
    assert "rule 0 (dropByPeriod): field 'period'" in capsys.readouterr().err
    assert main(["rules", *url, "set", "other", "--rules", '[{"type": "loadForever", "tieredReplicants": '
                 '{"warm": 1}}]']) == 0
    assert "tier 'warm' has no historicals" in capsys.readouterr().err


def life_table() -> pa.Table:
    days = [TODAY - 3 * DAY, TODAY - 2 * DAY]
    times = [d + i * 60_000 for d in days for i in range(4)]
    return pa.table({"__time": pa.array(times, pa.timestamp("ms", tz="UTC")), "age": ["x"] * len(times),
                     "value": pa.array(range(len(times)), pa.int64())})


def life_count(cluster) -> int:
    query = {"queryType": "timeseries", "dataSource": "life", "intervals": ALL_TIME, "granularity": "all",
             "aggregations": [{"type": "count", "name": "n"}]}
    try:
        rows = cluster.client.native(query)[0].to_pylist()
    except ClusterError as exc:
        if "unknown datasource 'life'" in str(exc):
            return 0  # no segment of it served (yet, or any more)
        raise
    return rows[0]["n"] if rows else 0


def test_mark_unused_mark_used_and_kill(cluster):
    base = "/druid/coordinator/v1/datasources/life"
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/life",
                [{"type": "loadForever", "tieredReplicants": {"hot": 1}}])[0] == 200
    descriptors = sorted(cluster.publish(life_table(), "life"), key=lambda d: d.id)
    older, newer = descriptors
    cluster.wait_until(lambda: life_count(cluster) == 8, what="both days queryable")
    day = f"{older.id.interval}".replace("/", "_")

    # By interval: only segments wholly inside it.
    assert http(cluster, "POST", f"{base}/markUnused", {"interval": str(older.id.interval)}) == (
        200, {"numChangedSegments": 1})
    cluster.wait_until(lambda: life_count(cluster) == 4, what="the unused day gone from queries")
    assert cluster.storage().exists(older.location)  # unused is not deleted

    # Kill deletes only unused segments: the used one in a wider interval is kept.
    status, out = http(cluster, "DELETE", f"{base}/intervals/1900-01-01_2200-01-01")
    assert status == 200 and out["killed"] == 1 and out["fileErrors"] == []
    assert cluster.coordinator.store.get(older.id) is None and not cluster.storage().exists(older.location)
    assert cluster.coordinator.store.get(newer.id).used and cluster.storage().exists(newer.location)
    assert life_count(cluster) == 4

    # By id (Druid spells partition 0 without its suffix), and used again by id.
    druid_id = str(newer.id).removesuffix("_0")
    assert http(cluster, "POST", f"{base}/markUnused", {"segmentIds": [druid_id]}) == (200, {"numChangedSegments": 1})
    cluster.wait_until(lambda: life_count(cluster) == 0, what="no day left in queries")
    assert http(cluster, "POST", f"{base}/markUsed", {"segmentIds": [str(newer.id)]}) == (
        200, {"numChangedSegments": 1})
    cluster.wait_until(lambda: life_count(cluster) == 4, what="the day served again")
    assert http(cluster, "DELETE", f"{base}/intervals/{day}")[1]["killed"] == 0  # already gone

    # Dropping the whole datasource marks every segment unused; markUsed by interval brings it back.
    assert http(cluster, "DELETE", base) == (200, {"numChangedSegments": 1})
    cluster.wait_until(lambda: life_count(cluster) == 0, what="the dropped datasource gone from queries")
    assert http(cluster, "POST", f"{base}/markUsed", {"interval": "1900-01-01/2200-01-01"}) == (
        200, {"numChangedSegments": 1})
    cluster.wait_until(lambda: life_count(cluster) == 4, what="the datasource served again")

    # Bad bodies and ids are named.
    status, out = http(cluster, "POST", f"{base}/markUnused", {"interval": "2020/2021", "segmentIds": ["a"]})
    assert status == 400 and "exactly one of 'interval' and 'segmentIds'" in out["error"]
    status, out = http(cluster, "POST", f"{base}/markUsed", {"segmentIds": ["life_nope"]})
    assert status == 400 and "has no segment 'life_nope'" in out["error"]
    assert http(cluster, "GET", f"{base}/markUsed")[0] == 405
    assert http(cluster, "DELETE", f"{base}/intervals/not-an-interval")[0] == 400


def metric(cluster, name: str, datasource: str, label: str = "datasource") -> float | None:
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}/metrics"
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{{label}="{datasource}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_segments_no_rule_matches_raise_the_alert_metric(cluster, caplog):
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/lonely",
                [{"type": "loadByInterval", "interval": "2000-01-01/2001-01-01", "tieredReplicants": {"hot": 1}}])[0] == 200
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/_default", [])[0] == 200
    try:
        with caplog.at_level("WARNING", logger="strata.coordinator"):
            cluster.publish(life_table(), "lonely")
            cluster.wait_until(lambda: metric(cluster, "strata_segments_unmatched", "lonely") == 2.0,
                               what="the unmatched gauge for lonely")
        assert any("2 used segments of datasource 'lonely' match no retention rule" in r.getMessage()
                   for r in caplog.records)
    finally:
        assert http(cluster, "POST", "/druid/coordinator/v1/rules/_default",
                    [{"type": "loadForever", "tieredReplicants": {"hot": 1}}])[0] == 200
    cluster.wait_until(lambda: metric(cluster, "strata_segments_unmatched", "lonely") is None,
                       what="the gauge removed once a rule matches")


def test_automatic_kill_on_a_cluster(tmp_path):
    c = EmbeddedCluster(str(tmp_path), historicals=1,
                        coordinator={"kill_unused_after_ms": 1, "kill_period_ms": 0, "max_kill_per_run": 10})
    try:
        [older, newer] = sorted(c.publish(life_table(), "life"), key=lambda d: d.id)
        c.coordinator.store.mark_unused([older.id])
        # The kill deletes the row, then the file: wait for both, not only the first.
        c.wait_until(lambda: c.coordinator.store.get(older.id) is None and not c.storage().exists(older.location),
                     what="the unused segment's row and file killed")
        assert c.coordinator.store.get(newer.id).used and c.storage().exists(newer.location)
    finally:
        c.stop()


def test_broker_prefers_a_tier(tmp_path):
    c = EmbeddedCluster(str(tmp_path), historicals=2, tiers=["hot", "cold"], broker={"tier_preference": "cold,hot"})

    def segments_run(h) -> float:
        return sum(s.value for m in h.metrics.segments_queried.collect() for s in m.samples
                   if s.name.endswith("_total"))

    try:
        assert http(c, "POST", "/druid/coordinator/v1/rules/life",
                    [{"type": "loadForever", "tieredReplicants": {"hot": 1, "cold": 1}}])[0] == 200
        c.publish(life_table(), "life")
        c.wait_queryable("life", 2, replicas=2)
        c.wait_until(lambda: all(len(c.broker.node.view.replicas.get(s, ())) == 2
                                 for s in list(c.broker.node.view.replicas)), what="the broker sees both replicas")
        hot, cold = c.historicals
        before = segments_run(hot), segments_run(cold)
        for _ in range(4):  # every rotation of the replicas
            assert life_count(c) == 8
        assert segments_run(hot) == before[0] and segments_run(cold) == before[1] + 8
        # A query's brokerTier context comes first, over the broker's preference.
        query = {"queryType": "timeseries", "dataSource": "life", "intervals": ALL_TIME, "granularity": "all",
                 "aggregations": [{"type": "count", "name": "n"}], "context": {"brokerTier": "hot"}}
        for _ in range(4):
            assert c.client.native(query)[0].to_pylist()[0]["n"] == 8
        assert segments_run(hot) == before[0] + 8 and segments_run(cold) == before[1] + 8
        # The same from SQL: the statement's context reaches its native queries.
        got, _ = c.client.sql("SELECT COUNT(*) AS n FROM life", context={"brokerTier": "hot"})
        assert got.to_pylist() == [{"n": 8}]
        assert segments_run(hot) == before[0] + 10 and segments_run(cold) == before[1] + 8
        with pytest.raises(ClusterError, match="'brokerTier' must be a tier name"):
            c.client.native({**query, "context": {"brokerTier": 7}})
    finally:
        c.stop()


def test_http_routes_longest_prefix_first_and_pass_on_none():
    from services.http_endpoint import HttpEndpoint
    from services.metrics import Metrics

    endpoint = HttpEndpoint("127.0.0.1", 0, Metrics("test"), lambda: {"healthy": True})
    try:
        seen = []

        def listing(method, path, query, body, headers):
            seen.append("listing")
            return 200, "application/json", b'"listing"'

        def lifecycle(method, path, query, body, headers):
            seen.append("lifecycle")
            return (200, "application/json", b'"lifecycle"') if path.endswith("/markUnused") else None

        endpoint.route("/druid/coordinator/v1/datasources", listing)  # registered first, shorter prefix
        endpoint.route("/druid/coordinator/v1/datasources/", lifecycle)
        assert endpoint.dispatch("POST", "/druid/coordinator/v1/datasources/wiki/markUnused", {}, b"", {})[2] == \
            b'"lifecycle"'
        assert endpoint.dispatch("GET", "/druid/coordinator/v1/datasources/wiki", {}, b"", {})[2] == b'"listing"'
        assert seen == ["lifecycle", "lifecycle", "listing"]
    finally:
        endpoint._server.server_close()


def broker_http(cluster, method: str, path: str, body=None):
    url = f"http://127.0.0.1:{cluster.broker.http.port}{path}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def finished_task(cluster, task_id: str) -> dict:
    box = {}

    def done() -> bool:
        status, out = broker_http(cluster, "GET", f"/druid/indexer/v1/task/{task_id}/status")
        assert status == 200, out
        box["status"] = out["status"]
        return out["status"]["statusCode"] != "RUNNING"

    cluster.wait_until(done, what=f"task {task_id} finished")
    return box["status"]


def test_kill_task_through_the_druid_task_api(cluster):
    """Druid's kill task on the broker's task API: it runs as a task (id, status, report,
    sys.tasks) and deletes only unused segments, rows then files."""
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/doomed",
                [{"type": "loadForever", "tieredReplicants": {"hot": 1}}])[0] == 200
    older, newer = sorted(cluster.publish(life_table(), "doomed"), key=lambda d: d.id)
    cluster.wait_queryable("doomed", 2)  # the count below must not race the newer segment's load
    cluster.coordinator.store.mark_unused([older.id])
    everything = {"type": "kill", "dataSource": "doomed", "interval": "1900-01-01/2200-01-01"}

    # A version no segment has: the task succeeds and deletes nothing.
    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", {**everything, "versions": ["nope"]})
    assert status == 200, out
    first = finished_task(cluster, out["task"])
    assert (first["statusCode"], first["type"], first["dataSource"]) == ("SUCCESS", "kill", "doomed")
    assert cluster.coordinator.store.get(older.id) is not None and cluster.storage().exists(older.location)

    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", {**everything, "batchSize": 1, "limit": 5})
    assert status == 200, out
    task_id = out["task"]
    assert finished_task(cluster, task_id)["statusCode"] == "SUCCESS"
    assert cluster.coordinator.store.get(older.id) is None and not cluster.storage().exists(older.location)
    # The used segment in the same interval is untouched and still answers.
    assert cluster.coordinator.store.get(newer.id).used and cluster.storage().exists(newer.location)
    status, report = broker_http(cluster, "GET", f"/druid/indexer/v1/task/{task_id}/reports")
    assert status == 200 and report["killUnusedSegments"]["taskId"] == task_id
    assert report["killUnusedSegments"]["payload"] == {
        "numSegmentsKilled": 1, "numBatchesProcessed": 1, "numSegmentsMarkedAsUnused": 0, "numSegmentsKeptUsed": 0,
        "fileErrors": []}
    got, _ = cluster.client.sql(f"SELECT type, datasource, status FROM sys.tasks WHERE task_id = '{task_id}'")
    assert got.to_pylist() == [{"type": "kill", "datasource": "doomed", "status": "SUCCESS"}]
    count = {"queryType": "timeseries", "dataSource": "doomed", "intervals": ALL_TIME,
             "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]}
    # The broker drops the killed (unused) segment from its view when the historical unannounces
    # it; a query sent before that can find the segment already gone from the historical.
    def broker_sees_only_newer() -> bool:
        with cluster.broker.node.lock:
            return {str(s) for s in cluster.broker.node.view.descriptors if s.datasource == "doomed"} == {str(newer.id)}

    cluster.wait_until(broker_sees_only_newer, what="the broker dropping the killed segment")
    assert cluster.client.native(count)[0].to_pylist()[0]["n"] == 4

    # Bad tasks are refused before a task exists, naming the field; other task types say where to go.
    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", {**everything, "limit": 0})
    assert status == 400 and "'limit' must be a positive integer" in out["errorMessage"], out
    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", {"type": "kill", "dataSource": "doomed"})
    assert status == 400 and "'interval' is required" in out["errorMessage"], out
    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", {"type": "index_parallel", "spec": {}})
    assert "POST /druid/v2/sql/task" in out["errorMessage"], out
    status, out = broker_http(cluster, "POST", "/druid/indexer/v1/task", b"{not json")
    assert status == 400 and "not valid JSON" in out["errorMessage"], out
    assert {t.id for t in cluster.client.tasks("doomed")} == {first["id"], task_id}


# ---- partial load rules: only a projection on the cold tier ---------------------------------------
BY_AGE = {"type": "aggregate", "name": "by_age", "groupingColumns": [{"type": "string", "name": "age"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "total", "fieldName": "value"}]}


BY_VALUE = {"type": "aggregate", "name": "by_value", "groupingColumns": [{"type": "long", "name": "value"}],
            "aggregators": [{"type": "count", "name": "n"}]}


def publish_with_projection(cluster, tmp_path, datasource: str, specs=(BY_AGE,)) -> dict:
    """One segment per day of ``table()`` (recent, old, ancient), each with the ``by_age``
    projection (or ``specs``); returns the open local copies by day name (the oracle)."""
    from common.query.projection import ProjectionSpec, projection_rows
    from common.segment import Segment
    from common.segment.builder import build_segment
    from common.segment.descriptor import SegmentDescriptor
    from common.segment.segment_id import SegmentId
    from common.types.interval import Interval
    from services.deep_storage.deep_storage import deep_storage_key

    rows, storage = table(), cluster.storage()
    specs = [ProjectionSpec.from_json(spec) for spec in specs]
    local, descriptors = {}, []
    for name, age in AGES.items():
        start = TODAY - age * DAY
        part = rows.filter(pa.compute.equal(rows.column("age"), name))
        path = str(tmp_path / f"{name}.sseg")
        manifest = build_segment(part, path, SegmentId(datasource, Interval(start, start + DAY), "v1", 0),
                                 projections=[projection_rows(spec, part) for spec in specs])
        key = deep_storage_key(manifest.segment_id)
        storage.push(path, key)
        descriptors.append(SegmentDescriptor.of(manifest, key, 1))
        local[name] = Segment.open(path)
    cluster.client.publish(descriptors)
    return local


def test_a_partial_rule_loads_only_a_projection_on_the_cold_tier(cluster, tmp_path):
    from common.query import execute

    rules = [{"type": "loadByPeriod", "period": "P30D", "tieredReplicants": {"hot": 1}},
             {"type": "loadPartialByPeriod", "period": "P365D", "tieredReplicants": {"cold": 1},
              "matcher": {"type": "exactProjection", "names": ["by_age"]}},
             {"type": "dropForever"}]
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/parted", rules)[0] == 200
    local = publish_with_projection(cluster, tmp_path, "parted")
    try:
        recent, old = (local[n].id for n in ("recent", "old"))
        hot, cold = cluster.historicals
        view = cluster.broker.node.view

        def placed() -> bool:
            with cluster.broker.node.lock:
                return (view.replicas.get(recent) == {"historical-1"} and view.replicas.get(old) == {"historical-2"}
                        and old in view.partial)
        cluster.wait_until(placed, what="recent whole on hot, old as a projection on cold")
        [(names, rule)] = view.partial[old].values()
        assert names == ("by_age",) and rule.startswith("loadPartialByPeriod") and recent not in view.partial
        assert cold.node.segment(old).loaded_projections == ("by_age",)
        # The cold historical keeps only the projection's bytes (a partial copy), fetched by ranges.
        kept = cold.node.segment(old)
        assert kept.manifest.partial_projections == ("by_age",)
        # The base columns' own parts are not there (only the dictionary the projection shares).
        base_parts = {p for c in local["old"].manifest.columns for p in c.parts.values()} - \
            {d.part for d in local["old"].manifest.dictionaries.values()}
        assert kept.size < local["old"].size and not base_parts & set(kept.manifest.files)
        assert set(kept.manifest.files) < set(local["old"].manifest.files)
        assert hot.node.segment(recent).loaded_projections is None

        # A query the projection answers still answers, over both tiers, as the whole segments do.
        fits = {"queryType": "groupBy", "dataSource": "parted", "intervals": ALL_TIME, "granularity": "all",
                "dimensions": ["age"], "aggregations": [{"type": "count", "name": "c"},
                                                        {"type": "longSum", "name": "s", "fieldName": "value"}]}
        want = execute({**fits, "context": {"noProjections": True}}, [local["recent"], local["old"]]).table
        got, _ = cluster.client.native(fits)
        assert got.to_pylist() == want.to_pylist() == [{"age": "old", "c": 7, "s": 21}, {"age": "recent", "c": 5, "s": 10}]

        got, _ = cluster.client.sql("SELECT age, COUNT(*) AS c, SUM(\"value\") AS s FROM parted GROUP BY age "
                                    "ORDER BY age")
        assert got.to_pylist() == want.to_pylist()
        with pytest.raises(ClusterError, match="loaded only as its projections"):
            cluster.client.sql("SELECT * FROM parted")

        got, _ = cluster.client.sql("SELECT rule_type, rule FROM sys.rules WHERE datasource = 'parted' "
                                    "AND rule_order = 1")
        [row] = got.to_pylist()
        assert row["rule_type"] == "loadPartialByPeriod" and json.loads(row["rule"])["matcher"] == rules[1]["matcher"]

        # One the projection cannot answer fails, naming the segment, the projections and the rule...
        scan = {"queryType": "scan", "dataSource": "parted", "intervals": ALL_TIME, "columns": ["age", "value"]}
        raw = {**fits, "dimensions": ["value"]}
        for query in (scan, raw, {**fits, "context": {"noProjections": True}}):
            with pytest.raises(ClusterError) as caught:
                cluster.client.native(query)
            message = str(caught.value)
            assert f"segment {old} is loaded only as its projections (by_age)" in message, message
            assert "loadPartialByPeriod" in message and "historical-2" in message and "Traceback" not in message
        # ...but runs where whole segments hold the rows it reads.
        recent_day = [f"{local['recent'].id.interval}"]
        got, _ = cluster.client.native({**scan, "intervals": recent_day})
        assert got.num_rows == 5
        # The historical refuses such a query on its own too (a broker that sent it anyway).
        with pytest.raises(Exception, match="loaded only as its projections"):
            execute(scan, [cold.node.segment(old)])
    finally:
        for segment in local.values():
            segment.close()


def test_changing_a_partial_rule_reloads_the_copies_in_place(cluster, tmp_path):
    """Other projection names, partial -> whole, whole -> partial: each copy is fetched again in
    the new shape on the historical that holds it, which serves the old one until the swap, so a
    query every shape answers keeps answering right throughout and no copy is ever missing."""
    import threading

    from common.query import execute

    def partial_rule(names):
        return [{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                 "matcher": {"type": "exactProjection", "names": names}}]

    assert http(cluster, "POST", "/druid/coordinator/v1/rules/reshaped", partial_rule(["by_age"]))[0] == 200
    local = publish_with_projection(cluster, tmp_path, "reshaped", specs=(BY_AGE, BY_VALUE))
    sids = [local[n].id for n in AGES]
    cold = cluster.historicals[1]
    view = cluster.broker.node.view
    by_age = {"queryType": "groupBy", "dataSource": "reshaped", "intervals": ALL_TIME, "granularity": "all",
              "dimensions": ["age"], "aggregations": [{"type": "count", "name": "c"},
                                                      {"type": "longSum", "name": "s", "fieldName": "value"}]}
    by_value = {**by_age, "dimensions": ["value"], "aggregations": [{"type": "count", "name": "c"}]}
    segments = list(local.values())
    want_age = execute({**by_age, "context": {"noProjections": True}}, segments).table.to_pylist()
    want_value = execute({**by_value, "context": {"noProjections": True}}, segments).table.to_pylist()
    assert [(r["age"], r["c"]) for r in want_age] == [("ancient", 11), ("old", 7), ("recent", 5)]

    def shapes():
        """segment -> the shape the broker routes by (None: whole), once each is on cold alone."""
        with cluster.broker.node.lock:
            if any(view.replicas.get(sid) != {"historical-2"} for sid in sids):
                return None
            return {sid: next(iter(view.partial[sid].values()))[0] if sid in view.partial else None for sid in sids}

    def settled(shape):
        return lambda: shapes() == {sid: shape for sid in sids} and all(
            cold.node.segment(sid).manifest.partial_projections == shape for sid in sids)

    cluster.wait_until(settled(("by_age",)), what="every segment on cold as its by_age projection")
    stop, problems, answered = threading.Event(), [], [0]

    def keep_querying():
        # by_age answers from every shape this test goes through: it must never fail or differ,
        # and the broker must never see a segment without its one copy.
        while not stop.is_set():
            try:
                if shapes() is None:
                    problems.append("a segment lost its copy on the cold historical")
                got, _ = cluster.client.native(by_age)
                if got.to_pylist() != want_age:
                    problems.append(f"wrong answer {got.to_pylist()}")
                answered[0] += 1
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                problems.append(f"{type(exc).__name__}: {exc}")
            stop.wait(0.01)

    querier = threading.Thread(target=keep_querying, name="reshape-querier", daemon=True)
    querier.start()
    try:
        with pytest.raises(ClusterError, match="loaded only as its projections"):
            cluster.client.native(by_value)
        # Other projection names: both projections now.
        assert http(cluster, "POST", "/druid/coordinator/v1/rules/reshaped",
                    partial_rule(["by_age", "by_value"]))[0] == 200
        cluster.wait_until(settled(("by_age", "by_value")), what="copies reloaded with both projections")
        got, _ = cluster.client.native(by_value)
        assert got.to_pylist() == want_value
        # Partial -> whole: every query answers, a scan too.
        assert http(cluster, "POST", "/druid/coordinator/v1/rules/reshaped",
                    [{"type": "loadForever", "tieredReplicants": {"cold": 1}}])[0] == 200
        cluster.wait_until(settled(None), what="copies reloaded whole")
        got, _ = cluster.client.native({"queryType": "scan", "dataSource": "reshaped", "intervals": ALL_TIME,
                                        "columns": ["age", "value"]})
        assert got.num_rows == sum(ROWS_PER_DAY.values())
        assert all(cold.node.segment(sid).size == local[n].size for n, sid in zip(AGES, sids))
        # Whole -> partial: the copies shrink to the projection's bytes again.
        assert http(cluster, "POST", "/druid/coordinator/v1/rules/reshaped", partial_rule(["by_age"]))[0] == 200
        cluster.wait_until(settled(("by_age",)), what="copies reloaded as by_age again")
        assert all(cold.node.segment(sid).size < local[n].size for n, sid in zip(AGES, sids))
        with pytest.raises(ClusterError, match="loaded only as its projections"):
            cluster.client.native(by_value)
        cluster.wait_until(lambda: answered[0] >= 5, what="queries answered during the reloads")
    finally:
        stop.set()
        querier.join(30)
        for segment in segments:
            segment.close()
    assert problems == [] and answered[0] >= 5
    # The hot historical never got a copy: each reload happened where the copy was.
    assert not {sid for sid in cluster.historicals[0].node.status()["served"]} & set(sids)
