"""An IN list holding a null (Druid's "or IS NULL") on a dictionary column, answered from values
(under an OR with a filter the indexes cannot answer): null rows must match, not come out unknown.
Found by the widened filter generator (strategies.in_filters now draws nulls for strings too)."""

import pyarrow as pa

from common.query import execute
from tests.unit.query.strategies import INTERVAL, T0, build_case


def test_null_in_list_matches_null_rows_on_the_value_path():
    n = 8
    table = pa.table({
        "__time": pa.array([T0 + i for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "rid": pa.array(range(n), pa.int64()), "s": pa.array([None, "", "a", None, "b", "", None, "a"]),
        "s2": pa.array([None] * n, pa.string()), "i": pa.array([None] * 7 + [0], pa.int64()),
        "d": pa.array([None] * n, pa.float64())})
    case = build_case(table, False, False)
    try:
        flt = {"type": "or", "fields": [{"type": "equals", "column": "i", "matchValue": 0},
                                        {"type": "in", "dimension": "s", "values": ["", None]}]}
        got = execute({"queryType": "scan", "dataSource": "t", "intervals": [INTERVAL], "columns": ["rid"],
                       "filter": flt}, case.segments).table
        assert sorted(got.column("rid").to_pylist()) == [0, 1, 3, 5, 6, 7]
        negated = execute({"queryType": "scan", "dataSource": "t", "intervals": [INTERVAL], "columns": ["rid"],
                           "filter": {"type": "not", "field": flt}}, case.segments).table
        assert sorted(negated.column("rid").to_pylist()) == []  # i is null or 0 everywhere s is 'a'/'b'
    finally:
        case.close()
