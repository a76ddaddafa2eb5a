"""Schemaless ingestion on the shared Spark session: discovered types, PARTIAL, *, exclude,
__dynamic rollup and schemaConflicts, read back with strata's engine and compared with DuckDB."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading

import pytest

from common.segment import Segment
from services.ingestion.ingestion_report import IngestionFailed
from services.ingestion.spark_job import IngestionJob, run_ingestion
from common.ingest.statement import parse_ingestion
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_spark_job import FakePublisher, deep, duck_rows, scan  # noqa: F401
from tests.unit.types.test_type_discovery import DRUID_ALL_TYPES, DRUID_TYPES

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason="shared test data not found")


def ingest(spark, sql, deep, **context):  # noqa: F811
    job = IngestionJob("schemaless", parse_ingestion(sql, context))
    report = run_ingestion(spark, job, deep.root, "", FakePublisher())
    segments = [Segment.open(os.path.join(deep.root, *s.location.split("/"))) for s in report.segments]
    return report, segments


def stored_types(segments) -> dict[str, str]:
    out: dict[str, str] = {}
    for seg in segments:
        for col in seg.manifest.columns:
            out.setdefault(col.name, col.type.native_name)
    return out


@pytest.mark.parametrize("name, expected", [("nested-all-types-test-data.json", DRUID_ALL_TYPES),
                                            ("nested-types-test-data.json", DRUID_TYPES)])
def test_no_declared_schema_meets_druids_types(spark, deep, name, expected):  # noqa: F811
    path = os.path.join(DATA, name)
    report, segments = ingest(spark, f"""INSERT INTO t SELECT TIME_PARSE("timestamp") AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
        PARTITIONED BY DAY""", deep)
    types = stored_types(segments)
    assert {k: v for k, v in types.items() if k != "__time"} == expected  # "timestamp" is named, so not in *
    decisions = {d["column"]: d for d in report.to_json()["schemaDecisions"]}
    assert set(decisions) == set(expected) | {"timestamp"}
    assert all(decisions[c]["chosen"] == t for c, t in expected.items())
    # JSON columns are nested columns, literal ones plain
    kinds = {c.name: c.encoding for seg in segments for c in seg.manifest.columns}
    assert all((kinds[c] == "nested") == (t == "COMPLEX<json>") for c, t in expected.items())


def test_values_match_duckdb_read_json_auto(spark, deep):  # noqa: F811
    path = os.path.join(DATA, "wikipedia-sampled.json")
    _, segments = ingest(spark, f"""INSERT INTO w SELECT TIME_PARSE("timestamp") AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json')) PARTITIONED BY DAY""", deep)
    types = stored_types(segments)
    assert types["added"] == "LONG" and types["deltaBucket"] == "DOUBLE" and types["isRobot"] == "LONG"
    assert types["cityName"] == "STRING" and "timestamp" not in types  # named elsewhere, so not in *
    cols = ["page", "added", "deltaBucket", "isRobot", "cityName"]
    got = scan(segments, "w", cols)
    want = duck_rows(f"SELECT page, added, deltaBucket, CAST(isRobot AS BIGINT), cityName "
                     f"FROM read_json_auto('{path}')")
    assert got == want


def test_partial_star_exclude_and_group_by_all_rollup(spark, deep, tmp_path):  # noqa: F811
    rows = [{"ts": f"2024-01-0{1 + i % 2}T00:00:00Z", "bytes": i, "host": f"h{i % 3}", "code": i % 2,
             "comment": "drop me", "tags": {"k": i % 2}} for i in range(30)]
    for i in range(3):
        with open(tmp_path / f"part{i}.json", "w") as f:
            f.write("\n".join(json.dumps(r) for r in rows[i::3]) + "\n")
    report, segments = ingest(spark, f"""INSERT INTO dst SELECT TIME_PARSE(ts) AS __time, SUM(bytes) AS bytes, *
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.json', format => 'json',
                              exclude => ARRAY['comment']))
        PARTIAL (ts VARCHAR, bytes BIGINT) GROUP BY ALL PARTITIONED BY DAY""", deep)
    types = stored_types(segments)
    assert "comment" not in types and "ts" not in types
    assert types["host"] == "STRING" and types["code"] == "LONG" and types["tags"] == "COMPLEX<json>"
    got = scan(segments, "dst", ["__time", "host", "code", "bytes"])
    want = duck_rows(f"SELECT epoch_ms(CAST(ts AS TIMESTAMP)), host, code, SUM(bytes) "
                     f"FROM read_json_auto('{tmp_path}/*.json') GROUP BY ALL")
    assert got == want
    assert report.rows_written == len(want)


def test_schema_conflicts_fail_names_column_types_files_and_fix(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "a.json").write_text('{"t": "2024-01-01", "x": "text"}\n{"t": "2024-01-01", "x": "more"}\n')
    (tmp_path / "b.json").write_text('{"t": "2024-01-01", "x": 1}\n{"t": "2024-01-01", "x": {"k": 1}}\n')
    sql = f"""INSERT INTO c SELECT TIME_PARSE(t) AS __time, x
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.json', format => 'json')) PARTITIONED BY DAY"""
    with pytest.raises(IngestionFailed) as info:
        ingest(spark, sql, deep, schemaConflicts="fail")
    msg = str(info.value)
    assert "column 'x'" in msg and "STRING at " in msg and f"{tmp_path}/a.json, line 1" in msg
    assert f"LONG at {tmp_path}/b.json, line 1" in msg
    assert "PARTIAL (\"x\"" in msg and "schemaConflicts = 'widen'" in msg
    report, segments = ingest(spark, sql, deep)  # widen (the default): anything + object -> JSON
    assert stored_types(segments)["x"] == "COMPLEX<json>"
    assert report.rows_written == 4


def test_csv_header_all_varchar_and_headerless_columns_array(spark, deep, tmp_path):  # noqa: F811
    files = [os.path.join(DATA, "embedded-tests", f"wikipedia_index_data{i}.csv") for i in (1, 2, 3)]
    listed = ", ".join(f"'{f}'" for f in files)
    _, segments = ingest(spark, f"""INSERT INTO csvw SELECT TIME_PARSE("timestamp") AS __time, *
        FROM TABLE(localfiles(files => ARRAY[{listed}], format => 'csv', findColumnsFromHeader => TRUE))
        PARTIAL ("timestamp" VARCHAR, added BIGINT) PARTITIONED BY DAY""", deep)
    types = stored_types(segments)
    assert types["added"] == "LONG" and types["page"] == "STRING" and types["delta"] == "STRING"
    assert scan(segments, "csvw", ["page", "added"]) == duck_rows(
        f"SELECT page, added FROM read_csv_auto([{listed}])")
    raw = tmp_path / "raw.csv"
    raw.write_text("2024-01-01,a,1\n2024-01-01,b,2\n")
    _, segments = ingest(spark, f"""INSERT INTO nohdr SELECT TIME_PARSE(ARRAY_OFFSET("columns", 0)) AS __time, "columns"
        FROM TABLE(localfiles(files => ARRAY['{raw}'], format => 'csv')) PARTITIONED BY DAY""", deep)
    assert stored_types(segments)["columns"] == "ARRAY<STRING>"
    assert scan(segments, "nohdr", ["columns"]) == [(["2024-01-01", "a", "1"],), (["2024-01-01", "b", "2"],)]


def test_parquet_footers_give_names_and_types_merged_across_files(spark, deep, tmp_path):  # noqa: F811
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    pq.write_table(pa.table({"ts": pa.array([t0, t0], pa.timestamp("ms", "UTC")), "n": [1, 2], "s": ["a", "b"],
                             "tags": [["x"], []], "flag": [True, False]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"ts": pa.array([t0], pa.timestamp("ms", "UTC")), "n": [2.5], "s": ["c"],
                             "extra": [7]}), tmp_path / "b.parquet")
    report, segments = ingest(spark, f"""INSERT INTO pq SELECT ts AS __time, *
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.parquet', format => 'parquet'))
        PARTITIONED BY DAY""", deep)
    types = stored_types(segments)
    assert types == {"__time": "TIMESTAMP", "n": "DOUBLE", "s": "STRING", "tags": "ARRAY<STRING>",
                     "flag": "LONG", "extra": "LONG"}
    assert scan(segments, "pq", ["n", "s", "flag", "extra"]) == sorted(
        [(1.0, "a", 1, None), (2.0, "b", 0, None), (2.5, "c", None, 7)], key=repr)
    rules = {d["column"]: d["rule"] for d in report.schema_decisions}
    assert rules["n"] == "LONG+DOUBLE -> DOUBLE"


def test_a_value_the_declared_type_cannot_take_is_a_parse_exception(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "p.json").write_text('{"ts": "2024-01-01", "bytes": 5, "h": "a"}\n'
                                     '{"ts": "2024-01-01", "bytes": "lots", "h": "b"}\n')
    sql = f"""INSERT INTO pe SELECT TIME_PARSE(ts) AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{tmp_path}/p.json'], format => 'json'))
        PARTIAL (ts VARCHAR, bytes BIGINT) PARTITIONED BY DAY"""
    with pytest.raises(IngestionFailed, match=r"p.json, line 2: column 'bytes': cannot parse 'lots' as a LONG"):
        ingest(spark, sql, deep)
    report, segments = ingest(spark, sql, deep, maxParseExceptions=1)
    assert report.parse_exceptions == 1 and scan(segments, "pe", ["bytes", "h"]) == [(5, "a")]


def test_tsv_header_gives_names_all_varchar(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "a.tsv").write_text("ts\thost\tbytes\n2024-01-01\th1\t10\n2024-01-02\th2\t2.5\n")
    (tmp_path / "b.tsv").write_text("ts\tbytes\tregion\n2024-01-01\t7\teu\n")
    report, segments = ingest(spark, f"""INSERT INTO tsvh SELECT TIME_PARSE(ts) AS __time, *
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.tsv', format => 'tsv',
                              findColumnsFromHeader => TRUE)) PARTITIONED BY DAY""", deep)
    # the union of the headers, every column VARCHAR (nothing declared), a missing column is null
    assert stored_types(segments) == {"__time": "TIMESTAMP", "host": "STRING", "bytes": "STRING",
                                      "region": "STRING"}
    assert scan(segments, "tsvh", ["__time", "host", "bytes", "region"]) == duck_rows(
        f"SELECT epoch_ms(CAST(ts AS TIMESTAMP)), host, CAST(bytes AS VARCHAR), region FROM read_csv("
        f"'{tmp_path}/*.tsv', delim='\\t', header=true, union_by_name=true, all_varchar=true)")
    assert report.parse_exceptions == 0 and report.rows_written == 3


def test_a_byte_order_mark_is_skipped_by_discovery_and_the_row_parser(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "bom.json").write_bytes('\ufeff{"id": "first", "t": "2024-01-01", "n": 1}\n'
                                        '{"id": "second", "t": "2024-01-01", "n": 2}\n'.encode("utf-8"))
    report, segments = ingest(spark, f"""INSERT INTO bomj SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{tmp_path}/bom.json'], format => 'json')) PARTITIONED BY DAY""", deep)
    assert [d["column"] for d in report.schema_decisions] == ["id", "t", "n"]
    assert stored_types(segments) == {"__time": "TIMESTAMP", "id": "STRING", "n": "LONG"}
    assert scan(segments, "bomj", ["id", "n"]) == [("first", 1), ("second", 2)] and report.parse_exceptions == 0
    (tmp_path / "bom.csv").write_bytes("\ufeffid,t,n\nfirst,2024-01-01,1\nsecond,2024-01-01,2\n".encode("utf-8"))
    report, segments = ingest(spark, f"""INSERT INTO bomc SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{tmp_path}/bom.csv'], format => 'csv',
                              findColumnsFromHeader => TRUE)) PARTITIONED BY DAY""", deep)
    assert [d["column"] for d in report.schema_decisions] == ["id", "t", "n"]
    assert stored_types(segments) == {"__time": "TIMESTAMP", "id": "STRING", "n": "STRING"}
    assert scan(segments, "bomc", ["id", "n"]) == [("first", "1"), ("second", "2")] and report.parse_exceptions == 0


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_root(tmp_path):
    """A loopback HTTP server over a fresh directory: (directory, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_http_without_extend_discovers_json_and_csv(spark, deep, http_root):  # noqa: F811
    root, url = http_root
    (root / "events.json").write_text('{"t": "2024-01-01", "n": 1, "x": 1.5, "tags": ["a"]}\n'
                                      '{"t": "2024-01-02", "n": 2, "x": 2, "tags": ["b", "c"], "obj": {"k": 1}}\n')
    report, segments = ingest(spark, f"""INSERT INTO hj SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(http(uris => ARRAY['{url}/events.json'], format => 'json')) PARTITIONED BY DAY""", deep)
    assert stored_types(segments) == {"__time": "TIMESTAMP", "n": "LONG", "x": "DOUBLE", "tags": "ARRAY<STRING>",
                                      "obj": "COMPLEX<json>"}
    rows = scan(segments, "hj", ["__time", "n", "x", "tags"])
    assert rows == duck_rows(f"SELECT epoch_ms(CAST(t AS TIMESTAMP)), n, CAST(x AS DOUBLE), tags "
                             f"FROM read_json_auto('{root}/events.json')")
    assert report.rows_written == 2
    (root / "hosts.csv").write_text("t,host,bytes\n2024-01-01,h1,10\n2024-01-01,h2,20\n")
    report, segments = ingest(spark, f"""INSERT INTO hc SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(http(uris => ARRAY['{url}/hosts.csv'], format => 'csv', findColumnsFromHeader => TRUE))
        PARTIAL (bytes BIGINT) PARTITIONED BY DAY""", deep)
    assert stored_types(segments) == {"__time": "TIMESTAMP", "bytes": "LONG", "host": "STRING"}
    assert scan(segments, "hc", ["host", "bytes"]) == duck_rows(
        f"SELECT host, bytes FROM read_csv_auto('{root}/hosts.csv')")
