"""The query log's pure parts and the registry: bounds by count and age, records, shapes of planned
SQL, sys.queries rows, KILL QUERY parsing, who may kill what, and the rotating JSON-lines file."""

from __future__ import annotations

import json
import threading

import pytest

from common.errors import QueryTimeoutError, ValidationError
from common.sql import plan_sql
from common.sql.kill_statement import kill_target
from common.types.column_type import ColumnType
from common.types.interval import format_instant
from services.broker.core.query_log import QueryLog, QueryRecord, TableUse, queries_table, query_shape
from services.broker.query_executor import Cancelled
from services.broker.query_log_file import QueryLogFile, read_lines
from services.broker.core.call_origin import CallOrigin
from services.broker.query_registry import QueryRegistry
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec
from tests.unit.sql.fake_catalog import FakeCatalog

SCHEMA = {"__time": ColumnType.parse("TIMESTAMP"), "channel": ColumnType.parse("STRING"),
          "page": ColumnType.parse("STRING"), "added": ColumnType.parse("LONG")}


def native(sql: str) -> dict:
    queries = plan_sql(sql, FakeCatalog({"wiki": SCHEMA})).native_queries()
    assert len(queries) == 1
    return queries[0]


def record(qid: str, start_ms: int, duration_ms: int = 10, user: str | None = "u") -> QueryRecord:
    r = QueryRecord(qid, user, "ipv4:127.0.0.1:1", "grpc", "sql", "SELECT 1", start_ms)
    r.finish(start_ms + duration_ms, "ok", 1)
    return r


# ---- the in-memory log ---------------------------------------------------------------------------------
def test_log_keeps_at_most_max_entries_newest_last():
    log = QueryLog(max_entries=3, max_age_ms=10**9)
    for i in range(5):
        log.add(record(f"q{i}", 1000 + i), now_ms=2000)
    assert [r.query_id for r in log.records(now_ms=2000)] == ["q2", "q3", "q4"]


def test_log_forgets_queries_older_than_max_age():
    log = QueryLog(max_entries=100, max_age_ms=60_000)
    log.add(record("old", 0, duration_ms=1000), now_ms=1000)
    log.add(record("new", 50_000, duration_ms=1000), now_ms=51_000)
    assert [r.query_id for r in log.records(now_ms=60_500)] == ["old", "new"]  # 'old' ended 59.5 s ago
    assert [r.query_id for r in log.records(now_ms=61_001)] == ["new"]
    assert log.records(now_ms=111_001) == []


def test_log_refuses_bounds_that_keep_nothing():
    with pytest.raises(ValueError, match="positive"):
        QueryLog(max_entries=0)


def test_record_accumulates_native_queries_and_round_trips_json():
    r = QueryRecord("q", "alice", "ipv4:10.0.0.1:5", "flight", "sql", "SELECT ...", 1_000)
    r.note_native("groupBy", "wiki", 3, 300, 4096, [TableUse("wiki", "hourly", 2), TableUse("wiki", "base", 1,
                                                                                             {"hourly": "interval"})],
                  {"datasource": "wiki", "grouping": ["channel"]})
    r.note_native("timeseries", "wiki", 3, 30, 100, [TableUse("wiki", "hourly", 3)], None)
    r.finish(1_250, "ok", result_rows=7, planning_ms=5)
    assert (r.segments, r.rows_scanned, r.bytes_read, r.datasources) == (6, 330, 4196, ["wiki"])
    assert r.projection_hits == (5, 6)
    assert r.shapes == [{"datasource": "wiki", "grouping": ["channel"], "rows_scanned": 300}]
    again = QueryRecord.from_json(json.loads(json.dumps(r.to_json())))
    assert again == r


def test_record_keeps_the_error_class_and_message():
    r = QueryRecord("q", None, None, "", "native", None, 0)
    r.finish(20, "error", error=ValidationError("unknown column 'pag'; did you mean 'page'?"))
    assert (r.status, r.duration_ms, r.error_class) == ("error", 20, "ValidationError")
    assert "did you mean 'page'" in r.error_message


def test_sys_queries_rows_newest_first_and_running_duration_so_far():
    done = record("done", 1_000, 40)
    done.note_native("groupBy", "wiki", 2, 10, 20, [TableUse("wiki", "base", 1, {"p": "filter"}),
                                                    TableUse("wiki", "base", 1, {"p": "filter"})], None)
    running = QueryRecord("run", "u", None, "flight", "sql", "SELECT 2", 5_000)
    table = queries_table([done, running], now_ms=5_300, format_instant=format_instant)
    rows = table.to_pylist()
    assert [r["query_id"] for r in rows] == ["run", "done"]
    assert rows[0]["status"] == "running" and rows[0]["duration_ms"] == 300
    assert rows[1]["start_time"] == "1970-01-01T00:00:01.000Z" and rows[1]["duration_ms"] == 40
    assert json.loads(rows[1]["tables"]) == [{"datasource": "wiki", "projection": "base", "segments": 2,
                                              "rejected": {"p": "filter"}}]


# ---- shapes of planned SQL -------------------------------------------------------------------------------
def test_shape_of_a_time_floor_group_by():
    shape = query_shape(native("SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a "
                               "FROM wiki WHERE page = 'x' GROUP BY 1, 2"))
    assert shape["grouping"] == ["channel"] and shape["granularity"] == "PT1H"
    assert shape["filter_columns"] == ["page"] and shape["advisable"]
    assert sorted(a["type"] for a in shape["aggregators"]) == ["count", "longSum"]


def test_shape_of_a_timeseries_by_day_and_a_topn():
    assert query_shape(native("SELECT FLOOR(__time TO DAY) AS d, COUNT(*) AS n FROM wiki GROUP BY 1"))["granularity"] \
        == "P1D"
    top = query_shape(native("SELECT page, MAX(added) AS m FROM wiki WHERE channel IN ('a', 'b') GROUP BY 1 "
                             "ORDER BY 2 DESC LIMIT 3"))
    assert (top["grouping"], top["filter_columns"], top["granularity"]) == (["page"], ["channel"], "all")


def test_shape_grouping_by_an_expression_is_not_advisable_and_scans_have_none():
    shape = query_shape(native("SELECT UPPER(channel) AS c, COUNT(*) AS n FROM wiki GROUP BY 1"))
    assert not shape["advisable"] and "upper" in shape["why_not"].lower()
    assert query_shape(native("SELECT page FROM wiki LIMIT 3")) is None


# ---- KILL QUERY ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("sql, target", [("KILL QUERY 'abc'", "abc"), ("/* c */ kill query 'a-1' ;", "a-1"),
                                         ("SELECT 'KILL QUERY'", None), ("SELECT 1", None)])
def test_kill_statement(sql, target):
    assert kill_target(sql) == target


@pytest.mark.parametrize("sql", ["KILL 'abc'", "KILL QUERY abc", "KILL QUERY ''", "KILL QUERY 'a' 'b'"])
def test_malformed_kill_shows_the_form(sql):
    with pytest.raises(ValidationError, match="KILL QUERY 'query id'"):
        kill_target(sql)


# ---- the registry ----------------------------------------------------------------------------------------
AUTH = BasicAuthorizer("admin", "pw", [UserSpec("alice", password="x", grants=(Grant("READ", "DATASOURCE", ".*"),)),
                                       UserSpec("bob", password="x", grants=(Grant("READ", "DATASOURCE", ".*"),))])


def run_in_thread(registry, user, started: threading.Event, release: threading.Event, outcome: dict,
                  query_id="q1") -> threading.Thread:
    def body():
        try:
            with registry.track("sql", sql="SELECT slow", user=user, query_id=query_id) as running:
                started.set()
                while running.is_active() and not release.wait(0.01):
                    pass
                if not running.is_active():
                    raise Cancelled(f"query {running.query_id} was cancelled")
        except Exception as exc:  # noqa: BLE001 - the outcome is asserted by the test
            outcome["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    assert started.wait(10)
    return t


def test_a_user_kills_their_own_query_and_it_is_logged_cancelled():
    registry = QueryRegistry(authorizer=AUTH)
    started, release, outcome = threading.Event(), threading.Event(), {}
    t = run_in_thread(registry, "alice", started, release, outcome)
    assert [r.query_id for r in registry.running()] == ["q1"]
    assert registry.kill("q1", "alice") == "query q1 is being killed"
    t.join(10)
    assert isinstance(outcome["error"], Cancelled)
    [logged] = registry.records()
    assert (logged.status, logged.error_message) == ("cancelled", "killed by alice (KILL QUERY)")


def _kill_answer(registry, query_id, user) -> str:
    try:
        return registry.kill(query_id, user)
    except Exception as exc:  # noqa: BLE001 - the answer under test, whichever it is
        return f"{type(exc).__name__}: {exc}"


def test_others_may_not_kill_a_query_and_are_answered_as_for_an_unknown_id_but_the_admin_may():
    registry = QueryRegistry(authorizer=AUTH)
    started, release, outcome = threading.Event(), threading.Event(), {}
    t = run_in_thread(registry, "alice", started, release, outcome)
    try:
        unknown = _kill_answer(registry, "q2", "bob")
        assert unknown == "ValidationError: no running query 'q2'; sys.queries lists queries with status 'running'"
        # Bob cannot tell alice's running q1 from an id nobody runs.
        assert _kill_answer(registry, "q1", "bob") == unknown.replace("q2", "q1")
        assert registry.running()[0].status == "running" and not registry.running()[0].error_message
        registry.kill("q1", "admin")
    finally:
        release.set()
        t.join(10)
    assert registry.records()[0].error_message == "killed by admin (KILL QUERY)"


def test_another_users_running_id_can_be_chosen_again_and_kill_reaches_only_ones_own():
    registry = QueryRegistry(authorizer=AUTH)
    started, release, outcome = threading.Event(), threading.Event(), {}
    t = run_in_thread(registry, "alice", started, release, outcome, query_id="shared")
    try:
        # Bob choosing alice's running id is answered as any free id: his statement runs.
        with registry.track("sql", sql="SELECT 1", user="bob", query_id="shared") as bobs:
            assert bobs.query_id == "shared"
            assert registry.kill("shared", "bob") == "query shared is being killed"
            assert not bobs.is_active()
        assert registry.running()[0].user == "alice" and not outcome  # alice's query runs on
        # The admin's KILL reaches every user's query under the id.
        with registry.track("sql", sql="SELECT 2", user="bob", query_id="shared") as again:
            registry.kill("shared", "admin")
            assert not again.is_active()
        t.join(10)
        assert isinstance(outcome["error"], Cancelled)
    finally:
        release.set()
        t.join(10)


def test_a_statement_is_killable_while_it_plans():
    from common.sql.planning_deadline import PlanningDeadline

    registry = QueryRegistry()
    planning, killed, outcome = threading.Event(), threading.Event(), {}

    def plan():  # a planner checking its deadline as it goes, as sqlglot's tokenizer and parser do
        try:
            with registry.planning("sql", "SELECT slow", None, "p1") as running:
                deadline = PlanningDeadline(300, stop=running.stop_if_killed)  # what the service plans with
                planning.set()
                assert killed.wait(10)
                deadline.check()
            outcome["planned"] = True
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc

    t = threading.Thread(target=plan)
    t.start()
    assert planning.wait(10)
    assert [r.query_id for r in registry.running()] == ["p1"]
    assert registry.kill("p1", None) == "query p1 is being killed"
    killed.set()
    t.join(10)
    assert isinstance(outcome.get("error"), Cancelled), outcome
    [logged] = registry.records()
    assert (logged.query_id, logged.status, logged.error_message) == \
        ("p1", "cancelled", "killed by an anonymous user (KILL QUERY)")


class _PausingPending:
    """The registry's pending statements, pausing (at most ``pause_s``) inside the chosen call, so
    a KILL QUERY can arrive exactly while a statement moves between planned and running."""

    def __init__(self, inner, at: str, pause_s: float = 0.3) -> None:
        self.inner, self.at, self.pause_s = inner, at, pause_s
        self.inside, self.go = threading.Event(), threading.Event()

    def _pause(self, name: str) -> None:
        if name == self.at and not self.inside.is_set():
            self.inside.set()
            self.go.wait(self.pause_s)

    def put(self, *args, **kwargs):
        self._pause("put")
        return self.inner.put(*args, **kwargs)

    def pop(self, *args, **kwargs):
        self._pause("pop")
        return self.inner.pop(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("at", ["put", "pop"])  # planning ends (running -> pending); the run starts (pending -> running)
def test_kill_finds_a_statement_moving_between_planned_and_running(at):
    """A statement planned by one call and run by the next (Flight SQL, the statements API) moves
    from running to pending and back under the registry's lock, so a KILL QUERY arriving during
    the move finds it. It once answered "no running query" there, and the run went on uncancelled."""
    registry = QueryRegistry()
    registry._pending = pausing = _PausingPending(registry._pending, at)
    outcome, answered = {}, threading.Event()

    def plan_then_run():
        with registry.planning("sql", "SELECT 1", "erin", "moving"):
            pass
        try:
            with registry.track("sql", sql="SELECT 1", user="erin", query_id="moving") as running:
                outcome["run"] = running
                assert answered.wait(10)  # running until the KILL has answered
                running.stop_if_killed_pending()
        except Cancelled:
            outcome["stopped before it ran"] = True

    t = threading.Thread(target=plan_then_run)
    t.start()
    assert pausing.inside.wait(10)
    answer = _kill_answer(registry, "moving", "erin")  # waits for the lock the move holds, if any
    pausing.go.set()
    answered.set()
    t.join(10)
    assert answer == "query moving is being killed", answer
    assert outcome["run"].cancelled  # killed before it ran, or while running: either way it stops


def test_a_statement_planned_for_a_later_run_is_logged_by_the_run_only():
    registry = QueryRegistry()
    with registry.planning("sql", "SELECT 1", "erin", "p2"):
        assert [r.query_id for r in registry.running()] == ["p2"]
    assert registry.records() == []  # planned fine: the run logs it
    with registry.track("sql", sql="SELECT 1", user="erin", query_id="p2"):
        pass
    assert [(r.query_id, r.status) for r in registry.records()] == [("p2", "ok")]
    with pytest.raises(ValidationError, match="bad plan"):
        with registry.planning("sql", "SELECT nope", "erin", "p3"):
            raise ValidationError("bad plan")
    assert sorted((r.query_id, r.status) for r in registry.records()) == [("p2", "ok"), ("p3", "error")]


def test_killing_an_unknown_or_finished_query_says_so():
    registry = QueryRegistry()
    with registry.track("sql", sql="SELECT 1", query_id="done"):
        pass
    for qid in ("done", "nope"):
        with pytest.raises(ValidationError, match=f"no running query '{qid}'"):
            registry.kill(qid, None)


def test_a_running_id_cannot_be_reused():
    registry = QueryRegistry()
    errors = []

    def second():
        try:
            with registry.track("sql", sql="SELECT 2", query_id="same"):
                pass
        except ValidationError as exc:
            errors.append(str(exc))

    with registry.track("sql", sql="SELECT 1", query_id="same"):
        t = threading.Thread(target=second)
        t.start()
        t.join(10)
    assert errors == ["query id 'same' is already running; choose another id (or none)"]
    # (A statement's own native queries are not tracked again: they report to its RunningQuery,
    # handed to them explicitly; see test_two_statements_on_two_threads_each_get_only_their_own_native_reports.)
    assert [r.query_id for r in registry.records()] == ["same"]


def test_status_of_failures_and_the_origin_of_calls():
    registry = QueryRegistry()
    with pytest.raises(QueryTimeoutError):  # no user given: the origin's
        with registry.track("sql", sql="SELECT 1", query_id="fixed-id",
                            origin=CallOrigin("grpc", "ipv4:10.1.2.3:4000", "carol")):
            raise QueryTimeoutError("too slow")
    with pytest.raises(PermissionError):
        with registry.track("sql", sql="SELECT 2", user="dave", query_id="mine",
                            origin=CallOrigin("flight", "ipv6:[::1]:5", None)):
            raise PermissionError("no READ")
    by_id = {r.query_id: r for r in registry.records()}
    assert (by_id["fixed-id"].status, by_id["fixed-id"].user, by_id["fixed-id"].remote_address) == \
        ("timeout", "carol", "ipv4:10.1.2.3:4000")
    assert (by_id["mine"].status, by_id["mine"].user, by_id["mine"].protocol) == ("denied", "dave", "flight")
    with registry.track("sql", sql="SELECT 3", query_id="nowhere"):  # no origin: nothing is made up
        pass
    nowhere = {r.query_id: r for r in registry.records()}["nowhere"]
    assert (nowhere.protocol, nowhere.remote_address, nowhere.user) == ("", None, None)


def test_log_file_rotates_and_holds_whole_json_lines(tmp_path):
    path = str(tmp_path / "logs" / "queries.jsonl")
    log_file = QueryLogFile(path, max_bytes=2_000, backups=2)
    registry = QueryRegistry(QueryLog(max_entries=5), log_file)
    for i in range(40):
        with registry.track("sql", sql=f"SELECT {i} -- " + "x" * 100, query_id=f"q{i}"):
            pass
    log_file.close()
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["queries.jsonl", "queries.jsonl.1", "queries.jsonl.2"]
    kept = read_lines(str(tmp_path / "logs" / "queries.jsonl.2")) + read_lines(str(tmp_path / "logs" / "queries.jsonl.1")) \
        + read_lines(path)
    ids = [r.query_id for r in kept]
    assert ids == [f"q{i}" for i in range(40 - len(ids), 40)]  # the newest, in order, none torn
    assert len(registry.records()) == 5  # memory holds fewer than the files


# ---- which table served each segment group (recomputed on the broker) ------------------------------------
@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    """Three daily segments of the projections test data; the middle day has no projections."""
    import os

    import pyarrow as pa

    from common.query.projection import projection_rows
    from common.segment.builder import build_segment
    from common.segment.segment import Segment
    from common.segment.segment_id import SegmentId
    from tests.conftest import EVENTS_DAYS, day_interval, make_events_table
    from tests.unit.query.test_projections import SPECS

    directory = str(tmp_path_factory.mktemp("logged-projections"))
    table = make_events_table()
    times = table.column("__time").cast(pa.int64()).to_numpy()
    out = {}
    for d in range(EVENTS_DAYS):
        iv = day_interval(d)
        part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
        sid = SegmentId("events", iv, "v1", 0)
        path = os.path.join(directory, f"{d}.sseg")
        build_segment(part, path, sid, (), projections=[] if d == 1 else [projection_rows(s, part) for s in SPECS])
        seg = Segment.open(path)
        out[sid] = json.dumps(seg.manifest.to_json())
        seg.close()
    return out


@pytest.mark.parametrize("query, expected", [
    ({"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"], "granularity": "all",
      "dimensions": ["channel"], "aggregations": [{"type": "count", "name": "n"}]}, "daily_channel_page"),
    ({"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01T05:30/2020-01-04"],
      "granularity": "hour", "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"}]}, "bucket edge"),
    ({"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"], "granularity": "all",
      "dimensions": ["page"], "aggregations": [{"type": "count", "name": "n"}]}, "'page' is not a grouping column"),
], ids=["projection", "edge-inside-a-day", "missing-column"])
def test_logged_tables_are_what_explain_says(manifests, query, expected):
    from common.query.model import query_from_json
    from common.query.partial import RunStats
    from common.query.projection_report import explain_projections

    registry = QueryRegistry(manifest_of=manifests.get)
    q = query_from_json(query)
    with registry.track("native", query_id="t") as running:
        registry.native_finished(running, q, RunStats(segments=3), list(manifests))
    [record] = registry.records()
    got = sorted((t.projection, t.segments, tuple(sorted(t.rejected.items()))) for t in record.tables)
    want = sorted((g["projection"], g["segments"], tuple(sorted(g["rejected"].items())))
                  for g in explain_projections(q, manifests.values()))
    assert got == want and sum(t.segments for t in record.tables) == 3
    assert expected in json.dumps(got)
    assert record.shapes[0]["base_segments"] == sum(t.segments for t in record.tables if t.projection == "base")


def test_a_flight_statement_planned_now_and_run_later_keeps_the_id_it_announced():
    from dataclasses import dataclass

    from services.broker.query_origin import MIDDLEWARE_KEY, announce_flight_query, flight_origin

    @dataclass(frozen=True)
    class Request:  # what a front door plans: SQL or native, a context, maybe an id
        sql: str | None = None
        native: dict | None = None
        context: dict | None = None
        query_id: str | None = None

    class Reply:
        query_id = None

    class Context:
        def __init__(self):
            self.reply = Reply()

        def peer(self):
            return "ipv4:127.0.0.1:9"

        def get_middleware(self, key):
            return self.reply if key == MIDDLEWARE_KEY else None

    planning = Context()
    chosen = announce_flight_query(planning, Request(sql="SET sqlQueryId = 'mine'; SELECT 1"))
    assert chosen.query_id == planning.reply.query_id == "mine"
    native = announce_flight_query(Context(), Request(native={"context": {"queryId": "n1"}}))
    assert native.query_id == "n1"
    fresh = announce_flight_query(Context(), Request(sql="SELECT 1"))
    assert len(fresh.query_id) == 32
    registry = QueryRegistry()
    later = flight_origin(Context(), "erin")  # the later call that runs it, under the announced id
    with registry.track("sql", sql="SELECT 1", query_id=fresh.query_id, origin=later):
        pass
    assert [(r.query_id, r.user, r.protocol, r.remote_address) for r in registry.records()] == \
        [(fresh.query_id, "erin", "flight", "ipv4:127.0.0.1:9")]
    assert later.reply.query_id == fresh.query_id  # that call answers with it


def test_a_query_run_again_logs_the_same_tables_and_a_manifest_known_later_counts(manifests):
    from common.query.model import query_from_json
    from common.query.partial import RunStats

    known = dict(list(manifests.items())[:2])  # the third segment's manifest is not known yet
    registry = QueryRegistry(manifest_of=lambda sid: known.get(sid))
    q = query_from_json({"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
                         "granularity": "all", "dimensions": ["channel"], "aggregations": [{"type": "count", "name": "n"}]})

    def logged(query_id: str) -> list[tuple]:
        with registry.track("native", query_id=query_id) as running:
            registry.native_finished(running, q, RunStats(segments=3), list(manifests))
        record = next(r for r in registry.records() if r.query_id == query_id)
        return sorted((t.projection, t.segments) for t in record.tables)

    assert logged("a") == logged("b") == [("base", 1), ("daily_channel_page", 1)]
    known.update(manifests)
    assert logged("c") == logged("d") == [("base", 1), ("daily_channel_page", 2)]


def test_two_statements_on_two_threads_each_get_only_their_own_native_reports(manifests):
    # The running query travels explicitly (``tracked``), not in ambient per-thread state: two
    # statements tracked at once, reporting in an interleaved order, each log only what they ran.
    from common.query.model import query_from_json
    from common.query.partial import RunStats

    registry = QueryRegistry(manifest_of=manifests.get)
    q = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
                         "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})
    both_in = threading.Barrier(2, timeout=10)
    turn = {"a": threading.Event(), "b": threading.Event()}
    errors = []

    def statement(name: str, segments: int, other: str) -> None:
        try:
            with registry.track("sql", sql=f"SELECT {name}", query_id=name) as running:
                both_in.wait()
                if name == "b":
                    assert turn["b"].wait(10)  # a reports first, b while a is still running
                registry.native_started(running)
                registry.native_finished(running, q, RunStats(segments=segments), list(manifests))
                turn[other].set()
                if name == "a":
                    assert turn["a"].wait(10)  # a ends only after b reported
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=statement, args=("a", 2, "b")),
               threading.Thread(target=statement, args=("b", 5, "a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    by_id = {r.query_id: r for r in registry.records()}
    assert by_id["a"].segments == 2 and by_id["b"].segments == 5
