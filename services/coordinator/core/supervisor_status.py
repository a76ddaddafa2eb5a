"""The pure parts of a Kafka supervisor's status (Druid's ``/status``, ``/stats`` and ``/health``):
per-partition lag from the broker's offsets, the supervisor's state and health from its tasks and
from how the broker answers, and the bounded ``recentErrors`` samples.

Lag, as Druid reports it: per partition, the latest offset in the topic minus the offset reading
resumes at (what the supervisor committed with its published segments). A partition never
committed starts at the earliest offset when ``useEarliestOffset`` (so all of it is lag) and at the
latest otherwise (no lag). A committed offset past the latest one (a recreated topic, or a broker
that reports the latest wrongly, as Tansu does after batched produce) is lag 0: a negative lag
would make the aggregate smaller than what is really left to read. Lag in time: per partition,
the age of its oldest unread message (by the record's timestamp), 0 when nothing is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Druid's druid.supervisor.taskUnhealthinessThreshold and unhealthinessThreshold defaults.
TASK_UNHEALTHINESS_THRESHOLD = 3
STREAM_UNHEALTHINESS_THRESHOLD = 3
# How many recentErrors the status shows (Druid bounds its list by maxStoredExceptionEvents).
MAX_RECENT_ERRORS = 20


def next_offsets(latest: Mapping[int, int], committed: Mapping[int, int], earliest: Mapping[int, int],
                 use_earliest: bool) -> dict[int, int]:
    """partition -> the offset reading resumes at, for every partition the broker reported."""
    out = {}
    for p, end in latest.items():
        if p in committed:
            out[p] = int(committed[p])
        elif use_earliest:
            out[p] = int(earliest.get(p, end))
        else:
            out[p] = int(end)
    return out


def partition_lag(latest: Mapping[int, int], committed: Mapping[int, int], earliest: Mapping[int, int],
                  use_earliest: bool) -> dict[int, int]:
    """partition -> messages left to read, for every partition the broker reported."""
    start = next_offsets(latest, committed, earliest, use_earliest)
    return {p: max(int(end) - start[p], 0) for p, end in latest.items()}


def time_lag_ms(lag: Mapping[int, int], oldest_unread_ms: Mapping[int, int], now_ms: int) -> dict[int, int]:
    """partition -> how old its oldest unread message is (0 with nothing to read); a partition
    with lag whose message timestamp could not be read is left out rather than guessed."""
    out = {}
    for p, n in lag.items():
        if n <= 0:
            out[p] = 0
        elif oldest_unread_ms.get(p, -1) >= 0:
            out[p] = max(now_ms - int(oldest_unread_ms[p]), 0)
    return out


@dataclass(frozen=True)
class LagStats:
    """Druid's LagStats: the total, the largest and the mean over partitions."""
    aggregate: int
    maximum: int
    average: float

    @classmethod
    def of(cls, lags: Mapping[int, int]) -> LagStats:
        if not lags:
            return cls(0, 0, 0.0)
        values = list(lags.values())
        return cls(sum(values), max(values), sum(values) / len(values))


@dataclass(frozen=True)
class StreamContact:
    """How the leader's latest-offset requests to the broker went: consecutive failures, whether
    one ever succeeded, and the last error."""
    failures: int = 0
    ever_connected: bool = False
    error: str = ""
    error_ms: int = 0


def supervisor_state(desired: str, active_tasks: int, finished_states: Sequence[str],
                     contact: StreamContact) -> tuple[str, str, bool]:
    """(state, detailedState, healthy) as Druid names them. ``desired`` is the stored state
    (RUNNING, SUSPENDED, TERMINATED); ``finished_states`` the final states of the supervisor's
    finished tasks, oldest first."""
    if desired == "SUSPENDED":
        return "SUSPENDED", "SUSPENDED", True
    if desired == "TERMINATED":
        return "STOPPING", "STOPPING", True
    if contact.failures >= STREAM_UNHEALTHINESS_THRESHOLD:
        detailed = "LOST_CONTACT_WITH_STREAM" if contact.ever_connected else "UNABLE_TO_CONNECT_TO_STREAM"
        return "UNHEALTHY_SUPERVISOR", detailed, False
    # Cancelled tasks (suspend, a taskDuration hand-over) say nothing about health.
    judged = [s for s in finished_states if s in ("SUCCESS", "FAILED")]
    last = judged[-TASK_UNHEALTHINESS_THRESHOLD:]
    if len(last) == TASK_UNHEALTHINESS_THRESHOLD and all(s == "FAILED" for s in last):
        return "UNHEALTHY_TASKS", "UNHEALTHY_TASKS", False
    return ("RUNNING", "RUNNING", True) if active_tasks else ("PENDING", "PENDING", True)


@dataclass(frozen=True)
class TaskView:
    """What the status needs of one of the supervisor's tasks (a TaskRecord, decoupled)."""
    id: str
    state: str
    error: str
    report: Mapping
    finished_ms: int


def recent_errors(tasks: Iterable[TaskView], contact: StreamContact, format_ms,
                  limit: int = MAX_RECENT_ERRORS) -> list[dict]:
    """Druid's recentErrors (timestamp, exceptionClass, message, streamException), oldest first
    and at most ``limit``: failed tasks, the parse exception samples tasks reported (with their
    partition, offset and reason), and the last failure to reach the broker."""
    events: list[tuple[int, dict]] = []
    for t in tasks:
        for sample in t.report.get("parseExceptionSamples") or ():
            at = int(sample.get("seenMs") or t.finished_ms or 0)
            events.append((at, {
                "timestamp": format_ms(at) if at else None, "exceptionClass": "ParseException",
                "message": f"partition {sample['partition']}, offset {sample['offset']}: {sample['reason']}",
                "streamException": False, "taskId": t.id, "partition": sample["partition"],
                "offset": sample["offset"], "reason": sample["reason"]}))
        if t.state == "FAILED":
            events.append((t.finished_ms, {
                "timestamp": format_ms(t.finished_ms) if t.finished_ms else None, "exceptionClass": "TaskFailure",
                "message": t.error, "streamException": False, "taskId": t.id}))
    if contact.failures:
        events.append((contact.error_ms, {"timestamp": format_ms(contact.error_ms), "exceptionClass": "StreamException",
                                          "message": contact.error, "streamException": True}))
    events.sort(key=lambda e: e[0])
    return [e for _, e in events[-limit:]] if limit > 0 else []


def task_row_stats(report: Mapping) -> dict:
    """One task's entry in Druid's ``/stats`` (totals only: strata keeps no moving averages)."""
    return {"totals": {"buildSegments": {
        "processed": int(report.get("rowsWritten") or 0),
        "processedWithError": 0,
        "thrownAway": int(report.get("thrownAway") or 0),
        "unparseable": int(report.get("parseExceptions") or 0)}},
        "microBatches": int(report.get("microBatches") or 0)}


__all__ = ["LagStats", "MAX_RECENT_ERRORS", "StreamContact", "TaskView", "next_offsets", "partition_lag",
           "recent_errors", "supervisor_state", "task_row_stats", "time_lag_ms"]
