"""What a Kafka supervisor does next (pure): its facts in, the commands for its tasks out.

As Druid's KafkaSupervisor, the topic's partitions are split among ``ioConfig.taskCount`` task
groups (partition ``p`` goes to group ``p % taskCount``), and each group runs ``replicas``
identical tasks that start from the same offsets: the offsets committed with the datasource's
published segments, restricted to the group's partitions. Replicas do not coordinate while they
read; whichever publishes a range first wins through the compare-and-swap of the end offsets in the
segments' metadata transaction (SupervisorStore), and a replica whose publish is refused ends
without publishing (the task reports itself superseded) and is replaced here by one that starts
from the offsets now committed. So no row is loaded twice whichever replica dies or loses.

``decide`` is level-triggered: it looks at the supervisor's desired state, the partitions the
broker last reported, and its tasks as the metadata DB has them, and says which tasks to start and
which to cancel so that every group has ``replicas`` tasks reading its current partitions with the
current spec. Its state lives in the metadata DB, so a restarted or newly elected coordinator makes
the same decisions. The manager (supervisor_manager.py) carries the commands out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def group_of(partition: int, task_count: int) -> int:
    """The task group reading ``partition`` (Druid's ``partition % taskCount``)."""
    return partition % task_count


def assign_partitions(partitions: Iterable[int], task_count: int) -> dict[int, tuple[int, ...]]:
    """group -> its partitions (sorted), for the groups that get at least one: with more groups
    than partitions the extra groups run no task, as in Druid."""
    out: dict[int, list[int]] = {}
    for p in sorted(set(partitions)):
        out.setdefault(group_of(p, task_count), []).append(p)
    return {g: tuple(ps) for g, ps in sorted(out.items())}


@dataclass(frozen=True)
class TaskFacts:
    """One of the supervisor's ``kafka`` tasks as the machine needs it."""
    id: str
    group: int
    partitions: tuple[int, ...] | None  # None: every partition of the topic at its start
    active: bool  # PENDING or RUNNING
    state: str
    finished_ms: int = 0
    spec_current: bool = True  # it runs the supervisor's current spec
    cancelling: bool = False  # a cancel was already sent


@dataclass(frozen=True)
class SupervisorFacts:
    id: str
    desired: str  # RUNNING, SUSPENDED or TERMINATED (the stored state)
    task_count: int
    replicas: int
    partitions: tuple[int, ...] | None  # as the broker last reported them; None: not known yet
    committed: Mapping[int, int]  # partition -> next offset, for the supervisor's current topic
    now_ms: int
    retry_after_ms: int = 5_000


@dataclass(frozen=True)
class StartTask:
    group: int
    partitions: tuple[int, ...] | None  # None: the task reads every partition it finds
    start_offsets: Mapping[int, int]  # the committed offsets of those partitions (others: useEarliestOffset)


@dataclass(frozen=True)
class CancelTask:
    task_id: str
    reason: str


Command = StartTask | CancelTask


def decide(sup: SupervisorFacts, tasks: Sequence[TaskFacts]) -> list[Command]:
    """The commands that bring the supervisor's tasks to what it should run now; cancels first,
    then starts in group order. ``tasks`` oldest first (final ones too: they decide back-off)."""
    active = [t for t in tasks if t.active]
    if sup.desired != "RUNNING":
        return [CancelTask(t.id, f"the supervisor is {sup.desired.lower()}") for t in active if not t.cancelling]
    if sup.partitions is None:
        if sup.task_count > 1:
            # Splitting needs the partition list (the lag monitor reads it within a period);
            # tasks already running keep going meanwhile.
            return []
        groups: dict[int, tuple[int, ...] | None] = {0: None}
    else:
        groups = dict(assign_partitions(sup.partitions, sup.task_count))
    commands: list[Command] = []
    keep: dict[int, list[TaskFacts]] = {g: [] for g in groups}
    for t in active:
        if t.cancelling:
            continue
        reason = _misfit(t, groups)
        if reason is None and not t.spec_current:
            reason = "the supervisor's spec changed"
        if reason is None and len(keep[t.group]) >= sup.replicas:
            reason = f"task group {t.group} has more than replicas={sup.replicas} tasks"
        if reason is not None:
            commands.append(CancelTask(t.id, reason))
        else:
            keep[t.group].append(t)
    for g, partitions in groups.items():
        missing = sup.replicas - len(keep[g])
        if missing <= 0 or _backing_off(sup, [t for t in tasks if t.group == g and not t.active]):
            continue
        wanted = partitions if partitions is not None else tuple(sorted(sup.committed))
        start = {p: int(sup.committed[p]) for p in wanted if p in sup.committed}
        commands.extend(StartTask(g, partitions, start) for _ in range(missing))
    return commands


def _misfit(t: TaskFacts, groups: Mapping[int, tuple[int, ...] | None]) -> str | None:
    if t.group not in groups:
        return f"task group {t.group} has no partitions now"
    want = groups[t.group]
    if t.partitions is None and want is not None:
        # A task started before the partitions were known reads whatever the topic had then:
        # right for one group, while the topic keeps its partitions.
        return None if len(groups) == 1 else "the partitions were split among task groups"
    if want is not None and tuple(t.partitions) != want:
        return f"task group {t.group} now reads partitions {list(want)}, not {list(t.partitions)}"
    return None


def _backing_off(sup: SupervisorFacts, finished: Sequence[TaskFacts]) -> bool:
    """A group whose last task failed a moment ago waits ``retry_after_ms`` (a broken broker
    address must not spin tasks); a superseded or finished one is replaced at once."""
    if not finished:
        return False
    last = max(finished, key=lambda t: t.finished_ms)
    return last.state == "FAILED" and sup.now_ms - last.finished_ms < sup.retry_after_ms


__all__ = ["CancelTask", "Command", "StartTask", "SupervisorFacts", "TaskFacts", "assign_partitions", "decide",
           "group_of"]
