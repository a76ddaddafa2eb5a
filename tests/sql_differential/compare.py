"""Results reduced to comparable rows, and the comparison itself.

Both sides become tuples of plain Python values: timestamps become UTC epoch milliseconds (a naive
DuckDB timestamp is read as UTC), DECIMAL becomes float. Column kinds (int, float, string,
timestamp, bool) are compared too, so a DOUBLE where BIGINT is due is a failure even when the
numbers agree.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa

from tests.harness.row_matching import same_multiset

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def plain(value):
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return (value - EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return plain(dt.datetime(value.year, value.month, value.day))
    if isinstance(value, decimal.Decimal):
        return float(value)
    if hasattr(value, "item") and not isinstance(value, (list, tuple, str, bytes)):
        return value.item()
    return value


def arrow_kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return arrow_kind(t.value_type)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "timestamp"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def duck_kind(type_name: str) -> str:
    name = str(type_name).upper()
    if name == "BOOLEAN":
        return "bool"
    if name in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                "UBIGINT", "UHUGEINT"):
        return "int"
    if name in ("FLOAT", "DOUBLE") or name.startswith("DECIMAL"):
        return "float"
    if name == "VARCHAR":
        return "string"
    if name.startswith("TIMESTAMP") or name == "DATE":
        return "timestamp"
    if name == '"NULL"' or name == "NULL":
        return "null"
    return name


def arrow_rows(table: pa.Table) -> tuple[list[str], list[tuple]]:
    cols = []
    kinds = []
    for col in table.columns:
        kinds.append(arrow_kind(col.type))
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        cols.append(col.to_pylist())
    rows = [tuple(plain(v) for v in row) for row in zip(*cols)] if cols else []
    return kinds, rows


def duck_rows(con, sql: str, params=None) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql, params or [])
    kinds = [duck_kind(d[1]) for d in cur.description]
    return kinds, [tuple(plain(v) for v in row) for row in cur.fetchall()]


def expected_rows(expected: list, kinds: list[str]) -> list[tuple]:
    """JSON rows; a string in a timestamp column is an ISO-8601 instant."""
    from common.types.interval import parse_instant

    out = []
    for row in expected:
        out.append(tuple(parse_instant(v) if k == "timestamp" and isinstance(v, str) else v
                         for v, k in zip(row, kinds)))
    return out


def _close(a, b, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
            return math.isnan(a) and math.isnan(b)
        if isinstance(a, int) and isinstance(b, int) and rel < 1e-6:
            return a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


def _sort_key(row: tuple):
    out = []
    for v in row:
        if v is None:
            out.append((1, "", 0.0, ""))
        elif isinstance(v, bool):
            out.append((0, "bool", float(v), ""))
        elif isinstance(v, (int, float)):
            f = float(v)
            out.append((0, "num", round(f, 6) if math.isfinite(f) else 0.0, "" if math.isfinite(f) else str(f)))
        else:
            out.append((0, type(v).__name__, 0.0, str(v)))
    return tuple(out)


def assert_same(actual: list[tuple], expected: list[tuple], *, ordered: bool, rel: float = 1e-9) -> None:
    if not ordered:
        actual, expected = sorted(actual, key=_sort_key), sorted(expected, key=_sort_key)
        if len(actual) == len(expected) and len(actual) <= 5000 and same_multiset(actual, expected, lambda x, y: _close(x, y, rel)):
            return
    assert len(actual) == len(expected), (
        f"strata returned {len(actual)} rows, expected {len(expected)}\n"
        f"strata[:8]   = {actual[:8]}\nexpected[:8] = {expected[:8]}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert len(a) == len(e), f"row {i}: {len(a)} columns != {len(e)}"
        if not all(_close(x, y, rel) for x, y in zip(a, e)):
            lo = max(0, i - 2)
            raise AssertionError(f"row {i} differs{' (unordered: rows sorted)' if not ordered else ''}:\n"
                                 f"  strata   {a}\n  expected {e}\n"
                                 f"strata[{lo}:{i + 3}]   = {actual[lo:i + 3]}\n"
                                 f"expected[{lo}:{i + 3}] = {expected[lo:i + 3]}")
