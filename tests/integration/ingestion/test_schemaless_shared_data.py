"""The mixed-type files of the shared data set ingested without a declared schema on the shared
Spark session: discovered types as the rules say, and every column DuckDB's read_json_auto types
the same way holds the same values."""

from __future__ import annotations

import glob
import json
import os

import pytest

from common.types.type_discovery import discover_rows
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_schemaless_spark import DATA, ingest, stored_types
from tests.integration.ingestion.test_spark_job import deep, scan  # noqa: F401
from tests.conftest import duck_connect

FILES = sorted(
    [os.path.join(DATA, n) for n in ("nested-numeric-test-data.json", "nested-types-test-data.json",
                                     "nonstring-mv-string-array.json", "wikipedia-sampled.json",
                                     "wikiticker-2015-09-12-sampled.json.gz")]
    + glob.glob(os.path.join(DATA, "embedded-tests", "*.json")) + glob.glob(os.path.join(DATA, "docs_inline", "*.json")))
_DUCK_KIND = {"LONG": ("BIGINT", "INTEGER", "BOOLEAN", "SMALLINT", "TINYINT", "UBIGINT", "HUGEINT"),
              "DOUBLE": ("DOUBLE", "FLOAT", "BIGINT", "INTEGER"), "STRING": ("VARCHAR",),
              "ARRAY<STRING>": ("VARCHAR[]",), "ARRAY<LONG>": ("BIGINT[]", "BOOLEAN[]", "INTEGER[]"),
              "ARRAY<DOUBLE>": ("DOUBLE[]", "BIGINT[]")}
_CAST = {"LONG": "BIGINT", "DOUBLE": "DOUBLE", "STRING": "VARCHAR", "ARRAY<STRING>": "VARCHAR[]",
         "ARRAY<LONG>": "BIGINT[]", "ARRAY<DOUBLE>": "DOUBLE[]"}


def _rows(path):
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, DATA) for p in FILES])
def test_shared_file_without_a_schema_matches_duckdb(spark, deep, path):  # noqa: F811
    report, segments = ingest(spark, f"""INSERT INTO shared SELECT TIMESTAMP '2000-01-01' AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json')) PARTITIONED BY ALL""", deep)
    expected = {n: t.native_name for n, t in discover_rows(_rows(path)).signature()}
    types = {k: v for k, v in stored_types(segments).items() if k != "__time"}
    assert types == expected
    assert report.rows_written == len(_rows(path)) and report.parse_exceptions == 0
    con = duck_connect()
    try:
        described = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM read_json_auto('{path}')").fetchall()}
        compared = [c for c, t in types.items() if described.get(c) in _DUCK_KIND.get(t, ())]
        json_columns = [c for c, t in types.items() if t == "COMPLEX<json>"]
        assert compared or json_columns, "nothing to compare"
        select = ", ".join(f'CAST("{c}" AS {_CAST[types[c]]})' for c in compared)
        want = sorted((tuple(r) for r in con.execute(f"SELECT {select} FROM read_json_auto('{path}')").fetchall()),
                      key=repr) if compared else []
    finally:
        con.close()
    if compared:
        assert scan(segments, "shared", compared) == want
    # JSON columns: DuckDB reshapes objects into structs, so the documents are compared with the file's
    source = _rows(path)
    for c in json_columns:
        got_docs = sorted(json.dumps(json.loads(v) if isinstance(v, str) else v, sort_keys=True)
                          for (v,) in scan(segments, "shared", [c]))
        assert got_docs == sorted(json.dumps(r.get(c), sort_keys=True) for r in source)
