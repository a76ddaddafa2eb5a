"""Storage faults with real processes (``strata up``) on an S3 deep storage (moto's server, over
HTTP): the S3 server stopped while historicals load, and a historical whose segment cache lives on
a small, full volume (a tmpfs). Each checks that no row is lost, duplicated or wrong, that no
segment is announced loaded that is not, and that the failures are reported where the coordinator
reads them (the load-failure records in discovery). One cluster for the module, whose coordinator
forgets a give-up after GIVE_UP_EXPIRY_MS (so a historical that gave up on a segment during the
outage gets it back and its record clears); every wait has a deadline."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import time

import pytest

from common.demo import table as demo_table
from common.segment import Segment
from common.segment.time_partitioner import build_segments, segment_filename
from services.cli.cluster_client import ClusterClient, ClusterError
from services.cli.local_cluster import LocalCluster, _alive, health
from services.coordinator.core.duties import DEFAULT_MAX_LOAD_ATTEMPTS
from services.deep_storage import deep_storage_from_url, deep_storage_key
from services.discovery.keys import load_failures_prefix, parse_load_failure_key, served_prefix, parse_served_key
from services.discovery.load_failure import LoadFailureReport
from common.segment.descriptor import SegmentDescriptor
from tests.harness.restartable_s3 import RestartableS3
from tests.harness.waiting import wait_until

ROWS_PER_SEGMENT = 2_000  # tens of KB a segment
CACHE_VOLUME = "2m"  # historical-1's cache volume: a few dozen of those segments
CACHE_VOLUME_BYTES = 2 << 20
GIVE_UP_EXPIRY_MS = 4_000  # [coordinator] give_up_expiry_ms: 5 minutes by default


def count_query(datasource: str, interval: str) -> dict:
    return {"queryType": "timeseries", "dataSource": datasource, "intervals": [interval], "granularity": "all",
            "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}


def _mount_tmpfs(path: str, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``path``; None if it worked, else why not."""
    os.makedirs(path, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount could not run: {exc}"
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}"


def _umount(path: str) -> None:
    done = subprocess.run(["umount", path], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:  # still busy: detach it now, the kernel frees it when the last user goes
        lazy = subprocess.run(["umount", "-l", path], capture_output=True, text=True, timeout=30)
        if lazy.returncode != 0:
            raise RuntimeError(f"cannot unmount the test's tmpfs at {path}: {done.stderr.strip()}; "
                               f"{lazy.stderr.strip()}")


@pytest.fixture(scope="module")
def s3():
    server = RestartableS3().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):
    c = LocalCluster(str(tmp_path_factory.mktemp("storage-faults")))
    cache1 = os.path.join(c.dir, "cache-1")
    c.tmpfs_refused = _mount_tmpfs(cache1, CACHE_VOLUME)
    try:
        # replication 1: a segment historical-1 cannot hold has somewhere else to go. The nodes
        # read their settings from the environment they are started with (services/node_config.py).
        expiry_var = "STRATA_COORDINATOR_GIVE_UP_EXPIRY_MS"
        before = os.environ.get(expiry_var)
        os.environ[expiry_var] = str(GIVE_UP_EXPIRY_MS)
        try:
            c.up(historicals=2, lease_ttl_s=2, duty_period_ms=200, replication=1, ports="auto",
                 deep_storage=s3.info.url, deep_storage_endpoint=s3.info.endpoint)
        finally:
            if before is None:
                del os.environ[expiry_var]
            else:
                os.environ[expiry_var] = before
        c.s3 = s3
        c.storage = deep_storage_from_url(s3.info.url, s3.info.endpoint, s3.info.region)
        endpoints = c.endpoints()
        c.client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        from services.discovery.embedded_client import EmbeddedDiscovery

        c.discovery = EmbeddedDiscovery(endpoints["coordinator"])
        c.expected = {}
        data = demo_table(4 * ROWS_PER_SEGMENT, start="2015-09-12", days=1)
        c.descriptors = c.client.build_and_publish(data, "wiki", c.storage, rows_per_segment=ROWS_PER_SEGMENT)
        c.client.wait_loaded("wiki", len(c.descriptors), 90)
        c.expected["wiki"] = (data.num_rows, sum(data.column("added").to_pylist()))
        _wait_answer(c, "wiki", "2015-09-12/2015-09-13")
        yield c
    finally:
        try:
            if hasattr(c, "discovery"):
                c.discovery.close()
            if hasattr(c, "client"):
                c.client.close()
            if c.state() is not None:
                c.down()
        finally:
            if c.tmpfs_refused is None:
                _umount(cache1)


def _answer(c, datasource: str, interval: str) -> tuple[int, int]:
    table, _ = c.client.native(count_query(datasource, interval), timeout_s=30)
    rows = table.to_pylist()
    return (rows[0]["c"], rows[0]["added"]) if rows else (0, 0)


def _wait_answer(c, datasource: str, interval: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = _answer(c, datasource, interval)
            if last == c.expected[datasource]:
                return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"{datasource} did not answer {c.expected[datasource]} within {timeout_s}s; last: {last}")


def _wait(predicate, timeout_s: float, what: str, poll_s: float = 0.1):
    return wait_until(predicate, timeout_s, what, poll_s)


def _failures(c, datasource: str) -> dict:
    """(historical, segment id) -> LoadFailureReport, for ``datasource``'s segments."""
    out = {}
    for key, value in c.discovery.get_prefix(load_failures_prefix()).items():
        report = LoadFailureReport.from_bytes(value)
        if report.segment.datasource == datasource:
            out[(parse_load_failure_key(key).server, report.segment)] = report
    return out


def _served(c, datasource: str) -> dict:
    """historical -> the ids of ``datasource``'s segments it announces as served."""
    out: dict = {}
    for key, value in c.discovery.get_prefix(served_prefix()).items():
        descriptor = SegmentDescriptor.from_bytes(value)
        if descriptor.id.datasource == datasource:
            out.setdefault(parse_served_key(key).server, set()).add(descriptor.id)
    return out


def _build_and_push(c, datasource: str, rows: int, day: str, work) -> tuple[list[SegmentDescriptor], tuple[int, int]]:
    """Segments of ``rows`` rows in one day, pushed to deep storage but not published."""
    data = demo_table(rows, start=day, days=1)
    built = build_segments(data, datasource, str(work), segment_granularity="day", rows_per_segment=ROWS_PER_SEGMENT)
    descriptors = []
    for path, manifest in built:
        key = deep_storage_key(manifest.segment_id)
        c.storage.push(path, key)
        descriptors.append(SegmentDescriptor.of(manifest, key, len(built), os.path.getsize(path)))
    return descriptors, (data.num_rows, sum(data.column("added").to_pylist()))


def _cache_files(c) -> list[str]:
    return sorted(glob.glob(os.path.join(c.dir, "cache-*", "*")) + glob.glob(os.path.join(c.dir, "cache-*", ".*")))


def test_deep_storage_stopped_while_historicals_load(cluster, tmp_path):
    c = cluster
    late, c.expected["late"] = _build_and_push(c, "late", 4 * ROWS_PER_SEGMENT, "2016-02-01", tmp_path)
    late_ids = {d.id for d in late}
    c.s3.stop()
    try:
        c.client.publish(late)  # metadata only: the coordinator assigns, the historicals cannot pull
        # Each load fails and is retried: a historical reports a second failed attempt only after
        # the coordinator assigned the segment again, one backoff later. The outage lasts until
        # some historical has also given up on a segment (which then moves to the other), so the
        # give-up's expiry is what must clear that record later. Records come and go (a give-up
        # moves a segment, an expired one is forgotten), so this collects what it has seen.
        first_failed_ms: dict = {}
        seen_twice: set = set()
        gave_up: set = set()

        def retried():
            found = _failures(c, "late")
            for where, report in found.items():
                if report.attempts == 1:
                    first_failed_ms.setdefault(where, report.failed_ms)
                elif report.attempts == 2 and where in first_failed_ms:  # seen both: one backoff apart
                    assert report.failed_ms - first_failed_ms[where] >= 1_000, (where, report)
            seen_twice.update(s for (_, s), r in found.items() if r.attempts >= 2)
            gave_up.update(where for where, r in found.items() if r.attempts >= DEFAULT_MAX_LOAD_ATTEMPTS)
            return found if seen_twice == late_ids and gave_up and found else None

        failures = _wait(retried, 90, "every 'late' segment failing twice, and a historical giving up on one")
        # Meanwhile: queries answer exactly from what is loaded, nothing of 'late' is announced,
        # and no half-pulled file is in any cache.
        for _ in range(3):
            _wait_answer(c, "wiki", "2015-09-12/2015-09-13", 30)
        assert _served(c, "late") == {}
        assert all(len(s.servers) == 0 for s in c.client.load_status("late"))
        with pytest.raises(ClusterError, match="'late'"):  # an error, never a count of rows not there
            _answer(c, "late", "2016-02-01/2016-02-02")
        names = {segment_filename(sid) for sid in late_ids}
        assert not [f for f in _cache_files(c) if os.path.basename(f) in names or ".tmp-" in f]
        by_key = {d.id: d.location for d in late}
        for (server, sid), report in failures.items():
            assert report.reason.startswith(f"cannot reach S3 at endpoint {c.s3.info.endpoint}"), report.reason
            assert by_key[sid] in report.reason
    finally:
        c.s3.start()
    # Back: the next retry of each segment loads it, and the failure records are cleared.
    c.client.wait_loaded("late", len(late), 90)
    _wait_answer(c, "late", "2016-02-01/2016-02-02")
    # A segment still assigned to the server that failed it clears its record on that load. A
    # server that gave up on a segment (the coordinator moved it elsewhere) keeps its record only
    # until the give-up expires: then the coordinator deletes it and the historical forgets it, so
    # no server stays excluded from a segment after the outage. Both the records in discovery and
    # each historical's own memory of failures (its health's "failed") end empty.
    def cleared():
        found = _failures(c, "late")
        remembered = {n["name"]: health(n)[1].get("failed") for n in c.running()["nodes"] if n["role"] == "historical"}
        return True if not found and all(v == 0 for v in remembered.values()) else None

    _wait(cleared, 60, f"every load-failure record cleared, those of the give-ups {sorted(map(str, gave_up))} "
                       f"too (they expire after {GIVE_UP_EXPIRY_MS} ms)")
    _wait_answer(c, "late", "2016-02-01/2016-02-02")
    _wait_answer(c, "wiki", "2015-09-12/2015-09-13")


def test_a_full_cache_volume_refuses_loads_cleanly_and_the_coordinator_assigns_elsewhere(cluster, tmp_path):
    c = cluster
    if c.tmpfs_refused is not None:
        pytest.skip(f"cannot give historical-1 a small cache volume: {c.tmpfs_refused} (needs root or CAP_SYS_ADMIN)")
    pid = c.node("historical-1")["pid"]
    # Twice what the volume holds: the coordinator, which believes historical-1 has its configured
    # 10 GiB, gives it about half of them. Sized from a segment as the format builds it today.
    probe = build_segments(demo_table(ROWS_PER_SEGMENT, start="2016-03-01", days=1), "probe",
                           str(tmp_path / "probe"), segment_granularity="day", rows_per_segment=ROWS_PER_SEGMENT)
    segment_bytes = os.path.getsize(probe[0][0])
    segments = 2 * CACHE_VOLUME_BYTES // segment_bytes + 4
    big, c.expected["big"] = _build_and_push(c, "big", segments * ROWS_PER_SEGMENT, "2016-03-01", tmp_path)
    c.client.publish(big)
    c.client.wait_loaded("big", len(big), 120)
    _wait_answer(c, "big", "2016-03-01/2016-03-02")
    _wait_answer(c, "wiki", "2015-09-12/2015-09-13")
    assert _alive(pid) and c.node("historical-1")["pid"] == pid, "historical-1 died with its cache volume full"
    cache1 = os.path.join(c.dir, "cache-1")

    def settled():
        # Every segment served exactly once (replication 1: a balancing move may briefly hold two
        # copies) and historical-1 not downloading (no load in flight, no partial file).
        served = _served(c, "big")
        ids = [s for v in served.values() for s in v]
        quiet = (health(c.node("historical-1"))[1].get("loading") == 0
                 and not [f for f in os.listdir(cache1) if f.startswith(".tmp-")])
        return served if len(ids) == len(set(ids)) == len(big) and quiet else None

    served = _wait(settled, 60, "every 'big' segment served once and historical-1 idle")
    assert served.get("historical-1"), "historical-1 serves nothing: it should keep what fits"
    # The refusals are reported, and those segments went to historical-2.
    reports = {s: r for (server, s), r in _failures(c, "big").items() if server == "historical-1"}
    refused = set(reports)
    assert refused, "historical-1 reported no failed load although its volume could not hold its share"
    for report in reports.values():  # refused before writing; or, racing another download, out of space
        assert (f"the cache volume of {cache1} has" in report.reason
                or "No space left on device" in report.reason), report.reason
    assert refused <= served["historical-2"]
    # Nothing on historical-1's volume counts as loaded unless it is whole: every segment it
    # serves (before and after the listing) is a file that passes every checksum.
    files = set()
    for name in os.listdir(cache1):
        if name.endswith(".sseg"):
            try:
                Segment.open(os.path.join(cache1, name), verify=True).close()
            except FileNotFoundError:
                continue  # evicted meanwhile (unserved): not counted
            files.add(name)
    still = served["historical-1"] & _served(c, "big").get("historical-1", set())
    assert {segment_filename(s) for s in still} <= files
    with open(os.path.join(c.dir, "logs", "historical-1.log")) as f:
        assert "max_cache_bytes is 10737418240 but the volume holding cache_dir" in f.read()
    # Restarted on the same full volume, it adopts only whole files and the answers stay exact.
    c.kill("historical-1", signal.SIGTERM)
    c.restart("historical-1")
    c.client.wait_loaded("big", len(big), 120)
    _wait_answer(c, "big", "2016-03-01/2016-03-02")
    _wait_answer(c, "wiki", "2015-09-12/2015-09-13")
