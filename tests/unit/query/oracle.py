"""Helpers that compare engine results with DuckDB results row by row.

Both sides are reduced to tuples of plain Python values: timestamps become epoch millis, floats
compare with a relative tolerance (sums run in a different order), NaN equals NaN.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa

from common.query import execute
from tests.harness.row_matching import same_multiset

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def plain(value):
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return (value - EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, decimal.Decimal):  # DuckDB types literals like 2.5 as DECIMAL
        return float(value)
    if hasattr(value, "item") and not isinstance(value, (list, tuple)):  # numpy scalars
        return value.item()
    return value


def engine_rows(table: pa.Table, columns: list[str] | None = None) -> list[tuple]:
    columns = columns or table.column_names
    cols = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols.append(col.to_pylist())
    return [tuple(plain(v) for v in row) for row in zip(*cols)]


def duck_rows(con, sql: str, params=None) -> list[tuple]:
    return [tuple(plain(v) for v in row) for row in con.execute(sql, params or []).fetchall()]


def _close(a, b, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel)
    return a == b and type(a) is type(b)


def _sort_value(v):
    # NaN compares false with everything, so a NaN left in the key makes sorted() depend on
    # input order; it sorts as its own bucket after the numbers instead.
    if isinstance(v, float):
        return (math.isnan(v), 0.0 if math.isnan(v) else round(v, 6))
    return v


def _row_sort_key(row: tuple) -> tuple:
    return tuple((v is not None, str(type(v)), _sort_value(v)) for v in row)


def assert_rows_equal(actual: list[tuple], expected: list[tuple], *, ordered: bool = True, rel: float = 1e-9):
    if not ordered:
        actual, expected = sorted(actual, key=_row_sort_key), sorted(expected, key=_row_sort_key)
        if len(actual) == len(expected) and len(actual) <= 5000 and same_multiset(actual, expected, lambda x, y: _close(x, y, rel)):
            return
    assert len(actual) == len(expected), f"{len(actual)} rows != {len(expected)} rows\n" \
        f"actual[:5]={actual[:5]}\nexpected[:5]={expected[:5]}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert len(a) == len(e) and all(_close(x, y, rel) for x, y in zip(a, e)), \
            f"row {i}: {a} != {e}\nactual[{max(0, i - 2)}:{i + 3}]={actual[max(0, i - 2):i + 3]}\n" \
            f"expected[{max(0, i - 2)}:{i + 3}]={expected[max(0, i - 2):i + 3]}"


def run_events(events, query: dict, interval: str = "2020-01-01/2020-01-04"):
    """Execute a query on the events segments with defaults filled in; returns the Result."""
    q = {"dataSource": "events", "intervals": [interval], **query}
    return execute(q, events.segments)


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
