"""Queries racing the end of a segment's life on a real cluster (in-process servers): while a query
thread runs without pause, segments are marked unused (markUnused, a drop rule), kept in deep
storage only by a zero-replica rule, and killed. Every answer is the count before or the count
after, never an error nor another count.

The race is made certain, not left to chance: the broker's served-segment watch is held back (a
discovery that lags) from the action until the historicals have dropped the segment, so the broker
still plans it on replicas that no longer serve it; a query then must answer without it (Druid's
missingSegments, services/broker/core/missing_segment.py). And the historical's NOT_FOUND names
exactly the segments it lacks."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.request

import grpc
import pyarrow as pa
import pytest

from services.cli.cluster_client import ClusterClient
from services.discovery.keys import served_prefix
from services.historical.client import HistoricalClient, missing_segments
from tests.harness.embedded_cluster import EmbeddedCluster

DAY = 86_400_000
FIRST_DAY = 1_704_067_200_000  # 2024-01-01
ROWS = [3, 5, 7, 11]  # rows of day 0, 1, 2, 3
ALL_TIME = ["1900-01-01/2200-01-01"]
COUNT = {"queryType": "timeseries", "dataSource": "race", "intervals": ALL_TIME, "granularity": "all",
         "aggregations": [{"type": "count", "name": "n"}]}
SCAN = {"queryType": "scan", "dataSource": "race", "intervals": ALL_TIME, "columns": ["__time", "value"]}
LOAD_BOTH = {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}


def day_interval(day: int) -> str:
    start = time.strftime("%Y-%m-%d", time.gmtime((FIRST_DAY + day * DAY) / 1000))
    end = time.strftime("%Y-%m-%d", time.gmtime((FIRST_DAY + (day + 1) * DAY) / 1000))
    return f"{start}/{end}"


def table() -> pa.Table:
    times = [FIRST_DAY + day * DAY + i * 60_000 for day, n in enumerate(ROWS) for i in range(n)]
    return pa.table({"__time": pa.array(times, pa.timestamp("ms", tz="UTC")),
                     "value": pa.array(range(len(times)), pa.int64())})


def http(cluster, method: str, path: str, body=None):
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}{path}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, json.loads(resp.read() or b"null")


class HeldWatch:
    """The broker's served-segment watch, re-registered so that the test can hold its events back
    and let them through later, in order: a discovery that lags behind the historicals."""

    def __init__(self, node) -> None:
        self.node = node
        self.lock = threading.Lock()
        self.held: list = []
        self.holding = False
        [old] = [w for w in node._watches if w.prefix == served_prefix()]
        old.cancel()
        node._watches.remove(old)
        node._watches.append(node.discovery.watch_prefix(served_prefix(), self._event))

    def _event(self, event) -> None:
        with self.lock:
            if self.holding:
                self.held.append(event)
            else:
                self.node._on_served(event)

    def hold(self) -> None:
        with self.lock:
            self.holding = True

    def release(self) -> None:
        with self.lock:
            for event in self.held:
                self.node._on_served(event)
            self.held.clear()
            self.holding = False


class Asker:
    """A thread asking the count without pause (each of ASKS in turn) until stopped."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.client = ClusterClient(f"127.0.0.1:{cluster.coordinator.grpc.port}",
                                    f"127.0.0.1:{cluster.broker.grpc.port}")
        self.answers: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="race-asker", daemon=True)

    def _run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            turn += 1
            try:
                self.answers.append(ASKS[turn % len(ASKS)](self.cluster, self.client))
            except Exception as exc:  # noqa: BLE001 - every failure is an answer the test rejects
                self.answers.append(exc)

    def __enter__(self) -> Asker:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        self.client.close()
        assert not self.thread.is_alive(), "the query thread did not stop within 60 s"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("race")), historicals=2)
    yield c
    c.stop()


def native_count(cluster, client) -> int:
    rows = client.native(COUNT, timeout_s=30)[0].to_pylist()
    return rows[0]["n"] if rows else 0


def sql_count(cluster, client) -> int:
    return client.sql("SELECT COUNT(*) AS n FROM race", timeout_s=30)[0].to_pylist()[0]["n"]


def scanned_rows(cluster, client, order: str = "none") -> int:
    """The rows of a native scan on Druid's HTTP API: streamed from the historicals (ordered by
    time: merged from all of them at once)."""
    query = json.dumps({**SCAN, "order": order}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{cluster.broker.http.port}/druid/v2", data=query, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
        return sum(len(batch["events"]) for batch in json.loads(resp.read()))


def time_ordered_rows(cluster, client) -> int:
    return scanned_rows(cluster, client, "ascending")


ASKS = [native_count, sql_count, scanned_rows, time_ordered_rows]


def count(cluster) -> int:
    return native_count(cluster, cluster.client)


def left_out(cluster, reason: str) -> float:
    return cluster.broker.metrics.segments_left_out.labels(reason)._value.get()


def served_anywhere(cluster, sid) -> bool:
    return any(sid in h.node.status()["served"] for h in cluster.historicals)


def in_broker_view(cluster, sid) -> bool:
    with cluster.broker.node.lock:
        return sid in cluster.broker.node.view.descriptors


def test_queries_racing_the_end_of_segments_answer_before_or_after(cluster):
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/race", [LOAD_BOTH]) == (200, {})
    days = sorted(cluster.publish(table(), "race"), key=lambda d: d.id)
    assert len(days) == 4
    cluster.wait_queryable("race", 4, replicas=2)
    cluster.wait_until(lambda: all(len(cluster.broker.node.view.replicas.get(d.id, ())) == 2 for d in days),
                       what="the broker seeing both replicas of every day")
    held = HeldWatch(cluster.broker.node)
    expected = sum(ROWS)
    assert count(cluster) == expected

    def end(day: int, action, reason: str) -> None:
        nonlocal expected
        sid = days[day].id
        before, after = expected, expected - ROWS[day]
        was_left_out = left_out(cluster, reason)
        with Asker(cluster) as asker:
            held.hold()
            try:
                action()
                cluster.wait_until(lambda: not served_anywhere(cluster, sid), what=f"both historicals dropping {sid}")
                # The broker still lists the segment on both replicas: every query plans it on them.
                assert in_broker_view(cluster, sid)
                assert [ask(cluster, cluster.client) for ask in ASKS] == [after] * len(ASKS)
                assert left_out(cluster, reason) >= was_left_out + len(ASKS)  # each left it out
            finally:
                held.release()
            cluster.wait_until(lambda: not in_broker_view(cluster, sid), what=f"the broker dropping {sid}")
            # More answers after the view caught up too, from the thread.
            seen = len(asker.answers)
            cluster.wait_until(lambda: len(asker.answers) >= seen + 2, what="two more answers")
        wrong = [a for a in asker.answers if a not in (before, after)]
        assert not wrong, f"answers other than {before} (before) or {after} (after): {wrong[:5]}"
        # Once both replicas dropped it no answer has it again: the count before, then after.
        assert asker.answers == sorted(asker.answers, reverse=True) and asker.answers[-1] == after
        expected = after

    base = "/druid/coordinator/v1/datasources/race"
    end(0, lambda: http(cluster, "POST", f"{base}/markUnused", {"interval": day_interval(0)}), "unused")
    end(1, lambda: http(cluster, "POST", "/druid/coordinator/v1/rules/race",
                        [{"type": "dropByInterval", "interval": day_interval(1)}, LOAD_BOTH]), "unused")
    # Used, but kept in deep storage only: the coordinator says no replica is wanted.
    unloaded = {"type": "loadByInterval", "interval": day_interval(2), "tieredReplicants": {"_default_tier": 0}}
    end(2, lambda: http(cluster, "POST", "/druid/coordinator/v1/rules/race",
                        [unloaded, {"type": "dropByInterval", "interval": day_interval(1)}, LOAD_BOTH]), "no_replicas")
    assert cluster.coordinator.store.get(days[2].id).used

    # Killing the unused days while queries run changes no answer.
    with Asker(cluster) as asker:
        status, out = http(cluster, "DELETE", f"{base}/intervals/1900-01-01_2200-01-01")
        assert status == 200 and out["killed"] == 2 and out["fileErrors"] == []
        cluster.wait_until(lambda: len(asker.answers) >= 4, what="four answers around the kill")
    assert asker.answers and all(a == ROWS[3] for a in asker.answers), asker.answers[:5]
    assert cluster.coordinator.store.get(days[0].id) is None and cluster.coordinator.store.get(days[1].id) is None
    assert count(cluster) == ROWS[3]


def test_a_historical_names_the_segments_it_does_not_serve(cluster):
    """NOT_FOUND's trailing metadata lists exactly the requested segments the historical lacks, so
    the broker asks elsewhere for those alone."""
    assert http(cluster, "POST", "/druid/coordinator/v1/rules/named", [LOAD_BOTH]) == (200, {})
    [served] = cluster.publish(table().slice(0, ROWS[0]), "named")
    cluster.wait_queryable("named", 1, replicas=2)
    absent = dataclasses.replace(served.id, version="v-never-published")
    historical = cluster.historicals[0]
    client = HistoricalClient(f"127.0.0.1:{historical.grpc.port}")
    try:
        query = json.dumps({**COUNT, "dataSource": "named"})
        call = client.ask(query, "q-named", [served.id, absent], {"value": served.schema()["value"]}, timeout_s=30)
        with pytest.raises(grpc.RpcError) as caught:
            call.read()
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert str(absent) in caught.value.details()
        assert missing_segments(caught.value, [served.id, absent]) == {absent}
    finally:
        client.close()
