"""Hostile JSON lines through INSERT on the shared local[2] Spark session, on the text scan (the
compiled reader) and on the general path (row_parser): a lone surrogate escape in a JSON and in a
VARCHAR column and a document nested beyond the limit are each one parse exception with file and
line, counted against maxParseExceptions; a document nested 600 levels, one holding 1e400 and
one holding integers beyond a double's precision ingest, and every other row is queryable."""

from __future__ import annotations

import json
import os

import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment import Segment
from common.sql import execute_sql
from services.ingestion.ingestion_report import TooManyParseExceptions
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_text_scan import T0, _both, _documents, _run, _same_reports, _sql, _write
from tests.unit.sql.fake_catalog import FakeCatalog

DEEP_OK = '{"k":' * 599 + '{"leaf":1}' + "}" * 599


def _lines() -> list[str]:
    lines = _documents(200)
    lines[5] = json.dumps({"ts": T0 + 5, "doc": {"a": "x"}, "name": "n", "k": 5}).replace('"x"', '"\\ud800"')
    lines[6] = json.dumps({"ts": T0 + 6, "doc": {"a": 1}, "name": "y", "k": 6}).replace('"y"', '"ok \\udc00"')
    lines[7] = f'{{"ts": {T0 + 7}, "doc": {"[" * 1000 + "]" * 1000}, "name": "deep", "k": 7}}'
    lines[8] = f'{{"ts": {T0 + 8}, "doc": {DEEP_OK}, "name": "deep-ok", "k": 8}}'
    lines[9] = (f'{{"ts": {T0 + 9}, "doc": {{"inf": 1e400, "big": 12345678901234567, "huge": 1e308, '
                f'"over": 9223372036854775808}}, "name": "numbers", "k": 9}}')
    return lines


def _query(report, deep, sql):
    segments = [Segment.open(os.path.join(deep.root, *s.location.split("/"))) for s in report.segments]
    catalog = FakeCatalog({"events": union_schema(segments)})
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table).to_pylist()


def test_hostile_lines_are_parse_exceptions_and_the_rest_is_queryable(spark, tmp_path):  # noqa: F811
    path = _write(tmp_path, _lines())
    sql = _sql(path, prefix="SET maxParseExceptions = 3;\n")
    (fast, got), (slow, want) = _both(spark, sql, tmp_path, ["__time", "doc", "who", "v", "k"])
    _same_reports(fast, slow)
    assert fast.parse_exceptions == 3
    samples = fast.parse_exception_samples
    assert [s.line for s in samples] == [6, 7, 8]
    assert all(s.source == path for s in samples)
    reasons = [s.reason for s in samples]
    assert "column 'doc'" in reasons[0] and "lone UTF-16 surrogate" in reasons[0]
    assert "column 'name'" in reasons[1] and "lone UTF-16 surrogate" in reasons[1]
    assert "deeper than 900 levels" in reasons[2]
    assert sorted(r for _, rows in got for r in rows) == sorted(r for _, rows in want for r in rows)
    assert fast.rows_written == 197

    for report, deep in ((fast, _deep(tmp_path, "fast")), (slow, _deep(tmp_path, "slow"))):
        rows = _query(report, deep, "SELECT COUNT(*) AS n, COUNT(doc) AS docs FROM events")
        assert rows == [{"n": 197, "docs": 196}]  # _documents' row 3 has a null doc
        [row] = _query(report, deep, "SELECT doc, TO_JSON_STRING(doc) AS s, JSON_QUERY(doc, '$') AS q, "
                                     "JSON_VALUE(doc, '$.big' RETURNING BIGINT) AS big, "
                                     "JSON_VALUE(doc, '$.huge' RETURNING BIGINT) AS huge, "
                                     "JSON_VALUE(doc, '$.over' RETURNING BIGINT) AS over, "
                                     "JSON_VALUE(doc, '$.inf' RETURNING DOUBLE) AS inf FROM events WHERE k = 9")
        assert json.loads(row["doc"]) == json.loads(row["s"]) == json.loads(row["q"]) == {
            "inf": "Infinity", "big": 12345678901234567, "huge": 1e308, "over": 9223372036854775808}
        assert (row["big"], row["huge"], row["over"]) == (12345678901234567, 2**63 - 1, 2**63 - 1)
        assert row["inf"] == float("inf")
        [row] = _query(report, deep, "SELECT TO_JSON_STRING(doc) AS s FROM events WHERE k = 8")
        assert row["s"] == DEEP_OK
        every = _query(report, deep, "SELECT k, TO_JSON_STRING(doc) AS s FROM events")
        assert sorted(r["k"] for r in every) == [k for k in range(200) if k not in (5, 6, 7)]


def _deep(tmp_path, which):
    from services.deep_storage import LocalDeepStorage

    return LocalDeepStorage(str(tmp_path / which))


def test_one_parse_exception_too_many_names_file_and_line(spark, tmp_path):  # noqa: F811
    path = _write(tmp_path, _lines())
    with pytest.raises(TooManyParseExceptions) as err:
        _run(spark, _sql(path, prefix="SET maxParseExceptions = 2;\n"), str(tmp_path / "deep"))
    assert err.value.report.parse_exceptions == 3
    assert f"{path}, line 6: column 'doc'" in str(err.value) and "maxParseExceptions=2" in str(err.value)
