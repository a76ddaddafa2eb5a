"""Which Kafka offsets a stream task's micro-batch reads: pure planning over numbers.

A micro-batch is a range ``[start, end)`` per partition. ``start`` is where the previous publish
ended (for the task's first batch: the offsets committed with the datasource's segments, from the
coordinator); ``end`` is the log end the broker reports, cut so that a batch holds at most
``maxRowsInMemory`` messages over all partitions. The cut is fair: every partition with messages
waiting gets an equal share, so one busy partition cannot starve the others' lag.

Offsets travel through Spark's streaming engine as JSON objects, whose keys are strings; the
functions here take and give ``{partition: offset}`` with int keys and convert at that edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from common.errors import ValidationError


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of one partition."""

    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def encode_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    """As a JSON object (Spark's offset): partition numbers as string keys, in partition order."""
    return {str(p): int(offsets[p]) for p in sorted(offsets)}


def decode_offsets(value: object, what: str = "offsets") -> dict[int, int]:
    """The ``{partition: offset}`` of a JSON object such as ``{"0": 12, "1": 40}``."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object of partition -> offset, got {value!r}")
    out: dict[int, int] = {}
    for key, offset in value.items():
        try:
            partition = int(key)
        except (TypeError, ValueError):
            raise ValidationError(f"{what}: partition {key!r} is not a whole number") from None
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValidationError(f"{what}: the offset of partition {partition} is {offset!r}, not a whole number")
        out[partition] = offset
    return out


def initial_offsets(partitions: Iterable[int], committed: Mapping[int, int],
                    watermarks: Mapping[int, tuple[int, int]], earliest: bool) -> dict[int, int]:
    """Where a task starts on each partition: the committed offset, else (a partition nothing was
    published from yet) its low watermark with ``useEarliestOffset``, its high one without."""
    out = {}
    for p in partitions:
        if p in committed:
            out[p] = int(committed[p])
        else:
            low, high = watermarks[p]
            out[p] = int(low if earliest else high)
    return out


def log_end(high_watermark: int, probed: Iterable[int] = ()) -> int:
    """A partition's log end: its high watermark, or past the last offset a read at the watermark
    - 1 returned when that is further. On Kafka they agree; a broker whose ListOffsets answers
    the last record batch's first offset + 1 (Tansu does) would leave the rest of that batch
    unread until another batch came, so the task reads that one batch's offsets to find the end."""
    return max([int(high_watermark), *(o + 1 for o in probed)])


def bounded_end(start: Mapping[int, int], latest: Mapping[int, int], max_rows: int | None) -> dict[int, int]:
    """The end of the next micro-batch: ``latest`` (a partition it does not name has nothing new),
    with at most ``max_rows`` messages in all (None: no bound), shared fairly: in rounds, each
    partition with messages left gets an equal part of what is left of the bound (the lowest
    partition numbers get the remainder). Never before ``start``: a log end below the committed
    offset (a truncated or recreated topic) reads nothing rather than going back."""
    if max_rows is not None and max_rows <= 0:
        raise ValidationError(f"maxRowsInMemory must be positive, got {max_rows}")
    waiting = {p: max(0, int(latest.get(p, s)) - int(s)) for p, s in start.items()}
    if max_rows is None or sum(waiting.values()) <= max_rows:
        return {p: int(s) + waiting[p] for p, s in start.items()}
    taken = dict.fromkeys(start, 0)
    left = max_rows
    active = sorted(p for p, n in waiting.items() if n > 0)
    while left > 0 and active:
        share = max(1, left // len(active))
        for p in list(active):
            if left == 0:
                break
            n = min(share, waiting[p] - taken[p], left)
            taken[p] += n
            left -= n
            if taken[p] == waiting[p]:
                active.remove(p)
    return {p: int(s) + taken[p] for p, s in start.items()}


def offset_ranges(start: Mapping[int, int], end: Mapping[int, int]) -> list[OffsetRange]:
    """One range per partition with offsets to read, in partition order (one Spark task each)."""
    out = []
    for p in sorted(end):
        s = int(start.get(p, end[p]))
        if end[p] > s:
            out.append(OffsetRange(p, s, int(end[p])))
    return out


__all__ = ["OffsetRange", "bounded_end", "decode_offsets", "encode_offsets", "initial_offsets", "log_end",
           "offset_ranges"]
