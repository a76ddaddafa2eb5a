"""markUnused / markUsed / kill against real backends: SQLite with local deep storage, and
PostgreSQL with an S3 server. A kill deletes rows and files of unused segments only."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.segment_lifecycle import SegmentLifecycle
from services.coordinator.store import SegmentRecord, SegmentStore
from services.deep_storage import deep_storage_from_url
from tests.fixtures.postgres_server import postgres_url, throwaway_database  # noqa: F401
from tests.fixtures.s3_server import s3_server  # noqa: F401

DAY = 86_400_000


@pytest.fixture(params=["sqlite+local", "postgresql+s3"])
def backends(request, tmp_path):
    if request.param == "sqlite+local":
        yield f"sqlite:///{tmp_path / 'm.db'}", deep_storage_from_url(str(tmp_path / "deep"))
        return
    base = request.getfixturevalue("postgres_url")
    s3 = request.getfixturevalue("s3_server")
    with throwaway_database(base) as (url, name):
        yield url, deep_storage_from_url(f"{s3.url}/{name}", s3.endpoint)


def publish(store, storage, tmp_path, day: int, version: str = "v1") -> SegmentRecord:
    sid = SegmentId("wiki", Interval(day * DAY, (day + 1) * DAY), version, 0)
    local = tmp_path / f"{day}-{version}.sseg"
    local.write_bytes(b"segment bytes " + str(sid).encode())
    key = f"wiki/{day}/{version}/0.sseg"
    storage.push(str(local), key)
    record = SegmentRecord(sid, local.stat().st_size, 10, key, f'{{"id":"{sid}"}}')
    store.publish([record])
    return record


def test_mark_and_kill(backends, tmp_path):
    url, storage = backends
    with SegmentStore(url) as store:
        life = SegmentLifecycle(store, lambda: storage)
        a, b, c = (publish(store, storage, tmp_path, day) for day in range(3))
        assert life.mark_unused("wiki", Interval(0, 2 * DAY)) == 2  # a and b, wholly inside
        assert life.mark_unused("wiki", Interval(0, 2 * DAY)) == 0
        assert life.mark_used("wiki", segment_ids=[str(b.id).removesuffix("_0")]) == 1  # Druid's id spelling
        with pytest.raises(ValidationError, match="has no segment 'wiki_nope'"):
            life.mark_used("wiki", segment_ids=["wiki_nope"])

        report = life.kill("wiki", Interval(0, 10 * DAY))
        assert report.killed == (a.id,) and report.skipped_used == 0 and report.file_errors == ()
        assert store.get(a.id) is None and not storage.exists(a.location)
        for used in (b, c):  # used segments in the interval are untouched
            assert store.get(used.id).used and storage.exists(used.location)


def test_a_segment_marked_used_during_a_kill_keeps_row_and_file(backends, tmp_path):
    url, storage = backends
    with SegmentStore(url) as store:
        a = publish(store, storage, tmp_path, 0)
        store.mark_unused([a.id])

        def used_again_meanwhile():
            # Called after the kill listed its candidates and before it deletes anything: the
            # segment is marked used in between, as a concurrent markUsed would.
            store.mark_used([a.id])
            return storage

        report = SegmentLifecycle(store, used_again_meanwhile).kill("wiki", Interval(0, DAY))
        assert report.killed == () and report.skipped_used == 1
        assert store.get(a.id).used and storage.exists(a.location)


def test_mark_used_skips_overshadowed_versions(backends, tmp_path):
    url, storage = backends
    with SegmentStore(url) as store:
        old = publish(store, storage, tmp_path, 0, "v1")
        publish(store, storage, tmp_path, 0, "v2")
        store.mark_unused([old.id])
        life = SegmentLifecycle(store, lambda: storage)
        assert life.mark_used("wiki", Interval(0, DAY)) == 0  # v2 hides v1: it would be unused again
        assert not store.get(old.id).used


def test_automatic_kill_is_bounded_and_spaced(backends, tmp_path):
    from services.coordinator.segment_lifecycle import AutoKill

    url, storage = backends
    clock = {"now": 1_000 * DAY}
    with SegmentStore(url, clock=lambda: clock["now"]) as store:
        records = [publish(store, storage, tmp_path, day) for day in range(4)]
        store.mark_unused([r.id for r in records[:3]])  # unused at 1000 days; the last stays used
        kill = AutoKill(SegmentLifecycle(store, lambda: storage), after_ms=30 * DAY, limit=2, period_ms=DAY,
                        clock=lambda: clock["now"])
        clock["now"] += 29 * DAY
        assert kill().killed == ()  # not unused long enough yet
        clock["now"] += DAY // 2
        assert kill() is None  # the period has not passed since the last run
        clock["now"] += DAY // 2
        assert kill().killed == (records[0].id, records[1].id)  # 30 days unused now; at most 2 a run
        clock["now"] += DAY
        assert kill().killed == (records[2].id,)
        assert [r.id for r in store.list(include_unused=True)] == [records[3].id]
        assert storage.exists(records[3].location)
        assert not any(storage.exists(r.location) for r in records[:3])
    with pytest.raises(ValidationError, match="kill_unused_after_ms > 0"):
        AutoKill(None, 0, 1, 1)


def test_kill_task_by_version_limit_and_batches(backends, tmp_path):
    from services.coordinator.core.kill_plan import parse_kill_spec

    url, storage = backends
    with SegmentStore(url) as store:
        life = SegmentLifecycle(store, lambda: storage)
        v1 = [publish(store, storage, tmp_path, day, "v1") for day in range(3)]
        v2 = publish(store, storage, tmp_path, 0, "v2")
        kept_used = publish(store, storage, tmp_path, 5, "v1")
        store.mark_unused([r.id for r in v1] + [v2.id])
        spec = {"type": "kill", "dataSource": "wiki", "interval": "1970-01-01/1970-02-01"}

        # Only the named version: v1's segments are kept.
        report, error = life.run_kill_task(parse_kill_spec({**spec, "versions": ["v2"]}))
        assert error is None and (report["numSegmentsKilled"], report["numBatchesProcessed"]) == (1, 1)
        assert store.get(v2.id) is None and not storage.exists(v2.location)
        # At most two, one a batch, in id order; a cancel between batches stops the rest.
        report, _ = life.run_kill_task(parse_kill_spec({**spec, "limit": 2, "batchSize": 1}),
                                       should_stop=lambda: store.get(v1[0].id) is None)
        assert (report["numSegmentsKilled"], report["numBatchesProcessed"]) == (1, 1)
        report, _ = life.run_kill_task(parse_kill_spec({**spec, "limit": 1}))
        assert report["numSegmentsKilled"] == 1 and store.get(v1[1].id) is None
        report, _ = life.run_kill_task(parse_kill_spec(spec))
        assert report == {"numSegmentsKilled": 1, "numBatchesProcessed": 1, "numSegmentsMarkedAsUnused": 0,
                          "numSegmentsKeptUsed": 0, "fileErrors": []}
        assert [r.id for r in store.list(include_unused=True)] == [kept_used.id]  # the used one, never killed
        assert storage.exists(kept_used.location)
        assert not any(storage.exists(r.location) for r in v1)
