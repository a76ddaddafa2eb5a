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
ABUSER = r'''
import sys, time
import pyarrow.flight as flight
client = flight.FlightClient(sys.argv[1])
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
        cluster.wait_until(lambda: streams.refused - refused_before >= 1000 - PER_CALLER, timeout_s=60,
                           what="the DoGets over the limit refused")
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
    proc, (held, _message) = _abuser(cluster, PER_CALLER, 3.0)
    try:
        assert int(held) == PER_CALLER
        # The streams stall (the client reads nothing; gRPC's buffers take one result or so),
        # each holding its slot...
        cluster.wait_until(lambda: streams.open_count() >= PER_CALLER // 2, timeout_s=30, what="the streams stalled")
        # The client is still there and still reads nothing; its calls' deadline ends them.
        cluster.wait_until(lambda: streams.open_count() == 0, timeout_s=30, what="streams past their deadline freed")
        assert proc.poll() is None
    finally:
        _stop(proc)
