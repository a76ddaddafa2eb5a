"""CatalogStore contract, on a SQLite file and on a real PostgreSQL server."""

from __future__ import annotations

import threading

import pytest

from common.catalog import (
    TableExistsError,
    TableId,
    TableNotFoundError,
    TableSpec,
    VersionConflictError,
)
from common.catalog.operations import DropColumns, MergeUpdate, MoveColumn
from common.errors import ValidationError
from services.coordinator.catalog_store import CatalogStore
from services.coordinator.store import SegmentStore
from tests.fixtures.manual_clock import ManualClock
from tests.fixtures.metadata_store_url import metadata_store_url  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401

THREAD_DEADLINE_S = 30
WIKI = TableId("druid", "wiki")
SPEC = TableSpec.from_json({"type": "datasource", "properties": {"segmentGranularity": "DAY"},
                            "columns": [{"name": "a", "sqlType": "VARCHAR"}, {"name": "b", "sqlType": "BIGINT"}]})


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def segments(metadata_store_url):
    store = SegmentStore(metadata_store_url)
    yield store
    store.close()


@pytest.fixture
def catalog(segments, clock):
    return CatalogStore(segments, clock)


def test_migration_creates_the_table(segments):
    assert 3 in segments.schema_versions()


def test_create_get_and_identity(catalog, clock):
    stored, written = catalog.create(WIKI, SPEC)
    assert written and stored.creation_time == stored.update_time == 1_000 and stored.state == "ACTIVE"
    got = catalog.get(WIKI)
    assert got == stored and got.spec.to_json() == SPEC.to_json()
    assert catalog.find(TableId("druid", "other")) is None
    with pytest.raises(TableNotFoundError, match="druid.other"):
        catalog.get(TableId("druid", "other"))


def test_actions(catalog, clock):
    first, _ = catalog.create(WIKI, SPEC)
    with pytest.raises(TableExistsError) as err:
        catalog.create(WIKI, SPEC, "New")
    assert err.value.current_version == first.update_time
    same, written = catalog.create(WIKI, TableSpec("datasource"), "IfNew")
    assert not written and same == first
    clock.now = 5_000
    other = TableSpec.from_json({"type": "datasource", "properties": {"segmentGranularity": "HOUR"}})
    replaced, written = catalog.create(WIKI, other, "Replace")
    assert written and replaced.spec == other and replaced.creation_time == first.creation_time
    assert replaced.update_time == 5_000
    forced, _ = catalog.create(WIKI, SPEC, "Force")
    assert forced.update_time == 5_001  # the clock stood still; the version did not
    created, written = catalog.create(TableId("druid", "new"), SPEC, "Force")
    assert written and created.creation_time == created.update_time
    with pytest.raises(TableNotFoundError):
        catalog.create(TableId("druid", "missing"), SPEC, "Replace")
    with pytest.raises(ValidationError, match="'version' applies to action Replace or Force"):
        catalog.create(TableId("druid", "x"), SPEC, "New", version=5)
    with pytest.raises(ValidationError, match="valid actions"):
        catalog.create(WIKI, SPEC, "Upsert")


def test_versions_guard_replace_edit_and_drop(catalog):
    v1, _ = catalog.create(WIKI, SPEC)
    v2, _ = catalog.create(WIKI, SPEC, "Replace", version=v1.update_time)
    assert v2.update_time > v1.update_time
    for attempt in (lambda: catalog.create(WIKI, SPEC, "Replace", version=v1.update_time),
                    lambda: catalog.create(WIKI, SPEC, "Force", version=v1.update_time),
                    lambda: catalog.edit(WIKI, [DropColumns(("a",))], version=v1.update_time),
                    lambda: catalog.drop(WIKI, version=v1.update_time)):
        with pytest.raises(VersionConflictError) as err:
            attempt()
        assert err.value.current_version == v2.update_time and err.value.expected == v1.update_time
        assert str(v2.update_time) in str(err.value)
    v3 = catalog.edit(WIKI, [MoveColumn("b", "first")], version=v2.update_time)
    assert v3.spec.column_names == ["b", "a"] and v3.update_time > v2.update_time


def test_invalid_results_are_not_stored(catalog):
    with pytest.raises(ValidationError, match="segmentGranularity"):
        catalog.create(WIKI, TableSpec("datasource", {"segmentGranularity": "P2D"}))
    assert catalog.find(WIKI) is None
    stored, _ = catalog.create(WIKI, SPEC)
    with pytest.raises(ValidationError, match="targetSegmentRows"):
        catalog.edit(WIKI, [MergeUpdate({"properties": {"targetSegmentRows": -1}})])
    with pytest.raises(ValidationError, match="schema 'sys'"):
        catalog.create(TableId("sys", "x"), SPEC)
    assert catalog.get(WIKI) == stored
    with pytest.raises(TableNotFoundError):
        catalog.edit(TableId("druid", "nope"), [MoveColumn("a", "first")])


def test_drop_keeps_a_tombstone_and_deltas_report_it(catalog, clock):
    catalog.create(WIKI, SPEC)
    src = TableId("ext", "src")
    catalog.create(src, TableSpec.from_json({"type": "inline", "properties": {"format": "csv", "data": "a"}}))
    mark = catalog.version()
    clock.now = 2_000
    updated = catalog.edit(WIKI, [DropColumns(("b",))])
    gone = catalog.drop(src)
    assert gone.state == "DELETED" and gone.update_time > updated.update_time
    assert catalog.drop(src, if_exists=True) is None
    with pytest.raises(TableNotFoundError):
        catalog.drop(src)
    with pytest.raises(TableNotFoundError):
        catalog.get(src)
    assert [t.id for t in catalog.list()] == [WIKI]
    delta = catalog.changes(mark)
    assert [t.id for t in delta.tables] == [WIKI] and delta.deleted == [src]
    assert delta.version == gone.update_time == catalog.version()
    assert catalog.changes(delta.version).tables == [] and catalog.changes(delta.version).deleted == []
    # Re-creating reuses the row: it is live again and no longer reported as deleted.
    clock.now = 3_000
    again, _ = catalog.create(src, TableSpec.from_json({"type": "inline", "properties": {"format": "json",
                                                                                          "data": "{}"}}))
    assert again.creation_time == again.update_time == 3_000
    delta = catalog.changes(mark)
    assert {t.id for t in delta.tables} == {WIKI, src} and delta.deleted == []
    assert [t.id for t in catalog.list("ext")] == [src]


def _race(n: int, fn) -> tuple[list, list]:
    barrier = threading.Barrier(n)
    wins, losses = [], []
    lock = threading.Lock()

    def run(i):
        barrier.wait(THREAD_DEADLINE_S)
        try:
            result = fn(i)
            with lock:
                wins.append(result)
        except (VersionConflictError, TableExistsError) as exc:
            with lock:
                losses.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_DEADLINE_S)
        assert not t.is_alive(), "a writer did not finish in time"
    return wins, losses


def test_concurrent_writers_with_one_version_exactly_one_wins(catalog):
    base, _ = catalog.create(WIKI, SPEC)
    wins, losses = _race(8, lambda i: catalog.edit(
        WIKI, [MergeUpdate({"properties": {"targetSegmentRows": i + 1}})], version=base.update_time))
    assert len(wins) == 1 and len(losses) == 7
    assert all(isinstance(e, VersionConflictError) and e.current_version == wins[0].update_time for e in losses)
    assert catalog.get(WIKI) == wins[0]


def test_concurrent_creates_exactly_one_wins(catalog):
    wins, losses = _race(6, lambda i: catalog.create(TableId("druid", "race"), SPEC, "New"))
    assert len(wins) == 1 and len(losses) == 5 and all(isinstance(e, TableExistsError) for e in losses)


def test_concurrent_unconditional_writers_get_distinct_increasing_versions(catalog):
    catalog.create(WIKI, SPEC)
    wins, losses = _race(8, lambda i: catalog.edit(WIKI, [MergeUpdate({"properties": {"targetSegmentRows": i + 1}})]))
    assert not losses and len({w.update_time for w in wins}) == 8
    assert catalog.get(WIKI).update_time == max(w.update_time for w in wins)
