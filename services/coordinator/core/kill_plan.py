"""Which unused segments an automatic kill deletes this run: those unused for at least
``[coordinator] kill_unused_after_ms``, oldest first, at most ``max_kill_per_run`` (so one run
never holds the metadata store or deep storage for long). Pure; the edge is SegmentLifecycle."""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import ValidationError
from common.segment.segment_id import SegmentId


def segments_to_kill(unused: Iterable[tuple[SegmentId, int]], now_ms: int, after_ms: int,
                     limit: int) -> list[SegmentId]:
    """``unused``: (segment, when it became unused). Returns the segments to delete, the longest
    unused first (ties by id, so the choice is the same every time)."""
    if after_ms < 0 or limit < 0:
        raise ValidationError(f"[coordinator] kill_unused_after_ms ({after_ms}) and max_kill_per_run ({limit}) "
                              "must be >= 0")
    due = sorted((since, sid) for sid, since in unused if now_ms - since >= after_ms)
    return [sid for _, sid in due[:limit]]
