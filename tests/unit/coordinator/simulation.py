"""An in-memory cluster for driving the coordinator duties tick by tick.

Historicals have a capacity and a load delay in ticks; a manual clock advances one tick per
coordinator run. Each tick: finish the loads that are due, take a snapshot, run the duties,
apply the commands (a Load starts loading, a Drop takes effect at once, MarkUnused moves the
segment to the unused list of the metadata), then check the invariants. A Load that would take
a historical past its capacity is recorded as a violation instead of being refused silently,
so tests can assert there were none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from common.types.interval import Interval
from services.coordinator.core.duties import (
    Command,
    Drop,
    DutyParams,
    Load,
    MarkUnused,
    Noop,
    SegmentEntry,
    ServerView,
    run_duties,
)


@dataclass
class SimHistorical:
    id: str
    max_bytes: int
    load_delay: int = 1
    loaded: set[SegmentId] = field(default_factory=set)
    loading: dict[SegmentId, int] = field(default_factory=dict)  # segment -> tick it is ready


class Simulation:
    def __init__(self, capacities: dict[str, int], *, load_delay: int | dict[str, int] = 1,
                 replication: int = 0, max_moves: int = 10) -> None:
        self.clock = 0
        self.replication = replication
        self.max_moves = max_moves
        self.used: dict[SegmentId, SegmentEntry] = {}
        self.unused: dict[SegmentId, SegmentEntry] = {}
        self.historicals: dict[str, SimHistorical] = {}
        self.violations: list[str] = []
        self.log: list[tuple[int, Command]] = []
        # Checks run after every tick; each gets the simulation and raises AssertionError.
        self.invariants: list[Callable[[Simulation], None]] = [_check_capacity]
        for server, cap in capacities.items():
            delay = load_delay if isinstance(load_delay, int) else load_delay[server]
            self.add_server(server, cap, delay)

    # --- the world ------------------------------------------------------------------------

    def publish(self, descriptors: Iterable[SegmentEntry]) -> None:
        for d in descriptors:
            self.used[d.id] = d

    def add_server(self, server: str, max_bytes: int, load_delay: int = 1) -> None:
        self.historicals[server] = SimHistorical(server, max_bytes, load_delay)

    def kill_server(self, server: str) -> None:
        del self.historicals[server]

    def snapshot(self) -> DutyParams:
        servers = {h.id: ServerView(h.max_bytes, frozenset(h.loaded), frozenset(h.loading))
                   for h in self.historicals.values()}
        return DutyParams(used=tuple(self.used.values()), servers=servers, unused=tuple(self.unused.values()),
                          now_ms=self.clock * 1000, replication=self.replication, max_moves=self.max_moves)

    # --- the clock --------------------------------------------------------------------------

    def tick(self) -> list[Command]:
        self.clock += 1
        for h in self.historicals.values():
            for seg, ready in list(h.loading.items()):
                if ready <= self.clock:
                    del h.loading[seg]
                    h.loaded.add(seg)
        commands = run_duties(self.snapshot())
        for command in commands:
            self._apply(command)
        for check in self.invariants:
            check(self)
        return commands

    def run_until_converged(self, max_ticks: int) -> int:
        """Ticks until a run finds nothing to do and no load is pending; returns the ticks taken."""
        for n in range(1, max_ticks + 1):
            commands = self.tick()
            if commands == [Noop()] and not any(h.loading for h in self.historicals.values()):
                return n
        raise AssertionError(
            f"cluster did not converge within {max_ticks} ticks; last commands: {commands[:10]}; "
            f"loading: { {h.id: len(h.loading) for h in self.historicals.values()} }"
        )

    def _apply(self, command: Command) -> None:
        self.log.append((self.clock, command))
        if isinstance(command, Load):
            h = self.historicals[command.server]
            if command.segment in h.loaded or command.segment in h.loading:
                return
            h.loading[command.segment] = self.clock + h.load_delay
            if self.bytes_on(h.id) > h.max_bytes:
                self.violations.append(f"tick {self.clock}: {command} takes {h.id} to "
                                       f"{self.bytes_on(h.id)} > {h.max_bytes} bytes")
        elif isinstance(command, Drop):
            h = self.historicals[command.server]
            h.loaded.discard(command.segment)
            h.loading.pop(command.segment, None)
        elif isinstance(command, MarkUnused):
            desc = self.used.pop(command.segment, None)
            if desc is not None:
                self.unused[command.segment] = desc

    # --- observations -----------------------------------------------------------------------

    def size_of(self, seg: SegmentId) -> int:
        desc = self.used.get(seg) or self.unused.get(seg)
        return desc.size if desc else 0

    def bytes_on(self, server: str) -> int:
        h = self.historicals[server]
        return sum(self.size_of(s) for s in h.loaded | set(h.loading))

    def loaded_on(self, seg: SegmentId) -> set[str]:
        return {h.id for h in self.historicals.values() if seg in h.loaded}

    def served_timeline(self, datasource: str) -> Timeline:
        """What a broker could query now: used or not, every segment loaded somewhere."""
        tl = Timeline(datasource)
        for h in self.historicals.values():
            for seg in h.loaded:
                if seg.datasource == datasource:
                    desc = self.used.get(seg) or self.unused[seg]
                    tl.add(TimelineSegment(seg, desc.num_partitions))
        return tl


def _check_capacity(sim: Simulation) -> None:
    assert not sim.violations, sim.violations


def no_gaps(datasource: str, interval: Interval) -> Callable[[Simulation], None]:
    """Invariant: every instant of ``interval`` is queryable from loaded segments."""

    def check(sim: Simulation) -> None:
        covered = sim.served_timeline(datasource).lookup(interval)
        at = interval.start
        for chunk in covered:
            assert chunk.interval.start == at, f"tick {sim.clock}: nothing queryable in [{at}, {chunk.interval.start})"
            at = chunk.interval.end
        assert at == interval.end, f"tick {sim.clock}: nothing queryable in [{at}, {interval.end})"

    return check


def min_loaded_replicas(n: int) -> Callable[[Simulation], None]:
    """Invariant: every used segment has at least ``n`` loaded copies."""

    def check(sim: Simulation) -> None:
        for seg in sim.used:
            got = len(sim.loaded_on(seg))
            assert got >= n, f"tick {sim.clock}: segment {seg} has {got} loaded copies, wanted >= {n}"

    return check
