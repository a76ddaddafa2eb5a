"""Faults with real processes (``strata up``): a historical killed mid-query, a coordinator
restarted, a corrupted cached segment. Each wait has a deadline."""

from __future__ import annotations

import glob
import os
import signal
import threading
import time

import pytest

from common.demo import table as demo_table
from common.segment import Segment
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster, _alive
from services.deep_storage import deep_storage_from_url
from tests.harness.waiting import wait_until

IV = ["2015-09-12/2015-09-19"]
COUNT = {"queryType": "timeseries", "dataSource": "wiki", "intervals": IV, "granularity": "all",
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}
ROWS = 60_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("faults")))
    c.up(historicals=2, lease_ttl_s=2, duty_period_ms=200, ports="auto")
    endpoints = c.endpoints()
    client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
    data = demo_table(ROWS)
    storage = deep_storage_from_url(os.path.join(c.dir, "deep-storage"))
    c.descriptors = client.build_and_publish(data, "wiki", storage)
    client.wait_loaded("wiki", len(c.descriptors), 60, replicas=2)
    c.expected = (ROWS, sum(data.column("added").to_pylist()))
    c.client = client
    _wait_answer(c)
    yield c
    client.close()
    c.down()


def _answer(c) -> tuple[int, int]:
    table, _ = c.client.native(COUNT, timeout_s=30)
    row = table.to_pylist()[0]
    return row["c"], row["added"]


def _wait_answer(c, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = _answer(c)
            if last == c.expected:
                return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"cluster did not answer {c.expected} within {timeout_s}s; last: {last}")


class _QueryLoop:
    """Three threads asking the cluster the count query until stopped; every answer and every
    failure is kept for the test to assert on."""

    def __init__(self, cluster, threads: int = 3) -> None:
        self.answers: list = []
        self.failures: list = []
        self._stop = threading.Event()
        self._workers = [threading.Thread(target=self._run, args=(cluster,)) for _ in range(threads)]
        for w in self._workers:
            w.start()

    def _run(self, cluster) -> None:
        while not self._stop.is_set():
            try:
                self.answers.append(_answer(cluster))
            except Exception as exc:  # noqa: BLE001 - recorded and asserted by the test
                self.failures.append(exc)

    def stop(self) -> None:
        self._stop.set()
        for w in self._workers:
            w.join(timeout=60)


def _historicals_seen(cluster) -> int:
    table, _ = cluster.client.sql("SELECT COUNT(*) AS c FROM sys.servers WHERE server_type = 'historical'")
    return table.column("c")[0].as_py()


def test_killing_a_historical_during_queries_fails_no_query(cluster):
    # Counted, not timed: queries run before the kill, while the broker still lists the dead node,
    # and after its lease expired and the broker dropped it (a loaded machine only makes it slower).
    loop = _QueryLoop(cluster)
    failures, answers = loop.failures, loop.answers
    try:
        wait_until(lambda: len(answers) >= 5, 60, "5 answers before the kill")
        cluster.kill("historical-2", signal.SIGKILL)
        after_kill = len(answers)
        wait_until(lambda: _historicals_seen(cluster) == 1, 60, "the broker to drop the killed historical")
        dropped = len(answers)
        wait_until(lambda: len(answers) >= dropped + 10, 60, "10 answers after the broker dropped it")
    finally:
        loop.stop()
    assert len(answers) > after_kill
    assert not failures, failures[:3]
    assert len(answers) > 10 and set(answers) == {cluster.expected}
    cluster.restart("historical-2")
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)


def test_restarting_the_coordinator_loses_no_segment_and_assignments_resume(cluster):
    cluster.kill("coordinator", signal.SIGTERM)
    # Historicals keep serving from their caches while the coordinator is away.
    _wait_answer(cluster, 30)
    cluster.restart("coordinator")
    endpoints = cluster.endpoints()
    cluster.client.close()
    cluster.client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)
    assert len(cluster.client.load_status("wiki")) == len(cluster.descriptors)
    # New work is assigned after the restart: a new datasource gets loaded.
    storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
    more = cluster.client.build_and_publish(demo_table(5_000, start="2016-01-01", days=1), "after_restart", storage)
    cluster.client.wait_loaded("after_restart", len(more), 60, replicas=2)
    _wait_answer(cluster, 30)


def test_a_corrupted_cached_segment_is_detected_and_fetched_again(cluster):
    cache = os.path.join(cluster.dir, "cache-1")
    cluster.kill("historical-1", signal.SIGTERM)
    victim = sorted(glob.glob(os.path.join(cache, "*.sseg")))[0]
    size = os.path.getsize(victim)
    with open(victim, "r+b") as f:  # flip one byte in the middle of the column data
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    cluster.restart("historical-1")
    deadline = time.monotonic() + 60
    while True:
        try:
            Segment.open(victim, verify=True)
            break  # the file was fetched again and is whole
        except Exception:  # noqa: BLE001 - corrupt or missing until re-fetched
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)
    _wait_answer(cluster, 30)
    assert _alive(cluster.node("historical-1")["pid"])
    with open(os.path.join(cluster.dir, "logs", "historical-1.log")) as f:
        log = f.read()
    assert "repulled" in log  # found by the background checksum pass, not by luck


def test_a_cached_segment_truncated_under_a_running_historical(cluster):
    # Regression: truncating a mapped segment file killed the historical with SIGBUS on the next
    # query. Now the query notices the change (the file is checked before its bytes are read),
    # the broker answers from the other replica, and the historical fetches a new copy.
    _wait_answer(cluster, 60)
    victim = None
    for cache in sorted(glob.glob(os.path.join(cluster.dir, "cache-*"))):
        files = sorted(glob.glob(os.path.join(cache, "*.sseg")))
        if files:
            victim, owner = files[-1], "historical-" + cache.rsplit("-", 1)[1]
            break
    assert victim is not None
    pid = cluster.node(owner)["pid"]
    os.truncate(victim, os.path.getsize(victim) // 3)
    for _ in range(5):  # queries keep coming while the copy is bad
        _wait_answer(cluster, 60)
    assert _alive(pid), f"{owner} died after its segment file was truncated"
    deadline = time.monotonic() + 60
    while True:
        try:
            Segment.open(victim, verify=True).close()
            break  # dropped and fetched again
        except Exception:  # noqa: BLE001 - truncated or missing until re-fetched
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)
    _wait_answer(cluster, 30)
    assert cluster.node(owner)["pid"] == pid and _alive(pid)


def test_segment_files_damaged_under_a_historical_mid_query_loop(cluster):
    # Queries keep running while one historical's cached copy is truncated and overwritten in
    # place, again and again: reads that meet the damage (a short read, a checksum mismatch, a
    # changed file) fail on that replica only, the broker answers from the other, the damaged
    # copy is dropped and fetched again (a new file, renamed in), and no answer is ever wrong.
    _wait_answer(cluster, 60)
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)
    cache = os.path.join(cluster.dir, "cache-1")
    # Only the segments the query loop reads: damage is found by reading it (or by a restart).
    victims = sorted(glob.glob(os.path.join(cache, "wiki_*.sseg")))
    assert victims
    pid = cluster.node("historical-1")["pid"]
    loop = _QueryLoop(cluster)
    failures, answers = loop.failures, loop.answers
    try:
        for step in range(12):
            before = len(answers)
            deadline = time.monotonic() + 30
            while len(answers) < before + 2 and time.monotonic() < deadline and not failures:
                time.sleep(0.02)  # let queries run against the current copy first
            victim = victims[step % len(victims)]
            try:
                with open(victim, "r+b") as f:  # in place: the inode the historical has open
                    size = os.fstat(f.fileno()).st_size
                    if step % 2:
                        f.truncate(size // 3)
                    else:
                        f.seek(size // 2)
                        f.write(os.urandom(min(65536, size // 4)))
            except FileNotFoundError:
                continue  # evicted and being fetched again right now
    finally:
        deadline = time.monotonic() + 30
        while len(answers) < 10 and time.monotonic() < deadline and not failures:
            time.sleep(0.05)
        loop.stop()
    assert _alive(pid), "historical-1 died while its segment files were damaged under it"
    assert not failures, failures[:3]
    assert len(answers) > 10 and set(answers) == {cluster.expected}
    # Every damaged copy is found by a query that reads it and replaced by a whole one fetched
    # again (the damage cannot be undone any other way: truncated, or random bytes under a crc).
    deadline = time.monotonic() + 60
    while True:
        try:
            for victim in victims:
                Segment.open(victim, verify=True).close()
            break
        except Exception:  # noqa: BLE001 - damaged or missing until fetched again
            if time.monotonic() > deadline:
                raise
            assert _answer(cluster) == cluster.expected  # queries are what find the damage
    cluster.client.wait_loaded("wiki", len(cluster.descriptors), 60, replicas=2)
    _wait_answer(cluster, 30)
    assert cluster.node("historical-1")["pid"] == pid and _alive(pid)
