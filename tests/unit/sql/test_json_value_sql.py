"""JSON_VALUE in SQL: planned as nested-field virtual columns (filters on a path become index
filters on it), RETURNING and CAST plan alike, and misuse fails with a clear message."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql, plan_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.unit.sql.fake_catalog import FakeCatalog

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data", "nested-example-data.json")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with open(DATA, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(rows))], pa.int64()),
                      "product": [r["product"] for r in rows],
                      "shipTo": [json.dumps(r["shipTo"]) for r in rows],
                      "details": [json.dumps(r["details"]) for r in rows]})
    path = str(tmp_path_factory.mktemp("jv") / "ex.sseg")
    build_segment(table, path, SegmentId("nested_data_example", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"shipTo": JSON, "details": JSON})
    segments = [Segment.open(path)]
    catalog = FakeCatalog({"nested_data_example": union_schema(segments)})
    yield rows, segments, catalog


def run(setup, sql):
    _, segments, catalog = setup
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table).to_pylist()


def test_returning_and_cast_plan_the_same(setup):
    _, _, catalog = setup
    a = plan_sql("SELECT JSON_VALUE(details, '$.price' RETURNING DOUBLE) AS p FROM nested_data_example", catalog)
    b = plan_sql("SELECT CAST(JSON_VALUE(details, '$.price') AS DOUBLE) AS p FROM nested_data_example", catalog)
    assert a.native_queries() == b.native_queries()
    assert a.native_queries()[0]["virtualColumns"] == [{"type": "nested-field", "columnName": "details",
                                                        "path": "$.price", "outputName": "v0",
                                                        "expectedType": "DOUBLE"}]


def test_values_group_keys_and_sums(setup):
    rows = setup[0]
    got = run(setup, "SELECT product, JSON_VALUE(details, '$.price' RETURNING DOUBLE) AS price "
                     "FROM nested_data_example")
    assert got == [{"product": r["product"], "price": r["details"]["price"]} for r in rows]
    got = run(setup, "SELECT JSON_VALUE(shipTo, '$.address.state') AS s, COUNT(*) AS n FROM nested_data_example "
                     "GROUP BY 1 ORDER BY 1")
    states = sorted({r["shipTo"]["address"]["state"] for r in rows})
    assert [g["s"] for g in got] == states
    total = run(setup, "SELECT SUM(JSON_VALUE(details, '$.price' RETURNING DOUBLE)) AS s FROM nested_data_example")
    assert total == [{"s": pytest.approx(sum(r["details"]["price"] for r in rows))}]


def test_a_filter_on_a_path_is_an_index_filter(setup):
    _, _, catalog = setup
    q = plan_sql("SELECT COUNT(*) AS c FROM nested_data_example WHERE JSON_VALUE(details, '$.color') = 'ivory'",
                 catalog).native_queries()[0]
    assert q["filter"] == {"type": "equals", "column": "v0", "matchValue": "ivory", "matchValueType": "STRING"}
    assert run(setup, "SELECT COUNT(*) AS c FROM nested_data_example WHERE JSON_VALUE(details, '$.color') = 'ivory'"
               ) == [{"c": 1}]
    assert run(setup, "SELECT COUNT(*) AS c FROM nested_data_example WHERE JSON_VALUE(details, '$.color') IS NULL"
               ) == [{"c": 1}]


@pytest.mark.parametrize("sql, message", [
    ("SELECT JSON_VALUE(TIMESTAMP '2020-01-01' - __time, '$') FROM nested_data_example", "COMPLEX<json>|INTERVAL"),
    ("SELECT JSON_VALUE(details, '$.x' RETURNING TIMESTAMP) FROM nested_data_example", "cannot return TIMESTAMP"),
    # JSON values have no order (they were compared as text)
    ("SELECT details > shipTo FROM nested_data_example", r"cannot order COMPLEX<json> values in 'details > shipTo'"),
    ("SELECT COUNT(*) FROM nested_data_example WHERE details BETWEEN shipTo AND details", "JSON_VALUE"),
])
def test_misuse_is_a_clear_error(setup, sql, message):
    with pytest.raises(ValidationError, match=message):
        plan_sql(sql, setup[2])


def test_json_value_of_a_plain_column_answers_as_druid(setup):
    """Not a JSON column: '$' is the value itself, other paths are null (Druid answers, not errs)."""
    got = run(setup, "SELECT product, JSON_VALUE(product, '$') AS v, JSON_VALUE(product, '$.x') AS x "
                     "FROM nested_data_example")
    assert got and all(r["v"] == r["product"] and r["x"] is None for r in got)


def test_json_functions(setup):
    rows = setup[0]
    got = run(setup, "SELECT JSON_QUERY(shipTo, '$.address') AS a, JSON_KEYS(details, '$') AS k, "
                     "JSON_PATHS(details) AS p, TO_JSON_STRING(details) AS t, "
                     "JSON_OBJECT(KEY 'product' VALUE product, KEY 'd' VALUE details) AS o, "
                     "JSON_MERGE(details, JSON_OBJECT('extra': 1)) AS m, "
                     "JSON_VALUE(PARSE_JSON('{\"n\": 7}'), '$.n' RETURNING BIGINT) AS n, "
                     "TRY_PARSE_JSON('{bad') AS bad FROM nested_data_example")
    for g, r in zip(got, rows):
        details = {k: float(v) if k == "price" else v for k, v in r["details"].items()}
        assert json.loads(g["a"]) == r["shipTo"]["address"]
        assert g["k"] == list(r["details"]) and g["p"] == [f"$.{k}" for k in r["details"]]
        assert json.loads(g["t"]) == details
        assert json.loads(g["o"]) == {"product": r["product"], "d": details}
        assert json.loads(g["m"]) == {**details, "extra": 1}
        assert g["n"] == 7 and g["bad"] is None


def test_json_object_keys_are_expressions_and_values_druid_typed(setup):
    """A JSON_OBJECT key may be any text expression (it was a syntax error past a literal); a
    TIMESTAMP value is its millis and a BOOLEAN 1/0, as Druid's expressions hold them (__time was
    an error, a boolean true)."""
    got = run(setup, "SELECT JSON_OBJECT(KEY 'p' || product VALUE __time, 'b' || 'c': (product = 'Bike'), "
                     "KEY LOWER('X') VALUE (1 = 2)) AS o FROM nested_data_example")
    for g, r, t in zip(got, setup[0], range(1577836800000, 1577836800000 + len(setup[0]))):
        assert json.loads(g["o"], object_pairs_hook=list) == [("p" + r["product"], t),
                                                              ("bc", int(r["product"] == "Bike")), ("x", 0)]


def test_json_query_and_keys_of_plain_columns_read_them_as_literals(setup):
    """Druid's JSON_QUERY and JSON_KEYS read a value that is not COMPLEX<json> as the JSON literal it
    is (qaJsonCols: JSON_PATHS(JSON_QUERY(s_str, '$')) is ['$']): the text is never parsed, any
    path below '$' is NULL, a literal has no keys, and NULL stays NULL."""
    rows = setup[0]
    got = run(setup, "SELECT JSON_QUERY(product, '$') AS q, JSON_QUERY(product, '$.x') AS below, "
                     "JSON_KEYS(product, '$') AS k, JSON_QUERY(CAST(NULL AS VARCHAR), '$') AS n, "
                     "JSON_QUERY(__time, '$') AS t, JSON_QUERY(ARRAY[1, 2], '$[1]') AS e, "
                     "JSON_PATHS(JSON_QUERY(product, '$')) AS p FROM nested_data_example")
    assert [json.loads(g["q"]) for g in got] == [r["product"] for r in rows]
    assert {(g["below"], g["k"], g["n"], g["e"]) for g in got} == {(None, None, None, "2")}
    assert [int(g["t"]) for g in got] == [1577836800000 + i for i in range(len(rows))]
    assert all(g["p"] == ["$"] for g in got)


@pytest.mark.parametrize("sql, message", [
    ("SELECT JSON_QUERY(INTERVAL '1' DAY, '$.x') FROM nested_data_example", "JSON_QUERY needs a COMPLEX<json> value"),
    ("SELECT PARSE_JSON(details) FROM nested_data_example", "PARSE_JSON needs VARCHAR text"),
    ("SELECT JSON_KEYS(details, '$.a[') FROM nested_data_example", "."),
    ("SELECT JSON_MERGE(details) FROM nested_data_example", "JSON_MERGE takes 2 or more arguments"),
])
def test_json_function_misuse(setup, sql, message):
    with pytest.raises(Exception, match=message):
        plan_sql(sql, setup[2])


def test_parse_json_names_the_bad_row(setup):
    with pytest.raises(ValidationError, match="PARSE_JSON: row 0 is not valid JSON"):
        run(setup, "SELECT PARSE_JSON('{nope') AS x FROM nested_data_example")


def test_wildcard_and_jq_paths_over_a_stored_nested_column(setup):
    rows = setup[0]
    got = run(setup, "SELECT JSON_VALUE(shipTo, '$.phoneNumbers[*].number') AS numbers, "
                     "JSON_VALUE(shipTo, '.address.city') AS city, JSON_QUERY(shipTo, '$..country') AS countries "
                     "FROM nested_data_example")
    assert got == [{"numbers": [p["number"] for p in r["shipTo"]["phoneNumbers"]],
                    "city": r["shipTo"]["address"]["city"],
                    "countries": json.dumps([r["shipTo"]["address"]["country"]], separators=(",", ":"))}
                   for r in rows]
    got = run(setup, "SELECT ARRAY_CONCAT_AGG(DISTINCT JSON_VALUE(shipTo, '$.phoneNumbers[*].type')) AS t "
                     "FROM nested_data_example")
    assert got == [{"t": ["primary", "secondary"]}]


def test_invalid_path_in_sql_quotes_it(setup):
    with pytest.raises(ValidationError, match=r"invalid JSON path '\$\.address\[x\]' at position 11"):
        run(setup, "SELECT JSON_VALUE(shipTo, '$.address[x]') FROM nested_data_example")


def test_array_concat_agg_distinct_of_json_keys(setup):
    rows = setup[0]
    got = run(setup, "SELECT ARRAY_CONCAT_AGG(DISTINCT JSON_KEYS(shipTo, '$.')) AS k, "
                     "ARRAY_CONCAT_AGG(JSON_KEYS(details, '$')) AS d FROM nested_data_example")
    assert got[0]["k"] == sorted({k for r in rows for k in r["shipTo"]})
    assert got[0]["d"] == [k for r in rows for k in r["details"]]
    with pytest.raises(ValidationError, match="ARRAY_CONCAT_AGG needs an array"):
        run(setup, "SELECT ARRAY_CONCAT_AGG(product) FROM nested_data_example")


class ManifestCatalog(FakeCatalog):
    """A catalog that, like the broker's, knows the served segments' manifests."""

    def __init__(self, segments):
        super().__init__({"nums": union_schema(segments)})
        self.manifests = [json.dumps(s.manifest.to_json()) for s in segments]

    def segment_manifests(self, name):
        return self.manifests if name == "nums" else []


@pytest.fixture(scope="module")
def nums(tmp_path_factory):
    docs = [{"n": 5, "f": 1.5, "m": 1, "s": "7"}, {"n": 150, "f": 2.25, "m": 2.5, "s": "x"},
            {"n": 300, "m": "3", "s": "9.5"}, {"f": 10.0}]
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(docs))], pa.int64()),
                      "j": [json.dumps(d) for d in docs]})
    path = str(tmp_path_factory.mktemp("nums") / "nums.sseg")
    build_segment(table, path, SegmentId("nums", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"j": JSON})
    segments = [Segment.open(path)]
    return docs, segments, ManifestCatalog(segments)


def test_json_value_without_returning_takes_the_stored_type_in_numeric_contexts(nums):
    docs, segments, catalog = nums
    sql = ("SELECT SUM(JSON_VALUE(j, '$.n')) AS n, SUM(JSON_VALUE(j, '$.f')) AS f, SUM(JSON_VALUE(j, '$.m')) AS m, "
           "SUM(JSON_VALUE(j, '$.s')) AS s FROM nums WHERE JSON_VALUE(j, '$.n') > 100 OR JSON_VALUE(j, '$.n') IS NULL")
    q = plan_sql(sql, catalog).native_queries()[0]
    types: dict = {}
    for vc in q["virtualColumns"]:
        types.setdefault(vc["path"], set()).add(vc.get("expectedType"))
    # A path that only held whole numbers reads as LONG; fractions, mixed numbers and text as DOUBLE.
    # (IS NULL asks for no number: that use stays VARCHAR.)
    assert types == {"$.n": {"LONG", "STRING"}, "$.f": {"DOUBLE"}, "$.m": {"DOUBLE"}, "$.s": {"DOUBLE"}}
    assert [a["type"] for a in q["aggregations"]] == ["longSum", "doubleSum", "doubleSum", "doubleSum"]
    got = execute_sql(sql, catalog, lambda nq: execute(nq, segments).table)
    kept = [d for d in docs if d.get("n") is None or d["n"] > 100]
    assert got.schema.field("n").type == pa.int64()
    assert got.to_pylist() == [{"n": sum(d.get("n", 0) for d in kept), "f": sum(d.get("f", 0) for d in kept),
                                "m": sum(float(d.get("m", 0)) for d in kept), "s": 9.5}]


def test_json_value_without_returning_is_varchar_where_no_number_is_asked_for(nums):
    _, segments, catalog = nums
    got = execute_sql("SELECT JSON_VALUE(j, '$.n') AS n, JSON_VALUE(j, '$.f') AS f FROM nums "
                      "WHERE JSON_VALUE(j, '$.s') = '7'", catalog, lambda nq: execute(nq, segments).table)
    assert got.to_pylist() == [{"n": "5", "f": "1.5"}]  # Druid's SQL type for it, as its docs show


def test_array_concat_agg_merges_partials_of_several_segments(tmp_path):
    from common.query.aggregators import ArrayConcat

    docs = [{"k": ["b", "a"]}, {"k": ["c"]}, {"k": None}, {"k": ["a", "d"]}, {}]
    segments = []
    for i, part in enumerate((docs[:2], docs[2:])):
        table = pa.table({"__time": pa.array([1577836800000 + 86_400_000 * i] * len(part), pa.int64()),
                          "g": ["x"] * len(part), "j": [json.dumps(d) for d in part]})
        day = Interval.of(f"2020-01-0{i + 1}/2020-01-0{i + 2}")
        path = str(tmp_path / f"s{i}.sseg")
        build_segment(table, path, SegmentId("arr", day, "v1", 0), column_types={"j": JSON})
        segments.append(Segment.open(path))
    catalog = FakeCatalog({"arr": union_schema(segments)})
    got = execute_sql("SELECT g, ARRAY_CONCAT_AGG(JSON_VALUE(j, '$.k[*]')) AS all_k, "
                      "ARRAY_CONCAT_AGG(DISTINCT JSON_VALUE(j, '$.k[*]')) AS set_k FROM arr GROUP BY g",
                      catalog, lambda q: execute(q, segments).table).to_pylist()
    assert got == [{"g": "x", "all_k": ["b", "a", "c", "a", "d"], "set_k": ["a", "b", "c", "d"]}]
    assert ArrayConcat("x", "f", True).to_json() == {"type": "arrayConcat", "name": "x", "fieldName": "f",
                                                     "distinct": True}
