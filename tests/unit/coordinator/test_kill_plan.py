"""Automatic kill: which unused segments one run deletes."""

from __future__ import annotations

import re

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.kill_plan import (DEFAULT_BATCH_SIZE, KillSpec, kill_batches, parse_kill_spec,
                                                   segments_to_kill)

DAY = 86_400_000


def sid(day: int) -> SegmentId:
    return SegmentId("wiki", Interval(day * DAY, (day + 1) * DAY), "v1")


def test_only_segments_unused_long_enough_oldest_first_bounded():
    now = 100 * DAY
    unused = [(sid(0), now - 10 * DAY), (sid(1), now - 30 * DAY), (sid(2), now - 7 * DAY), (sid(3), now - DAY + 1)]
    assert segments_to_kill(unused, now, 7 * DAY, 10) == [sid(1), sid(0), sid(2)]  # 7 days exactly is due
    assert segments_to_kill(unused, now, 7 * DAY, 2) == [sid(1), sid(0)]
    assert segments_to_kill(unused, now, 7 * DAY, 0) == []
    assert segments_to_kill(unused, now, 31 * DAY, 10) == []
    same_time = [(sid(5), 0), (sid(4), 0)]
    assert segments_to_kill(same_time, now, 1, 1) == [sid(4)]  # ties by id: the same choice every run


def test_bad_settings_are_named():
    with pytest.raises(ValidationError, match="kill_unused_after_ms"):
        segments_to_kill([], 0, -1, 1)


# ---- the kill task (Druid's {"type": "kill", ...}) ------------------------------------------------
def vsid(day: int, version: str, partition: int = 0, datasource: str = "wiki") -> SegmentId:
    return SegmentId(datasource, Interval(day * DAY, (day + 1) * DAY), version, partition)


def test_kill_spec_parses_druids_payload_and_round_trips():
    spec = parse_kill_spec({"type": "kill", "dataSource": "wiki", "interval": "1970-01-01/1970-01-04",
                            "versions": ["v2", "v1", "v2"], "batchSize": 2, "limit": 3,
                            "maxUsedStatusLastUpdatedTime": "1970-01-02T00:00:00Z", "context": {"priority": 25}})
    assert spec == KillSpec("wiki", Interval(0, 3 * DAY), ("v2", "v1"), 2, 3, DAY)
    assert parse_kill_spec(spec.to_json()) == spec
    defaults = parse_kill_spec({"type": "kill", "dataSource": "wiki", "interval": "1970-01-01/1970-01-02"})
    assert (defaults.versions, defaults.batch_size, defaults.limit, defaults.max_used_status_updated_ms) == \
        (None, DEFAULT_BATCH_SIZE, None, None)


@pytest.mark.parametrize("payload, message", [
    ([], "a kill task is a JSON object"),
    ({"dataSource": "wiki"}, "'interval' is required"),
    ({"interval": "2020/2021"}, "'dataSource' is required"),
    ({"dataSource": "", "interval": "2020/2021"}, "'dataSource' is required"),
    ({"dataSource": "wiki", "interval": "yesterday"}, "'interval' 'yesterday' is not an ISO-8601 interval"),
    ({"dataSource": "wiki", "interval": "2020/2021", "batchSize": 0}, "'batchSize' must be a positive integer"),
    ({"dataSource": "wiki", "interval": "2020/2021", "limit": -1}, "'limit' must be a positive integer"),
    ({"dataSource": "wiki", "interval": "2020/2021", "limit": True}, "'limit' must be a positive integer"),
    ({"dataSource": "wiki", "interval": "2020/2021", "limit": 1.5}, "'limit' must be a positive integer"),
    ({"dataSource": "wiki", "interval": "2020/2021", "versions": []}, "'versions' must be a non-empty list"),
    ({"dataSource": "wiki", "interval": "2020/2021", "versions": [1]}, "'versions' must be a non-empty list"),
    ({"dataSource": "wiki", "interval": "2020/2021", "markAsUnused": True}, "'markAsUnused' is not supported"),
    ({"dataSource": "wiki", "interval": "2020/2021", "id": "mine"}, "unknown field 'id'"),
    ({"type": "index", "dataSource": "wiki", "interval": "2020/2021"}, "'type' must be \"kill\""),
    ({"dataSource": "wiki", "interval": "2020/2021", "maxUsedStatusLastUpdatedTime": "soon"},
     "'maxUsedStatusLastUpdatedTime' 'soon'"),
])
def test_bad_kill_payloads_name_the_field(payload, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        parse_kill_spec(payload)


def test_kill_batches_choose_by_interval_version_cutoff_and_limit():
    unused = [(vsid(0, "v1"), 5), (vsid(0, "v2"), 5), (vsid(1, "v1", 1), 50), (vsid(1, "v1", 0), 5),
              (vsid(2, "v1"), 5),  # not wholly inside [0, 2.5 days)
              (vsid(0, "v1", datasource="other"), 5)]
    base = {"type": "kill", "dataSource": "wiki", "interval": "1970-01-01/1970-01-03T12:00:00Z"}
    every = [vsid(0, "v1"), vsid(0, "v2"), vsid(1, "v1", 0), vsid(1, "v1", 1)]
    assert kill_batches(parse_kill_spec(base), unused) == [every]
    assert kill_batches(parse_kill_spec({**base, "batchSize": 3}), unused) == [every[:3], every[3:]]
    assert kill_batches(parse_kill_spec({**base, "limit": 2, "batchSize": 1}), unused) == [[every[0]], [every[1]]]
    assert kill_batches(parse_kill_spec({**base, "versions": ["v2"]}), unused) == [[vsid(0, "v2")]]
    assert kill_batches(parse_kill_spec({**base, "versions": ["v9"]}), unused) == []
    # Marked unused at 50 ms: after the cutoff, so kept.
    assert kill_batches(parse_kill_spec({**base, "maxUsedStatusLastUpdatedTime": "1970-01-01T00:00:00.010Z"}), unused) == [
        [vsid(0, "v1"), vsid(0, "v2"), vsid(1, "v1", 0)]]
