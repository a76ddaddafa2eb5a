"""What a kill deletes, pure; the edge (deep storage, metadata DB) is SegmentLifecycle.

- Automatic kill: segments unused for at least ``[coordinator] kill_unused_after_ms``, oldest
  first, at most ``max_kill_per_run`` (so one run never holds the metadata store or deep storage
  for long).
- A ``kill`` task, as Druid's ``{"type": "kill", "dataSource", "interval", "versions",
  "batchSize", "limit", "maxUsedStatusLastUpdatedTime"}``: the unused segments wholly inside the
  interval, of the given versions only, marked unused no later than the given instant, at most
  ``limit`` of them, deleted ``batchSize`` at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval, format_instant, parse_instant

DEFAULT_BATCH_SIZE = 100  # Druid's default
_EXAMPLE = '{"type": "kill", "dataSource": "wikipedia", "interval": "2015-09-12/2015-09-13"}'
_FIELDS = ("type", "dataSource", "interval", "versions", "batchSize", "limit", "maxUsedStatusLastUpdatedTime",
           "context", "markAsUnused")


def segments_to_kill(unused: Iterable[tuple[SegmentId, int]], now_ms: int, after_ms: int,
                     limit: int) -> list[SegmentId]:
    """``unused``: (segment, when it became unused). Returns the segments to delete, the longest
    unused first (ties by id, so the choice is the same every time)."""
    if after_ms < 0 or limit < 0:
        raise ValidationError(f"[coordinator] kill_unused_after_ms ({after_ms}) and max_kill_per_run ({limit}) "
                              "must be >= 0")
    due = sorted((since, sid) for sid, since in unused if now_ms - since >= after_ms)
    return [sid for _, sid in due[:limit]]


@dataclass(frozen=True)
class KillSpec:
    datasource: str
    interval: Interval
    versions: tuple[str, ...] | None = None  # None: every version
    batch_size: int = DEFAULT_BATCH_SIZE
    limit: int | None = None  # None: no limit
    max_used_status_updated_ms: int | None = None  # None: however recently marked unused

    def to_json(self) -> dict:
        """The task's stored spec (strata's task record), read back by ``parse_kill_spec``."""
        out = {"type": "kill", "dataSource": self.datasource, "interval": str(self.interval),
               "batchSize": self.batch_size}
        if self.versions is not None:
            out["versions"] = list(self.versions)
        if self.limit is not None:
            out["limit"] = self.limit
        if self.max_used_status_updated_ms is not None:
            out["maxUsedStatusLastUpdatedTime"] = format_instant(self.max_used_status_updated_ms)
        return out


def _positive(payload: dict, field: str) -> int | None:
    value = payload.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError(f"kill task: '{field}' must be a positive integer, got {value!r}")
    return value


def parse_kill_spec(payload: object) -> KillSpec:
    """A kill task's JSON, validated; errors name the field and show a correct payload."""
    if not isinstance(payload, dict):
        raise ValidationError(f"a kill task is a JSON object, e.g. {_EXAMPLE}")
    unknown = sorted(set(payload) - set(_FIELDS))
    if unknown:
        raise ValidationError(f"kill task: unknown field '{unknown[0]}' (known: {', '.join(_FIELDS)}); "
                              f"the task id is chosen by strata")
    if payload.get("type", "kill") != "kill":
        raise ValidationError(f"kill task: 'type' must be \"kill\", got {payload.get('type')!r}")
    if payload.get("markAsUnused"):
        raise ValidationError("kill task: 'markAsUnused' is not supported (Druid deprecated it); mark the "
                              "segments unused first with POST /druid/coordinator/v1/datasources/{ds}/markUnused, "
                              "then kill")
    datasource = payload.get("dataSource")
    if not isinstance(datasource, str) or not datasource:
        raise ValidationError(f"kill task: 'dataSource' is required (a datasource name), e.g. {_EXAMPLE}")
    text = payload.get("interval")
    if not isinstance(text, str) or not text:
        raise ValidationError(f"kill task: 'interval' is required (an ISO-8601 interval), e.g. {_EXAMPLE}")
    try:
        interval = Interval.parse(text)
    except ValidationError as exc:
        raise ValidationError(f"kill task: 'interval' {text!r} is not an ISO-8601 interval: {exc}") from None
    versions = payload.get("versions")
    if versions is not None:
        if not isinstance(versions, list) or not versions or not all(isinstance(v, str) and v for v in versions):
            raise ValidationError("kill task: 'versions' must be a non-empty list of segment version strings "
                                  "(or left out to kill every version)")
        versions = tuple(dict.fromkeys(versions))
    batch_size = _positive(payload, "batchSize") or DEFAULT_BATCH_SIZE
    limit = _positive(payload, "limit")
    cutoff = payload.get("maxUsedStatusLastUpdatedTime")
    cutoff_ms = None
    if cutoff is not None:
        if not isinstance(cutoff, str):
            raise ValidationError("kill task: 'maxUsedStatusLastUpdatedTime' must be an ISO-8601 instant string")
        try:
            cutoff_ms = parse_instant(cutoff)
        except ValidationError as exc:
            raise ValidationError(f"kill task: 'maxUsedStatusLastUpdatedTime' {cutoff!r}: {exc}") from None
    return KillSpec(datasource, interval, versions, batch_size, limit, cutoff_ms)


def kill_batches(spec: KillSpec, unused: Iterable[tuple[SegmentId, int]]) -> list[list[SegmentId]]:
    """``unused``: (segment, when it became unused) of the spec's datasource. The segments the
    task deletes, in id order, cut into batches of ``batch_size``."""
    chosen = sorted(sid for sid, since in unused
                    if sid.datasource == spec.datasource
                    and spec.interval.start <= sid.interval.start and sid.interval.end <= spec.interval.end
                    and (spec.versions is None or sid.version in spec.versions)
                    and (spec.max_used_status_updated_ms is None or since <= spec.max_used_status_updated_ms))
    if spec.limit is not None:
        chosen = chosen[:spec.limit]
    return [chosen[i:i + spec.batch_size] for i in range(0, len(chosen), spec.batch_size)]
