"""More faults with real processes (``strata up``), each checked for lost, duplicated or wrong
rows: a historical that stops answering without closing its connections (SIGSTOP), the broker
restarted under a query loop, and the coordinator killed in the middle of publishes and again
while it assigns. One cluster for the module; every wait has a deadline."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time

import pytest

from common.demo import table as demo_table
from common.segment.descriptor import SegmentDescriptor
from common.segment.time_partitioner import build_segments
from services.cli.cluster_client import ClusterClient, ClusterError
from services.cli.local_cluster import LocalCluster

from services.deep_storage import deep_storage_from_url, deep_storage_key

IV = ["2015-09-12/2015-09-19"]
ROWS = 40_000
QUERY_TIMEOUT_S = 15.0
# Errors a client may retry: the broker is down or restarting, or not ready to answer yet.
RETRYABLE = ("UNAVAILABLE",)


def count_query(datasource: str, intervals=IV) -> dict:
    return {"queryType": "timeseries", "dataSource": datasource, "intervals": intervals, "granularity": "all",
            "aggregations": [{"type": "count", "name": "c"},
                             {"type": "longSum", "name": "added", "fieldName": "added"}]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("fault-recovery")))
    c.up(historicals=2, lease_ttl_s=2, duty_period_ms=200, ports="auto")
    try:
        c.storage = deep_storage_from_url(os.path.join(c.dir, "deep-storage"))
        c.client = _client(c)
        data = demo_table(ROWS)
        c.descriptors = c.client.build_and_publish(data, "wiki", c.storage, rows_per_segment=5_000)
        c.client.wait_loaded("wiki", len(c.descriptors), 90, replicas=2)
        c.expected = (ROWS, sum(data.column("added").to_pylist()))
        _wait_answer(c)
        yield c
    finally:
        for name in ("historical-1", "historical-2"):
            try:
                os.kill(c.node(name)["pid"], signal.SIGCONT)
            except (ProcessLookupError, Exception):  # noqa: BLE001 - best effort before down
                pass
        c.client.close() if hasattr(c, "client") else None
        c.down()


def _client(c) -> ClusterClient:
    endpoints = c.endpoints()
    return ClusterClient(endpoints["coordinator"], endpoints["broker"])


def _answer(client: ClusterClient, datasource: str = "wiki", timeout_s: float = QUERY_TIMEOUT_S,
            intervals=IV) -> tuple[int, int]:
    table, _ = client.native(count_query(datasource, intervals), timeout_s=timeout_s)
    rows = table.to_pylist()
    return (rows[0]["c"], rows[0]["added"]) if rows else (0, 0)


def _wait_answer(c, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = _answer(c.client)
            if last == c.expected:
                return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"cluster did not answer {c.expected} within {timeout_s}s; last: {last}")


class QueryLoop:
    """Client threads querying until stopped, recording each answer or error and its duration."""

    def __init__(self, c, threads: int = 3) -> None:
        self.c = c
        self.answers: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.slowest = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> QueryLoop:
        for t in self._threads:
            t.start()
        return self

    def _run(self) -> None:
        client = _client(self.c)
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    answer, error = _answer(client), None
                except ClusterError as exc:
                    answer, error = None, str(exc)
                took = time.monotonic() - started
                with self._lock:
                    self.slowest = max(self.slowest, took)
                    if error is None:
                        self.answers.append(answer)
                    else:
                        self.errors.append(error)
                if error is not None:
                    time.sleep(0.05)  # a client backing off before its retry
        finally:
            client.close()

    def count(self) -> int:
        with self._lock:
            return len(self.answers)

    def wait_answers(self, more: int, timeout_s: float) -> None:
        target = self.count() + more
        deadline = time.monotonic() + timeout_s
        while self.count() < target:
            assert time.monotonic() < deadline, f"fewer than {more} answers within {timeout_s}s: {self.errors[-3:]}"
            time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(QUERY_TIMEOUT_S + 30)


def test_a_historical_that_stops_answering_does_not_hold_queries_past_their_deadline(cluster):
    victim = cluster.node("historical-2")["pid"]
    with QueryLoop(cluster) as loop:
        loop.wait_answers(5, 60)
        os.kill(victim, signal.SIGSTOP)  # alive, connections open, never answers
        try:
            stopped = time.monotonic()
            # Past the lease TTL (2 s) and then some: in-flight calls to it, new ones before the
            # broker drops it, and queries after, all answered from the other replica.
            loop.wait_answers(30, 4 * QUERY_TIMEOUT_S)
            while time.monotonic() - stopped < 6:
                loop.wait_answers(1, QUERY_TIMEOUT_S)
        finally:
            os.kill(victim, signal.SIGCONT)
    assert loop.errors == []
    assert set(loop.answers) == {cluster.expected}
    assert loop.slowest < QUERY_TIMEOUT_S, loop.slowest
    # Resumed, it announces itself again and serves its replicas.
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 90, replicas=2)
    _wait_answer(cluster)


def test_restarting_the_broker_under_a_query_loop_gives_retryable_errors_never_wrong_answers(cluster):
    with QueryLoop(cluster) as loop:
        loop.wait_answers(5, 60)
        cluster.kill("broker", signal.SIGKILL)
        cluster.restart("broker")
        loop.wait_answers(20, 120)  # answering again after the restart
    assert set(loop.answers) == {cluster.expected}  # never a partial count from a broker still warming up
    assert loop.errors, "the broker was down for a while: some queries must have failed"
    wrong = [e for e in loop.errors if not e.startswith(RETRYABLE)]
    assert wrong == [], wrong[:3]


def _build(datasource: str, segments: int, rows_per_segment: int, work: str, storage) -> list[SegmentDescriptor]:
    data = demo_table(segments * rows_per_segment, start="2016-03-01", days=1)
    built = build_segments(data, datasource, work, segment_granularity="day", rows_per_segment=rows_per_segment)
    out = []
    for path, manifest in built:
        key = deep_storage_key(manifest.segment_id)
        storage.push(path, key)
        out.append(SegmentDescriptor.of(manifest, key, len(built), os.path.getsize(path)))
    return out


def _restart_coordinator(cluster) -> None:
    cluster.restart("coordinator")
    cluster.client.close()
    cluster.client = _client(cluster)


def test_the_coordinator_killed_mid_publish_publishes_all_or_nothing_and_recovers_mid_assignment(cluster):
    batch = 60
    published: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="strata-fault-build-") as work:
        for attempt, delay_s in enumerate((0.0, 0.03, 0.15)):
            ds = f"atomic_{attempt}"
            descriptors = _build(ds, batch, 40, os.path.join(work, ds), cluster.storage)
            outcome: dict = {}

            def publish(descriptors=descriptors, outcome=outcome) -> None:
                client = _client(cluster)
                try:
                    outcome["published"] = client.publish(descriptors)
                except ClusterError as exc:
                    outcome["error"] = str(exc)
                finally:
                    client.close()

            publisher = threading.Thread(target=publish, daemon=True)
            publisher.start()
            if delay_s:
                publisher.join(delay_s)
            cluster.kill("coordinator", signal.SIGKILL)
            publisher.join(90)
            assert not publisher.is_alive()
            _restart_coordinator(cluster)
            stored = [r for r in cluster.client.list_segments(ds) if r.used]
            assert len(stored) in (0, batch), f"{ds}: {len(stored)} of {batch} segments published"
            if "published" in outcome:  # acknowledged: it must all be there
                assert len(stored) == batch
            published[ds] = len(stored)
        # Killed again while it assigns a fresh batch: loads resume after the restart.
        descriptors = _build("assigning", batch, 40, os.path.join(work, "assigning"), cluster.storage)
        cluster.client.publish(descriptors)
        published["assigning"] = batch
    deadline = time.monotonic() + 90
    while not any(len(s.servers) for s in cluster.client.load_status("assigning")):
        assert time.monotonic() < deadline, "no segment of 'assigning' was loaded"
        time.sleep(0.05)
    cluster.kill("coordinator", signal.SIGKILL)
    _restart_coordinator(cluster)
    for ds, count in published.items():
        if count:
            cluster.client.wait_loaded(ds, count, 180, replicas=2)
    # No lost and no duplicated row: each datasource answers exactly what was published.
    for ds, count in published.items():
        want = (count * 40, None)
        deadline = time.monotonic() + 60
        while True:
            try:
                got = _answer(cluster.client, ds, intervals=["2016-03-01/2016-03-02"]) if count else (0, None)
            except ClusterError as exc:
                got = (exc, None)
            if got[0] == want[0] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert got[0] == want[0], f"{ds}: {got[0]} rows, published {want[0]}"
    _wait_answer(cluster)
