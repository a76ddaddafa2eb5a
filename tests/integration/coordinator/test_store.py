"""SegmentStore contract, run against a SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading

import pytest
from sqlalchemy import create_engine, text

from common.errors import ValidationError
from common.segment.manifest import PartEntry, SegmentManifest
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.store import (
    MIGRATIONS,
    MetadataSchemaError,
    Migration,
    PublishConflictError,
    SegmentRecord,
    SegmentStore,
)
from tests.fixtures.manual_clock import ManualClock
from tests.fixtures.metadata_store_url import metadata_store_url  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401

KNOWN = [m.version for m in MIGRATIONS]
NEXT = KNOWN[-1] + 1

DAY = 86_400_000
THREAD_DEADLINE_S = 60


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(metadata_store_url, clock):
    with SegmentStore(metadata_store_url, clock=clock) as s:
        yield s


def rec(day: int = 0, version: str = "v1", partition: int = 0, num_partitions: int = 1, ds: str = "wiki",
        payload: str | None = None, size: int = 100) -> SegmentRecord:
    sid = SegmentId(ds, Interval(day * DAY, (day + 1) * DAY), version, partition)
    return SegmentRecord(sid, size, 10, f"{ds}/{day}/{version}/{partition}.sseg",
                         payload if payload is not None else f'{{"id":"{sid}"}}', num_partitions)


def ids(records) -> list[SegmentId]:
    return [r.id for r in records]


# --- publish, list, mark unused ---------------------------------------------------------------

def test_publish_and_list_in_time_order(store, clock):
    batch = [rec(2), rec(0, partition=1, num_partitions=2), rec(0, num_partitions=2), rec(1, ds="edits")]
    assert store.publish(batch) == 4
    listed = store.list()
    assert ids(listed) == [rec(1, ds="edits").id, rec(0, num_partitions=2).id,
                           rec(0, partition=1, num_partitions=2).id, rec(2).id]
    first = listed[1]
    assert first == SegmentRecord(rec(0).id, 100, 10, "wiki/0/v1/0.sseg", f'{{"id":"{rec(0).id}"}}', 2,
                                  used=True, created_ms=clock.now, used_status_updated_ms=clock.now)
    assert ids(store.list("wiki")) == ids(listed[1:])
    assert store.used_segments() == listed
    assert store.datasources() == ["edits", "wiki"]
    assert store.get(rec(2).id) == listed[3]
    assert store.get(rec(9).id) is None


def test_mark_unused_hides_segments_unless_asked(store, clock):
    store.publish([rec(0), rec(1), rec(2)])
    clock.now = 5_000
    assert store.mark_unused([rec(1).id, rec(7).id]) == 1
    assert store.mark_unused([rec(1).id]) == 0  # already unused
    assert ids(store.list()) == [rec(0).id, rec(2).id]
    everything = store.list(include_unused=True)
    assert [(r.id, r.used, r.used_status_updated_ms) for r in everything] == [
        (rec(0).id, True, 1_000), (rec(1).id, False, 5_000), (rec(2).id, True, 1_000)]


def test_mark_unused_in_interval_takes_only_segments_wholly_inside(store):
    wide = SegmentRecord(SegmentId("wiki", Interval(0, 3 * DAY), "v0"), 1, 1, "w", "{}")
    store.publish([rec(0), rec(1), rec(2), rec(1, ds="edits"), wide])
    assert store.mark_unused_in_interval("wiki", Interval(DAY, 3 * DAY)) == 2
    assert ids(store.list()) == [rec(1, ds="edits").id, rec(0).id, wide.id]
    assert store.datasources() == ["edits", "wiki"]
    store.mark_unused_in_interval("edits", Interval(0, 10 * DAY))
    assert store.datasources() == ["wiki"]
    assert store.datasources(include_unused=True) == ["edits", "wiki"]


def test_delete_unused_removes_only_unused_rows(store):
    store.publish([rec(0), rec(1)])
    store.mark_unused([rec(0).id])
    assert store.delete_unused([rec(0).id, rec(1).id]) == 1
    assert ids(store.list(include_unused=True)) == [rec(1).id]


# --- conflicts and atomicity ------------------------------------------------------------------

def test_republishing_an_identical_segment_is_a_no_op(store, clock):
    store.publish([rec(0), rec(1)])
    store.mark_unused([rec(1).id])
    clock.now = 9_000
    assert store.publish([rec(0), rec(1), rec(2)]) == 1
    listed = {r.id: r for r in store.list(include_unused=True)}
    assert listed[rec(0).id].created_ms == 1_000
    assert listed[rec(1).id].used is False
    assert listed[rec(2).id].created_ms == 9_000


def test_batch_with_one_conflicting_segment_publishes_nothing(store):
    store.publish([rec(0)])
    batch = [rec(1), rec(2), rec(0, payload='{"other":1}'), rec(3)]
    with pytest.raises(PublishConflictError, match="differs in payload") as err:
        store.publish(batch)
    assert str(rec(0).id) in str(err.value)
    assert ids(store.list(include_unused=True)) == [rec(0).id]


def test_same_id_twice_in_one_batch_with_different_descriptors_is_refused(store):
    with pytest.raises(PublishConflictError, match=str(rec(0).id).replace(".", r"\.")):
        store.publish([rec(0), rec(0, size=5)])
    assert store.list() == []
    assert store.publish([rec(0), rec(0)]) == 1


def test_partitions_disagreeing_on_num_partitions_publish_nothing(store):
    store.publish([rec(0, partition=0, num_partitions=2)])
    with pytest.raises(PublishConflictError, match="num_partitions"):
        store.publish([rec(5), rec(0, partition=1, num_partitions=3)])
    assert ids(store.list()) == [rec(0).id]


@pytest.mark.parametrize("bad, message", [
    (rec(0, partition=0, num_partitions=0), "num_partitions must be >= 1"),
    (SegmentRecord(SegmentId("wiki", Interval(5, 5), "v1"), 1, 1, "x", "{}"), "empty interval"),
    (rec(0, size=-1), "must be >= 0"),
])
def test_invalid_records_are_refused_before_anything_is_written(store, bad, message):
    with pytest.raises(ValidationError, match=message):
        store.publish([rec(3), bad])
    assert store.list() == []


def test_record_from_a_manifest():
    sid = rec(0).id
    manifest = SegmentManifest(sid, 42, None, None, (), (), {"a": PartEntry(0, 70, 1), "b": PartEntry(70, 30, 2)}, "x")
    r = SegmentRecord.from_manifest(manifest, "wiki/0.sseg", num_partitions=1)
    assert (r.id, r.size_bytes, r.num_rows, r.location) == (sid, 100, 42, "wiki/0.sseg")
    assert SegmentManifest.from_json(json.loads(r.payload), "x") == manifest


def test_record_round_trips_through_the_shared_descriptor(store):
    r = rec(0, partition=1, num_partitions=2)
    d = r.descriptor()
    assert (d.id, d.size, d.num_rows, d.location, d.num_partitions, d.manifest_json) == (
        r.id, 100, 10, r.location, 2, r.payload)
    store.publish([SegmentRecord.from_descriptor(d)])
    assert store.get(r.id).descriptor() == d


# --- concurrency ------------------------------------------------------------------------------

def _run_threads(target, n: int = 4) -> list[BaseException | object]:
    results: list = [None] * n
    start = threading.Barrier(n, timeout=THREAD_DEADLINE_S)

    def body(i: int) -> None:
        try:
            results[i] = target(i, start)
        except BaseException as exc:  # reported to the test thread below
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_DEADLINE_S)
        assert not t.is_alive(), f"publisher thread {t.name} still running after {THREAD_DEADLINE_S}s"
    return results


def test_four_concurrent_publishers_each_opening_the_store(metadata_store_url):
    shared = rec(99)

    def publisher(i: int, start: threading.Barrier) -> int:
        start.wait()
        with SegmentStore(metadata_store_url) as s:  # concurrent first open: concurrent migrations too
            published = 0
            for b in range(10):
                batch = [rec(i * 100 + b * 5 + k, ds=f"ds{i}") for k in range(5)] + [shared]
                published += s.publish(batch)
            return published

    results = _run_threads(publisher)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    assert sum(results) == 4 * 50 + 1
    with SegmentStore(metadata_store_url) as s:
        assert len(s.list()) == 4 * 50 + 1
        assert s.schema_versions() == KNOWN


def test_concurrent_conflicting_publishers_one_wins(metadata_store_url):
    SegmentStore(metadata_store_url).close()

    def publisher(i: int, start: threading.Barrier) -> int:
        with SegmentStore(metadata_store_url) as s:
            start.wait()
            return s.publish([rec(i + 10), rec(0, payload=f'{{"writer":{i}}}')])

    results = _run_threads(publisher)
    winners = [r for r in results if r == 2]
    losers = [r for r in results if isinstance(r, PublishConflictError)]
    assert len(winners) == 1 and len(losers) == 3, results
    with SegmentStore(metadata_store_url) as s:
        assert len(s.list()) == 2  # the shared id and the winner's own segment; losers left nothing



def test_opening_a_new_sqlite_file_waits_out_a_writer_instead_of_failing(tmp_path):
    # Switching a new file to WAL takes the write lock from inside a read transaction, the one
    # lock wait SQLite refuses to hand to the busy handler: it answers "database is locked" at
    # once. A writer holding the lock when a coordinator starts (another coordinator, the command
    # line, or just a descheduled opener on a loaded machine) must delay the open, not fail it.
    path = tmp_path / "meta" / "strata.db"
    path.parent.mkdir()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, on a file still in rollback-journal mode
    outcome: list = []

    def open_store() -> None:
        try:
            with SegmentStore(f"sqlite:///{path}") as s:
                outcome.append(s.schema_versions())
        except BaseException as exc:  # reported to the test thread below
            outcome.append(exc)

    opener = threading.Thread(target=open_store, daemon=True)
    opener.start()
    opener.join(0.5)
    assert outcome == [], "the store opened (or failed) while another connection held the write lock"
    holder.execute("ROLLBACK")
    holder.close()
    opener.join(THREAD_DEADLINE_S)
    assert outcome == [KNOWN]


def test_stores_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path):
    for n in range(10):
        url = f"sqlite:///{tmp_path / str(n) / 'strata.db'}"

        def opener(i: int, start: threading.Barrier, url=url) -> list[int]:
            with SegmentStore(url, migrate=False) as s:  # no connection yet: all connect at once below
                start.wait()
                s.migrate()
                return s.schema_versions()

        assert _run_threads(opener, n=8) == [KNOWN] * 8, f"database {n}"


_MIXED_ROUNDS = 8


def _mixed_writer(url: str, name: str, start: threading.Barrier | None = None) -> None:
    """Publishes, moves tasks through their states and writes the catalog, each in its own
    transaction, as a coordinator's RPC threads do."""
    from common.catalog import TableId, TableSpec
    from common.catalog.operations import MergeUpdate
    from services.coordinator.catalog_store import CatalogStore
    from services.coordinator.task_store import TaskStore

    spec = TableSpec.from_json({"type": "datasource", "columns": [{"name": "a", "sqlType": "VARCHAR"}]})
    if start is not None:
        start.wait()
    with SegmentStore(url) as s:
        tasks, catalog = TaskStore(s), CatalogStore(s)
        table = TableId("druid", name)
        catalog.create(table, spec)
        for r in range(_MIXED_ROUNDS):
            s.publish([rec(r, ds=name), rec(100 + r, ds=name), rec(99, ds="shared")])
            task = tasks.create(name, "insert", f"INSERT INTO {name} ...")
            tasks.transition(task.id, "RUNNING")
            tasks.transition(task.id, "SUCCESS", report={"round": r})
            catalog.edit(table, [MergeUpdate({"properties": {"targetSegmentRows": r + 1}})])
            s.mark_unused([rec(100 + r, ds=name).id])
            assert len(s.list(name)) == r + 1


_MIXED_CHILD = """
import sys
from tests.integration.coordinator.test_store import _mixed_writer
_mixed_writer(sys.argv[1], sys.argv[2])
"""


def test_publishes_task_updates_and_catalog_writes_from_threads_and_processes_all_land(metadata_store_url):
    """Four writer threads here and two writer processes (a second coordinator, the command
    line) on one metadata database: every write lands, none fails with "database is locked"."""
    from services.coordinator.catalog_store import CatalogStore
    from services.coordinator.task_store import TaskStore

    SegmentStore(metadata_store_url).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    children = [subprocess.Popen([sys.executable, "-c", _MIXED_CHILD, metadata_store_url, f"proc{i}"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    try:
        results = _run_threads(lambda i, start: _mixed_writer(metadata_store_url, f"thread{i}", start))
        outputs = [c.communicate(timeout=THREAD_DEADLINE_S)[0] for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert [c.returncode for c in children] == [0, 0], outputs
    writers = [f"thread{i}" for i in range(4)] + ["proc0", "proc1"]
    with SegmentStore(metadata_store_url) as s:
        assert s.datasources() == sorted(writers + ["shared"])
        for w in writers:
            assert ids(s.list(w)) == [rec(r, ds=w).id for r in range(_MIXED_ROUNDS)]
            assert len(s.list(w, include_unused=True)) == 2 * _MIXED_ROUNDS
        tasks = TaskStore(s).list()
        assert sorted(t.datasource for t in tasks) == sorted(writers * _MIXED_ROUNDS)
        assert {t.state for t in tasks} == {"SUCCESS"}
        tables = CatalogStore(s).list("druid")
        assert sorted(t.id.name for t in tables) == sorted(writers)
        assert {t.spec.properties.get("targetSegmentRows") for t in tables} == {_MIXED_ROUNDS}


# --- schema migrations ------------------------------------------------------------------------

def test_migrations_are_idempotent(store):
    assert store.schema_versions() == KNOWN
    assert store.migrate() == []
    assert store.schema_versions() == KNOWN


def test_a_new_migration_applies_once(metadata_store_url):
    calls = []

    def add_note(conn) -> None:
        calls.append(1)
        conn.execute(text("ALTER TABLE strata_segments ADD COLUMN note TEXT"))  # fails if run twice

    with SegmentStore(metadata_store_url) as s:
        s.publish([rec(0)])
    steps = MIGRATIONS + (Migration(NEXT, "add note", add_note),)
    with SegmentStore(metadata_store_url, migrations=steps) as s:
        assert s.schema_versions() == KNOWN + [NEXT]
        assert s.migrate() == []
        assert ids(s.list()) == [rec(0).id]  # the new column does not disturb reads
    with SegmentStore(metadata_store_url, migrations=steps) as s:
        assert s.schema_versions() == KNOWN + [NEXT]
    assert calls == [1]


def test_a_failing_migration_leaves_no_trace(metadata_store_url):
    def broken(conn) -> None:
        conn.execute(text("CREATE TABLE strata_scratch (x INTEGER)"))
        raise RuntimeError("new migration failed halfway")

    SegmentStore(metadata_store_url).close()
    with pytest.raises(RuntimeError, match="halfway"):
        SegmentStore(metadata_store_url, migrations=MIGRATIONS + (Migration(NEXT, "broken", broken),))
    with SegmentStore(metadata_store_url) as s:
        assert s.schema_versions() == KNOWN
    engine = create_engine(metadata_store_url)
    with engine.connect() as conn:
        with pytest.raises(Exception):
            conn.execute(text("SELECT * FROM strata_scratch"))
    engine.dispose()


def test_a_database_newer_than_the_code_is_refused(metadata_store_url):
    SegmentStore(metadata_store_url, migrations=MIGRATIONS + (Migration(NEXT, "noop", lambda conn: None),)).close()
    with pytest.raises(MetadataSchemaError, match=rf"schema versions \[{NEXT}\].*upgrade strata"):
        SegmentStore(metadata_store_url)


def test_migration_versions_must_ascend(metadata_store_url):
    with pytest.raises(MetadataSchemaError, match="unique and ascending"):
        SegmentStore(metadata_store_url, migrations=(MIGRATIONS[0], MIGRATIONS[0]))


# --- durability -------------------------------------------------------------------------------

def test_reopening_keeps_the_data(metadata_store_url):
    with SegmentStore(metadata_store_url) as s:
        s.publish([rec(0), rec(1)])
        s.mark_unused([rec(1).id])
    with SegmentStore(metadata_store_url) as s:
        assert [(r.id, r.used) for r in s.list(include_unused=True)] == [(rec(0).id, True), (rec(1).id, False)]


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    with SegmentStore(f"sqlite:///{tmp_path / 'm.db'}") as s:
        with s._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000


def test_unsupported_url_names_the_choices():
    with pytest.raises(ValidationError, match="sqlite:///path"):
        SegmentStore("mysql://u:secret@h/db")


# --- REPLACE ----------------------------------------------------------------------------------

def test_replace_retires_uncovered_chunks_and_keeps_covered_ones_until_overshadowed(store):
    store.publish([rec(0), rec(1), rec(2)])
    # Replace days 0-2 with new data for day 1 only: day 0 and day 2 hold replaced rows and
    # nothing newer hides them, so they go unused now; day 1 stays until v2 is served.
    store.publish([rec(1, "v2")], replace=("wiki", [Interval(0, 3 * DAY)]))
    used = {str(r.id): r.used for r in store.list("wiki", include_unused=True)}
    assert used == {str(rec(0).id): False, str(rec(1).id): True, str(rec(2).id): False, str(rec(1, "v2").id): True}


def test_replace_with_no_rows_empties_the_interval(store):
    store.publish([rec(0), rec(1)])
    store.publish([], replace=("wiki", [Interval(DAY, 2 * DAY)]))
    assert ids(store.list("wiki")) == [rec(0).id]


def test_replace_refuses_to_leave_replaced_rows_visible(store):
    month = SegmentRecord(SegmentId("wiki", Interval(0, 30 * DAY), "v1"), 100, 10, "m", "{}")
    store.publish([month])
    with pytest.raises(ValidationError, match="would leave rows of segment wiki_.*align OVERWRITE WHERE"):
        store.publish([rec(3, "v2")], replace=("wiki", [Interval(3 * DAY, 5 * DAY)]))
    assert ids(store.list("wiki")) == [month.id]  # nothing published, nothing retired


def test_migration_6_adds_the_realtime_flag_to_an_older_database(metadata_store_url):
    SegmentStore(metadata_store_url, migrations=MIGRATIONS[:5]).close()
    engine = create_engine(metadata_store_url)
    with engine.begin() as conn:  # as a database made before the column existed
        conn.execute(text("ALTER TABLE strata_segments DROP COLUMN realtime"))
        conn.execute(text("INSERT INTO strata_segments (id, datasource, start_ms, end_ms, version, partition_num, "
                          "num_partitions, size_bytes, num_rows, location, payload, used, created_ms, "
                          "used_status_updated_ms) VALUES ('old', 'wiki', 0, 1, 'v1', 0, 1, 1, 1, 'x', '{}', "
                          "TRUE, 0, 0)"))
    engine.dispose()
    with SegmentStore(metadata_store_url) as s:
        assert s.schema_versions() == KNOWN
        assert [(r.location, r.realtime) for r in s.list("wiki")] == [("x", False)]
        s.publish([rec(3)])
        assert [r.realtime for r in s.list("wiki")] == [False, False]
