"""Type discovery against what Druid's own schema-discovery tests assert, and the widening rules."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.types.column_type import ColumnType
from common.types.type_discovery import (
    NULL,
    ColumnDiscovery,
    SchemaDiscovery,
    discover_rows,
    observe,
    widen,
)

DATA = "/work/shared/data"

# Druid: sql/src/test/java/org/apache/druid/sql/calcite/CalciteNestedDataQueryTest.java, the row
# signature of SELECT * FROM druid.all_auto (nested-all-types-test-data.json ingested with
# useSchemaDiscovery); NESTED_DATA is COMPLEX<json>. "timestamp" is the time column there.
DRUID_ALL_TYPES = {
    "str": "STRING", "long": "LONG", "double": "DOUBLE", "bool": "LONG", "variant": "STRING",
    "variantNumeric": "DOUBLE", "variantEmptyObj": "COMPLEX<json>", "variantEmtpyArray": "ARRAY<LONG>",
    "variantWithArrays": "ARRAY<STRING>", "obj": "COMPLEX<json>", "complexObj": "COMPLEX<json>",
    "arrayString": "ARRAY<STRING>", "arrayStringNulls": "ARRAY<STRING>", "arrayLong": "ARRAY<LONG>",
    "arrayLongNulls": "ARRAY<LONG>", "arrayDouble": "ARRAY<DOUBLE>", "arrayDoubleNulls": "ARRAY<DOUBLE>",
    "arrayVariant": "ARRAY<STRING>", "arrayBool": "ARRAY<LONG>", "arrayNestedLong": "COMPLEX<json>",
    "arrayObject": "COMPLEX<json>", "null": "STRING", "cstr": "STRING", "clong": "LONG", "cdouble": "DOUBLE",
    "cObj": "COMPLEX<json>", "cstringArray": "ARRAY<STRING>", "cLongArray": "ARRAY<LONG>",
    "cDoubleArray": "ARRAY<DOUBLE>", "cEmptyArray": "ARRAY<LONG>", "cEmptyObj": "COMPLEX<json>",
    "cNullArray": "ARRAY<LONG>", "cEmptyObjectArray": "COMPLEX<json>", "cObjectArray": "COMPLEX<json>",
}
# nested-types-test-data.json: the classic auto-type file; Druid's auto indexer resolves the mixed
# `variant` column (1, "b", 3.0, "4", ...) to its least restrictive type, STRING.
DRUID_TYPES = {"str": "STRING", "long": "LONG", "double": "DOUBLE", "variant": "STRING"}


def _rows(name):
    with open(os.path.join(DATA, name)) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("name, expected", [("nested-all-types-test-data.json", DRUID_ALL_TYPES),
                                            ("nested-types-test-data.json", DRUID_TYPES)])
def test_druid_discovered_types_are_met_exactly(name, expected):
    sig = {n: t.native_name for n, t in discover_rows(_rows(name)).signature() if n != "timestamp"}
    assert sig == expected


def test_partitions_merge_to_the_same_schema_in_any_split():
    rows = _rows("nested-all-types-test-data.json")
    whole = discover_rows(rows).signature()
    for cut in range(1, len(rows)):
        left, right = SchemaDiscovery(), SchemaDiscovery()
        for i, r in enumerate(rows[:cut], 1):
            left.add_row(r, "f", i)
        for i, r in enumerate(rows[cut:], cut + 1):
            right.add_row(r, "f", i)
        merged = SchemaDiscovery.from_json(json.loads(json.dumps(right.to_json()))).merge(left)
        assert dict(merged.signature()) == dict(whole)


@pytest.mark.parametrize("a, b, want", [
    (1, 2.5, "DOUBLE"), (1, "x", "STRING"), (2.5, "x", "STRING"), (True, 3, "LONG"),
    (1, [2], "ARRAY<LONG>"), (1.5, [2], "ARRAY<DOUBLE>"), ("a", [1], "ARRAY<STRING>"), ([1], ["a"], "ARRAY<STRING>"),
    (1, {"a": 1}, "COMPLEX<json>"), ([1], {"a": 1}, "COMPLEX<json>"), (None, 5, "LONG"), (None, None, "STRING"),
    ([], [], "ARRAY<LONG>"), ([None], [2.5], "ARRAY<DOUBLE>"), ([[1]], 1, "COMPLEX<json>"),
])
def test_widening_table(a, b, want):
    got = discover_rows([{"c": a}, {"c": b}]).signature()
    assert dict(got)["c"] == ColumnType.parse(want)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True),
                    st.text(max_size=3))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=2), inner, max_size=3)),
                      max_leaves=8)


@given(st.lists(values, max_size=12))
def test_widening_is_order_free(vals):
    """The chosen type does not depend on row order (so not on how Spark splits the input)."""
    forward = discover_rows({"c": v} for v in vals).signature()
    backward = discover_rows({"c": v} for v in reversed(vals)).signature()
    assert forward == backward
    acc = NULL
    for v in vals:
        acc = widen(acc, observe(v))[0]
    for v in vals:  # every value's own type widens into the result without changing it
        assert widen(acc, observe(v))[0] == acc


def test_conflict_names_both_types_with_their_first_place():
    col = ColumnDiscovery("x")
    col.add(observe({"a": 1}), "b.json", 3)
    col.add(observe("s"), "a.json", 7)
    col.add(observe("t"), "a.json", 9)
    (t1, where1), (t2, where2) = col.conflict()
    assert (t1, where1) == (("STRING",), ("a.json", 7))
    assert (t2, where2) == (("JSON",), ("b.json", 3))
    agree = ColumnDiscovery("y")
    agree.add(observe([]), "a", 1)
    agree.add(observe([1]), "a", 2)
    assert agree.conflict() is None
