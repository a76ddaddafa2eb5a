"""MemoryStore: revisions, leases against a manual clock, watches with history."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.discovery import CompactedError, LeaseLostError, MemoryStore, WatchEvent
from services.discovery import memory_store


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def store(clock):
    return MemoryStore(clock)


def test_every_change_gets_the_next_revision(store):
    assert store.revision == 0
    assert store.put("/a/1", b"x") == 1
    assert store.put("/a/1", b"y") == 2
    assert store.put("/a/2", b"z") == 3
    assert store.delete("/a/1") == 1
    assert store.revision == 4
    assert store.delete("/a/1") == 0  # nothing deleted: no new revision
    assert store.revision == 4


def test_create_and_mod_revisions(store):
    store.put("/k", b"1")
    store.put("/other", b"")
    store.put("/k", b"2")
    kv = store.get("/k")
    assert (kv.value, kv.create_revision, kv.mod_revision) == (b"2", 1, 3)


def test_get_prefix_is_sorted_filtered_and_as_of_a_revision(store):
    for key in ["/b/2", "/a/1", "/b/1", "/bb/1", "/b"]:
        store.put(key, key.encode())
    kvs, revision = store.get_prefix("/b/")
    assert list(kvs) == ["/b/1", "/b/2"]
    assert revision == 5
    assert {k: v.value for k, v in kvs.items()} == {"/b/1": b"/b/1", "/b/2": b"/b/2"}


def test_put_if_absent_reports_the_existing_entry(store):
    assert store.put_if_absent("/lock", b"me") == (True, None)
    created, existing = store.put_if_absent("/lock", b"you")
    assert not created and existing.value == b"me"
    store.delete("/lock")
    assert store.put_if_absent("/lock", b"you")[0]


def test_bad_keys_and_values_are_rejected_with_the_key_named(store):
    with pytest.raises(ValidationError, match="non-empty"):
        store.put("", b"x")
    with pytest.raises(ValidationError, match="'/k' must be bytes"):
        store.put("/k", "text")
    with pytest.raises(ValidationError, match="ttl_s"):
        store.grant_lease(0)


def test_lease_expires_by_the_clock_and_takes_its_keys(store, clock):
    lease = store.grant_lease(10)
    store.put("/n/a", b"1", lease)
    store.put("/n/b", b"2", lease)
    store.put("/n/plain", b"3")
    clock.advance(9)
    assert store.expire() == []
    assert store.keepalive(lease) == 10  # restarts the TTL from now
    clock.advance(9)
    assert store.expire() == []
    clock.advance(1.5)
    assert store.expire() == [lease]
    assert list(store.get_prefix("/n/")[0]) == ["/n/plain"]
    assert store.keepalive(lease) == 0
    assert store.time_to_live(lease) == 0


def test_a_lease_past_its_ttl_is_dead_before_the_reaper_runs(store, clock):
    lease = store.grant_lease(5)
    clock.advance(6)
    assert store.keepalive(lease) == 0
    with pytest.raises(LeaseLostError, match="grant a new lease"):
        store.put("/k", b"v", lease)


def test_put_with_unknown_lease_raises_lease_lost(store):
    with pytest.raises(LeaseLostError, match="'/k'"):
        store.put("/k", b"v", 12345)
    assert store.revision == 0


def test_revoke_deletes_keys_each_at_its_own_revision(store):
    lease = store.grant_lease(10)
    store.put("/x/1", b"", lease)
    store.put("/x/2", b"", lease)
    watcher = store.watch("/x/")
    assert store.revoke_lease(lease) is True
    assert store.revoke_lease(lease) is False
    events, through = watcher.get(0)
    assert [(e.type, e.key, e.revision) for e in events] == [("delete", "/x/1", 3), ("delete", "/x/2", 4)]
    assert through == 4


def test_a_key_moved_to_another_lease_survives_the_old_one(store, clock):
    old = store.grant_lease(5)
    store.put("/k", b"1", old)
    clock.advance(3)
    new = store.grant_lease(5)
    store.put("/k", b"2", new)
    clock.advance(3)
    assert store.expire() == [old]
    assert store.get("/k").value == b"2"


def test_watch_from_a_revision_replays_history_then_follows(store):
    store.put("/w/a", b"1")          # rev 1
    snapshot, revision = store.get_prefix("/w/")
    store.put("/w/b", b"2")          # rev 2: between the snapshot and the watch
    store.put("/elsewhere", b"")     # rev 3: not under the prefix
    watcher = store.watch("/w/", revision + 1)
    store.delete("/w/a")             # rev 4
    events, through = watcher.get(0)
    assert events == [WatchEvent("put", "/w/b", b"2", 2), WatchEvent("delete", "/w/a", b"", 4)]
    assert through == 4
    assert list(snapshot) == ["/w/a"]


def test_watch_from_zero_sees_only_later_changes(store):
    store.put("/w/a", b"1")
    watcher = store.watch("/w/")
    store.put("/w/b", b"2")
    assert [e.key for e in watcher.get(0)[0]] == ["/w/b"]


def test_idle_watcher_reports_how_far_the_store_got(store):
    watcher = store.watch("/quiet/")
    store.put("/busy/1", b"")
    store.put("/busy/2", b"")
    assert watcher.get(0) == ([], 2)


def test_watch_before_the_kept_history_is_compacted():
    store = MemoryStore(history=3)
    for i in range(5):
        store.put(f"/k/{i}", b"")
    assert store.compact_revision == 2
    with pytest.raises(CompactedError, match="resync") as info:
        store.watch("/k/", 2)
    assert info.value.compact_revision == 2
    assert [e.revision for e in store.watch("/k/", 3).get(0)[0]] == [3, 4, 5]


def test_a_watcher_too_far_behind_is_cut_off(store, monkeypatch):
    monkeypatch.setattr(memory_store, "MAX_PENDING", 3)
    watcher = store.watch("/k/")
    for i in range(5):
        store.put(f"/k/{i}", b"")
    with pytest.raises(CompactedError, match="fell more than 3 events behind"):
        watcher.get(0)


def test_closed_watcher_stops_receiving_and_returns_at_once(store):
    watcher = store.watch("/k/")
    watcher.close()
    store.put("/k/1", b"")
    assert watcher.get(5)[0] == []  # returns immediately: closed
    assert watcher.closed


def test_each_store_is_a_new_incarnation():
    assert MemoryStore().store_id != MemoryStore().store_id
