"""The broker survives careless concurrent clients (issue 23): 64 threads, each with its own ADBC
Flight SQL connection to a real local cluster (``strata up``: coordinator, broker and two
historicals as processes; the wiki segments carry an hourly projection), run a fixed mix of
statements: grouped queries with projections on and off (``SET noProjections = true;``), a filtered
COUNT, the top pages, ``SELECT 1``, a ``?`` parameter, a sys table, EXPLAIN PLAN FOR, KILL QUERY of
a finished own query, and scans whose results are abandoned half-read, whose connection is dropped
mid-stream, or whose cursor is never closed (left to the garbage collector).

The broker must stay up, no call may fail (a KILL of a query that is not running answers with
the error it gives one client alone), and every answer equals the one the same statement gave a
single client before the load began. Before the fix, the broker's call watchdog asked Flight call
contexts of finished RPCs whether they were cancelled, and this load ended the broker with a
segmentation fault in some runs (a race: on a busy 2-core machine about one run in four);
tests/component/flight_sql/test_call_liveness.py asks an ended call's liveness on purpose, which
crashed every time.
"""

from __future__ import annotations

import gc
import math
import os
import threading
import time
import warnings

import pyarrow as pa
import pytest

from bench.projections import build
from bench.projections_cluster import publish_built
from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster

# The driver's cursor finalizer complains (an unraisable exception) when a cursor left to the
# garbage collector outlives its connection: exactly what these careless clients do.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

ROWS = 30_000
CLIENTS = 64

CALL_TIMEOUT_S = 120  # every RPC of the driver gives up after this (no call may hang the test)
JOIN_TIMEOUT_S = 600  # backstop for the whole load; a healthy run on a loaded 2-core machine takes well under 60 s

SCAN = "SELECT __time, channel, page, \"user\", added FROM wiki"
# (name, SQL, parameters): each statement of the mix.
STATEMENTS = [
    ("grouped", "SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel ORDER BY 1", None),
    ("grouped, no projections", "SET noProjections = true; SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel "
                                "ORDER BY 1", None),
    ("hourly sum", "SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(added) AS s FROM wiki GROUP BY 1 ORDER BY 1", None),
    ("filtered count", "SELECT COUNT(*) AS c FROM wiki WHERE added > 10", None),
    ("top pages", "SELECT page, SUM(added) AS s FROM wiki GROUP BY page ORDER BY s DESC, page LIMIT 5", None),
    ("select 1", "SELECT 1 AS one", None),
    ("parameter", "SELECT COUNT(*) AS c, SUM(added) AS s FROM wiki WHERE channel = ?", ("#en.wikipedia",)),
    ("sys table", "SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = 'wiki'", None),
    ("explain", "EXPLAIN PLAN FOR SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel", None),
    ("scan", SCAN, None),
]
KILL = "KILL QUERY '{id}'"
ITERATIONS = len(STATEMENTS)  # each client runs each statement once: a fixed amount of work, no clock


def _connect(uri: str):
    import adbc_driver_flightsql.dbapi as flight_sql
    from adbc_driver_flightsql import DatabaseOptions

    options = {DatabaseOptions.TIMEOUT_QUERY.value: str(CALL_TIMEOUT_S),
               DatabaseOptions.TIMEOUT_FETCH.value: str(CALL_TIMEOUT_S),
               DatabaseOptions.TIMEOUT_UPDATE.value: str(CALL_TIMEOUT_S)}
    return flight_sql.connect(uri, db_kwargs=options)


def canonical(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples (times as epoch millis), so equal answers compare equal whatever the
    order batches arrived in."""
    cols = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        cols.append(col.to_pylist())
    rows = [tuple(round(v, 9) if isinstance(v, float) and math.isfinite(v) else v for v in row) for row in zip(*cols)]
    return sorted(rows, key=repr)


def _answer(cur, sql: str, parameters) -> list[tuple]:
    if parameters is None:
        cur.execute(sql)
    else:
        cur.execute(sql, parameters)
    return canonical(cur.fetch_arrow_table())


def _kill_error(cur, query_id: str) -> str:
    """The error message KILL QUERY of ``query_id`` answers with (it is not running)."""
    try:
        cur.execute(KILL.format(id=query_id))
        cur.fetch_arrow_table()
    except Exception as exc:  # noqa: BLE001 - the answer under test is the error
        return _error_text(exc, query_id)
    raise AssertionError(f"KILL QUERY of '{query_id}', which is not running, did not fail")


def _error_text(exc: BaseException, query_id: str) -> str:
    return f"{type(exc).__name__}: {exc}".replace(query_id, "<id>")


def _broker_pid(cluster: LocalCluster) -> int:
    return next(rec["pid"] for rec in cluster.running()["nodes"] if rec["name"] == "broker")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    work = tmp_path_factory.mktemp("broker-clients")
    data = demo_table(ROWS, days=2)
    built: list = []
    build(data, str(work), built)  # day segments with the hourly_channel projection
    cluster = LocalCluster(str(work / "cluster"))
    cluster.up(historicals=2, ports="auto")
    try:
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        try:
            publish_built(client, os.path.join(cluster.dir, "deep-storage"), built, 300)
            deadline = time.monotonic() + 120
            while True:  # the broker sees the historicals' announcements a moment later
                table, _ = client.sql("SELECT COUNT(*) AS c FROM wiki")
                if table.column(0).to_pylist() == [ROWS]:
                    break
                assert time.monotonic() < deadline, f"the broker did not see all {ROWS} rows within 120 s"
                time.sleep(0.1)
        finally:
            client.close()
        warnings.filterwarnings("ignore", message="Cannot disable autocommit")
        with _connect(endpoints["flight"]) as conn:  # the one-client answers
            cur = conn.cursor()
            answers = {name: _answer(cur, sql, params) for name, sql, params in STATEMENTS}
            kill_answer = _kill_error(cur, "never-ran")
            cur.close()
        yield cluster, endpoints["flight"], answers, kill_answer
    finally:
        cluster.down()


class Outcomes:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures: list[str] = []
        self.answered = 0

    def ok(self) -> None:
        with self.lock:
            self.answered += 1

    def fail(self, text: str) -> None:
        with self.lock:
            self.failures.append(text)


def _client(uri: str, i: int, answers: dict, kill_answer: str, start: threading.Barrier, out: Outcomes) -> None:
    """One careless client: its own connection, each statement of the mix once starting at its
    own, cursors often dropped unclosed, scans abandoned half-read or cut off with their
    connection, half the clients killing their own finished query."""
    conn = _connect(uri)
    try:
        start.wait()
        for n in range(ITERATIONS):
            step = i + n
            name, sql, params = STATEMENTS[step % len(STATEMENTS)]
            cur = conn.cursor()
            try:
                if name == "scan" and step % 3 == 0:
                    # Half-read, then dropped: the cursor and its reader go to the garbage collector.
                    cur.execute(sql)
                    reader = cur.fetch_record_batch()
                    reader.read_next_batch()
                    del reader
                elif name == "scan" and step % 3 == 1:
                    # A connection of its own, cut off mid-stream.
                    other = _connect(uri)
                    ocur = other.cursor()
                    ocur.execute(sql)
                    ocur.fetch_record_batch().read_next_batch()
                    other.close()
                elif name == "select 1" and i % 2 == 0:
                    # KILL of the client's own query, which has finished: answered as any id not running.
                    own = f"client-{i}-{n}"
                    cur.execute(f"SET sqlQueryId = '{own}'; SELECT 1 AS one")
                    if canonical(cur.fetch_arrow_table()) != answers[name]:
                        out.fail(f"client {i}: wrong answer to {name} under its own id")
                    got = _kill_error(cur, own)
                    if got != kill_answer:
                        out.fail(f"client {i}: KILL QUERY of its finished query answered {got!r}, "
                                 f"alone {kill_answer!r}")
                else:
                    got = _answer(cur, sql, params)
                    if got != answers[name]:
                        out.fail(f"client {i}: wrong answer to {name}: {got[:5]} vs {answers[name][:5]}")
                out.ok()
            except Exception as exc:  # noqa: BLE001 - every failure is reported with its statement
                out.fail(f"client {i}: {name}: {type(exc).__name__}: {exc}")
            if step % 2:
                cur.close()
            del cur  # else left open, for the garbage collector
            if step % 5 == 0:
                gc.collect()
    except Exception as exc:  # noqa: BLE001 - a failure to connect or to start is a failure of the run
        out.fail(f"client {i}: {type(exc).__name__}: {exc}")
    finally:
        try:
            conn.close()
        except Exception as exc:  # noqa: BLE001
            out.fail(f"client {i}: closing its connection: {type(exc).__name__}: {exc}")


def test_64_careless_clients_get_their_answers_and_the_broker_stays_up(loaded):
    cluster, uri, answers, kill_answer = loaded
    assert all(answers.values()), "every statement of the mix answers rows to compare"
    assert "no running query" in kill_answer
    pid = _broker_pid(cluster)
    out = Outcomes()
    start = threading.Barrier(CLIENTS, timeout=CALL_TIMEOUT_S)
    threads = [threading.Thread(target=_client, args=(uri, i, answers, kill_answer, start, out),
                                name=f"careless-client-{i}", daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for t in threads:
        t.join(timeout=max(deadline - time.monotonic(), 0.1))
    stuck = [t.name for t in threads if t.is_alive()]
    gc.collect()
    assert _alive(pid), f"the broker process {pid} died under the load; its log: {cluster.dir}/logs"
    assert not stuck, f"{len(stuck)} clients still waiting for an answer after {JOIN_TIMEOUT_S} s"
    assert not out.failures, f"{len(out.failures)} failed calls, first ones: {out.failures[:5]}"
    assert out.answered == CLIENTS * ITERATIONS
    # The broker still answers a new client after the load.
    with _connect(uri) as conn:
        cur = conn.cursor()
        assert _answer(cur, STATEMENTS[0][1], None) == answers["grouped"]
        cur.close()
