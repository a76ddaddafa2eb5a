"""Filters on a column whose type changed between segments (STRING in older segments, LONG or
DOUBLE in newer ones, or the reverse). The newest segment's type is the column's type and older
segments' values are read cast to it (``ColumnSource``); filters must coerce their values to that
type too. They used to coerce to the stored type while comparing the cast values, and failed with
Arrow errors such as "Array type doesn't match type of values set: int64 vs string".

The oracle is one segment holding the same rows already in the newest type: every query type and
filter must answer the same over the two mixed segments (value path for the older segment, index
path for the newer) as over it (index path for a string column)."""

from __future__ import annotations

import json
import pathlib
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ValidationError
from common.query import execute
from common.query.engine import union_schema
from common.query.row_source import _cast_lenient
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON, ColumnType
from common.types.interval import Interval
from tests.unit.sql.fake_catalog import FakeCatalog

T0 = 1577836800000
DAY = 86_400_000
ALL = "2020-01-01/2020-01-03"

STRINGS = ["5", "abc", None, "7", "5.0", "6"]
LONGS = [5, 6, None, 7, 5, 10]
DOUBLES = [5.0, 6.5, None, 7.0, -0.0, 10.0]
# STRINGS read as a number: what the engine's lenient cast gives ("abc" is no number).
STRINGS_AS_LONG = [5, None, None, 7, 5, 6]
STRINGS_AS_DOUBLE = [5.0, None, None, 7.0, 5.0, 6.0]
S_OLD = ["a", "b", "a", None, "b", "c"]
S_NEW = ["b", "b", "c", "a", None, "a"]

CASES = {
    # old values, new values, both read as the new type
    "string_then_long": (pa.array(STRINGS), pa.array(LONGS, pa.int64()),
                         pa.array(STRINGS_AS_LONG + LONGS, pa.int64())),
    "long_then_string": (pa.array(LONGS, pa.int64()), pa.array(STRINGS),
                         pa.concat_arrays([pa.array(LONGS, pa.int64()).cast(pa.string()), pa.array(STRINGS)])),
    "string_then_double": (pa.array(STRINGS), pa.array(DOUBLES, pa.float64()),
                           pa.array(STRINGS_AS_DOUBLE + DOUBLES, pa.float64())),
    "double_then_string": (pa.array(DOUBLES, pa.float64()), pa.array(STRINGS),
                           pa.concat_arrays([pa.array(DOUBLES, pa.float64()).cast(pa.string()), pa.array(STRINGS)])),
}


def _times(day: int, n: int) -> pa.Array:
    return pa.array([T0 + day * DAY + i * 1000 for i in range(n)], pa.int64())


def _segment(tmp, name, table, interval, version, **kwargs) -> Segment:
    path = str(tmp / f"{name}.sseg")
    build_segment(table, path, SegmentId(name.split("_")[0], Interval.of(interval), version, 0), **kwargs)
    return Segment.open(path)


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    old, new, as_newest = CASES[request.param]
    tmp = tmp_path_factory.mktemp("mixed")
    n = len(old)
    mixed = [
        _segment(tmp, "mixed_old", pa.table({"__time": _times(0, n), "x": old, "s": S_OLD}),
                 "2020-01-01/2020-01-02", "v1"),
        _segment(tmp, "mixed_new", pa.table({"__time": _times(1, n), "x": new, "s": S_NEW}),
                 "2020-01-02/2020-01-03", "v2"),
    ]
    ref = [_segment(tmp, "ref", pa.table({"__time": pa.concat_arrays([_times(0, n), _times(1, n)]), "x": as_newest,
                                          "s": S_OLD + S_NEW}), ALL, "v1")]
    assert union_schema(mixed)["x"] == union_schema(ref)["x"]
    assert mixed[0].schema["x"] != mixed[1].schema["x"]
    yield request.param, mixed, ref
    for seg in mixed + ref:
        seg.close()


def _eq(value, kind=None):
    out = {"type": "equals", "column": "x", "matchValue": value}
    return {**out, "matchValueType": kind} if kind else out


FILTERS = [
    _eq("5", "STRING"), _eq(5, "LONG"), _eq(5.0, "DOUBLE"), _eq("7"), _eq(6.5, "DOUBLE"),
    {"type": "selector", "dimension": "x", "value": "5"},
    {"type": "selector", "dimension": "x", "value": 7},
    {"type": "in", "dimension": "x", "values": ["5", "7"]},
    {"type": "in", "dimension": "x", "values": [5, 7.0, 6.5]},
    {"type": "in", "dimension": "x", "values": ["6", None]},
    {"type": "bound", "dimension": "x", "lower": "5", "upper": "6.5", "ordering": "numeric"},
    {"type": "bound", "dimension": "x", "lower": "5", "upper": "6", "upperStrict": True},
    {"type": "range", "column": "x", "lower": 5, "upper": 7, "upperOpen": True, "matchValueType": "LONG"},
    {"type": "range", "column": "x", "lower": "5", "matchValueType": "STRING"},
    {"type": "range", "column": "x", "upper": 6.5, "matchValueType": "DOUBLE"},
    {"type": "like", "dimension": "x", "pattern": "5%"},
    {"type": "like", "dimension": "x", "pattern": "%0"},
    {"type": "not", "field": {"type": "in", "dimension": "x", "values": ["5", "6"]}},
    {"type": "not", "field": _eq("7", "STRING")},
    {"type": "and", "fields": [{"type": "selector", "dimension": "s", "value": "b"},
                               {"type": "in", "dimension": "x", "values": ["5", "6.5", "10"]}]},
    {"type": "or", "fields": [_eq("7", "STRING"), {"type": "selector", "dimension": "s", "value": "c"}]},
    {"type": "not", "field": {"type": "or", "fields": [_eq(5, "LONG"), {"type": "null", "column": "x"}]}},
]


def _queries(flt):
    base = {"dataSource": "?", "intervals": [ALL], "filter": flt}
    count = [{"type": "count", "name": "c"}]
    return [
        {**base, "queryType": "scan", "columns": ["__time", "x", "s"]},
        {**base, "queryType": "timeseries", "granularity": "day", "aggregations": count},
        {**base, "queryType": "topN", "granularity": "all", "dimension": "s", "metric": "c", "threshold": 10,
         "aggregations": count},
        {**base, "queryType": "groupBy", "granularity": "all", "dimensions": ["x"], "aggregations": count},
    ]


def _run(query, datasource, segments):
    rows = execute({**query, "dataSource": datasource}, segments).table.to_pylist()
    return sorted(rows, key=repr) if query["queryType"] in ("scan", "groupBy", "topN") else rows


@pytest.mark.parametrize("flt", FILTERS, ids=[json.dumps(f)[:70] for f in FILTERS])
def test_every_query_type_answers_as_over_one_segment_of_the_newest_type(case, flt):
    _, mixed, ref = case
    for query in _queries(flt):
        assert _run(query, "mixed", mixed) == _run(query, "ref", ref), query


def _count(flt, segments, datasource="mixed"):
    rows = execute({"queryType": "timeseries", "dataSource": datasource, "intervals": [ALL], "granularity": "all",
                    "filter": flt, "aggregations": [{"type": "count", "name": "c"}]}, segments).table.to_pylist()
    return rows[0]["c"] if rows else 0


def test_a_string_value_matches_the_number_it_spells(case):
    name, mixed, _ = case
    # "5" is LONG 5 and DOUBLE 5.0 in the numeric segment, and "5" (and "5.0" when read as a number) in
    # the text one.
    want = {"string_then_long": 4, "long_then_string": 3, "string_then_double": 3, "double_then_string": 2}[name]
    assert _count({"type": "selector", "dimension": "x", "value": "5"}, mixed) == want
    assert _count({"type": "in", "dimension": "x", "values": ["5", 5.0]}, mixed) == want
    if name.endswith("string"):  # a word is just another string there
        assert _count({"type": "in", "dimension": "x", "values": ["5", "nope"]}, mixed) == want


def test_a_word_against_a_column_now_numeric_is_a_clear_error(case):
    name, mixed, _ = case
    flt = {"type": "in", "dimension": "x", "values": ["5", "abc"]}
    if name.endswith("string"):
        # Text now: the older numbers read as text, and "abc" matches the one row that has it.
        assert _count(flt, mixed) == {"long_then_string": 4, "double_then_string": 3}[name]
        return
    # Numeric now: the column's type says no row can equal "abc"; the user is told, as for a column
    # that was always numeric (tests/unit/query/test_errors.py), instead of an Arrow error.
    kind = "BIGINT" if name.endswith("long") else "DOUBLE"
    with pytest.raises(ValidationError, match=f"column 'x' is {kind} but the filter compares it with 'abc'"):
        _count(flt, mixed)


def test_sql_plans_over_the_merged_schema(case):
    _, mixed, ref = case
    catalogs = {"mixed": (FakeCatalog({"mixed": union_schema(mixed)}), mixed),
                "ref": (FakeCatalog({"ref": union_schema(ref)}), ref)}
    for where in ("x = 5", "x IN (5, 7)", "x > 5 AND x < 10", "NOT (x = 7)", "x IS NULL"):
        got = {}
        for key, (catalog, segments) in catalogs.items():
            sql = f"SELECT s, COUNT(*) AS c FROM {key} WHERE {where} GROUP BY s ORDER BY s"
            got[key] = execute_sql(sql, catalog, lambda q, segs=segments: execute(q, segs).table, (), {}).to_pylist()
        assert got["mixed"] == got["ref"], where


def test_a_nested_field_of_mixed_types(tmp_path):
    docs_old = [{"v": 5}, {"v": "5"}, {"v": 6.5}, {"v": None}, {"v": "x"}]
    docs_new = [{"v": "5.0"}, {"v": 5.0}, {"v": 7}, {}, {"v": "5"}]
    segs = [_segment(tmp_path, f"nest_{i}", pa.table({"__time": _times(i, 5),
                                                     "j": pa.array([json.dumps(d) for d in docs])}),
                     f"2020-01-0{i + 1}/2020-01-0{i + 2}", f"v{i + 1}", column_types={"j": JSON})
            for i, docs in enumerate([docs_old, docs_new])]
    try:
        def count(flt, kind=None):
            vc = {"type": "nested-field", "columnName": "j", "path": "$.v", "outputName": "v"}
            q = {"queryType": "timeseries", "dataSource": "nest", "intervals": [ALL], "granularity": "all",
                 "virtualColumns": [{**vc, "expectedType": kind} if kind else vc], "filter": flt,
                 "aggregations": [{"type": "count", "name": "c"}]}
            rows = execute(q, segs).table.to_pylist()
            return rows[0]["c"] if rows else 0

        five = [{"type": "selector", "dimension": "v", "value": "5"},
                {"type": "in", "dimension": "v", "values": ["5", 5]},
                {"type": "equals", "column": "v", "matchValue": 5, "matchValueType": "LONG"}]
        # As text, 5 is "5" (three rows) and 5.0 / "5.0" stay other strings; as numbers all five are 5.
        assert [count(f) for f in five[:2]] == [3, 3]
        assert count(five[2]) == 5
        assert [count(f, "DOUBLE") for f in five] == [5, 5, 5]
        assert [count(f, "LONG") for f in five] == [5, 5, 5]
        assert count({"type": "bound", "dimension": "v", "lower": "5", "upper": "7", "ordering": "numeric"},
                     "DOUBLE") == 7
    finally:
        for s in segs:
            s.close()


KINDS = {"STRING": pa.string(), "LONG": pa.int64(), "DOUBLE": pa.float64()}
TEXTS = st.sampled_from(["5", "5.0", "-0", "0", " 7", "7", "1e3", "6.5", "abc", "", "9007199254740993", "-3.5"])
NUMBERS = st.one_of(st.sampled_from([5, 7, 0, -3, 1000, 2**53 + 1, -(2**63)]),
                    st.sampled_from([5.0, 6.5, -0.0, 0.0, 7.0, -3.5, 1e3, 1e20]))
MATCH = st.one_of(TEXTS, NUMBERS)


def _column(kind: str, draw_values) -> pa.Array:
    if kind == "STRING":
        return pa.array(draw_values(st.one_of(st.none(), TEXTS)), pa.string())
    if kind == "LONG":
        return pa.array(draw_values(st.one_of(st.none(), st.integers(-5, 12), st.just(2**53 + 1))), pa.int64())
    return pa.array(draw_values(st.one_of(st.none(), st.sampled_from([5.0, 6.5, -0.0, 7.0, 1e3, -3.5, 1e20]))),
                    pa.float64())


@st.composite
def mixed_cases(draw):
    old_kind, new_kind = draw(st.permutations(list(KINDS)).map(lambda p: p[:2]))
    n = draw(st.integers(1, 8))

    def values(strategy):
        return draw(st.lists(strategy, min_size=n, max_size=n))

    return old_kind, _column(old_kind, values), new_kind, _column(new_kind, values)


@st.composite
def mixed_filters(draw):
    kind = draw(st.sampled_from(["equals", "selector", "in", "bound", "range", "like", "not"]))
    if kind == "equals":
        value = draw(MATCH)
        typ = draw(st.sampled_from([None, "STRING", "LONG", "DOUBLE"]))
        if typ in ("LONG", "DOUBLE") and isinstance(value, str):
            typ = "STRING"
        return _eq(value, typ)
    if kind == "selector":
        return {"type": "selector", "dimension": "x", "value": draw(MATCH)}
    if kind == "in":
        return {"type": "in", "dimension": "x", "values": draw(st.lists(st.one_of(st.none(), MATCH), max_size=4))}
    if kind in ("bound", "range"):
        lower, upper = draw(st.one_of(st.none(), MATCH)), draw(st.one_of(st.none(), MATCH))
        if kind == "bound":
            out = {"type": "bound", "dimension": "x", "lower": lower, "upper": upper,
                   "lowerStrict": draw(st.booleans()), "ordering": draw(st.sampled_from(["numeric", "lexicographic"]))}
        else:
            typ = "STRING" if any(isinstance(b, str) for b in (lower, upper)) else "DOUBLE"
            out = {"type": "range", "column": "x", "lower": lower, "upper": upper, "matchValueType": typ}
        return {k: v for k, v in out.items() if v is not None}
    if kind == "like":
        return {"type": "like", "dimension": "x", "pattern": draw(st.sampled_from(["5%", "%.5", "_", "%0%", ""]))}
    return {"type": "not", "field": draw(mixed_filters())}


def _outcome(query, segments):
    try:
        return sorted(execute(query, segments).table.column("rid").to_pylist())
    except ValidationError as exc:  # the same user error either way (a word against a numeric column)
        return str(exc)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mixed_cases(), flt=mixed_filters())
def test_random_filters_on_a_changed_type_answer_as_over_the_newest_type(case, flt):
    """Any pair of types, mean values (-0.0, 2**53 + 1, " 7", "1e3") and filter values: two segments
    whose column types differ answer as one segment already holding the newest type (made with the
    engine's own lenient cast, which is not what is under test: the filter is)."""
    old_kind, old, new_kind, new = case
    n = len(old)
    as_newest = pa.concat_arrays([_cast_lenient(old, ColumnType.parse(new_kind)), new])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        mixed = [_segment(tmp, "mixed_old", pa.table({"__time": _times(0, n), "x": old, "rid": range(n)}),
                          "2020-01-01/2020-01-02", "v1"),
                 _segment(tmp, "mixed_new", pa.table({"__time": _times(1, n), "x": new, "rid": range(n, 2 * n)}),
                          "2020-01-02/2020-01-03", "v2")]
        ref = [_segment(tmp, "ref", pa.table({"__time": pa.concat_arrays([_times(0, n), _times(1, n)]),
                                              "x": as_newest, "rid": range(2 * n)}), ALL, "v1")]
        try:
            query = {"queryType": "scan", "intervals": [ALL], "columns": ["rid"], "filter": flt}
            assert _outcome({**query, "dataSource": "mixed"}, mixed) == _outcome({**query, "dataSource": "ref"}, ref)
        finally:
            for seg in mixed + ref:
                seg.close()
