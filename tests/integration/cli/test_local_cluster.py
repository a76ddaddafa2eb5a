"""``strata up`` / ``strata down`` with real processes: ports are probed the way the servers bind
(a port in TIME_WAIT is free, one being listened on is not and is reported with its holder),
``--ports auto`` steps around taken ones, and ``down`` returns only once every process is gone."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import adbc_driver_flightsql.dbapi as flight_sql
import pytest

from common.errors import StrataError
from services.cli import local_cluster
from services.cli.local_cluster import LocalCluster, _alive, port_free, port_holder
from services.grpc_server import GrpcServer


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def documented(monkeypatch) -> dict:
    """Free ports stand in for the documented ones, which other clusters on this host may hold."""
    p = _free_ports(8)
    ports = {"coordinator": {"grpc_port": p[0], "http_port": p[1]},
             "broker": {"grpc_port": p[2], "http_port": p[3], "flight_port": p[4]},
             "historical": {"grpc_port": p[5], "http_port": p[6]},
             "router": {"http_port": p[7]}}
    monkeypatch.setattr(local_cluster, "DOCUMENTED_PORTS", ports)
    return ports


def _time_wait_port() -> int:
    """A port whose only socket is a closed server-side connection in TIME_WAIT, left by a
    listener that set SO_REUSEADDR as every strata server does (gRPC, Flight, http.server)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn, _ = listener.accept()
    conn.close()  # the server closes first, as an HTTP server does: its side ends in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    return port


def test_a_port_in_time_wait_is_free_as_the_servers_bind(tmp_path):
    port = _time_wait_port()
    with socket.socket() as plain:  # the old probe: bind without SO_REUSEADDR says "in use"
        with pytest.raises(OSError) as err:
            plain.bind(("127.0.0.1", port))
        assert err.value.errno == errno.EADDRINUSE
    assert port_free(port)
    server = GrpcServer("127.0.0.1", port)  # and a server does bind it
    assert server.port == port
    server.server.stop(None)


def test_a_listened_port_is_taken_and_its_holder_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert not port_free(port)
        holder = port_holder(port)
        assert holder is not None and holder.startswith(f"pid {os.getpid()} (")
        # Two gRPC servers cannot share a port either (gRPC's default SO_REUSEPORT is off).
        with pytest.raises(OSError, match=f"{port}.*in use"):
            GrpcServer("127.0.0.1", port)


def test_up_refuses_a_documented_port_in_use_naming_it_and_its_holder(tmp_path, documented):
    taken = documented["broker"]["flight_port"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", taken))
        s.listen(1)
        cluster = LocalCluster(str(tmp_path / "cluster"))
        with pytest.raises(StrataError) as err:
            cluster.up(historicals=1)
    message = str(err.value)
    assert f"port {taken} (broker flight) is in use by pid {os.getpid()}" in message
    assert "--ports auto" in message
    assert cluster.state() is None and not os.path.exists(os.path.join(cluster.dir, "logs", "coordinator.log"))


def test_down_waits_for_every_process_and_up_gets_the_same_ports_again(tmp_path, documented):
    cluster = LocalCluster(str(tmp_path / "cluster"))
    first = cluster.up(historicals=1, lease_ttl_s=2, duty_period_ms=200)
    try:
        coordinator = cluster.node("coordinator")
        assert coordinator["grpc_port"] == documented["coordinator"]["grpc_port"]
        # The router serves the console at the URL `strata up` prints and reaches the broker.
        console = cluster.endpoints()["console"]
        assert console == f"http://127.0.0.1:{documented['router']['http_port']}/"
        with urllib.request.urlopen(console, timeout=10) as page:
            assert b"console.js" in page.read()
        with urllib.request.urlopen(urllib.request.Request(
                console + "druid/v2/sql", data=b'{"query": "SELECT 1 AS one"}',
                headers={"Content-Type": "application/json"}), timeout=30) as answer:
            assert json.loads(answer.read()) == [{"one": 1}]
        # A Flight SQL query too: the broker's Flight server once kept SIGTERM from stopping it.
        with flight_sql.connect(cluster.endpoints()["flight"]) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1 AS one")
            assert cur.fetchall() == [(1,)]
        # A task process that outlived its coordinator (as after a SIGKILL): down stops it too.
        tasks = os.path.join(cluster.dir, "coordinator", "tasks")
        os.makedirs(tasks, exist_ok=True)
        leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                                     "services.ingestion.task_main", "--task-id", "insert_x_1"],
                                    start_new_session=True)
        with open(os.path.join(tasks, "insert_x_1.pid"), "w") as f:
            f.write(str(leftover.pid))
        cluster.kill("coordinator", signal.SIGKILL)  # its leftover task is now nobody's
        cluster.restart("coordinator")
    except BaseException:
        cluster.down()
        raise
    pids = [n["pid"] for n in cluster.running()["nodes"]]
    cluster.down()
    assert [p for p in pids + [leftover.pid] if _alive(p)] == []  # gone when down returns, not later
    assert cluster.killed_at_down == []  # every node stopped on SIGTERM, none needed SIGKILL
    # Right after down, the documented ports are free again (their connections in TIME_WAIT).
    second = cluster.up(historicals=1, lease_ttl_s=2, duty_period_ms=200)
    try:
        assert [{k: v for k, v in n.items() if k.endswith("port")} for n in second["nodes"]] == \
               [{k: v for k, v in n.items() if k.endswith("port")} for n in first["nodes"]]
    finally:
        cluster.down()


def test_ports_auto_steps_around_a_taken_port(tmp_path, documented):
    taken = documented["coordinator"]["http_port"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", taken))
        s.listen(1)
        cluster = LocalCluster(str(tmp_path / "cluster"))
        state = cluster.up(historicals=1, lease_ttl_s=2, duty_period_ms=200, ports="auto")
        try:
            coordinator = cluster.node("coordinator")
            assert coordinator["http_port"] != taken
            assert coordinator["grpc_port"] == documented["coordinator"]["grpc_port"]
            assert len(state["nodes"]) == 4  # coordinator, broker, historical, router
        finally:
            cluster.down()


def test_ports_auto_starts_a_node_again_when_its_port_is_taken_between_probe_and_bind(tmp_path, documented,
                                                                                      monkeypatch):
    # Another process binds the broker's HTTP port after strata up probed it: the broker cannot
    # bind, and is started again on fresh ports; health checks reach our broker, not the squatter.
    squatted = documented["broker"]["http_port"]
    probe = local_cluster.port_free
    monkeypatch.setattr(local_cluster, "port_free", lambda port, host="127.0.0.1": port == squatted or probe(port))
    with socket.socket() as s:
        s.bind(("127.0.0.1", squatted))
        s.listen(8)
        cluster = LocalCluster(str(tmp_path / "cluster"))
        state = cluster.up(historicals=1, lease_ttl_s=2, duty_period_ms=200, ports="auto")
        try:
            broker = cluster.node("broker")
            assert broker["http_port"] != squatted and broker["respawns"] == 1
            assert local_cluster.health(broker)[1]["pid"] == broker["pid"]
            assert [n["name"] for n in state["nodes"]] == ["coordinator", "broker", "historical-1", "router"]
        finally:
            cluster.down()
