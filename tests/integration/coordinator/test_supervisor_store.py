"""SupervisorStore on SQLite and a real PostgreSQL: supervisor state, and segments published with
their stream offsets in one transaction with compare-and-swap on the previous offsets."""

from __future__ import annotations

import threading

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from common.ingest.supervisor_spec import parse_supervisor_spec
from services.coordinator.store import PublishConflictError, ReplaceConflictError, SegmentRecord, SegmentStore
from services.coordinator.supervisor_store import (RUNNING, SUSPENDED, TERMINATED, OffsetsConflictError,
                                                    SupervisorNotFoundError, SupervisorStore)
from tests.fixtures.metadata_store_url import metadata_store_url  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401

HOUR = 3_600_000
THREAD_DEADLINE_S = 60


def spec(ds: str = "wiki", topic: str = "edits", **extra) -> dict:
    return {"type": "kafka", **extra,
            "spec": {"dataSchema": {"dataSource": ds},
                     "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}


@pytest.fixture
def stores(metadata_store_url):
    with SegmentStore(metadata_store_url) as segments:
        yield segments, SupervisorStore(segments)


def rec(hour: int, version: str = "v1", ds: str = "wiki") -> SegmentRecord:
    sid = SegmentId(ds, Interval(hour * HOUR, (hour + 1) * HOUR), version, 0)
    return SegmentRecord(sid, 100, 10, f"{ds}/{hour}/{version}.sseg", f'{{"id":"{sid}"}}', 1)


def test_supervisor_state_survives_reopening(metadata_store_url):
    with SegmentStore(metadata_store_url) as segments:
        sup = SupervisorStore(segments)
        assert sup.upsert(parse_supervisor_spec(spec())).state == RUNNING
        assert sup.set_state("wiki", SUSPENDED).suspended
        sup.upsert(parse_supervisor_spec(spec("other", suspended=True)))
    with SegmentStore(metadata_store_url) as segments:  # a restarted (or newly elected) coordinator
        sup = SupervisorStore(segments)
        assert [(r.id, r.state) for r in sup.list()] == [("other", SUSPENDED), ("wiki", SUSPENDED)]
        # An update keeps the state; the spec is replaced.
        assert sup.upsert(parse_supervisor_spec(spec(topic="edits2"))).state == SUSPENDED
        assert sup.require("wiki").spec.topic == "edits2"
        sup.set_state("wiki", TERMINATED)
        assert [r.id for r in sup.list()] == ["other"]
        assert [r.id for r in sup.list(include_terminated=True)] == ["other", "wiki"]
        with pytest.raises(SupervisorNotFoundError, match="terminated"):
            sup.set_state("wiki", RUNNING)
        assert sup.upsert(parse_supervisor_spec(spec())).state == RUNNING  # POST again restarts it
        with pytest.raises(SupervisorNotFoundError, match="no supervisor 'nope'"):
            sup.require("nope")


def test_publish_moves_offsets_with_segments(stores):
    segments, sup = stores
    assert sup.offsets("wiki") is None
    assert sup.publish_with_offsets([rec(0)], "wiki", "edits", {0: 0, 1: 0}, {0: 5, 1: 7}) == 1
    assert sup.offsets("wiki").offsets == {0: 5, 1: 7}
    sup.publish_with_offsets([rec(1)], "wiki", "edits", {1: 7}, {1: 9})
    assert sup.offsets("wiki").offsets == {0: 5, 1: 9}
    assert [str(r.id) for r in segments.list("wiki")] == [str(rec(0).id), str(rec(1).id)]


def test_stale_commit_is_refused_and_publishes_nothing(stores):
    segments, sup = stores
    sup.publish_with_offsets([rec(0)], "wiki", "edits", {0: 0}, {0: 5})
    # A second task that also started at 0 (a replica, or a task restarted from stale offsets).
    with pytest.raises(OffsetsConflictError, match="partition 0: started at 0, committed 5"):
        sup.publish_with_offsets([rec(2, "v2")], "wiki", "edits", {0: 0}, {0: 5})
    assert [str(r.id) for r in segments.list("wiki")] == [str(rec(0).id)]
    assert sup.offsets("wiki").offsets == {0: 5}
    with pytest.raises(OffsetsConflictError, match="topic 'edits', not 'other'"):
        sup.publish_with_offsets([rec(3)], "wiki", "other", {0: 5}, {0: 6})
    assert segments.list("wiki", include_unused=True)[-1].id == rec(0).id


def test_segment_conflict_leaves_offsets_unmoved(stores):
    segments, sup = stores
    sup.publish_with_offsets([rec(0)], "wiki", "edits", {0: 0}, {0: 5})
    clash = SegmentRecord(rec(0).id, 999, 10, "elsewhere", "{}", 1)
    with pytest.raises(PublishConflictError):
        sup.publish_with_offsets([rec(1), clash], "wiki", "edits", {0: 5}, {0: 8})
    assert sup.offsets("wiki").offsets == {0: 5}
    assert len(segments.list("wiki")) == 1


def test_offsets_must_not_go_backwards_or_cross_datasources(stores):
    _, sup = stores
    with pytest.raises(ValidationError, match="partitions \\[0\\]"):
        sup.publish_with_offsets([], "wiki", "edits", {0: 5}, {0: 4})
    with pytest.raises(ValidationError, match="not of datasource 'wiki'"):
        sup.publish_with_offsets([rec(0, ds="other")], "wiki", "edits", {0: 0}, {0: 1})
    assert sup.offsets("wiki") is None


def test_reset_and_reset_offsets(stores):
    _, sup = stores
    sup.publish_with_offsets([rec(0)], "wiki", "edits", {0: 0, 1: 0}, {0: 5, 1: 7})
    sup.reset_offsets("wiki", {1: 3})
    assert sup.offsets("wiki").offsets == {0: 5, 1: 3}
    sup.reset_offsets("wiki")
    assert sup.offsets("wiki") is None
    with pytest.raises(ValidationError, match="name the topic"):
        sup.reset_offsets("wiki", {0: 1})
    sup.reset_offsets("wiki", {0: 1}, topic="edits")
    assert sup.offsets("wiki").offsets == {0: 1}


def test_concurrent_publishers_from_the_same_offsets_one_wins(stores):
    segments, sup = stores
    outcomes: list = []
    barrier = threading.Barrier(4)

    def publish(i: int) -> None:
        barrier.wait(timeout=THREAD_DEADLINE_S)
        try:
            sup.publish_with_offsets([rec(10 + i, f"v{i}")], "wiki", "edits", {0: 0}, {0: 10})
            outcomes.append("ok")
        except OffsetsConflictError:
            outcomes.append("refused")

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_DEADLINE_S)
        assert not t.is_alive()
    assert sorted(outcomes) == ["ok", "refused", "refused", "refused"]
    assert len(segments.list("wiki")) == 1
    assert sup.offsets("wiki").offsets == {0: 10}


def test_stream_segments_are_realtime_until_a_handoff_replaces_them(stores):
    segments, sup = stores
    sup.publish_with_offsets([rec(0), rec(1)], "wiki", "edits", {0: 0}, {0: 5})
    segments.publish([rec(2, "v0")])  # a batch INSERT's segment
    assert {str(r.id): r.realtime for r in segments.list("wiki")} == {
        str(rec(0).id): True, str(rec(1).id): True, str(rec(2, "v0").id): False}
    hour0 = Interval(0, HOUR)
    # The handoff of hour 0, built from rec(0): one transaction, the old one overshadowed by version.
    segments.publish([rec(0, "v2")], replace=("wiki", [hour0]), expected=[rec(0).id])
    flags = {str(r.id): r.realtime for r in segments.list("wiki")}
    assert flags[str(rec(0, "v2").id)] is False and flags[str(rec(0).id)] is True  # until the coordinator drops it
    # A micro-batch allocated in v1 before that handoff published would be hidden: refused, offsets kept.
    with pytest.raises(OffsetsConflictError, match="would be hidden by .*v2"):
        sup.publish_with_offsets([SegmentRecord(SegmentId("wiki", hour0, "v1", 1), 100, 10, "late", "{}", 1)],
                                 "wiki", "edits", {0: 5}, {0: 9})
    assert sup.offsets("wiki").offsets == {0: 5}
    # Appended to the handoff's version it is fine, and realtime again.
    sup.publish_with_offsets([SegmentRecord(SegmentId("wiki", hour0, "v2", 1), 100, 10, "ok", "{}", 1)],
                             "wiki", "edits", {0: 5}, {0: 9})
    assert {str(r.id) for r in segments.list("wiki") if r.realtime} == {
        str(rec(0).id), str(rec(1).id), str(SegmentId("wiki", hour0, "v2", 1))}


def test_a_handoff_is_refused_when_a_segment_appeared_after_it_read_the_list(stores):
    segments, sup = stores
    sup.publish_with_offsets([rec(0)], "wiki", "edits", {0: 0}, {0: 5})
    appended = SegmentRecord(SegmentId("wiki", Interval(0, HOUR), "v1", 1), 100, 10, "appended", "{}", 1)
    sup.publish_with_offsets([appended], "wiki", "edits", {0: 5}, {0: 8})  # another task group's micro-batch
    with pytest.raises(ReplaceConflictError, match="changed since this replace read them \\(new: wiki_"):
        segments.publish([rec(0, "v2")], replace=("wiki", [Interval(0, HOUR)]), expected=[rec(0).id])
    assert {str(r.id) for r in segments.list("wiki")} == {str(rec(0).id), str(appended.id)}  # nothing published
    segments.publish([rec(0, "v2")], replace=("wiki", [Interval(0, HOUR)]), expected=[rec(0).id, appended.id])
    assert str(rec(0, "v2").id) in {str(r.id) for r in segments.list("wiki")}
