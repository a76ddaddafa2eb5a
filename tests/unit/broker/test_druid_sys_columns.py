"""Druid's sys columns beside strata's: overshadowing by newer versions, shard specs, dimensions."""

from __future__ import annotations

import json

from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.broker.core.druid_sys_columns import (add_segment_columns, server_columns, server_properties_table,
                                                    task_columns)


def sid(ds: str, start: str, end: str, version: str, partition: int = 0) -> SegmentId:
    return SegmentId(ds, Interval(parse_instant(start), parse_instant(end)), version, partition)


def test_a_newer_version_covering_the_interval_overshadows():
    old_day = sid("wiki", "2015-09-12", "2015-09-13", "v1")
    old_next = sid("wiki", "2015-09-13", "2015-09-14", "v1")
    new_day = sid("wiki", "2015-09-12", "2015-09-13", "v2", 1)
    other_ds = sid("other", "2015-09-12", "2015-09-13", "v0")
    unpublished = sid("wiki", "2015-09-12", "2015-09-13", "v0")
    rows = {s: {"is_published": 1, "replication": 2} for s in (old_day, old_next, new_day, other_ds)}
    rows[unpublished] = {"is_published": 0, "replication": 1}
    add_segment_columns(rows, {})
    flags = {s: (r["is_overshadowed"], r["is_active"]) for s, r in rows.items()}
    assert flags == {old_day: (1, 0), old_next: (0, 1), new_day: (0, 1), other_ds: (0, 1), unpublished: (0, 0)}
    assert json.loads(rows[new_day]["shard_spec"]) == {"type": "numbered", "partitionNum": 1, "partitions": None}
    assert rows[old_day]["num_replicas"] == 2 and rows[old_day]["is_realtime"] == 0
    assert rows[old_day]["dimensions"] is None  # no descriptor known
    assert {r["replication_factor"] for r in rows.values()} == {-1}  # no load status: not judged


def test_replication_factor_is_what_the_rules_want_and_tier_what_the_server_announces():
    loaded, unused, unjudged = (sid("wiki", f"2015-09-{d}", f"2015-09-{d + 1}", "v1") for d in (12, 13, 14))
    rows = {loaded: {"is_published": 1}, unused: {"is_published": 0}, unjudged: {"is_published": 1}}
    add_segment_columns(rows, {}, {loaded: 3, unused: 0})
    assert [rows[s]["replication_factor"] for s in (loaded, unused, unjudged)] == [3, 0, -1]
    assert server_columns("historical", 8081, "1", "cold")["tier"] == "cold"
    assert server_columns("historical", 8081, "1", "")["tier"] == "_default_tier"
    assert server_columns("broker", 8082, "1", "")["tier"] is None


def test_task_and_server_property_columns():
    class Task:
        id, state, created_ms, error = "t1", "PENDING", 0, ""

    assert task_columns(Task()) == {"group_id": "t1", "queue_insertion_time": "1970-01-01T00:00:00.000Z",
                                    "runner_status": "PENDING", "location": None, "host": None,
                                    "plaintext_port": -1, "tls_port": -1, "error_msg": None}
    table = server_properties_table([("h:1", "broker", {"b": 2, "a": 1})])
    assert table.to_pylist() == [
        {"server": "h:1", "service_name": "strata/broker", "node_roles": '["broker"]', "property": "a", "value": "1"},
        {"server": "h:1", "service_name": "strata/broker", "node_roles": '["broker"]', "property": "b", "value": "2"}]


def _descriptor(segment_id: SegmentId, columns: list[str], metrics: dict | None = None):
    from common.segment.descriptor import SegmentDescriptor

    manifest = {"columns": [{"name": c, "type": "LONG" if c != "page" else "STRING"} for c in columns]}
    if metrics is not None:
        manifest["metrics"] = [{"name": n, "type": t} for n, t in metrics.items()]
    return SegmentDescriptor(segment_id, 1, 1, "k", 1, json.dumps(manifest))


def test_dimensions_and_metrics_are_druids_compact_json_text():
    rollup = sid("wiki", "2015-09-12", "2015-09-13", "v1")
    plain = sid("wiki", "2015-09-13", "2015-09-14", "v1")
    rows = {rollup: {"is_published": 1}, plain: {"is_published": 1}}
    add_segment_columns(rows, {rollup: _descriptor(rollup, ["__time", "page", "cnt", "added"],
                                                   {"cnt": "count", "added": "longSum"}),
                               plain: _descriptor(plain, ["__time", "page", "added"])})
    assert (rows[rollup]["dimensions"], rows[rollup]["metrics"]) == ('["page"]', '["cnt","added"]')
    assert (rows[plain]["dimensions"], rows[plain]["metrics"]) == ('["page","added"]', "[]")


def test_is_realtime_is_what_the_metadata_store_flags():
    streamed = sid("wiki", "2015-09-12T00", "2015-09-12T01", "v1", 3)
    handed_off = sid("wiki", "2015-09-12T00", "2015-09-12T01", "v2")
    batch = sid("wiki", "2015-09-13", "2015-09-14", "v1")
    rows = {s: {"is_published": 1} for s in (streamed, handed_off, batch)}
    add_segment_columns(rows, {}, None, {streamed})
    assert {s: r["is_realtime"] for s, r in rows.items()} == {streamed: 1, handed_off: 0, batch: 0}
    assert rows[streamed]["is_overshadowed"] == 1  # the handoff's version hides it
