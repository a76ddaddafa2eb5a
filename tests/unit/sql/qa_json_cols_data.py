"""Druid's qaJsonCols test table (``test_json_cols``) as a strata segment, shared by the qaJsonCols
golden test modules.

The data is /work/shared/data/qaJsonCols/funcs.json.gz (4 rows: two with scalars, empty
containers and the deep objects c1/c2 of ``a_*`` keys, two whose scalars and containers are null
and whose c1/c2 hold ``b_*`` keys), ingested as Druid's ``funcs_and_sql`` spec ingests it:
``auto`` columns (schema discovery), no rollup, a ``cnt`` count metric."""

from __future__ import annotations

import os

from common.query import execute
from common.query.engine import union_schema
from common.sql import execute_sql
from tests.unit.sql.druid_test_files import DATA, discovered_table, segment_of
from tests.unit.sql.fake_catalog import FakeCatalog

NAME = "qaJsonCols/funcs.json.gz"
HAVE_DATA = os.path.isfile(os.path.join(DATA, NAME))


def qa_json_cols_runner(base):
    """A function running SQL over test_json_cols (its segment written under ``base``)."""
    table, json_types = discovered_table(NAME)
    segments = [segment_of(table, json_types, "test_json_cols", "2022-01-01/2022-03-01",
                           str(base / "test_json_cols.sseg"))]
    catalog = FakeCatalog({"test_json_cols": union_schema(segments)})
    return lambda text: execute_sql(text, catalog, lambda q: execute(q, segments).table)


def count_case(test_id: str, where: str, n: int) -> tuple:
    """Druid's common case shape: the rows of test_json_cols matching ``where`` are ``n``."""
    return test_id, f"SELECT count(*) c FROM test_json_cols WHERE {where}", [[str(n)]]


__all__ = ["HAVE_DATA", "count_case", "qa_json_cols_runner"]
