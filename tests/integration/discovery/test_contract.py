"""One contract for every Discovery implementation: LocalDiscovery, EmbeddedDiscovery against a
real gRPC DiscoveryServicer on loopback, and EtcdDiscovery against a real etcd. Plus what only
the remote ones can show: watches and announcements surviving a server restart."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent import futures

import grpc
import pytest

from services.discovery import (
    Announcer,
    Discovery,
    LeaderElection,
    LeaseLostError,
    LocalDiscovery,
    MemoryStore,
)
from services.discovery.embedded_client import EmbeddedDiscovery
from services.discovery.embedded_service import add_to_server
from services.discovery.etcd_discovery import EtcdDiscovery
from tests.fixtures.etcd_server import etcd_server  # noqa: F401
from tests.fixtures.etcd_server import start_etcd
from tests.unit.discovery.event_recorder import EventRecorder, holds_for, wait_until
from tests.unit.discovery.partitioned_discovery import PartitionedDiscovery

pytestmark = pytest.mark.integration

DEADLINE_S = 8.0
TTL_S = 1  # etcd's minimum with the fixture's raft timings


class EmbeddedServer:
    """A gRPC server hosting a DiscoveryServicer on 127.0.0.1; ``restart`` keeps the port."""

    def __init__(self, store: MemoryStore | None = None, port: int = 0) -> None:
        self.store = store or MemoryStore()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="test-discovery"))
        self.servicer = add_to_server(self.server, self.store, progress_interval_s=0.5)
        self.port = self._bind(port)
        self.server.start()

    def _bind(self, port: int) -> int:
        # Rebinding a port just released can briefly fail; retry until a deadline.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                bound = self.server.add_insecure_port(f"127.0.0.1:{port}")
                if bound:
                    return bound
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not bind 127.0.0.1:{port} within {DEADLINE_S}s")
            time.sleep(0.05)  # poll interval inside the deadline loop

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None).wait(DEADLINE_S)
        self.servicer.close()

    def restart(self, store: MemoryStore | None = None) -> None:
        self.stop()
        replacement = EmbeddedServer(store or self.store, self.port)
        self.__dict__.update(replacement.__dict__)


class Backend:
    """Makes clients of one shared store; each test works under its own key root."""

    def __init__(self, kind: str, etcd_url: str | None = None) -> None:
        self.kind = kind
        self.root = f"/test/{uuid.uuid4().hex[:8]}/"
        self.name = f"test-{uuid.uuid4().hex[:8]}"  # leader-election name, unique per test
        self.clients: list[Discovery] = []
        self.embedded: EmbeddedServer | None = None
        self.store: MemoryStore | None = None
        self.etcd_url = etcd_url
        if kind == "local":
            self.store = MemoryStore()
        elif kind == "embedded":
            self.embedded = EmbeddedServer()

    def client(self) -> Discovery:
        if self.kind == "local":
            client = LocalDiscovery(self.store, reap_interval_s=0.05)
        elif self.kind == "embedded":
            client = EmbeddedDiscovery(self.embedded.target, timeout_s=3.0)
        else:
            client = EtcdDiscovery(self.etcd_url, timeout_s=3.0)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        if self.embedded is not None:
            self.embedded.stop()


@pytest.fixture(params=["local", "embedded", "etcd"])
def backend(request):
    url = request.getfixturevalue("etcd_server") if request.param == "etcd" else None
    b = Backend(request.param, url)
    yield b
    b.close()


def test_put_get_delete(backend):
    d = backend.client()
    r = backend.root
    d.put(r + "b/2", b"\x00\xff binary")
    d.put(r + "a", b"1")
    d.put(r + "b/1", b"")
    d.put(r + "bb", b"not under b/")
    assert d.get_prefix(r + "b/") == {r + "b/1": b"", r + "b/2": b"\x00\xff binary"}
    assert list(d.get_prefix(r)) == [r + "a", r + "b/1", r + "b/2", r + "bb"]
    d.put(r + "a", b"2")
    assert d.get_prefix(r + "a") == {r + "a": b"2"}
    assert d.delete(r + "a") is True
    assert d.delete(r + "a") is False
    assert r + "a" not in d.get_prefix(r)
    assert backend.client().get_prefix(r + "b/") == d.get_prefix(r + "b/")


def test_put_if_absent(backend):
    d, other = backend.client(), backend.client()
    key = backend.root + "claim"
    assert d.put_if_absent(key, b"first") is True
    assert other.put_if_absent(key, b"second") is False
    assert d.get_prefix(key) == {key: b"first"}
    d.delete(key)
    assert other.put_if_absent(key, b"second") is True


def test_put_if_absent_is_exclusive_under_contention(backend):
    clients = [backend.client() for _ in range(4)]
    key = backend.root + "race"
    wins = []
    start = threading.Barrier(len(clients))

    def contend(client, i):
        start.wait(DEADLINE_S)
        if client.put_if_absent(key, str(i).encode()):
            wins.append(i)

    threads = [threading.Thread(target=contend, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    assert len(wins) == 1
    assert clients[0].get_prefix(key) == {key: str(wins[0]).encode()}


def test_lease_expiry_deletes_its_keys(backend):
    d = backend.client()
    r = backend.root
    lease = d.grant_lease(TTL_S)
    d.put(r + "leased/1", b"", lease)
    d.put(r + "leased/2", b"", lease)
    d.put(r + "plain", b"")
    recorder = EventRecorder()
    watch = backend.client().watch_prefix(r, recorder)
    assert watch.wait_synced(DEADLINE_S)
    wait_until(lambda: not d.get_prefix(r + "leased/"), DEADLINE_S, "leased keys to expire")
    assert d.get_prefix(r) == {r + "plain": b""}
    recorder.wait_state({r + "plain": b""}, DEADLINE_S)
    with pytest.raises(LeaseLostError):
        lease.refresh()
    with pytest.raises(LeaseLostError):
        d.put(r + "again", b"", lease)
    lease.revoke()  # gone already: not an error


def test_revoke_deletes_keys_at_once(backend):
    d = backend.client()
    lease = d.grant_lease(30)
    d.put(backend.root + "k", b"v", lease)
    lease.refresh()
    lease.revoke()
    assert d.get_prefix(backend.root) == {}


def test_watch_initial_state_then_changes(backend):
    writer, watcher = backend.client(), backend.client()
    r = backend.root
    writer.put(r + "w/b", b"2")
    writer.put(r + "w/a", b"1")
    writer.put(r + "outside", b"x")
    recorder = EventRecorder()
    watch = watcher.watch_prefix(r + "w/", recorder)
    assert watch.wait_synced(DEADLINE_S)
    writer.put(r + "w/c", b"3")
    writer.delete(r + "w/a")
    writer.put(r + "w/b", b"22")
    writer.put(r + "outside", b"y")
    recorder.wait_for(lambda evs: len(evs) >= 5, DEADLINE_S, "5 events")
    assert [(e.type, e.key, e.value) for e in recorder.events] == [
        ("put", r + "w/a", b"1"), ("put", r + "w/b", b"2"),
        ("put", r + "w/c", b"3"), ("delete", r + "w/a", b""), ("put", r + "w/b", b"22")]
    revisions = [e.revision for e in recorder.events[2:]]
    assert revisions == sorted(revisions) and len(set(revisions)) == 3
    watch.cancel()
    writer.put(r + "w/late", b"")
    assert r + "w/late" not in recorder.state()


def test_watch_started_during_writes_has_no_gap(backend):
    writer, watcher = backend.client(), backend.client()
    r = backend.root
    stop = threading.Event()
    written = {}

    def write():
        i = 0
        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            key = f"{r}k{i % 5}"
            writer.put(key, str(i).encode())
            written[key] = str(i).encode()
            i += 1

    thread = threading.Thread(target=write)
    thread.start()
    wait_until(lambda: len(written) == 5, DEADLINE_S, "the writer to start")
    recorder = EventRecorder()
    watcher.watch_prefix(r, recorder)
    recorder.wait_for(lambda evs: len(evs) >= 30, DEADLINE_S, "events while writing")
    stop.set()
    thread.join(DEADLINE_S)
    recorder.wait_state(writer.get_prefix(r), DEADLINE_S)
    assert recorder.state() == written
    # Per key, values only ever go up: nothing was delivered out of order.
    last: dict[str, int] = {}
    for event in recorder.events:
        value = int(event.value)
        assert value > last.get(event.key, -1), f"{event.key}: {value} after {last.get(event.key)}"
        last[event.key] = value


def test_announcer_keeps_keys_alive_and_recovers_a_revoked_lease(backend):
    d = backend.client()
    r = backend.root
    announcer = Announcer(d, ttl_s=TTL_S, name="h1")
    announcer.set(r + "nodes/h1", b"me")
    announcer.set(r + "served/h1/seg", b"1")
    assert announcer.wait_announced(DEADLINE_S)
    first = announcer.lease
    # Several TTLs pass: refreshes keep the same lease and the keys.
    recorder = EventRecorder()
    backend.client().watch_prefix(r, recorder).wait_synced(DEADLINE_S)
    announced = {r + "nodes/h1": b"me", r + "served/h1/seg": b"1"}
    holds_for(lambda: announcer.lease is first and d.get_prefix(r) == announced, 2.5 * TTL_S,
              "the first lease and its keys")
    # Revoked behind its back (as an etcd or coordinator restart would): it re-announces.
    first.revoke()
    wait_until(lambda: announcer.lease is not None and announcer.lease.id != first.id, DEADLINE_S, "a new lease")
    assert announcer.wait_announced(DEADLINE_S)
    assert d.get_prefix(r) == {r + "nodes/h1": b"me", r + "served/h1/seg": b"1"}
    recorder.wait_for(lambda evs: any(e.type == "delete" for e in evs), DEADLINE_S, "the revoke's deletes")
    recorder.wait_state({r + "nodes/h1": b"me", r + "served/h1/seg": b"1"}, DEADLINE_S)
    announcer.remove(r + "served/h1/seg")
    assert d.get_prefix(r) == {r + "nodes/h1": b"me"}
    announcer.close()
    assert d.get_prefix(r) == {}


def leaders(*elections):
    return sorted(e.node_id for e in elections if e.is_leader)


def test_leader_election_failover_on_resign(backend):
    a = LeaderElection(backend.client(), backend.name, "a", ttl_s=TTL_S)
    b = LeaderElection(backend.client(), backend.name, "b", ttl_s=TTL_S)
    try:
        first = wait_until(lambda: leaders(a, b), DEADLINE_S, "a leader")
        assert len(first) == 1
        leader, follower = (a, b) if first == ["a"] else (b, a)
        assert follower.wait_leader(DEADLINE_S) == leader.node_id
        leader.resign()
        wait_until(lambda: leaders(a, b) == [follower.node_id], DEADLINE_S, "the follower to take over")
        wait_until(lambda: leader.leader() == follower.node_id, DEADLINE_S, "the resigned node to see it")
    finally:
        a.close()
        b.close()


def test_leader_election_failover_when_the_leaders_lease_dies(backend):
    cut = PartitionedDiscovery(backend.client())
    a = LeaderElection(cut, backend.name, "a", ttl_s=TTL_S)
    wait_until(lambda: a.is_leader, DEADLINE_S, "a to lead")
    b = LeaderElection(backend.client(), backend.name, "b", ttl_s=TTL_S)
    try:
        assert b.wait_leader(DEADLINE_S) == "a"
        cut.partitioned = True  # a can no longer refresh: its lease expires on the server
        # Nothing but the expiry of a's lease can let b lead (a cannot resign through the cut), so
        # b leading at all is the proof; a bound on how long it took would race the machine's load.
        wait_until(lambda: b.is_leader, DEADLINE_S, "b to take over once a's lease expires")
        wait_until(lambda: not a.is_leader, DEADLINE_S, "a to step down")
        assert leaders(a, b) == ["b"]
        cut.partitioned = False
        wait_until(lambda: a.leader() == "b", DEADLINE_S, "a to see b lead")
        holds_for(lambda: leaders(a, b) == ["b"], TTL_S, "b alone leading after a heals")
    finally:
        cut.partitioned = False
        a.close()
        b.close()


def test_embedded_watch_resumes_after_server_restart_with_the_same_store():
    server = EmbeddedServer()
    client = EmbeddedDiscovery(server.target, timeout_s=3.0)
    try:
        client.put("/r/a", b"1")
        recorder = EventRecorder()
        watch = client.watch_prefix("/r/", recorder)
        assert watch.wait_synced(DEADLINE_S)
        server.stop()
        # Changes while the server is down (straight into its store) arrive after the restart,
        # as events, not as a resync.
        server.store.put("/r/b", b"2")
        server.store.delete("/r/a")
        server.restart()
        recorder.wait_state({"/r/b": b"2"}, DEADLINE_S)
        assert [(e.type, e.key) for e in recorder.events] == [("put", "/r/a"), ("put", "/r/b"), ("delete", "/r/a")]
        client.put("/r/c", b"3")
        recorder.wait_state({"/r/b": b"2", "/r/c": b"3"}, DEADLINE_S)
    finally:
        client.close()
        server.stop()


def test_embedded_watch_resyncs_when_the_history_it_needs_is_gone():
    server = EmbeddedServer(MemoryStore(history=5))
    client = EmbeddedDiscovery(server.target, timeout_s=3.0)
    try:
        client.put("/h/gone", b"")
        recorder = EventRecorder()
        assert client.watch_prefix("/h/", recorder).wait_synced(DEADLINE_S)
        server.stop()
        server.store.delete("/h/gone")
        for i in range(20):  # far more changes than the store keeps
            server.store.put(f"/h/{i % 3}", str(i).encode())
        server.restart()
        recorder.wait_state({"/h/0": b"18", "/h/1": b"19", "/h/2": b"17"}, DEADLINE_S)
    finally:
        client.close()
        server.stop()


def test_embedded_watch_and_announcer_survive_a_coordinator_restart():
    """A restarted coordinator has an empty store whose revisions start again: the watch resyncs
    (deleting what is gone) and the announcer re-announces."""
    server = EmbeddedServer()
    node, observer = EmbeddedDiscovery(server.target, timeout_s=3.0), EmbeddedDiscovery(server.target, timeout_s=3.0)
    announcer = Announcer(node, ttl_s=TTL_S, name="h1")
    try:
        announcer.set("/strata/nodes/historical/h1", b"me")
        assert announcer.wait_announced(DEADLINE_S)
        observer.put("/strata/nodes/broker/stale", b"gone after restart")
        for i in range(20):  # push the old store's revision well past the new one's
            observer.put("/strata/other", str(i).encode())
        recorder = EventRecorder()
        observer.watch_prefix("/strata/nodes/", recorder).wait_synced(DEADLINE_S)
        server.restart(MemoryStore())
        recorder.wait_state({"/strata/nodes/historical/h1": b"me"}, DEADLINE_S)
        assert server.store.get("/strata/nodes/historical/h1") is not None
        assert ("delete", "/strata/nodes/broker/stale") in [(e.type, e.key) for e in recorder.events]
        observer.put("/strata/nodes/broker/new", b"")
        recorder.wait_state({"/strata/nodes/historical/h1": b"me", "/strata/nodes/broker/new": b""}, DEADLINE_S)
    finally:
        announcer.close()
        node.close()
        observer.close()
        server.stop()


def test_etcd_watch_and_announcer_survive_an_etcd_restart(tmp_path):
    process = start_etcd(str(tmp_path / "etcd"))
    client = EtcdDiscovery(process.url, timeout_s=3.0)
    announcer = Announcer(client, ttl_s=2, name="h1")
    try:
        announcer.set("/strata/nodes/historical/h1", b"me")
        assert announcer.wait_announced(DEADLINE_S)
        recorder = EventRecorder()
        client.watch_prefix("/strata/", recorder).wait_synced(DEADLINE_S)
        process.stop()
        process.start()
        client.put("/strata/after", b"restart")
        recorder.wait_state({"/strata/nodes/historical/h1": b"me", "/strata/after": b"restart"}, DEADLINE_S)
        assert announcer.wait_announced(DEADLINE_S)
        assert client.get_prefix("/strata/nodes/") == {"/strata/nodes/historical/h1": b"me"}
    finally:
        announcer.close()
        client.close()
        process.stop()
