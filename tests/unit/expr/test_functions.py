import math

import pyarrow as pa
import pytest

from common.errors import UnsupportedError, ValidationError
from common.expr import FUNCTIONS, evaluate, infer_type, parse
from common.types.column_type import DOUBLE, FLOAT, LONG, STRING, TIMESTAMP, ColumnType

COLUMNS = {
    "s": pa.array(["Hello", "  pad  ", None, "café", ""]),
    "d": pa.array(["Apple", "apple", None, "Apple", "Cherry"]).dictionary_encode(),
    "l": pa.array([3, -4, None, 0, 10]),
    "x": pa.array([2.5, -2.5, None, 0.0, 1.25]),
    "num": pa.array(["12", " 7 ", "abc", None, "-3.9"]),
}
TYPES = {"s": STRING, "d": STRING, "l": LONG, "x": DOUBLE, "num": STRING}
N = 5


def ev(text, columns=COLUMNS, n=N):
    return evaluate(parse(text), columns, n).to_pylist()


def approx(values):
    return [None if v is None else pytest.approx(v, nan_ok=True) for v in values]


STRING_CASES = [
    ("concat(s, '!')", ["Hello!", "  pad  !", None, "café!", "!"]),
    ("concat(s, l)", ["Hello3", "  pad  -4", None, "café0", "10"]),
    ("concat('a', x)", ["a2.5", "a-2.5", None, "a0.0", "a1.25"]),
    ("concat(l)", ["3", "-4", None, "0", "10"]),
    ("concat(s, null)", [None] * 5),
    ("lower(s)", ["hello", "  pad  ", None, "café", ""]),
    ("upper(s)", ["HELLO", "  PAD  ", None, "CAFÉ", ""]),
    ("lower(l)", ["3", "-4", None, "0", "10"]),
    ("strlen(s)", [5, 7, None, 4, 0]),
    ("length(s)", [5, 7, None, 4, 0]),
    ("substring(s, 1, 3)", ["ell", " pa", None, "afé", None]),
    ("substring(s, 2, -1)", ["llo", "pad  ", None, "fé", None]),
    ("substring(s, 5, 2)", [None, "  ", None, None, None]),  # past the end: null, as Druid
    ("replace(s, 'l', 'L')", ["HeLLo", "  pad  ", None, "café", ""]),
    ("replace(s, '', 'L')", ["Hello", "  pad  ", None, "café", ""]),
    ("strpos(s, 'l')", [2, -1, None, -1, -1]),
    ("strpos(s, 'é')", [-1, -1, None, 3, -1]),
    ("strpos(concat('é', s), 'l')", [3, -1, None, -1, -1]),  # characters, not bytes
    ("strpos(s, 'l', 3)", [3, -1, None, -1, -1]),
    ("strpos(s, 'H', 1)", [-1, -1, None, -1, -1]),
    ("trim(s)", ["Hello", "pad", None, "café", ""]),
    ("ltrim(s)", ["Hello", "pad  ", None, "café", ""]),
    ("rtrim(s)", ["Hello", "  pad", None, "café", ""]),
    ("trim(s, ' Hd')", ["ello", "pa", None, "café", ""]),
    ("left(s, 2)", ["He", "  ", None, "ca", ""]),
    ("right(s, 2)", ["lo", "  ", None, "fé", ""]),
    ("left(s, 0)", ["", "", None, "", ""]),
    ("right(s, 0)", ["", "", None, "", ""]),
    ("reverse(s)", ["olleH", "  dap  ", None, "éfac", ""]),
    ("lpad(s, 7, 'xy')", ["xyHello", "  pad  ", None, "xyxcafé", "xyxyxyx"]),
    ("rpad(s, 6, '-')", ["Hello-", "  pad ", None, "café--", "------"]),
    ("lpad(s, 3, 'x')", ["Hel", "  p", None, "caf", "xxx"]),
    ("lpad(s, 8, '')", ["Hello", "  pad  ", None, "café", ""]),
    ("lpad(s, 0, 'x')", ["", "", None, "", ""]),
    ("lpad(s, 3, null)", [None] * 5),
    ("repeat(s, 2)", ["HelloHello", "  pad    pad  ", None, "cafécafé", ""]),
    ("contains_string(s, 'll')", [True, False, None, False, False]),
    ("contains_string(s, 'LL')", [False, False, None, False, False]),
    ("icontains_string(s, 'LL')", [True, False, None, False, False]),
    ("like(s, 'H%')", [True, False, None, False, False]),
    ("like(s, '_ell_')", [True, False, None, False, False]),
    ("like(s, 'caf_')", [False, False, None, True, False]),
    ("like(s, '%')", [True, True, None, True, True]),
    ("like(concat(s, '%'), '%!%', '!')", [True, True, None, True, True]),
    ("like(concat(s, '_'), 'Hello!_', '!')", [True, False, None, False, False]),
    ("like('a\\\\b', 'a\\\\b')", [True] * 5),  # without ESCAPE a backslash is an ordinary character
    ("regexp_like(s, '^[A-Z]')", [True, False, None, False, False]),
    ("regexp_like(s, 'l+')", [True, False, None, False, False]),
    ("regexp_extract(s, 'l+')", ["ll", None, None, None, None]),
    ("regexp_extract(s, '(H)(e)(l+)', 3)", ["ll", None, None, None, None]),
    ("regexp_extract(s, '([a-z])([a-z])', 0)", ["el", "pa", None, "ca", None]),
    ("regexp_extract(s, '(?P<first>[a-z])([a-z])', 2)", ["l", "a", None, "a", None]),
    ("regexp_extract(s, '[(]?(a)', 1)", [None, "a", None, "a", None]),
    ("regexp_replace(s, '([aeiou])', '<$1>')", ["H<e>ll<o>", "  p<a>d  ", None, "c<a>fé", ""]),
]


@pytest.mark.parametrize("text,expected", STRING_CASES)
def test_string_functions(text, expected):
    assert ev(text) == expected


@pytest.mark.parametrize("text,expected", STRING_CASES)
def test_string_functions_agree_on_dictionary_input(text, expected):
    # The same cases with s dictionary-encoded go through the per-distinct-value path.
    dict_columns = dict(COLUMNS, s=COLUMNS["s"].dictionary_encode())
    assert ev(text, dict_columns) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("nvl(l, 99)", [3, -4, 99, 0, 10]),
        ("nvl(l, x)", [3.0, -4.0, None, 0.0, 10.0]),
        ("nvl(s, 'none')", ["Hello", "  pad  ", "none", "café", ""]),
        ("nvl(null, 'z')", ["z"] * 5),
        ("coalesce(null, x, l, 7)", [2.5, -2.5, 7.0, 0.0, 1.25]),
        ("coalesce(s)", ["Hello", "  pad  ", None, "café", ""]),
        ("nullif(l, 0)", [3, -4, None, None, 10]),
        ("nullif(s, '')", ["Hello", "  pad  ", None, "café", None]),
        ("nullif(l, null)", [3, -4, None, 0, 10]),
        ("if(l > 0, 'pos', 'other')", ["pos", "other", "other", "other", "pos"]),
        ("if(l, l, null)", [3, None, None, None, 10]),  # Druid: positive numbers are true
        ("if(x > 0, 1, 0.5)", [1.0, 0.5, 0.5, 0.5, 1.0]),
        ("if(s, 1, 2)", [2, 2, 2, 2, 2]),
        ("case_searched(l > 5, 'big', l > 0, 'small', 'none')", ["small", "none", "none", "none", "big"]),
        ("case_searched(l > 5, 'big', l > 0, 'small')", ["small", None, None, None, "big"]),
        ("case_simple(d, 'Apple', 1, 'apple', 2, 0)", [1, 2, 0, 1, 0]),
        ("case_simple(d, 'Apple', 1, 'apple', 2)", [1, 2, None, 1, None]),
        ("case_simple(l, 3, 'three', 10, 'ten', 'other')", ["three", "other", "other", "other", "ten"]),
        ("isnull(s)", [False, False, True, False, False]),
        ("notnull(x)", [True, True, False, True, True]),
        ("isnull(null)", [True] * 5),
    ],
)
def test_null_and_conditional_functions(text, expected):
    assert ev(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("cast(num, 'LONG')", [12, 7, None, None, -3]),
        ("cast(num, 'BIGINT')", [12, 7, None, None, -3]),
        ("cast(num, 'DOUBLE')", [12.0, 7.0, None, None, -3.9]),
        ("cast(num, 'FLOAT')", [12.0, 7.0, None, None, pytest.approx(-3.9)]),
        ("cast(x, 'LONG')", [2, -2, None, 0, 1]),
        ("cast(l, 'DOUBLE')", [3.0, -4.0, None, 0.0, 10.0]),
        ("cast(l, 'STRING')", ["3", "-4", None, "0", "10"]),
        ("cast(x, 'VARCHAR')", ["2.5", "-2.5", None, "0.0", "1.25"]),
        ("cast(l > 0, 'STRING')", ["1", "0", None, "0", "1"]),
        ("cast('1e3', 'LONG')", [1000] * 5),
        ("cast('+5', 'LONG')", [5] * 5),
        ("cast('99999999999999999999', 'LONG')", [9_223_372_036_854_775_807] * 5),
        ("cast('NaN', 'DOUBLE') != 0", [True] * 5),
        ("cast('2020-01-02', 'TIMESTAMP') == timestamp_parse('2020-01-02')", [True] * 5),
        ("cast(86400000, 'TIMESTAMP') == timestamp_parse('1970-01-02')", [True] * 5),
    ],
)
def test_cast(text, expected):
    assert ev(text) == expected


def test_cast_types_and_errors():
    assert infer_type(parse("cast(num, 'LONG')"), TYPES) == LONG
    assert infer_type(parse("cast(l, 'FLOAT')"), TYPES) == FLOAT
    assert infer_type(parse("cast(l, 'VARCHAR')"), TYPES) == STRING
    assert infer_type(parse("cast(l, 'TIMESTAMP')"), TYPES) == TIMESTAMP
    assert evaluate(parse("cast(l, 'FLOAT')"), COLUMNS, N).type == pa.float32()
    assert ev("cast(cast(1.0, 'STRING'), 'DOUBLE')") == [1.0] * 5
    with pytest.raises(ValidationError, match="unknown type 'WIDGET'"):
        infer_type(parse("cast(l, 'WIDGET')"), TYPES)
    with pytest.raises(UnsupportedError, match="cast to COMPLEX<json> is not supported"):
        infer_type(parse("cast(l, 'COMPLEX<json>')"), TYPES)
    # A single value casts to a one-element array (null to a null array), as in Druid.
    assert infer_type(parse("cast(l, 'ARRAY<LONG>')"), TYPES) == ColumnType.parse("ARRAY<LONG>")
    assert ev("cast(1.5, 'ARRAY<LONG>')") == [[1]] * 5
    with pytest.raises(ValidationError, match="cannot cast ARRAY<BIGINT> to BIGINT"):
        infer_type(parse("cast(array(1), 'LONG')"), TYPES)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("abs(l)", [3, 4, None, 0, 10]),
        ("abs(x)", [2.5, 2.5, None, 0.0, 1.25]),
        ("ceil(x)", [3.0, -2.0, None, 0.0, 2.0]),
        ("floor(x)", [2.0, -3.0, None, 0.0, 1.0]),
        ("ceil(l)", [3.0, -4.0, None, 0.0, 10.0]),  # Druid's ceil/floor always give DOUBLE
        ("round(x)", [3.0, -3.0, None, 0.0, 1.0]),  # HALF_UP: halves round away from zero
        ("round(x, 1)", [2.5, -2.5, None, 0.0, 1.3]),
        ("round(l, -1)", [0, 0, None, 0, 10]),
        ("round(1250, -2)", [1300] * 5),
        ("round(l)", [3, -4, None, 0, 10]),
        ("round(x / 0.0)", [None] * 5),
        ("round(cast('NaN', 'DOUBLE'))", [0.0] * 5),
        ("sqrt(l)", [math.sqrt(3), float("nan"), None, 0.0, math.sqrt(10)]),
        ("pow(l, 2)", [9.0, 16.0, None, 0.0, 100.0]),
        ("power(2, 0.5)", [math.sqrt(2)] * 5),
        ("exp(0)", [1.0] * 5),
        ("log(l)", [math.log(3), float("nan"), None, float("-inf"), math.log(10)]),
        ("log10(l)", [math.log10(3), float("nan"), None, float("-inf"), 1.0]),
        ("greatest(l, x)", [3.0, -2.5, None, 0.0, 10.0]),
        ("greatest(l, 1, null)", [3, 1, 1, 1, 10]),  # nulls are skipped
        ("least(l, 1)", [1, -4, 1, 0, 1]),
        ("greatest(s, 'M')", ["M", "M", "M", "café", "M"]),
        ("least(l, 'b')", ["3", "-4", "b", "0", "10"]),
        ("greatest(null, null)", [None] * 5),
        ("div(l, 3)", [1, -1, None, 0, 3]),
        ("div(x, 1)", [2, -2, None, 0, 1]),
        ("div(l, 0)", [None] * 5),
        ("mod(l, 3)", [0, -1, None, 0, 1]),
        ("mod(x, 2)", [0.5, -0.5, None, 0.0, 1.25]),
        ("mod(l, 0)", [None] * 5),
        ("signum(x)", [1.0, -1.0, None, 0.0, 1.0]),
        ("atan2(1, 1)", [math.pi / 4] * 5),
        ("cbrt(l)", [3 ** (1 / 3), -(4 ** (1 / 3)), None, 0.0, 10 ** (1 / 3)]),
    ],
)
def test_math_functions(text, expected):
    assert ev(text) == approx(expected)


def test_math_output_types():
    assert infer_type(parse("abs(l)"), TYPES) == LONG
    assert infer_type(parse("abs(x)"), TYPES) == DOUBLE
    assert infer_type(parse("round(l, 2)"), TYPES) == LONG
    assert infer_type(parse("floor(l)"), TYPES) == DOUBLE
    assert infer_type(parse("div(x, l)"), TYPES) == LONG
    assert infer_type(parse("mod(x, l)"), TYPES) == DOUBLE
    assert infer_type(parse("greatest(l, s)"), TYPES) == STRING
    assert infer_type(parse("nvl(l, x)"), TYPES) == DOUBLE
    assert infer_type(parse("if(l, 'a', 1)"), TYPES) == STRING
    assert infer_type(parse("case_searched(l > 0, 1, null)"), TYPES) == LONG
    assert infer_type(parse("nullif(s, 'a')"), TYPES) == STRING
    assert infer_type(parse("contains_string(s, 'a')"), TYPES) == LONG
    assert infer_type(parse("isnull(s)"), TYPES) == LONG


def test_function_argument_errors():
    with pytest.raises(ValidationError, match=r"concat\(\) takes at least 1 argument, got 0 in 'concat\(\)'"):
        infer_type(parse("concat()"), TYPES)
    with pytest.raises(ValidationError, match=r"substring\(\) takes 3 arguments, got 2.*usage: substring"):
        infer_type(parse("substring(s, 1)"), TYPES)
    with pytest.raises(ValidationError, match="substring index must be 0 or more"):
        evaluate(parse("substring(s, -1, 2)"), COLUMNS, N)
    with pytest.raises(ValidationError, match=r"left\(\) needs a length of 0 or more"):
        evaluate(parse("left(s, -1)"), COLUMNS, N)
    with pytest.raises(ValidationError, match="invalid regular expression '\\(unclosed'"):
        evaluate(parse("regexp_like(s, '(unclosed')"), COLUMNS, N)
    with pytest.raises(ValidationError, match="regexp_extract group 3 does not exist"):
        evaluate(parse("regexp_extract(s, '(a)', 3)"), COLUMNS, N)
    with pytest.raises(ValidationError, match="LIKE escape must be one character"):
        evaluate(parse("like(s, 'a', '!!')"), COLUMNS, N)
    with pytest.raises(ValidationError, match="must be an integer"):
        evaluate(parse("left(s, 'x')"), COLUMNS, N)


def test_registry_has_the_documented_functions():
    documented = """concat lower upper strlen length substring replace strpos trim ltrim rtrim left right
        reverse lpad rpad contains_string like regexp_like regexp_extract nvl coalesce nullif if
        case_searched case_simple isnull notnull cast abs ceil floor round sqrt pow power exp log log10
        greatest least div mod timestamp_floor timestamp_ceil timestamp_shift timestamp_extract
        timestamp_format timestamp_parse timestamp""".split()
    assert set(documented) <= set(FUNCTIONS)
    assert all(FUNCTIONS[name].doc for name in documented)


def test_array_slice_pads_past_the_end_with_nulls_as_druid():
    """Druid's ARRAY_SLICE copies the range, so an end past the last element pads with nulls
    (its qaArray results: array_slice([], 0, 2) is [null, null]); a start past the end is null."""
    arrays = {"a": pa.array([[1, 2], [], None, [5, 6, 7]], pa.list_(pa.int64()))}
    assert evaluate(parse("array_slice(a, 1, 4)"), arrays, 4).to_pylist() == \
        [[2, None, None], None, None, [6, 7, None]]
    assert evaluate(parse("array_slice(a, 0, 2)"), arrays, 4).to_pylist() == [[1, 2], [None, None], None, [5, 6]]
    with pytest.raises(ValidationError, match="give a smaller end"):
        evaluate(parse("array_slice(a, 0, 5000000)"), arrays, 4)
