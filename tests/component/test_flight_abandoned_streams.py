"""A Flight client that opens 1,000 DoGet streams and never reads them (a separate process, so the
broker's memory is measured apart from the client's): the broker holds at most its per-caller limit
of results for it and refuses the rest cleanly (UNAVAILABLE, naming the limit) before running them,
its memory stays bounded, other clients keep being served meanwhile, and the streams are freed
when the client's deadline passes or the client goes away."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.harness.embedded_cluster import EmbeddedCluster

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROWS = 40_000  # about 8 MiB per result: more than gRPC buffers for a client that does not read
PER_CALLER = 8
DEADLINE_S = 10.0  # the abusive client's own call deadline, in the deadline tests
ABUSER = r'''
import sys, time
import pyarrow.flight as flight
# Without BDP probing gRPC keeps the flow-control windows small, so unread results stall on the server
# (with it, windows grow while the data keeps coming and the client may swallow whole results).
client = flight.FlightClient(sys.argv[1], generic_options=[("grpc.http2.bdp_probe", 0)])
options = flight.FlightCallOptions(timeout=float(sys.argv[3])) if float(sys.argv[3]) else flight.FlightCallOptions()
# A refusal shows in do_get or, when it returned before the server answered, on the first read.
held, message = [], ""
for _ in range(int(sys.argv[2])):
    try:
        held.append(client.do_get(flight.Ticket(b"SELECT s, n FROM t"), options))
    except flight.FlightUnavailableError as exc:
        message = str(exc).splitlines()[0]
if not message:
    try:
        held[-1].read_chunk()
    except flight.FlightUnavailableError as exc:
        message = str(exc).splitlines()[0]
print(len(held), message, flush=True)
time.sleep(600)  # holds the streams, reads nothing, until killed
'''


def _rss_mib(pid: int | None = None) -> float:
    with open(f"/proc/{pid or 'self'}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("streams")), historicals=1)
    try:
        table = pa.table({
            "__time": pa.array([1442016000000 + i * 1000 for i in range(ROWS)], pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")),
            "s": pa.array([f"{i:08d}" + "x" * 192 for i in range(ROWS)]),
            "n": pa.array(range(ROWS), pa.int64())})
        c.wait_queryable("t", len(c.publish(table, "t")))
        c.broker.flight.streams.per_caller = PER_CALLER  # a small limit keeps the test light
        yield c
    finally:
        c.stop()


def _abuser(cluster, streams: int, timeout_s: float) -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", ABUSER, f"grpc://127.0.0.1:{cluster.broker.flight.port}",
                             str(streams), str(timeout_s)], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # bounded: the abuser prints once its attempts are done
    assert line, f"the abusive client died (exit {proc.poll()})"
    held, message = line.rstrip("\n").split(" ", 1)
    return proc, [held, message]


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=30)


def test_a_thousand_unread_streams(cluster):
    streams = cluster.broker.flight.streams
    before, refused_before = _rss_mib(), streams.refused
    proc, (held, message) = _abuser(cluster, 1000, 0)
    try:
        assert int(held) <= 1000
        # Every DoGet past the limit was refused before its query ran, and said why.
        try:
            cluster.wait_until(lambda: streams.refused - refused_before >= 1000 - PER_CALLER, timeout_s=180,
                               what="the DoGets over the limit refused")
        except TimeoutError:
            raise AssertionError(f"refused {streams.refused - refused_before}, open {streams.open_count()}, "
                                 f"abuser held {held}: {message}") from None
        assert f"the most one caller may have ({PER_CALLER})" in message, message
        assert streams.open_count() <= PER_CALLER
        # The broker holds at most PER_CALLER results (~8 MiB each) and gRPC's buffers for them.
        grown = _rss_mib() - before
        assert grown < PER_CALLER * 8 * 3 + 150, f"broker memory grew {grown:.0f} MiB"
        # Everyone else is served meanwhile, on their own connections.
        other = flight.FlightClient(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
        try:
            for _ in range(3):
                reader = other.do_get(flight.Ticket(b"SELECT COUNT(*) AS c, MAX(n) AS m FROM t"),
                                      flight.FlightCallOptions(timeout=30))
                assert reader.read_all().to_pylist() == [{"c": ROWS, "m": ROWS - 1}]
            full = other.do_get(flight.Ticket(b"SELECT s, n FROM t"), flight.FlightCallOptions(timeout=60)).read_all()
            assert full.num_rows == ROWS
        finally:
            other.close()
    finally:
        _stop(proc)
    # The client went away: its streams are dropped and their slots freed.
    cluster.wait_until(lambda: streams.open_count() == 0, timeout_s=30, what="abandoned streams freed")


def test_unread_streams_are_freed_when_their_deadline_passes(cluster):
    streams = cluster.broker.flight.streams
    # The deadline is long enough for the queries to run and stall even on a loaded machine.
    proc, (held, _message) = _abuser(cluster, PER_CALLER, DEADLINE_S)
    try:
        assert int(held) == PER_CALLER
        # The streams stall (the client reads nothing; gRPC's buffers take one result or so),
        # each holding its slot...
        cluster.wait_until(lambda: streams.open_count() >= 1, timeout_s=DEADLINE_S, what="the streams stalled")
        # The client is still there and still reads nothing; its calls' deadline ends them.
        cluster.wait_until(lambda: streams.open_count() == 0, timeout_s=30, what="streams past their deadline freed")
        assert proc.poll() is None
    finally:
        _stop(proc)


# ---- the same on the gRPC BrokerService ----------------------------------------------------------
GRPC_ABUSER = r'''
import sys, time, grpc
from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc
stub = broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(sys.argv[1], options=[("grpc.http2.bdp_probe", 0)]))
timeout = float(sys.argv[3]) or None
calls = [stub.Query(broker_pb2.QueryRequest(sql="SELECT s, n FROM t"), timeout=timeout) for _ in range(int(sys.argv[2]))]
refused = None
for call in calls[-3:]:  # the last ones are past the limit: refused at once
    try:
        next(call)
    except grpc.RpcError as exc:
        refused = f"{exc.code().name} {exc.details()}"
print(len(calls), refused, flush=True)
time.sleep(600)  # holds the streams, reads nothing, until killed
'''


def _grpc_abuser(cluster, streams: int, timeout_s: float) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", GRPC_ABUSER, f"127.0.0.1:{cluster.broker.grpc.port}",
                             str(streams), str(timeout_s)], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line, f"the abusive client died (exit {proc.poll()})"
    return proc, line.rstrip("\n")


def _grpc_count(cluster) -> list:
    import grpc

    from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{cluster.broker.grpc.port}") as ch:
        stub = broker_pb2_grpc.BrokerServiceStub(ch)
        return list(stub.Query(broker_pb2.QueryRequest(sql="SELECT COUNT(*) AS c FROM t"), timeout=30))


def test_a_thousand_unread_grpc_query_streams(cluster):
    """Each unread stream would hold one of the broker's gRPC workers: without a limit, a few dozen
    starve every other caller."""
    limiter = cluster.broker.grpc.client_streams
    proc, line = _grpc_abuser(cluster, 1000, 0)
    try:
        assert "RESOURCE_EXHAUSTED" in line and f"({limiter.per_connection})" in line, line
        assert limiter.open_count() <= limiter.per_connection
        assert _grpc_count(cluster)  # another client is served at once
    finally:
        _stop(proc)
    cluster.wait_until(lambda: limiter.open_count() == 0, timeout_s=30, what="abandoned gRPC streams freed")


def test_unread_grpc_streams_are_freed_at_their_deadline(cluster):
    limiter = cluster.broker.grpc.client_streams
    proc, _line = _grpc_abuser(cluster, 8, DEADLINE_S)
    try:
        cluster.wait_until(lambda: limiter.open_count() >= 1, timeout_s=DEADLINE_S, what="the gRPC streams stalled")
        cluster.wait_until(lambda: limiter.open_count() == 0, timeout_s=30, what="gRPC streams past their deadline")
        assert proc.poll() is None
    finally:
        _stop(proc)
