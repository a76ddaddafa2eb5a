"""Spark ingestion end to end on a local[2] session: Druid SQL in, segments in (local) deep storage,
one publish call out. Segment contents are read back with strata's own engine and compared with
DuckDB over the same input files."""

from __future__ import annotations

import decimal
import functools
import gzip
import http.server
import os
import shutil
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.query import execute
from common.segment import Segment
from common.segment.timeline import TimelineSegment
from common.types.interval import ETERNITY, Interval, parse_instant
from services.coordinator.core.allocation import PartitionLedger
from services.deep_storage import LocalDeepStorage
from services.ingestion.ingestion_report import IngestionCancelled, IngestionFailed, TooManyParseExceptions
from services.ingestion.spark_job import IngestionJob, run_ingestion
from common.ingest.statement import parse_ingestion
from tests.conftest import duck_connect
from tests.fixtures.spark_session import spark  # noqa: F401

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
EMBEDDED = os.path.join(DATA, "embedded-tests")
WIKITICKER = os.path.join(DATA, "wikiticker-2015-09-12-sampled.json.gz")
WIKI_COLUMNS = ("timestamp VARCHAR, page VARCHAR, language VARCHAR, \"user\" VARCHAR, unpatrolled VARCHAR, "
                "newPage VARCHAR, robot VARCHAR, anonymous VARCHAR, namespace VARCHAR, continent VARCHAR, "
                "country VARCHAR, region VARCHAR, city VARCHAR, added BIGINT, deleted BIGINT, delta BIGINT")

ALL_TIME = "1000-01-01/3000-01-01"
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason="shared test data not found")


class FakePublisher:
    """The coordinator's side, in memory: the real allocation rules over what was published."""

    def __init__(self, fail_publish: bool = False) -> None:
        self.ledger = PartitionLedger()
        self.calls: list[tuple] = []
        self.published: list = []
        self.fail_publish = fail_publish

    def allocate(self, datasource, intervals, mode, partitions=None):
        self.calls.append(("allocate", datasource, list(intervals), mode))
        existing = [TimelineSegment(d.id, d.num_partitions) for d in self.published if d.id.datasource == datasource]
        version = f"v{sum(1 for c in self.calls if c[0] == 'allocate')}"
        return {a.interval: a for a in self.ledger.allocate(existing, intervals, mode, version, partitions)}

    def publish(self, descriptors, replace_intervals):
        self.calls.append(("publish", list(descriptors), replace_intervals))
        if self.fail_publish:
            raise RuntimeError("metadata store is down")
        self.published.extend(descriptors)

    @property
    def publishes(self) -> list[tuple]:
        return [c for c in self.calls if c[0] == "publish"]


@pytest.fixture
def deep(tmp_path):
    return LocalDeepStorage(str(tmp_path / "deep"))


def ingest(spark, sql, deep, publisher=None, **kwargs):  # noqa: F811
    publisher = publisher or FakePublisher()
    report = run_ingestion(spark, IngestionJob("test-job", parse_ingestion(sql)), deep.root, "", publisher, **kwargs)
    return report, publisher


def segments_of(deep, report) -> list[Segment]:
    return [Segment.open(os.path.join(deep.root, *s.location.split("/"))) for s in report.segments]


def scan(segments, datasource, columns) -> list[tuple]:
    result = execute({"queryType": "scan", "dataSource": datasource, "intervals": [ALL_TIME],
                      "columns": list(columns)}, segments)
    table = result.table
    rows = []
    for rec in table.to_pylist():
        rows.append(tuple(_ms(rec[c]) if c == "__time" else rec[c] for c in columns))
    return sorted(rows, key=repr)


def _ms(v):
    if hasattr(v, "timestamp"):
        return int(round(v.timestamp() * 1000))
    return int(v)


def duck_rows(sql: str) -> list[tuple]:
    con = duck_connect()
    try:
        return sorted([tuple(r) for r in con.execute(sql).fetchall()], key=repr)
    finally:
        con.close()


# ---- formats ------------------------------------------------------------------------------------------


def test_csv_with_header_matches_duckdb(spark, deep):  # noqa: F811
    report, pub = ingest(spark, f"""
        INSERT INTO wiki
        SELECT TIME_PARSE("timestamp") AS __time, page, "user", added, deleted, delta
        FROM TABLE(localfiles(baseDir => '{EMBEDDED}', filter => 'wikipedia_index_data*.csv', format => 'csv',
                              findColumnsFromHeader => true)) EXTEND ({WIKI_COLUMNS})
        PARTITIONED BY DAY""", deep)
    assert report.status == "SUCCESS" and report.rows_read == 10 and report.rows_written == 10
    assert [c[0] for c in pub.calls] == ["allocate", "publish"]
    assert pub.calls[0][3] == "insert" and pub.calls[1][2] is None
    got = scan(segments_of(deep, report), "wiki", ["__time", "page", "user", "added", "deleted", "delta"])
    want = duck_rows(f"""SELECT epoch_ms("timestamp"::TIMESTAMPTZ), page, "user", added, deleted, delta
                         FROM read_csv('{EMBEDDED}/wikipedia_index_data*.csv', header=true)""")
    assert got == want
    days = sorted({s.id.interval for s in report.segments})
    assert days == [Interval.parse("2013-08-31/2013-09-01"), Interval.parse("2013-09-01/2013-09-02")]


def test_csv_listed_columns_skip_header_rows_and_list_delimiter(spark, deep, tmp_path):  # noqa: F811
    path = tmp_path / "tags.csv"
    path.write_text("# exported by a tool\nts,tags,n\n2020-01-01T00:00:00Z,a|b,1\n2020-01-01T01:00:00Z,c,2\n"
                    "2020-01-02T00:00:00Z,,3\n")
    report, _ = ingest(spark, f"""
        INSERT INTO tagged SELECT TIME_PARSE(ts) AS __time, tags, n
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{path}"]}}',
                          '{{"type": "csv", "columns": ["ts", "tags", "n"], "skipHeaderRows": 2,
                             "listDelimiter": "|"}}',
                          '[{{"name": "ts", "type": "string"}}, {{"name": "tags", "type": "ARRAY<STRING>"}},
                            {{"name": "n", "type": "long"}}]'))
        PARTITIONED BY DAY""", deep)
    rows = scan(segments_of(deep, report), "tagged", ["__time", "tags", "n"])
    t0 = parse_instant("2020-01-01")
    assert rows == sorted([(t0, ["a", "b"], 1), (t0 + 3_600_000, ["c"], 2), (t0 + 86_400_000, None, 3)], key=repr)
    assert {str(m.type) for s in segments_of(deep, report) for m in s.manifest.columns if m.name == "tags"} \
        == {"ARRAY<STRING>"}


def test_tsv_with_header_matches_duckdb(spark, deep):  # noqa: F811
    report, _ = ingest(spark, f"""
        INSERT INTO wiki SELECT TIME_PARSE("timestamp") AS __time, page, city, added
        FROM TABLE(localfiles(baseDir => '{EMBEDDED}', filter => '*.tsv', format => 'tsv',
                              findColumnsFromHeader => true)) EXTEND ({WIKI_COLUMNS})
        PARTITIONED BY DAY""", deep)
    got = scan(segments_of(deep, report), "wiki", ["__time", "page", "city", "added"])
    want = duck_rows(f"""SELECT epoch_ms("timestamp"::TIMESTAMPTZ), page, city, added
                         FROM read_csv('{EMBEDDED}/*.tsv', header=true, delim='\t')""")
    assert got == want


def test_all_time_makes_one_eternity_segment(spark, deep):  # noqa: F811
    report, pub = ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json").replace(
        "PARTITIONED BY DAY", "PARTITIONED BY ALL TIME"), deep)
    assert [s.id.interval for s in report.segments] == [ETERNITY]
    assert pub.calls[0][2] == [ETERNITY]
    assert len(scan(segments_of(deep, report), "animals", ["animal"])) == 3


def test_gzipped_json_clustered_matches_duckdb(spark, deep):  # noqa: F811
    report, _ = ingest(spark, f"""
        SET rowsPerSegment = 100;
        INSERT INTO wikiticker
        SELECT TIME_PARSE("time") AS __time, channel, page, added, deleted, isRobot
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{WIKITICKER}"]}}', '{{"type": "json"}}',
            '[{{"name": "time", "type": "string"}}, {{"name": "channel", "type": "string"}},
              {{"name": "page", "type": "string"}}, {{"name": "added", "type": "long"}},
              {{"name": "deleted", "type": "long"}}, {{"name": "isRobot", "type": "string"}}]'))
        WHERE TIME_PARSE("time") < TIMESTAMP '2015-09-12 03:00:00'
        PARTITIONED BY HOUR CLUSTERED BY channel""", deep)
    want = duck_rows(f"""SELECT count(*), sum(added), sum(deleted), count(DISTINCT channel)
                         FROM read_json_auto('{WIKITICKER}') WHERE "time"::TIMESTAMPTZ < '2015-09-12 03:00:00+00'""")
    assert report.rows_read == 39244
    assert report.rows_written == want[0][0]
    assert report.rows_filtered == 39244 - want[0][0]
    segments = segments_of(deep, report)
    rows = scan(segments, "wikiticker", ["__time", "channel", "added", "deleted"])
    assert (len(rows), sum(r[2] for r in rows), sum(r[3] for r in rows)) == want[0][:3]
    # Each hour is split into range partitions of channel, numbered 0..n-1, none empty, none far over size.
    by_chunk: dict = {}
    for seg in segments:
        by_chunk.setdefault(seg.id.interval, []).append(seg)
    assert len(by_chunk) == 3
    for interval, segs in by_chunk.items():
        segs.sort(key=lambda s: s.id.partition)
        n = len(segs)
        assert n >= 2, "a chunk of hundreds of rows at 100 rows per segment is split"
        assert [s.id.partition for s in segs] == list(range(n))
        descriptor_parts = {r.id: r for r in report.segments}
        assert all(descriptor_parts[s.id].rows == s.num_rows for s in segs)
        previous_max = None
        for seg in segs:
            data = scan([seg], "wikiticker", ["__time", "channel"])
            channels = [c for _, c in data]
            top = max(channels.count(c) for c in set(channels))
            # A range holds ~100 rows, more only when one channel alone is that big (keys never split).
            assert 0 < seg.num_rows <= 2 * 100 or top > 100
            if previous_max is not None:
                assert min(channels) >= previous_max  # ranges do not overlap
            previous_max = max(channels)
            table = execute({"queryType": "scan", "dataSource": "wikiticker", "intervals": [ALL_TIME],
                             "columns": ["__time", "channel"]}, [seg]).table
            keys = [(_ms(t), c) for t, c in zip(table.column("__time").to_pylist(), table.column("channel").to_pylist())]
            assert keys == sorted(keys), "rows are sorted by time, then channel"


def test_parquet(spark, deep, tmp_path):  # noqa: F811
    t0 = parse_instant("2021-03-01")
    table = pa.table({
        "ts": pa.array([t0 + i * 3_600_000 for i in range(50)], pa.timestamp("ms", tz="UTC")),
        "name": [f"n{i % 7}" for i in range(50)],
        "value": pa.array([i * 0.5 for i in range(50)]),
        "count_text": [str(i) for i in range(50)],
    })
    pq.write_table(table.slice(0, 25), tmp_path / "a.parquet")
    pq.write_table(table.slice(25), tmp_path / "b.parquet")
    report, _ = ingest(spark, f"""
        INSERT INTO pq SELECT ts AS __time, name, "value", count_text AS n
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.parquet', format => 'parquet'))
             EXTEND (ts TIMESTAMP, name VARCHAR, "value" DOUBLE, count_text BIGINT)
        PARTITIONED BY DAY""", deep)
    got = scan(segments_of(deep, report), "pq", ["__time", "name", "value", "n"])
    want = duck_rows(f"SELECT epoch_ms(ts), name, value, count_text::BIGINT FROM read_parquet('{tmp_path}/*.parquet')")
    assert got == want and len(got) == 50


def test_inline_data_with_expressions(spark, deep):  # noqa: F811
    report, _ = ingest(spark, """
        INSERT INTO inl
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'PT1H') AS __time, UPPER(s) AS s, n * 2 AS n2,
               TIME_FORMAT(TIME_PARSE(ts), 'yyyy-MM-dd') AS d, TIMESTAMP_TO_MILLIS(TIME_PARSE(ts)) AS ms
        FROM TABLE(inline(data => ARRAY['2020-05-01T10:20:30Z,ab,1', '2020-05-01T11:59:59.5Z,cd,2'],
                          format => 'csv')) EXTEND (ts VARCHAR, s VARCHAR, n BIGINT)
        PARTITIONED BY DAY""", deep)
    rows = scan(segments_of(deep, report), "inl", ["__time", "s", "n2", "d", "ms"])
    t = parse_instant("2020-05-01T10:20:30Z")
    t2 = parse_instant("2020-05-01T11:59:59.5Z")
    assert rows == sorted([(parse_instant("2020-05-01T10:00:00Z"), "AB", 2, "2020-05-01", t),
                           (parse_instant("2020-05-01T11:00:00Z"), "CD", 4, "2020-05-01", t2)], key=repr)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_data(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    shutil.copy(os.path.join(DATA, "rollup-data.json"), root / "rollup-data.json")
    with open(os.path.join(EMBEDDED, "tiny_wiki_1.json"), "rb") as src, gzip.open(root / "tiny.json.gz", "wb") as out:
        out.write(src.read())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_http_source_rollup_matches_duckdb(spark, deep, http_data):  # noqa: F811
    report, _ = ingest(spark, f"""
        INSERT INTO rollup
        SELECT TIME_FLOOR(TIME_PARSE("timestamp"), 'PT1M') AS __time, srcIP, dstIP,
               SUM(packets) AS packets, SUM(bytes) AS bytes, COUNT(*) AS cnt
        FROM TABLE(http(uris => ARRAY['{http_data}/rollup-data.json'], format => 'json'))
             EXTEND ("timestamp" VARCHAR, srcIP VARCHAR, dstIP VARCHAR, packets BIGINT, bytes BIGINT)
        GROUP BY 1, 2, 3
        PARTITIONED BY DAY""", deep)
    got = scan(segments_of(deep, report), "rollup", ["__time", "srcIP", "dstIP", "packets", "bytes", "cnt"])
    want = duck_rows(f"""SELECT epoch_ms(time_bucket(INTERVAL 1 MINUTE, "timestamp"::TIMESTAMPTZ)), srcIP, dstIP,
                                sum(packets), sum(bytes), count(*)
                         FROM read_json_auto('{DATA}/rollup-data.json') GROUP BY ALL""")
    assert report.rows_read == 9 and len(got) == 5
    assert got == want


def test_http_gzip_and_size_limit(spark, deep, http_data):  # noqa: F811
    sql = f"""INSERT INTO tiny SELECT TIME_PARSE("timestamp") AS __time, page, tags
              FROM TABLE(http(uris => '{http_data}/tiny.json.gz', format => 'json'))
                   EXTEND ("timestamp" VARCHAR, page VARCHAR, tags VARCHAR ARRAY)
              PARTITIONED BY DAY"""
    report, _ = ingest(spark, sql, deep)
    rows = scan(segments_of(deep, report), "tiny", ["page", "tags"])
    assert ("Gypsy Danger", ["t1", "t2"]) in rows and len(rows) == 3
    pub = FakePublisher()
    with pytest.raises(IngestionFailed, match="over the limit of 10") as err:
        ingest(spark, "SET httpInputMaxBytes = 10;\n" + sql, deep, pub)
    assert err.value.report.status == "FAILED" and not pub.publishes
    with pytest.raises(IngestionFailed, match="404"):
        ingest(spark, sql.replace("tiny.json.gz", "missing.json"), deep)


# ---- allocation and publishing --------------------------------------------------------------------------


def _sql_updates(mode_clause: str, name: str) -> str:
    return f"""{mode_clause} SELECT TIME_PARSE("timestamp") AS __time, animal, "number"
               FROM TABLE(localfiles(files => ARRAY['{os.path.join(DATA, name)}'], format => 'json'))
                    EXTEND ("timestamp" VARCHAR, animal VARCHAR, "number" BIGINT)
               PARTITIONED BY DAY"""


def test_insert_appends_and_replace_gets_a_new_version(spark, deep):  # noqa: F811
    pub = FakePublisher()
    first, _ = ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json"), deep, pub)
    second, _ = ingest(spark, _sql_updates("INSERT INTO animals", "updates-data2.json"), deep, pub)
    [a1] = first.segments
    [a2] = second.segments
    assert a2.id.version == a1.id.version and a2.id.partition == a1.id.partition + 1
    appended = [d for d in pub.published if d.id == a2.id][0]
    assert appended.num_partitions == 1  # the chunk's core set is still the first INSERT's one segment
    replaced, _ = ingest(spark, _sql_updates("REPLACE INTO animals OVERWRITE ALL", "updates-data3.json"), deep, pub)
    [r] = replaced.segments
    assert r.id.version not in (a1.id.version,) and r.id.partition == 0
    modes = [c[3] for c in pub.calls if c[0] == "allocate"]
    assert modes == ["insert", "insert", "replace"]
    assert [c[2] for c in pub.publishes] == [None, None, [ETERNITY]]
    assert scan(segments_of(deep, replaced), "animals", ["animal", "number"]) == duck_rows(
        f"SELECT animal, number FROM read_json_auto('{DATA}/updates-data3.json')")


def test_replace_where_checks_rows_fall_inside(spark, deep):  # noqa: F811
    ok_sql = _sql_updates("REPLACE INTO animals OVERWRITE WHERE __time >= TIMESTAMP '2018-01-01' AND "
                          "__time < TIMESTAMP '2018-01-02'", "updates-data.json")
    report, pub = ingest(spark, ok_sql, deep)
    assert pub.publishes[0][2] == [Interval.parse("2018-01-01/2018-01-02")]
    bad = ok_sql.replace("2018-01-01'", "2019-01-01'").replace("2018-01-02'", "2019-01-02'")
    pub2 = FakePublisher()
    with pytest.raises(IngestionFailed, match="outside OVERWRITE WHERE"):
        ingest(spark, bad, deep, pub2)
    assert not pub2.publishes


# ---- failures ---------------------------------------------------------------------------------------------


@pytest.fixture
def bad_csv(tmp_path):
    path = tmp_path / "bad" / "events.csv"
    path.parent.mkdir()
    path.write_text("ts,n\n2020-01-01T00:00:00Z,1\n2020-01-01T00:00:01Z,oops\n2020-01-01T00:00:02Z,3\n"
                    "2020-01-01T00:00:03Z,4,extra\n")
    return path


def _bad_sql(path, prefix=""):
    return prefix + f"""INSERT INTO events SELECT TIME_PARSE(ts) AS __time, n
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'csv', skipHeaderRows => 1))
             EXTEND (ts VARCHAR, n BIGINT)
        PARTITIONED BY DAY"""


def test_parse_exceptions_over_the_limit_fail_naming_file_and_line(spark, deep, bad_csv):  # noqa: F811
    pub = FakePublisher()
    with pytest.raises(TooManyParseExceptions) as err:
        ingest(spark, _bad_sql(bad_csv), deep, pub)
    message = str(err.value)
    assert f"{bad_csv}, line 3" in message and "cannot parse 'oops' as a LONG" in message
    assert "maxParseExceptions=0" in message
    report = err.value.report
    assert report.status == "FAILED" and report.parse_exceptions == 2
    assert [(s.line, s.raw) for s in report.parse_exception_samples] == [
        (3, "2020-01-01T00:00:01Z,oops"), (5, "2020-01-01T00:00:03Z,4,extra")]
    assert pub.calls == [] and deep.list("events") == []


def test_parse_exceptions_within_the_limit_are_reported(spark, deep, bad_csv):  # noqa: F811
    report, pub = ingest(spark, _bad_sql(bad_csv, "SET maxParseExceptions = 2;\n"), deep)
    assert report.status == "SUCCESS" and report.parse_exceptions == 2 and report.rows_written == 2
    assert [s.line for s in report.parse_exception_samples] == [3, 5]
    assert scan(segments_of(deep, report), "events", ["n"]) == [(1,), (3,)]


def test_failed_publish_deletes_uploads(spark, deep):  # noqa: F811
    pub = FakePublisher(fail_publish=True)
    with pytest.raises(IngestionFailed, match="metadata store is down") as err:
        ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json"), deep, pub)
    assert len(pub.publishes) == 1 and not pub.published
    assert err.value.report.status == "FAILED" and err.value.report.segments == ()
    assert deep.list("animals") == []


def test_cancelled_job_publishes_nothing_and_deletes_uploads(spark, deep, monkeypatch):  # noqa: F811
    cancel = threading.Event()
    deleted: list[int] = []
    original = LocalDeepStorage.delete_prefix

    def spy(self, prefix):
        deleted.append(len(self.list(prefix)))
        return original(self, prefix)

    monkeypatch.setattr(LocalDeepStorage, "delete_prefix", spy)
    phases = []

    def progress(phase, details):
        phases.append(phase)
        if phase == "building":
            cancel.set()  # mid-run: segments get built and uploaded, then the run must undo them

    pub = FakePublisher()
    with pytest.raises(IngestionCancelled) as err:
        ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json"), deep, pub, progress=progress,
               cancel_event=cancel)
    assert err.value.report.status == "CANCELLED"
    assert not pub.publishes and deep.list("animals") == []
    assert phases[-1] == "building" and deleted, "the run cleaned its upload folder"


def test_a_cancel_right_after_the_publish_keeps_the_published_segments(spark, deep):  # noqa: F811
    """A suspend reaching a stream task just after its publish committed: the rows are in, so the
    run succeeds and no file of a published segment is removed."""
    cancel = threading.Event()

    class CancelledAtCommit(FakePublisher):
        def publish(self, descriptors, replace_intervals):
            super().publish(descriptors, replace_intervals)
            cancel.set()

    def progress(phase, details):
        if phase == "done":
            raise RuntimeError("the progress report after the publish failed")

    pub = CancelledAtCommit()
    report, _ = ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json"), deep, pub,
                       progress=progress, cancel_event=cancel)
    assert report.status == "SUCCESS" and len(pub.publishes) == 1 and report.segments
    assert sum(s.num_rows for s in segments_of(deep, report)) == report.rows_written > 0


def test_cancel_before_start(spark, deep):  # noqa: F811
    cancel = threading.Event()
    cancel.set()
    pub = FakePublisher()
    with pytest.raises(IngestionCancelled):
        ingest(spark, _sql_updates("INSERT INTO animals", "updates-data.json"), deep, pub, cancel_event=cancel)
    assert pub.calls == []


def test_select_without_time_names_the_fix(spark, deep):  # noqa: F811
    with pytest.raises(IngestionFailed, match=r"__time must be a TIMESTAMP.*TIME_PARSE"):
        ingest(spark, """INSERT INTO x SELECT ts AS __time FROM TABLE(inline(data => 'a', format => 'csv'))
                         EXTEND (ts VARCHAR) PARTITIONED BY DAY""", deep)
    with pytest.raises(IngestionFailed, match="null __time"):
        ingest(spark, """INSERT INTO x SELECT TIME_PARSE(ts) AS __time FROM TABLE(inline(data => 'nope', format => 'csv'))
                         EXTEND (ts VARCHAR) PARTITIONED BY DAY""", deep)


def test_missing_input_directory(spark, deep, tmp_path):  # noqa: F811
    with pytest.raises(IngestionFailed, match="baseDir '.*nowhere' does not exist"):
        ingest(spark, f"""INSERT INTO x SELECT TIME_PARSE(ts) AS __time
                          FROM TABLE(localfiles(baseDir => '{tmp_path}/nowhere', format => 'csv'))
                          EXTEND (ts VARCHAR) PARTITIONED BY DAY""", deep)


# ---- Parquet read by Spark, by pyarrow in Spark tasks, or by row_parser: same segments ------------------


@pytest.fixture
def typed_parquet(tmp_path):
    t0 = parse_instant("2022-02-01")
    n = 3000
    table = pa.table({
        "ts": pa.array([t0 + i * 97_000 for i in range(n)], pa.timestamp("ms", tz="UTC")),
        "i8": pa.array([None if i % 11 == 0 else i % 100 - 50 for i in range(n)], pa.int8()),
        "u32": pa.array([i * 1_400_000 for i in range(n)], pa.uint32()),
        "flag": pa.array([None if i % 7 == 0 else i % 2 == 0 for i in range(n)]),
        "f": pa.array([i / 8 for i in range(n)], pa.float32()),
        "d": [None if i % 5 == 0 else i * 0.1 for i in range(n)],
        "s": pa.array([["x", "é", "日本"][i % 3] for i in range(n)]).dictionary_encode(),
        "naive": pa.array([i * 1000 for i in range(n)], pa.timestamp("us")),
        "unused_ns": pa.array(range(n), pa.timestamp("ns", tz="UTC")),
        # year 1, the days Rome's calendar switch skipped, year 9999: Spark must not rebase them
        "day": pa.array([None if i % 13 == 0 else [-719_162 + i // 4, -141_440 + i // 4, 2_932_896 - i // 4, 15_901][i % 4]
                         for i in range(n)], pa.int32()).cast(pa.date32()),
        "day2": pa.array([None if i % 9 == 0 else 15_000 + i for i in range(n)], pa.int32()).cast(pa.date32()),
        "dec": pa.array([None if i % 6 == 0 else decimal.Decimal(i * 7 - 9000) / 1000 for i in range(n)],
                        pa.decimal128(12, 3)),
    })
    pq.write_table(table, tmp_path / "typed.parquet", row_group_size=700)
    return tmp_path / "typed.parquet"


TYPED_COLUMNS = ("ts TIMESTAMP, i8 BIGINT, u32 DOUBLE, flag VARCHAR, flag_n BIGINT, f FLOAT, d DOUBLE, s VARCHAR, "
                 "naive TIMESTAMP, day VARCHAR, day2 TIMESTAMP, dec DOUBLE")


def _typed_sql(path, select="ts AS __time, i8, u32, flag, f, d, s, day, dec", where="", rows_per_segment=1000):
    return f"""SET rowsPerSegment = {rows_per_segment};
        INSERT INTO typed SELECT {select}
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'parquet')) EXTEND ({TYPED_COLUMNS}) {where}
        PARTITIONED BY HOUR CLUSTERED BY s"""


def test_parquet_readers_agree(spark, deep, typed_parquet, tmp_path, monkeypatch):  # noqa: F811
    import services.ingestion.parquet_source as parquet_source
    import services.ingestion.spark_job as spark_job

    seen = {"scan": [], "native": []}
    plan_scan, plan_parquet = spark_job.plan_scan, parquet_source.plan_parquet
    monkeypatch.setattr(spark_job, "plan_scan", lambda *a: seen["scan"].append(plan_scan(*a)) or seen["scan"][-1])
    monkeypatch.setattr(parquet_source, "plan_parquet",
                        lambda *a: seen["native"].append(plan_parquet(*a)) or seen["native"][-1])
    row_parser_copy = tmp_path / "row[parser].parquet"  # a name Spark would glob: read by row_parser
    row_parser_copy.write_bytes(typed_parquet.read_bytes())
    columns = ["__time", "i8", "u32", "flag", "f", "d", "s", "day", "dec"]
    results = []
    for path, where in ((typed_parquet, ""), (typed_parquet, "WHERE i8 IS NULL OR i8 IS NOT NULL"),
                        (row_parser_copy, "")):
        report, _ = ingest(spark, _typed_sql(path, where=where), deep)
        assert report.rows_read == 3000 and report.rows_written == 3000 and report.parse_exceptions == 0
        results.append(scan(segments_of(deep, report), "typed", columns))
    assert [s is not None for s in seen["scan"]] == [True, False, False]
    assert [len(p.groups) for p in seen["native"]] == [1, 1, 0]
    assert results[0] == results[1] == results[2]
    assert results[0][0][1:] == (None, 0.0, None, 0.0, None, "x", None, None)
    written = pq.read_table(typed_parquet)
    days = written.column("day").cast(pa.string()).to_pylist()
    assert {"0001-01-02", "1582-10-06", "9999-12-31"} <= set(days)
    assert sorted(filter(None, (r[7] for r in results[0]))) == sorted(filter(None, days))
    decimals = [float(v) for v in written.column("dec").to_pylist() if v is not None]
    assert sorted(r[8] for r in results[0] if r[8] is not None) == sorted(decimals)
    # a TIMESTAMP other than __time is stored as epoch millis, whoever reads it
    stored = []
    for path in (typed_parquet, row_parser_copy):
        report, _ = ingest(spark, _typed_sql(path, select="ts AS __time, naive, flag_n, s, day2"), deep)
        stored.append(scan(segments_of(deep, report), "typed", ["__time", "naive", "day2"]))
    assert stored[0] == stored[1] and stored[0][1][1] == 1
    assert stored[0][0][2] is None and stored[0][1][2] == (15_000 + 1) * 86_400_000  # a DATE is its midnight UTC


def test_parquet_clustered_ranges_through_the_arrow_scan(spark, deep, typed_parquet):  # noqa: F811
    report, _ = ingest(spark, _typed_sql(typed_parquet, rows_per_segment=15), deep)
    by_hour: dict = {}
    for seg in segments_of(deep, report):
        by_hour.setdefault(seg.id.interval, []).append(seg)
    assert sum(s.rows for s in report.segments) == 3000
    assert any(len(segs) > 1 for segs in by_hour.values())
    for segs in by_hour.values():
        segs.sort(key=lambda s: s.id.partition)
        values = [sorted({r[1] for r in scan([s], "typed", ["__time", "s"])}) for s in segs]
        assert all(a[-1] <= b[0] for a, b in zip(values, values[1:]))  # ranges of s do not overlap


def test_parquet_chunks_counted_on_the_driver_or_by_spark_give_the_same_segments(spark, deep, typed_parquet,  # noqa: F811
                                                                                  monkeypatch):
    from services.ingestion import arrow_scan

    sql = _typed_sql(typed_parquet, select="ts AS __time, i8, s", rows_per_segment=400)
    counted = []
    count_on_driver = arrow_scan.count_on_driver

    def counting(*args):
        counted.append(1)
        return count_on_driver(*args)

    monkeypatch.setattr(arrow_scan, "count_on_driver", counting)
    on_driver, _ = ingest(spark, sql, deep)
    assert counted  # the small file was counted here, not in a Spark job
    monkeypatch.setattr(arrow_scan, "DRIVER_COUNT_ROWS", 0)
    by_spark, _ = ingest(spark, sql, deep)
    assert len(counted) == 1
    assert [(s.id.interval, s.id.partition, s.rows) for s in on_driver.segments] == \
        [(s.id.interval, s.id.partition, s.rows) for s in by_spark.segments]
    assert on_driver.rows_written == by_spark.rows_written == 3000
    assert sorted(scan(segments_of(deep, on_driver), "typed", ["__time", "i8", "s"])) == \
        sorted(scan(segments_of(deep, by_spark), "typed", ["__time", "i8", "s"]))


def test_parquet_segments_built_by_their_reading_tasks_equal_the_shuffled_ones(spark, deep, typed_parquet,  # noqa: F811
                                                                             monkeypatch):
    """Days split into __time ranges over row groups of 700 rows: the tasks that read and build
    their segments (scan_build.py) make the segments the shuffle path makes."""
    from services.ingestion import scan_build

    planned = []
    plan_tasks = scan_build.plan_tasks
    monkeypatch.setattr(scan_build, "plan_tasks", lambda *a: planned.append(plan_tasks(*a)) or planned[-1])
    sql = f"""SET rowsPerSegment = 400;{{}}
        INSERT INTO typed SELECT ts AS __time, i8, d, s FROM TABLE(localfiles(files => ARRAY['{typed_parquet}'],
        format => 'parquet')) EXTEND ({TYPED_COLUMNS}) PARTITIONED BY DAY"""
    direct, _ = ingest(spark, sql.format(""), deep)
    assert len(planned) == 1 and planned[0] is not None and len(planned[0]) == 2
    shuffled, _ = ingest(spark, sql.format(" SET scanBuild = false;"), deep)
    assert len(planned) == 1  # the setting keeps the shuffle: no tasks planned
    assert len(direct.segments) > 4 and direct.rows_written == shuffled.rows_written == 3000
    assert [(s.id.interval, s.id.partition, s.rows) for s in direct.segments] == \
        [(s.id.interval, s.id.partition, s.rows) for s in shuffled.segments]
    columns = ["__time", "i8", "d", "s"]
    for a, b in zip(segments_of(deep, direct), segments_of(deep, shuffled)):
        assert scan([a], "typed", columns) == scan([b], "typed", columns)


def test_parquet_values_that_do_not_fit_are_parse_exceptions_with_their_row(spark, deep, tmp_path):  # noqa: F811
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"ts": pa.array([0, 1, 2], pa.timestamp("ms", tz="UTC")), "n": ["1", "x", "3"]}), path)
    sql = f"""INSERT INTO bad SELECT ts AS __time, n FROM TABLE(localfiles(files => ARRAY['{path}'],
              format => 'parquet')) EXTEND (ts TIMESTAMP, n BIGINT) PARTITIONED BY DAY"""
    with pytest.raises(TooManyParseExceptions, match=rf"{path}, line 2.*cannot parse 'x' as a LONG"):
        ingest(spark, sql, deep)
    report, _ = ingest(spark, "SET maxParseExceptions = 1;\n" + sql, deep)
    assert report.rows_read == 3 and report.rows_written == 2
    assert scan(segments_of(deep, report), "bad", ["n"]) == [(1,), (3,)]


@pytest.mark.parametrize("granularity", ["all", "none", "second", "hour", "day", "week", "month", "PT15M", "PT7M",
                                         {"type": "period", "period": "P1D", "origin": "2000-01-01T05:00:00Z"},
                                         {"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"}])
def test_chunk_column_agrees_with_chunk_starts(spark, granularity):  # noqa: F811
    from common.types.granularity import Granularity
    from services.ingestion.partitioning import chunk_starts
    from services.ingestion.spark_job import chunk_column

    gran = Granularity.parse(granularity)
    micros = [None, 0, -1, -500, -1000, -1001, 999, 1000, 86_399_999_999, -86_400_000_001, 1_442_016_000_000_123,
              -30_000_000_000_000_001, 4_102_444_800_000_000]
    df = spark.createDataFrame([(m,) for m in micros], "m BIGINT").selectExpr("timestamp_micros(m) AS __time")
    got = [r[0] for r in df.select(chunk_column(gran)).collect()]
    want = chunk_starts(pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")), gran).to_pylist()
    assert got == want


def test_each_segment_gets_a_builder_task_of_its_own(spark):  # noqa: F811
    from pyspark.sql import functions as F

    n = 13
    df = spark.range(0, 5000).select((F.col("id") % n).cast("int").alias("part"))
    placed = df.repartitionById(n, F.col("part")).select("part", F.spark_partition_id().alias("pid")).distinct()
    assert sorted((r["part"], r["pid"]) for r in placed.collect()) == [(i, i) for i in range(n)]


def test_selects_that_are_cached_between_passes(spark):  # noqa: F811
    from services.ingestion.spark_job import _needs_cache

    spark.range(10).selectExpr("id", "timestamp_seconds(id) AS t").createOrReplaceTempView("cache_probe")
    cheap = ["SELECT t AS __time, id FROM cache_probe WHERE id > 2", "SELECT t AS __time FROM cache_probe"]
    costly = ["SELECT max(t) AS __time, id % 2 FROM cache_probe GROUP BY 2", "SELECT current_timestamp() AS __time",
              "SELECT t AS __time, rand() AS r FROM cache_probe", "SELECT DISTINCT t AS __time FROM cache_probe"]
    assert [_needs_cache(spark.sql(q)) for q in cheap + costly] == [False] * len(cheap) + [True] * len(costly)
