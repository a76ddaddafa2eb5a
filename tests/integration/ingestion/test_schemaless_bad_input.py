"""Bad input for schemaless ingestion: every case ends clearly, nothing is lost or silently dropped."""

from __future__ import annotations


import json

import pyarrow as pa
import pytest

from common.errors import ValidationError
from services.ingestion.ingestion_report import IngestionFailed, TooManyParseExceptions
from services.ingestion.schema_discovery import _json_scan
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_schemaless_spark import ingest, stored_types
from tests.integration.ingestion.test_spark_job import deep, scan  # noqa: F401


def _sql(path_clause: str, select: str = "*") -> str:
    return f"""INSERT INTO bad SELECT TIME_PARSE(t) AS __time, {select}
        FROM TABLE(localfiles({path_clause}, format => 'json')) PARTITIONED BY DAY"""


def test_empty_files_next_to_real_ones_and_only_empty_files(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "a_empty.json").write_text("")
    (tmp_path / "b.json").write_text('{"t": "2024-01-01", "x": 1}\n\n{"t": "2024-01-01", "x": 2}\n')
    report, segments = ingest(spark, _sql(f"baseDir => '{tmp_path}', filter => '*.json'"), deep)
    assert report.rows_written == 2 and stored_types(segments)["x"] == "LONG"
    only = tmp_path / "only"
    only.mkdir()
    (only / "e.json").write_text("")
    with pytest.raises(IngestionFailed, match=r"no columns were found .*\(every file is empty"):
        ingest(spark, _sql(f"baseDir => '{only}', filter => '*.json'"), deep)


def test_a_column_of_only_nulls_is_a_string_column_of_nulls(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "n.json").write_text('{"t": "2024-01-01", "n": null, "x": 1}\n{"t": "2024-01-01", "x": 2}\n')
    report, segments = ingest(spark, _sql(f"files => ARRAY['{tmp_path}/n.json']"), deep)
    assert stored_types(segments)["n"] == "STRING"
    assert scan(segments, "bad", ["x", "n"]) == [(1, None), (2, None)]
    assert {d["column"]: d["rule"] for d in report.schema_decisions}["n"] == "only nulls -> STRING"


def test_object_in_one_file_string_in_another_keeps_both_as_json(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "o.json").write_text('{"t": "2024-01-01", "v": {"k": [1, 2]}}\n')
    (tmp_path / "s.json").write_text('{"t": "2024-01-01", "v": "plain"}\n')
    report, segments = ingest(spark, _sql(f"baseDir => '{tmp_path}', filter => '*.json'"), deep)
    assert stored_types(segments)["v"] == "COMPLEX<json>" and report.rows_written == 2
    docs = sorted(json.dumps(json.loads(v) if isinstance(v, str) else v) for (v,) in scan(segments, "bad", ["v"]))
    assert docs == sorted([json.dumps({"k": [1, 2]}), json.dumps("plain")])


def test_ten_thousand_distinct_keys_stop_with_the_fix(spark, deep, tmp_path):  # noqa: F811
    with open(tmp_path / "wide.json", "w") as f:
        for i in range(10_000):
            f.write(json.dumps({"t": "2024-01-01", f"k{i}": i}) + "\n")
    with pytest.raises(IngestionFailed, match=r"10001 distinct top-level keys .* maxDiscoveredColumns = 1000"):
        ingest(spark, _sql(f"files => ARRAY['{tmp_path}/wide.json']"), deep)


def test_keys_differing_only_in_case_are_two_columns(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "c.json").write_text('{"t": "2024-01-01", "Name": "upper", "name": "lower"}\n'
                                     '{"t": "2024-01-01", "name": "only lower"}\n')
    _, segments = ingest(spark, _sql(f"files => ARRAY['{tmp_path}/c.json']"), deep)
    assert scan(segments, "bad", ["Name", "name"]) == [("upper", "lower"), (None, "only lower")]


def test_top_level_json_array_of_objects_is_rows_and_other_arrays_are_parse_exceptions(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "arr.json").write_text('[{"t": "2024-01-01", "x": 1}, {"t": "2024-01-01", "x": 2}]\n[1, 2]\n')
    with pytest.raises(TooManyParseExceptions, match=r"arr.json, line 2: expected a JSON object, got a list"):
        ingest(spark, _sql(f"files => ARRAY['{tmp_path}/arr.json']"), deep)
    report, segments = ingest(spark, _sql(f"files => ARRAY['{tmp_path}/arr.json']"), deep, maxParseExceptions=1)
    assert scan(segments, "bad", ["x"]) == [(1,), (2,)] and report.parse_exceptions == 1


def test_mixed_line_endings_lose_no_row(spark, deep, tmp_path):  # noqa: F811
    (tmp_path / "m.json").write_bytes(b'{"t": "2024-01-01", "x": 1}\r\n{"t": "2024-01-01", "x": 2}\n'
                                      b'{"t": "2024-01-01", "x": 3.5}\r{"t": "2024-01-01", "x": 4}')
    report, segments = ingest(spark, _sql(f"files => ARRAY['{tmp_path}/m.json']"), deep)
    assert stored_types(segments)["x"] == "DOUBLE"
    assert scan(segments, "bad", ["x"]) == [(1.0,), (2.0,), (3.5,), (4.0,)] and report.parse_exceptions == 0


def test_discovery_reads_names_past_a_byte_order_mark():
    data = '\ufeff{"t": "2024-01-01", "a": 1}\n{"t": "2024-01-02", "b": "x"}\n'
    listing = pa.RecordBatch.from_pylist([{"name": "bom.json", "path": None, "data": data, "spark_file": None,
                                           "start": None, "end": None, "first_line": 1}])
    [out] = list(_json_scan([listing]))
    names = [c["name"] for c in json.loads(out.column(0)[0].as_py())]
    assert names == ["t", "a", "b"]


def test_discovery_passes_over_lines_nested_past_the_stack():
    # The reader makes such a line its parse exception; discovery must not fail the statement on it.
    deep = '{"t": "2024-01-01", "d": ' + "[" * 5000 + "]" * 5000 + "}"
    data = f'{deep}\n{{"t": "2024-01-02", "b": "x", "s": "\\ud800"}}\n'
    listing = pa.RecordBatch.from_pylist([{"name": "deep.json", "path": None, "data": data, "spark_file": None,
                                           "start": None, "end": None, "first_line": 1}])
    [out] = list(_json_scan([listing]))
    assert [c["name"] for c in json.loads(out.column(0)[0].as_py())] == ["t", "b", "s"]


def test_bad_schema_conflicts_setting_is_named():
    from common.ingest.discovered_schema import conflict_mode

    with pytest.raises(ValidationError, match="schemaConflicts"):
        conflict_mode({"schemaConflicts": "strict"})
    assert conflict_mode({}) == "widen" and conflict_mode({"schemaConflicts": "FAIL"}) == "fail"

