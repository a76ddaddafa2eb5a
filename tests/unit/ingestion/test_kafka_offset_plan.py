"""The offsets a stream task's micro-batch reads (services/ingestion/core/kafka_offset_plan.py):
start and end per partition, a bound over all partitions shared fairly, the log end past a
broker's short watermark, and the JSON offsets Spark carries. Pure: no broker, no Spark."""

from __future__ import annotations

import random

import pytest

from common.errors import ValidationError
from services.ingestion.core.kafka_offset_plan import (
    OffsetRange,
    bounded_end,
    decode_offsets,
    encode_offsets,
    initial_offsets,
    log_end,
    offset_ranges,
)


def test_start_offsets_are_the_committed_ones_else_earliest_or_latest():
    marks = {0: (0, 40), 1: (7, 9), 2: (3, 3)}
    assert initial_offsets([0, 1, 2], {0: 25}, marks, earliest=True) == {0: 25, 1: 7, 2: 3}
    assert initial_offsets([0, 1, 2], {0: 25}, marks, earliest=False) == {0: 25, 1: 9, 2: 3}
    # A committed offset wins even past the watermark (the coordinator's word, not the broker's).
    assert initial_offsets([0], {0: 100}, {}, earliest=True) == {0: 100}


def test_unbounded_batch_reads_to_the_log_end():
    assert bounded_end({0: 5, 1: 0}, {0: 12, 1: 3}, None) == {0: 12, 1: 3}
    assert bounded_end({0: 5, 1: 0}, {0: 12, 1: 3}, 100) == {0: 12, 1: 3}  # under the bound
    # A partition the broker did not answer for, or whose end is below the start, stays put.
    assert bounded_end({0: 5, 1: 8}, {0: 6, 1: 2}, None) == {0: 6, 1: 8}
    assert bounded_end({0: 5}, {}, 10) == {0: 5}


def test_bound_is_shared_fairly_between_partitions():
    # 10 rows over three partitions with plenty waiting: 4, 3, 3 (the remainder to the lowest).
    assert bounded_end({0: 0, 1: 0, 2: 0}, {0: 100, 1: 100, 2: 100}, 10) == {0: 4, 1: 3, 2: 3}
    # A partition with little waiting takes what it has; the others share the rest.
    assert bounded_end({0: 0, 1: 50, 2: 0}, {0: 100, 1: 51, 2: 100}, 9) == {0: 4, 1: 51, 2: 4}
    # One busy partition does not starve one that has a single message.
    assert bounded_end({0: 0, 1: 0}, {0: 10_000, 1: 1}, 2) == {0: 1, 1: 1}
    assert bounded_end({0: 0}, {0: 10}, 1) == {0: 1}


def test_bounded_batches_cover_every_offset_once():
    rng = random.Random(26)
    for _ in range(200):
        parts = rng.randint(1, 6)
        start = {p: rng.randint(0, 50) for p in range(parts)}
        latest = {p: start[p] + rng.choice([0, 0, 1, rng.randint(0, 300)]) for p in range(parts)}
        bound = rng.randint(1, 120)
        offsets, seen = dict(start), []
        while offsets != latest:
            end = bounded_end(offsets, latest, bound)
            ranges = offset_ranges(offsets, end)
            assert ranges and sum(r.size for r in ranges) <= bound
            # Fair: no two partitions with messages still waiting differ by more than one in a batch.
            waiting = [r.size for r in ranges if end[r.partition] < latest[r.partition]]
            assert not waiting or max(waiting) - min(waiting) <= 1
            seen += [(r.partition, o) for r in ranges for o in range(r.start, r.end)]
            offsets = end
        want = [(p, o) for p in range(parts) for o in range(start[p], latest[p])]
        assert sorted(seen) == want  # every offset once, none twice, none skipped


def test_ranges_are_one_per_partition_with_offsets():
    assert offset_ranges({0: 3, 1: 9, 2: 0}, {0: 7, 1: 9, 2: 1}) == [OffsetRange(0, 3, 7), OffsetRange(2, 0, 1)]
    assert offset_ranges({0: 3}, {0: 3}) == []


def test_log_end_reads_past_a_short_watermark():
    assert log_end(10) == 10  # Kafka: the watermark is the log end, the probe saw offset 9 only
    assert log_end(10, [9]) == 10
    assert log_end(1, [0, 1, 2, 3, 4]) == 5  # Tansu: ten records in one batch report a watermark of 1
    assert log_end(4, []) == 4  # the probe saw nothing (a transaction marker): the watermark


def test_offsets_as_spark_carries_them():
    assert encode_offsets({2: 5, 0: 7}) == {"0": 7, "2": 5}
    assert decode_offsets({"0": 7, "2": 5}) == {0: 7, 2: 5}
    with pytest.raises(ValidationError, match="partition 'x' is not a whole number"):
        decode_offsets({"x": 1})
    with pytest.raises(ValidationError, match="the offset of partition 0 is '7', not a whole number"):
        decode_offsets({"0": "7"})
    with pytest.raises(ValidationError, match="startOffsets must be a JSON object"):
        decode_offsets([1], "startOffsets")
    with pytest.raises(ValidationError, match="maxRowsInMemory must be positive"):
        bounded_end({0: 0}, {0: 5}, 0)
