"""LocalDiscovery, Announcer and LeaderElection on a MemoryStore (no sockets)."""

from __future__ import annotations

import threading

import pytest

from common.errors import ValidationError
from services.discovery import (
    Announcer,
    DiscoveryError,
    LeaderElection,
    LeaseLostError,
    LocalDiscovery,
    MemoryStore,
    WatchEvent,
    leader_key,
    node_key,
)
from services.discovery import memory_store
from tests.unit.discovery.event_recorder import EventRecorder, wait_until
from tests.unit.discovery.partitioned_discovery import PartitionedDiscovery
from tests.unit.discovery.test_memory_store import ManualClock

DEADLINE_S = 5.0


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def discovery(clock):
    # Leases expire only when a test advances the clock and calls store.expire().
    d = LocalDiscovery(MemoryStore(clock), reap_interval_s=None)
    yield d
    d.close()


def test_lease_refresh_and_loss(discovery, clock):
    lease = discovery.grant_lease(2)
    discovery.put("/k", b"v", lease)
    clock.advance(1.5)
    lease.refresh()
    clock.advance(1.5)
    discovery.store.expire()
    assert discovery.get_prefix("/") == {"/k": b"v"}
    clock.advance(2)
    discovery.store.expire()
    assert discovery.get_prefix("/") == {}
    with pytest.raises(LeaseLostError):
        lease.refresh()
    lease.revoke()  # already gone: not an error


def test_closed_discovery_says_so(clock):
    d = LocalDiscovery(MemoryStore(clock), reap_interval_s=None)
    d.close()
    with pytest.raises(DiscoveryError, match="closed"):
        d.put("/k", b"")


def test_watch_delivers_state_then_changes_in_order(discovery):
    discovery.put("/w/b", b"2")
    discovery.put("/w/a", b"1")
    recorder = EventRecorder()
    watch = discovery.watch_prefix("/w/", recorder)
    assert watch.wait_synced(DEADLINE_S)
    discovery.put("/w/c", b"3")
    discovery.delete("/w/a")
    discovery.put("/x", b"outside")
    recorder.wait_for(lambda evs: len(evs) >= 4, DEADLINE_S, "4 events")
    assert [(e.type, e.key) for e in recorder.events] == [
        ("put", "/w/a"), ("put", "/w/b"), ("put", "/w/c"), ("delete", "/w/a")]
    watch.cancel()
    discovery.put("/w/d", b"late")
    assert "/w/d" not in recorder.state()


def test_cancel_from_inside_the_callback(discovery):
    seen = []
    holder = {}
    assigned = threading.Event()

    def callback(event):
        seen.append(event.key)
        assigned.wait(DEADLINE_S)  # the first callback can run before watch_prefix returns
        holder["watch"].cancel()

    discovery.put("/w/a", b"")
    discovery.put("/w/b", b"")
    holder["watch"] = discovery.watch_prefix("/w/", callback)
    assigned.set()
    wait_until(lambda: seen, DEADLINE_S, "the first event")
    holder["watch"].cancel()
    assert seen == ["/w/a"]


def test_a_failing_callback_does_not_stop_the_watch(discovery):
    recorder = EventRecorder()

    def callback(event):
        recorder(event)
        if event.key == "/w/bad":
            raise RuntimeError("boom")

    discovery.watch_prefix("/w/", callback).wait_synced(DEADLINE_S)
    discovery.put("/w/bad", b"")
    discovery.put("/w/good", b"")
    recorder.wait_state({"/w/bad": b"", "/w/good": b""}, DEADLINE_S)


def test_watch_that_falls_behind_resyncs_to_the_current_state(discovery, monkeypatch):
    monkeypatch.setattr(memory_store, "MAX_PENDING", 5)
    discovery.put("/w/gone", b"old")
    discovery.put("/w/kept", b"old")
    release = threading.Event()
    recorder = EventRecorder()

    def slow(event):
        recorder(event)
        release.wait(DEADLINE_S)

    discovery.watch_prefix("/w/", slow)
    recorder.wait_for(lambda evs: len(evs) >= 1, DEADLINE_S, "the first initial put")
    # While the callback is stuck, more changes pile up than the store will buffer.
    discovery.delete("/w/gone")
    for i in range(10):
        discovery.put(f"/w/new{i}", str(i).encode())
    discovery.put("/w/kept", b"new")
    release.set()
    expected = discovery.get_prefix("/w/")
    recorder.wait_state(expected, DEADLINE_S)
    assert any(e == WatchEvent("delete", "/w/gone", b"", e.revision) for e in recorder.events)


def test_announcer_puts_refreshes_and_revokes(discovery):
    announcer = Announcer(discovery, ttl_s=1, name="h1")
    announcer.set(node_key("historical", "h1"), b"{}")
    announcer.set("/strata/served/h1/seg", b"1")
    assert announcer.wait_announced(DEADLINE_S)
    lease = announcer.lease
    assert discovery.store.get(node_key("historical", "h1")).lease_id == lease.id
    announcer.remove("/strata/served/h1/seg")
    assert discovery.get_prefix("/strata/") == {node_key("historical", "h1"): b"{}"}
    announcer.close()
    assert discovery.get_prefix("/strata/") == {}
    with pytest.raises(DiscoveryError, match="announcer 'h1' is closed"):
        announcer.set("/k", b"")


def test_announcer_reputs_everything_after_its_lease_expires(discovery, clock):
    announcer = Announcer(discovery, ttl_s=1, name="h1")
    announcer.set("/strata/nodes/historical/h1", b"me")
    announcer.set("/strata/served/h1/a", b"1")
    assert announcer.wait_announced(DEADLINE_S)
    first = announcer.lease
    clock.advance(5)  # a "GC pause" far past the TTL: the store expires the lease
    discovery.store.expire()
    assert discovery.get_prefix("/strata/") == {}
    wait_until(lambda: announcer.lease is not None and announcer.lease.id != first.id, DEADLINE_S,
               "a new lease")
    assert announcer.wait_announced(DEADLINE_S)
    assert discovery.get_prefix("/strata/") == {"/strata/nodes/historical/h1": b"me", "/strata/served/h1/a": b"1"}
    announcer.close()


def test_announcer_rejects_a_bad_ttl(discovery):
    with pytest.raises(ValidationError, match="Announcer 'x': ttl_s"):
        Announcer(discovery, ttl_s=0, name="x")


def test_announcer_writes_what_was_set_while_partitioned_once_healed(discovery):
    partitioned = PartitionedDiscovery(discovery)
    announcer = Announcer(partitioned, ttl_s=1, name="h1")
    assert announcer.wait_announced(DEADLINE_S)
    partitioned.partitioned = True
    announcer.set("/k/a", b"1")  # does not raise: written later
    assert not announcer.wait_announced(0.1)
    partitioned.partitioned = False
    assert announcer.wait_announced(DEADLINE_S)
    assert discovery.get_prefix("/k/") == {"/k/a": b"1"}
    announcer.close()


class ChangeLog:
    def __init__(self) -> None:
        self.changes: list[tuple[bool, str | None]] = []

    def __call__(self, is_leader: bool, leader: str | None) -> None:
        self.changes.append((is_leader, leader))


def leaders(*elections):
    return [e.node_id for e in elections if e.is_leader]


def test_one_leader_and_failover_on_resign(discovery):
    log_a, log_b = ChangeLog(), ChangeLog()
    a = LeaderElection(discovery, "coordinator", "a", log_a, ttl_s=1)
    first = wait_until(lambda: leaders(a), DEADLINE_S, "a to lead")
    b = LeaderElection(discovery, "coordinator", "b", log_b, ttl_s=1)
    assert b.wait_leader(DEADLINE_S) == "a"
    assert first == ["a"] and not b.is_leader
    assert discovery.get_prefix(leader_key("coordinator")) == {leader_key("coordinator"): b"a"}
    a.resign()
    wait_until(lambda: leaders(a, b) == ["b"], DEADLINE_S, "b to take over")
    wait_until(lambda: a.leader() == "b", DEADLINE_S, "a to see b lead")
    assert log_a.changes[0] == (True, "a") and log_a.changes[-1] == (False, "b")
    assert (False, "a") in log_b.changes and log_b.changes[-1] == (True, "b")
    a.close()
    b.close()
    assert discovery.get_prefix(leader_key("coordinator")) == {}


def test_failover_when_the_leaders_lease_dies_behind_a_partition(discovery):
    cut = PartitionedDiscovery(discovery)
    a = LeaderElection(cut, "coordinator", "a", ttl_s=1)
    wait_until(lambda: a.is_leader, DEADLINE_S, "a to lead")
    b = LeaderElection(discovery, "coordinator", "b", ttl_s=1)
    assert b.wait_leader(DEADLINE_S) == "a"
    cut.partitioned = True
    discovery.store.revoke_lease(a.lease.id)  # what the store does once a's TTL passes unrefreshed
    wait_until(lambda: b.is_leader, DEADLINE_S, "b to take over")
    wait_until(lambda: not a.is_leader and a.leader() == "b", DEADLINE_S, "a to notice")
    cut.partitioned = False
    a.close()
    b.close()


def test_leader_that_cannot_refresh_steps_down(discovery):
    cut = PartitionedDiscovery(discovery)
    log_a = ChangeLog()
    a = LeaderElection(cut, "coordinator", "a", log_a, ttl_s=1)
    wait_until(lambda: a.is_leader, DEADLINE_S, "a to lead")
    cut.partitioned = True  # the store still has a's key (the manual clock never expires it)
    wait_until(lambda: not a.is_leader, DEADLINE_S, "a to step down after a TTL without refresh")
    assert log_a.changes[-1] == (False, "a")
    cut.partitioned = False
    a.close()


def test_elections_for_other_names_do_not_interfere(discovery):
    a = LeaderElection(discovery, "x", "a", ttl_s=1)
    b = LeaderElection(discovery, "x-other", "b", ttl_s=1)
    wait_until(lambda: a.is_leader and b.is_leader, DEADLINE_S, "both to lead their own election")
    assert a.leader() == "a" and b.leader() == "b"
    a.close()
    b.close()


def test_a_win_whose_answer_was_lost_is_still_a_win(discovery):
    class LostAnswer(PartitionedDiscovery):
        """put_if_absent succeeds in the store but the caller sees an error (a dropped response)."""

        def put_if_absent(self, key, value, lease=None) -> bool:
            self.inner.put_if_absent(key, value, self._unwrap(lease))
            raise DiscoveryError("response lost by the test")

    a = LeaderElection(LostAnswer(discovery), "coordinator", "a", ttl_s=1)
    wait_until(lambda: a.is_leader, DEADLINE_S, "a to recognise its own key")
    assert a.leader() == "a"
    a.close()
    assert discovery.get_prefix(leader_key("coordinator")) == {}


def test_a_leader_paused_past_its_ttl_is_not_leader_now_before_its_thread_runs(discovery, monkeypatch):
    import time as real_time

    from services.discovery import discovery as election_module

    cut = PartitionedDiscovery(discovery)
    a = LeaderElection(cut, "coordinator", "a", ttl_s=1)
    wait_until(lambda: a.is_leader_now(), DEADLINE_S, "a to lead with a fresh lease")
    cut.partitioned = True  # no refresh gets through while it is "paused"

    class Resumed:  # the monotonic clock as a process sees it after a pause of two TTLs
        @staticmethod
        def monotonic():
            return real_time.monotonic() + 2.0

        def __getattr__(self, name):
            return getattr(real_time, name)

    monkeypatch.setattr(election_module, "time", Resumed())
    assert a.is_leader_now() is False  # at once, whatever the election thread has done yet
    wait_until(lambda: not a.is_leader, DEADLINE_S, "a to step down")
    cut.partitioned = False
    monkeypatch.undo()
    a.close()
