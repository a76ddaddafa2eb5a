"""The text scan (services/ingestion/text_scan.py) on the shared local[2] session: a SELECT that
picks columns of one JSON/CSV/TSV source is read, timed, counted and cut by the reading tasks.
Every test runs the same statement through the general path too (SET textScan = false) and
requires the same rows in the same segments, the same counts and the same parse exceptions."""

from __future__ import annotations

import functools
import json
import os

import pytest

from common.query import execute
from common.segment import Segment
from services.deep_storage import LocalDeepStorage
from services.ingestion import text_scan, text_splits
from services.ingestion.ingestion_report import IngestionFailed, TooManyParseExceptions
from services.ingestion.spark_job import IngestionJob, _Run, run_ingestion
from common.ingest.statement import parse_ingestion
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_spark_job import FakePublisher

ALL_TIME = "1000-01-01/3000-01-01"
DAY_MS = 86_400_000
T0 = 1_600_000_000_000 // DAY_MS * DAY_MS


def _documents(n: int) -> list[str]:
    """JSON lines over three days (the third holds few rows), mean values in the JSON column."""
    lines = []
    for i in range(n):
        day = 0 if i % 5 < 2 else 1 if i % 5 < 4 else 2
        ts = T0 + day * DAY_MS + (i * 7919) % DAY_MS
        doc = {"a": {"b": i % 7, "c": f"v{i % 13}"}, "x": [i, i / 4], "m": "t" if i % 3 else i,
               "u": "é\u2603", "big": 10**20 if i == 5 else 1, "neg": -0.0, "n": None}
        row = {"ts": ts, "doc": doc, "name": f"n{i % 11}", "v": i * 0.5, "k": i}
        if i == 3:
            row["doc"] = None
        lines.append(json.dumps(row, ensure_ascii=False))
    return lines


def _write(tmp_path, lines, name="events.json") -> str:
    path = str(tmp_path / name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _sql(path, fmt="json", prefix="", extend="ts BIGINT, doc TYPE('COMPLEX<json>'), name VARCHAR, v DOUBLE, k BIGINT",
         select="MILLIS_TO_TIMESTAMP(ts) AS __time, doc, name AS who, v, k", extra="", clustered=""):
    return (f"{prefix}INSERT INTO events SELECT {select} FROM TABLE(localfiles(files => ARRAY['{path}'], "
            f"format => '{fmt}'{extra})) EXTEND ({extend}) PARTITIONED BY DAY {clustered}")


def _run(spark, sql, root, context=None):  # noqa: F811
    deep = LocalDeepStorage(root)
    job = IngestionJob("text-scan", parse_ingestion(sql), context=context or {})
    report = run_ingestion(spark, job, deep.root, "", FakePublisher())
    return report, deep


def _contents(report, deep, columns):
    """(interval, rows sorted) per segment, segments in interval/partition order."""
    out = []
    for s in sorted(report.segments, key=lambda s: (s.id.interval.start, s.id.partition)):
        seg = Segment.open(os.path.join(deep.root, *s.location.split("/")))
        table = execute({"queryType": "scan", "dataSource": "events", "intervals": [ALL_TIME],
                         "columns": list(columns)}, [seg]).table
        out.append((str(s.id.interval), sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)))
    return out


def _both(spark, sql, tmp_path, columns, context=None):  # noqa: F811
    """The report and segment contents of the text scan and of the general path."""
    context = context or {}
    scans = []
    read_text = text_scan.read_text

    def spy(*args, **kwargs):
        scans.append(args[1])
        return read_text(*args, **kwargs)

    text_scan.read_text = spy
    try:
        fast, fast_deep = _run(spark, sql, str(tmp_path / "fast"), context)
    finally:
        text_scan.read_text = read_text
    assert len(scans) == 1, "the statement did not take the text scan"
    slow, slow_deep = _run(spark, sql, str(tmp_path / "slow"), {**context, "textScan": False})
    return (fast, _contents(fast, fast_deep, columns)), (slow, _contents(slow, slow_deep, columns))


def _by_day(contents):
    days: dict = {}
    for iv, rows in contents:
        days.setdefault(iv, []).extend(rows)
    return {iv: sorted(rows, key=repr) for iv, rows in days.items()}


def _same_reports(fast, slow):
    assert fast.status == slow.status == "SUCCESS"
    for key in ("rows_read", "rows_written", "parse_exceptions", "rows_filtered"):
        assert getattr(fast, key) == getattr(slow, key), key
    assert fast.parse_exception_samples == slow.parse_exception_samples


def test_the_scan_is_planned_only_for_plain_picks(spark, tmp_path):  # noqa: F811
    path = _write(tmp_path, _documents(3))
    planned = {}
    for name, sql in {
        "picks": _sql(path),
        "time column": _sql(path, extend="ts TIMESTAMP, doc TYPE('COMPLEX<json>')", select="ts AS __time, doc"),
        "expression": _sql(path, select="MILLIS_TO_TIMESTAMP(ts) AS __time, UPPER(name) AS who"),
        "where": _sql(path, select="MILLIS_TO_TIMESTAMP(ts) AS __time, doc") .replace(
            "PARTITIONED BY", "WHERE k > 1 PARTITIONED BY"),
        "millis not time": _sql(path, select="MILLIS_TO_TIMESTAMP(ts) AS __time, MILLIS_TO_TIMESTAMP(k) AS t2"),
        "time parse": _sql(path, extend="ts VARCHAR", select="TIME_PARSE(ts) AS __time"),
    }.items():
        run = _Run(spark, IngestionJob("plan", parse_ingestion(sql)), str(tmp_path / "deep"), "", FakePublisher(),
                   None, None)
        try:
            planned[name] = run.plan_text() is not None
        finally:
            run.release()
    assert planned == {"picks": True, "time column": True, "expression": False, "where": False,
                       "millis not time": False, "time parse": False}


def test_json_column_several_days_and_split_chunks_match_the_general_path(spark, tmp_path):  # noqa: F811
    lines = _documents(3000)
    lines[10] = '{"ts": 1, "doc": {"a": '  # malformed
    lines[20] = "[1, 2]"  # not an object
    lines[30] = ""  # blank
    lines[40] = '{"ts": "soon", "doc": {}}'  # a LONG that is not one
    sql = _sql(_write(tmp_path, lines), prefix="SET maxParseExceptions = 5;\n")
    (fast, got), (slow, want) = _both(spark, sql, tmp_path, ["__time", "doc", "who", "v", "k"],
                                      {"rowsPerSegment": 500})
    _same_reports(fast, slow)
    assert fast.parse_exceptions == 3 and [s.line for s in fast.parse_exception_samples] == [11, 21, 41]
    assert len(fast.segments) == len(slow.segments) == 8  # 1200, 1200 and 600 rows: 3 + 3 + 2 segments
    # Range boundaries come from a random sample of each day's keys (another one on each path), so
    # the rows of a day may split differently between its segments; the days hold the same rows.
    assert _by_day(got) == _by_day(want) and all(rows for _, rows in got)
    assert sorted(r for _, rows in got for r in rows) == sorted(r for _, rows in want for r in rows)
    assert sum(len(rows) for _, rows in got) == fast.rows_written == 2997 - 1


def test_ranges_of_a_big_file_and_clustered_keys(spark, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(text_splits, "text_ranges", functools.partial(text_splits.text_ranges, min_range_bytes=4096))
    lines = _documents(2000)
    lines[1500] = "{oops"
    sql = _sql(_write(tmp_path, lines), prefix="SET maxParseExceptions = 1;\n", clustered="CLUSTERED BY who")
    (fast, got), (slow, want) = _both(spark, sql, tmp_path, ["__time", "doc", "who", "k"], {"rowsPerSegment": 300})
    _same_reports(fast, slow)
    assert [s.line for s in fast.parse_exception_samples] == [1501]
    assert sorted(r for _, rows in got for r in rows) == sorted(r for _, rows in want for r in rows)
    assert _by_day(got) == _by_day(want) and [iv for iv, _ in got] == [iv for iv, _ in want]
    for (iv, rows), (next_iv, next_rows) in zip(got, got[1:]):  # CLUSTERED BY: names in ranges
        if iv == next_iv:
            assert rows and max(r[2] for r in rows) <= min(r[2] for r in next_rows)


def test_too_many_parse_exceptions_name_file_and_line(spark, tmp_path):  # noqa: F811
    lines = _documents(50)
    lines[7] = "not json"
    lines[9] = '{"ts": 1, "k": "x"}'
    path = _write(tmp_path, lines)
    messages = []
    for context in ({}, {"textScan": False}):
        with pytest.raises(TooManyParseExceptions) as err:
            _run(spark, _sql(path), str(tmp_path / f"deep{len(messages)}"), context)
        messages.append(str(err.value))
        assert err.value.report.parse_exceptions == 2
    assert messages[0] == messages[1]
    assert f"{path}, line 8: invalid JSON" in messages[0] and "maxParseExceptions=0" in messages[0]


def test_null_time_fails_as_on_the_general_path(spark, tmp_path):  # noqa: F811
    lines = _documents(20)
    lines[4] = json.dumps({"doc": {"a": 1}, "k": 4})
    path = _write(tmp_path, lines)
    messages = []
    for context in ({}, {"textScan": False}):
        with pytest.raises(IngestionFailed) as err:
            _run(spark, _sql(path), str(tmp_path / f"deep{len(messages)}"), context)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "1 row(s) have a null __time" in messages[0]


def test_csv_and_tsv_with_a_time_column(spark, tmp_path):  # noqa: F811
    rows = [f"2020-01-0{1 + i % 3}T0{i % 10}:00:00Z,p{i % 4},{i},\"{{\"\"a\"\": {i}}}\"" for i in range(40)]
    rows[5] = "2020-01-01T00:00:00Z,p1,notanumber,{}"
    csv_path = _write(tmp_path, ["t,page,n,j", *rows], "x.csv")
    sql = _sql(csv_path, fmt="csv", prefix="SET maxParseExceptions = 1;\n",
               extend="t TIMESTAMP, page VARCHAR, n BIGINT, j TYPE('COMPLEX<json>')", select="t AS __time, page, n, j",
               extra=", findColumnsFromHeader => true")
    (fast, got), (slow, want) = _both(spark, sql, tmp_path / "csv", ["__time", "page", "n", "j"])
    _same_reports(fast, slow)
    assert fast.parse_exceptions == 1 and got == want and len(got) == 3
    tsv = [f"2020-01-0{1 + i % 2}T00:00:0{i % 10}Z\tp{i}\t{i}" for i in range(30)]
    tsv_path = _write(tmp_path, tsv, "x.tsv")
    sql = _sql(tsv_path, fmt="tsv", extend="t TIMESTAMP, page VARCHAR, n BIGINT", select="t AS __time, page, n")
    (fast, got), (slow, want) = _both(spark, sql, tmp_path / "tsv", ["__time", "page", "n"])
    _same_reports(fast, slow)
    assert got == want and sum(len(r) for _, r in got) == 30
