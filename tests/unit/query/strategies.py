"""Hypothesis strategies shared by the property tests: small random tables split into two day
segments, random native filter trees, and their DuckDB SQL translations."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import pyarrow as pa
from hypothesis import strategies as st

from common.segment import Segment, SegmentId, build_segment
from common.types import Interval, parse_instant

T0 = parse_instant("2020-01-01")
DAY = 86_400_000
INTERVAL = "2020-01-01/2020-01-03"
ALPHABET = "ab%_"  # LIKE metacharacters inside the data make pattern matching honest
# -0.0 next to 0.0 (one value in SQL, two bit patterns), NaN and the infinities: each has
# broken grouping or IN lists that compare by hash or by bits.
DOUBLES = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.25, float("nan"), float("inf"), float("-inf")]
# Filter values for integer columns include fractions, which must never be truncated to match.
FRACTIONS = [-2.5, -0.5, 0.5, 2.5, 1.0, -0.0]

strings = st.one_of(st.none(), st.text(alphabet=ALPHABET, max_size=3))
ints = st.one_of(st.none(), st.integers(-3, 3))
doubles = st.one_of(st.none(), st.sampled_from(DOUBLES))


@st.composite
def tables(draw, max_rows: int = 40) -> pa.Table:
    n = draw(st.integers(1, max_rows))  # with no rows there is no segment, so no schema to query
    # Unique times so 'first'/'last' have one right answer; spread over two days (two segments).
    offsets = draw(st.lists(st.integers(0, 2 * DAY - 1), min_size=n, max_size=n, unique=True))
    return pa.table({
        "__time": pa.array([T0 + o for o in offsets], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "rid": pa.array(range(n), pa.int64()),
        "s": pa.array(draw(st.lists(strings, min_size=n, max_size=n)), pa.string()),
        "s2": pa.array(draw(st.lists(strings, min_size=n, max_size=n)), pa.string()),
        "i": pa.array(draw(st.lists(ints, min_size=n, max_size=n)), pa.int64()),
        "d": pa.array(draw(st.lists(doubles, min_size=n, max_size=n)), pa.float64()),
    })


@dataclass
class Case:
    table: pa.Table  # as DuckDB sees it: s2 is null wherever a segment lacks the column
    segments: list[Segment]
    tmp: tempfile.TemporaryDirectory

    def close(self) -> None:
        for s in self.segments:
            s.close()
        self.tmp.cleanup()


def build_case(table: pa.Table, drop_s2_on_day2: bool, sort_by_s: bool) -> Case:
    tmp = tempfile.TemporaryDirectory()
    times = table.column("__time").cast(pa.int64()).to_numpy()
    segments = []
    masks = [(times >= T0 + d * DAY) & (times < T0 + (d + 1) * DAY) for d in range(2)]
    # Drop s2 from day 2 only when day 1 has it: a column no segment has is an unknown column.
    drop_s2_on_day2 = drop_s2_on_day2 and bool(masks[0].any())
    for d in range(2):
        iv = Interval(T0 + d * DAY, T0 + (d + 1) * DAY)
        part = table.filter(pa.array(masks[d]))
        if part.num_rows == 0:
            continue  # a day without rows simply has no segment
        if d == 1 and drop_s2_on_day2:
            part = part.drop_columns(["s2"])
        path = os.path.join(tmp.name, f"d{d}.sseg")
        build_segment(part, path, SegmentId("t", iv, "v1", 0), ["s"] if sort_by_s else ())
        segments.append(Segment.open(path))
    if drop_s2_on_day2:
        s2 = [None if masks[1][k] else v for k, v in enumerate(table.column("s2").to_pylist())]
        table = table.set_column(table.schema.get_field_index("s2"), "s2", pa.array(s2, pa.string()))
    return Case(table, segments, tmp)


# ---- filters ---------------------------------------------------------------------------------------
def _sql_literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"  # nan, inf and -0.0 keep their meaning in DuckDB
    return repr(value)


@dataclass(frozen=True)
class F:
    """A native filter and the SQL condition with the same meaning under three-valued logic."""

    native: dict
    sql: str


def _value_for(column: str):
    return {"s": st.text(alphabet=ALPHABET, max_size=3), "s2": st.text(alphabet=ALPHABET, max_size=3),
            "i": st.one_of(st.integers(-3, 3), st.sampled_from(FRACTIONS)),
            "d": st.one_of(st.sampled_from(DOUBLES), st.integers(-3, 3))}[column]


@st.composite
def equals_filters(draw) -> F:
    col = draw(st.sampled_from(["s", "s2", "i", "d"]))
    v = draw(_value_for(col))
    native = {"type": "equals", "column": col, "matchValue": v}
    if col == "d":
        native["matchValueType"] = "DOUBLE"
    return F(native, f"{col} = {_sql_literal(v)}")


@st.composite
def in_filters(draw) -> F:
    col = draw(st.sampled_from(["s", "s2", "i", "d"]))
    values = draw(st.lists(_value_for(col), min_size=1, max_size=3))
    # A null in the list means "or IS NULL" (Druid's legacy in-filter), for every column type.
    with_null = draw(st.booleans())
    sql = f"{col} IN ({', '.join(_sql_literal(v) for v in values)})"
    if with_null:
        sql = f"({sql} OR {col} IS NULL)"
    return F({"type": "in", "dimension": col, "values": values + ([None] if with_null else [])}, sql)


@st.composite
def range_filters(draw) -> F:
    col = draw(st.sampled_from(["s", "s2", "i", "d"]))
    lower = draw(st.one_of(st.none(), _value_for(col)))
    upper = draw(st.one_of(st.none(), _value_for(col)))
    lo_open, up_open = draw(st.booleans()), draw(st.booleans())
    native = {"type": "range", "column": col, "lowerOpen": lo_open, "upperOpen": up_open}
    if col in ("i", "d"):
        native["matchValueType"] = "LONG" if col == "i" else "DOUBLE"
    parts = []
    if lower is not None:
        native["lower"] = lower
        parts.append(f"{col} {'>' if lo_open else '>='} {_sql_literal(lower)}")
    if upper is not None:
        native["upper"] = upper
        parts.append(f"{col} {'<' if up_open else '<='} {_sql_literal(upper)}")
    # Without bounds a range still compares, so null rows are unknown rather than false.
    return F(native, " AND ".join(parts) if parts else f"{col} = {col}")


@st.composite
def like_filters(draw) -> F:
    col = draw(st.sampled_from(["s", "s2"]))
    pattern = draw(st.text(alphabet=ALPHABET, max_size=4))
    return F({"type": "like", "dimension": col, "pattern": pattern}, f"{col} LIKE {_sql_literal(pattern)}")


@st.composite
def null_filters(draw) -> F:
    col = draw(st.sampled_from(["s", "s2", "i", "d"]))
    return F({"type": "null", "column": col}, f"{col} IS NULL")


leaf_filters = st.one_of(equals_filters(), in_filters(), range_filters(), like_filters(), null_filters())


def _combine(children):
    return st.one_of(
        children.map(lambda f: F({"type": "not", "field": f.native}, f"NOT ({f.sql})")),
        st.lists(children, min_size=1, max_size=3).map(
            lambda fs: F({"type": "and", "fields": [f.native for f in fs]}, " AND ".join(f"({f.sql})" for f in fs))),
        st.lists(children, min_size=1, max_size=3).map(
            lambda fs: F({"type": "or", "fields": [f.native for f in fs]}, " OR ".join(f"({f.sql})" for f in fs))),
    )


filters = st.recursive(leaf_filters, _combine, max_leaves=6)
