"""ColumnType: the one mapping between user spellings, SQL names, native names and Arrow types."""

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.types import (
    DOUBLE,
    DOUBLE_ARRAY,
    FLOAT,
    JSON,
    LONG,
    LONG_ARRAY,
    STRING,
    STRING_ARRAY,
    TIMESTAMP,
    ColumnType,
    TypeKind,
    least_restrictive,
)

# (type, sql_name, native_name, arrow type)
ALL_TYPES = [
    (TIMESTAMP, "TIMESTAMP", "TIMESTAMP", pa.timestamp("ms", tz="UTC")),
    (STRING, "VARCHAR", "STRING", pa.string()),
    (LONG, "BIGINT", "LONG", pa.int64()),
    (DOUBLE, "DOUBLE", "DOUBLE", pa.float64()),
    (FLOAT, "FLOAT", "FLOAT", pa.float32()),
    (STRING_ARRAY, "ARRAY<VARCHAR>", "ARRAY<STRING>", pa.list_(pa.string())),
    (LONG_ARRAY, "ARRAY<BIGINT>", "ARRAY<LONG>", pa.list_(pa.int64())),
    (DOUBLE_ARRAY, "ARRAY<DOUBLE>", "ARRAY<DOUBLE>", pa.list_(pa.float64())),
    (JSON, "COMPLEX<json>", "COMPLEX<json>", pa.string()),
]
IDS = [t[2] for t in ALL_TYPES]


@pytest.mark.parametrize("ctype,sql,native,arrow", ALL_TYPES, ids=IDS)
def test_names_and_arrow_type(ctype, sql, native, arrow):
    assert ctype.sql_name == sql
    assert ctype.native_name == native
    assert str(ctype) == native
    assert ctype.to_arrow() == arrow


@pytest.mark.parametrize("ctype,sql,native,arrow", ALL_TYPES, ids=IDS)
def test_parse_round_trips_both_spellings(ctype, sql, native, arrow):
    assert ColumnType.parse(sql) == ctype
    assert ColumnType.parse(native) == ctype
    assert ColumnType.parse(sql.lower()) == ctype
    assert ColumnType.parse(f"  {native}  ") == ctype


@pytest.mark.parametrize("ctype,sql,native,arrow", [t for t in ALL_TYPES if t[0] is not JSON], ids=IDS[:-1])
def test_arrow_round_trip(ctype, sql, native, arrow):
    assert ColumnType.from_arrow(ctype.to_arrow()) == ctype


def test_json_travels_as_text_so_arrow_cannot_tell_it_from_string():
    # Documented loss: COMPLEX<json> is stored as JSON text until nested columns exist.
    assert ColumnType.from_arrow(JSON.to_arrow()) == STRING


@pytest.mark.parametrize("name,expected", [
    ("varchar", STRING), ("CHAR", STRING), ("text", STRING), ("VARCHAR(255)", STRING),
    ("INTEGER", LONG), ("int", LONG), ("SMALLINT", LONG), ("TINYINT", LONG), ("BOOLEAN", LONG),
    ("DECIMAL(10, 2)", DOUBLE), ("REAL", FLOAT), ("timestamp", TIMESTAMP),
    ("array<varchar>", STRING_ARRAY), ("ARRAY<INTEGER>", LONG_ARRAY),
    # FLOAT elements widen: arrays hold only STRING, LONG or DOUBLE.
    ("ARRAY<FLOAT>", DOUBLE_ARRAY), ("array<real>", DOUBLE_ARRAY),
    ("COMPLEX<JSON>", JSON), ("complex<json>", JSON),
])
def test_parse_aliases(name, expected):
    assert ColumnType.parse(name) == expected


@pytest.mark.parametrize("arrow,expected", [
    (pa.int8(), LONG), (pa.uint32(), LONG), (pa.bool_(), LONG), (pa.float16(), FLOAT),
    (pa.decimal128(10, 2), DOUBLE), (pa.large_string(), STRING), (pa.dictionary(pa.int32(), pa.string()), STRING),
    (pa.timestamp("us"), TIMESTAMP), (pa.date32(), TIMESTAMP), (pa.null(), STRING),
    (pa.list_(pa.float32()), DOUBLE_ARRAY), (pa.large_list(pa.int32()), LONG_ARRAY),
    (pa.list_(pa.dictionary(pa.int8(), pa.string())), STRING_ARRAY),
])
def test_from_arrow_normalizes(arrow, expected):
    assert ColumnType.from_arrow(arrow) == expected


@pytest.mark.parametrize("name", ["FOO", "", "ARRAY<FOO>", "LIST<LONG>", "VARCHAR2"])
def test_bad_names_list_the_valid_types(name):
    with pytest.raises(ValidationError) as err:
        ColumnType.parse(name)
    msg = str(err.value)
    assert "unknown type" in msg
    for valid in ("VARCHAR", "BIGINT", "DOUBLE", "FLOAT", "TIMESTAMP", "ARRAY<", "COMPLEX<json>"):
        assert valid in msg


def test_unknown_complex_type_names_the_supported_one():
    with pytest.raises(ValidationError, match=r"COMPLEX<foo>.*COMPLEX<json>"):
        ColumnType.parse("COMPLEX<foo>")


@pytest.mark.parametrize("name", ["ARRAY<ARRAY<LONG>>", "ARRAY<TIMESTAMP>", "ARRAY<COMPLEX<HLLSketch>>"])
def test_unsupported_array_elements(name):
    with pytest.raises(ValidationError, match="element type must be one of STRING, LONG, DOUBLE or COMPLEX<json>"):
        ColumnType.parse(name)


def test_array_of_json_is_what_json_query_array_gives():
    # Druid's ARRAY<COMPLEX<json>>: JSON documents, held as their text
    t = ColumnType.parse("ARRAY<COMPLEX<json>>")
    assert t.is_array and t.element.complex_name == "json" and t.native_name == "ARRAY<COMPLEX<json>>"
    assert t.to_arrow() == pa.list_(pa.string())


def test_multi_value_string_is_varchar_over_a_list_of_strings():
    from common.types.column_type import MULTI_VALUE_STRING, STRING, STRING_ARRAY, least_restrictive

    assert ColumnType.parse("MULTI_VALUE_STRING") == MULTI_VALUE_STRING and MULTI_VALUE_STRING.sql_name == "VARCHAR"
    assert least_restrictive(STRING, MULTI_VALUE_STRING) == MULTI_VALUE_STRING
    assert least_restrictive(MULTI_VALUE_STRING, STRING_ARRAY) == MULTI_VALUE_STRING
    with pytest.raises(ValidationError, match="only strings can be multi-value"):
        ColumnType(STRING_ARRAY.kind, ColumnType.parse("LONG"), multi_value=True)


def test_unsupported_arrow_types_name_the_column():
    with pytest.raises(ValidationError, match="column 'm'.*no strata type"):
        ColumnType.from_arrow(pa.map_(pa.string(), pa.int64()), "m")
    with pytest.raises(ValidationError, match=r"column 'b': arrays of timestamp\[ms\] are not supported"):
        ColumnType.from_arrow(pa.list_(pa.timestamp("ms")), "b")


def test_constructor_invariants():
    with pytest.raises(ValidationError):
        ColumnType(TypeKind.ARRAY)
    with pytest.raises(ValidationError, match="only ARRAY types"):
        ColumnType(TypeKind.LONG, element=LONG)
    with pytest.raises(ValidationError, match="COMPLEX<json>"):
        ColumnType(TypeKind.COMPLEX)


def test_classification():
    assert [t.is_numeric for t in (LONG, DOUBLE, FLOAT, TIMESTAMP, STRING, STRING_ARRAY, JSON)] == \
        [True, True, True, True, False, False, False]
    assert STRING.is_string and not JSON.is_string
    assert LONG_ARRAY.is_array and not LONG.is_array


@pytest.mark.parametrize("a,b,expected", [
    (LONG, LONG, LONG), (LONG, FLOAT, DOUBLE), (FLOAT, LONG, DOUBLE), (LONG, DOUBLE, DOUBLE), (FLOAT, FLOAT, FLOAT),
    (LONG, STRING, STRING), (TIMESTAMP, LONG, STRING),
    (LONG_ARRAY, DOUBLE_ARRAY, DOUBLE_ARRAY), (STRING_ARRAY, LONG_ARRAY, STRING_ARRAY),
    (JSON, LONG, JSON), (STRING, JSON, JSON),
])
def test_least_restrictive(a, b, expected):
    assert least_restrictive(a, b) == expected
    assert least_restrictive(b, a) == expected
