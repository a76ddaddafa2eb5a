from collections.abc import Mapping

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.expr import evaluate, evaluate_column, evaluate_predicate, infer_type, parse
from common.types.column_type import DOUBLE, FLOAT, LONG, STRING, TIMESTAMP, ColumnType

COLUMNS = {
    "a": pa.array([7, -7, 7, None, 0], pa.int64()),
    "b": pa.array([2, 2, -2, 3, 0], pa.int64()),
    "x": pa.array([1.5, -2.5, None, 4.0, 0.0], pa.float64()),
    "f": pa.array([0.5, 1.0, 2.0, None, -1.0], pa.float32()),
    "s": pa.array(["b", "a", None, "B", "true"]),
    "n": pa.array(["10", "2", "x", None, "1.5"]),
    "__time": pa.array([0, 86_400_000, None, 1_442_016_000_000, -1], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
}
TYPES = {"a": LONG, "b": LONG, "x": DOUBLE, "f": FLOAT, "s": STRING, "n": STRING, "__time": TIMESTAMP}
N = 5


def ev(text, columns=COLUMNS, n=N):
    return evaluate(parse(text), columns, n).to_pylist()


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a + b", [9, -5, 5, None, 0]),
        ("a - b", [5, -9, 9, None, 0]),
        ("a * b", [14, -14, -14, None, 0]),
        ("a / b", [3, -3, -3, None, None]),  # truncates toward zero; x/0 is null
        ("a % b", [1, -1, 1, None, None]),  # sign follows the dividend, as in Java
        ("a ^ 2", [49, 49, 49, None, 0]),
        ("b ^ -1", [0, 0, 0, 0, None]),  # LONG powers truncate; 0 ^ -1 is a division by zero
        ("-a", [-7, 7, -7, None, 0]),
        ("a + x", [8.5, -9.5, None, None, 0.0]),
        ("a / 2.0", [3.5, -3.5, 3.5, None, 0.0]),
        ("x / 0", [None] * 5),
        ("x % 2", [1.5, -0.5, None, 0.0, 0.0]),
        ("f * 2", [1.0, 2.0, 4.0, None, -2.0]),
        ("7 / 2", [3] * 5),
        ("7.0 / 2", [3.5] * 5),
        ("2 ^ 10", [1024] * 5),
        ("2.0 ^ 0.5", [2.0**0.5] * 5),
        ("null + 1", [None] * 5),
        ("a + null", [None] * 5),
        ("__time + 1", [1, 86_400_001, None, 1_442_016_000_001, 0]),
        ("__time / 86400000", [0, 1, None, 16_690, 0]),
    ],
)
def test_arithmetic(text, expected):
    assert ev(text) == expected


def test_arithmetic_result_types():
    assert evaluate(parse("a + b"), COLUMNS, N).type == pa.int64()
    assert evaluate(parse("a + x"), COLUMNS, N).type == pa.float64()
    assert evaluate(parse("a + f"), COLUMNS, N).type == pa.float64()
    assert evaluate(parse("__time - 1"), COLUMNS, N).type == pa.int64()
    assert infer_type(parse("a + b"), TYPES) == LONG
    assert infer_type(parse("a / b"), TYPES) == LONG
    assert infer_type(parse("a + f"), TYPES) == DOUBLE
    assert infer_type(parse("-f"), TYPES) == DOUBLE
    assert infer_type(parse("__time + 1"), TYPES) == LONG
    assert infer_type(parse("a > b"), TYPES) == LONG
    assert infer_type(parse("null"), TYPES) == STRING
    assert infer_type(parse("null + 1"), TYPES) == LONG
    assert infer_type(parse("__time"), TYPES) == TIMESTAMP


def test_long_overflow_wraps_like_java():
    big = {"v": pa.array([9_223_372_036_854_775_807, -9_223_372_036_854_775_808])}
    assert ev("v + 1", big, 2) == [-9_223_372_036_854_775_808, -9_223_372_036_854_775_807]
    assert ev("v % -1", big, 2) == [0, 0]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a > b", [True, False, True, None, False]),
        ("a == 7", [True, False, True, None, False]),
        ("a != 7", [False, True, False, None, True]),
        ("a <= x", [False, True, None, None, True]),
        ("x >= 0", [True, False, None, True, True]),
        ("s < 'b'", [False, True, None, True, False]),  # byte order: 'B' < 'a' < 'b'
        ("s == 'b'", [True, False, None, False, False]),
        ("n > 5", [True, False, None, None, False]),  # a string against a number compares as DOUBLE
        ("n == 1.5", [False, False, None, None, True]),
        ("__time >= 86400000", [False, True, None, True, False]),
        ("__time == __time", [True, True, None, True, True]),
        ("null == null", [None] * 5),
        ("a == null", [None] * 5),
    ],
)
def test_comparisons(text, expected):
    assert ev(text) == expected


def test_comparison_booleans_become_long_in_evaluate_column():
    out = evaluate_column(parse("a > b"), COLUMNS, N, TYPES)
    assert out.type == pa.int64()
    assert out.to_pylist() == [1, 0, 1, None, 0]
    assert ev("(a > b) + 1") == [2, 1, 2, None, 1]


def test_three_valued_logic():
    cols = {
        "p": pa.array([True, True, True, False, False, False, None, None, None]),
        "q": pa.array([True, False, None, True, False, None, True, False, None]),
    }
    assert ev("p && q", cols, 9) == [True, False, None, False, False, False, None, False, None]
    assert ev("p || q", cols, 9) == [True, True, True, True, False, None, True, None, None]
    assert ev("!p", cols, 9) == [False, False, False, True, True, True, None, None, None]
    assert ev("!(p && q) == (!p || !q)", cols, 9) == [True, True, None, True, True, True, None, True, None]


def test_truthiness_in_predicates():
    cols = {
        "l": pa.array([0, 1, -3, None]),
        "d": pa.array([0.0, 0.1, float("nan"), None]),
        "s": pa.array(["true", "TRUE", "yes", None]),
    }
    assert evaluate_predicate(parse("l"), cols, 4).to_pylist() == [False, True, False, None]  # Druid: positive numbers are true
    assert evaluate_predicate(parse("d"), cols, 4).to_pylist() == [False, True, False, None]
    assert evaluate_predicate(parse("s"), cols, 4).to_pylist() == [True, True, False, None]
    assert evaluate_predicate(parse("l && s"), cols, 4).to_pylist() == [False, True, False, None]
    pred = evaluate_predicate(parse("1"), cols, 4)
    assert isinstance(pred, pa.BooleanArray) and pred.to_pylist() == [True] * 4
    assert evaluate_predicate(parse("null"), cols, 4).to_pylist() == [None] * 4


@pytest.mark.parametrize(
    "text,message",
    [
        ("s + 1", "cannot apply '+' to STRING in 's + 1'; use concat() to join strings"),
        ("1 + (s + 1)", "in 's + 1'"),
        ("a * s", "cannot apply '*' to STRING in 'a * s'; convert it with cast(s, 'DOUBLE')"),
        ("-s", "cannot apply '-' to STRING in '-s'"),
        ("abs(s)", "cannot apply abs() to STRING in 'abs(s)'"),
        ("timestamp_floor(s, 'P1D')", "parse 's' with timestamp_parse() first"),
        ("timestamp_floor(x, 'P1D')", "cannot apply timestamp_floor() to DOUBLE"),
        ("lower(a, b)", "lower() takes 1 argument, got 2 in 'lower(a, b)'"),
        ("substring(s, a, 1)", "argument 2 of substring() must be a constant, not 'a'"),
        ("cast(a, concat('LO', 'NG'))", "must be a literal"),
        ("timestamp_extract(__time, 'FORTNIGHT')", "unknown timestamp_extract unit 'FORTNIGHT'"),
    ],
)
def test_type_errors_name_the_expression(text, message):
    with pytest.raises(ValidationError) as info:
        infer_type(parse(text), TYPES)
    assert message in str(info.value)
    with pytest.raises(ValidationError) as info:  # evaluation runs the same checks
        evaluate(parse(text), COLUMNS, N)
    assert message in str(info.value)


def test_unknown_column_and_function_suggest_names():
    with pytest.raises(ValidationError, match="unknown column 'ab'; did you mean 'abc', 'a'"):
        infer_type(parse("ab + 1"), {"a": LONG, "abc": LONG, "zzz": LONG})
    with pytest.raises(ValidationError, match="unknown function 'lowr'; did you mean 'lower'"):
        infer_type(parse("lowr(s)"), TYPES)
    with pytest.raises(ValidationError, match="unknown function 'timestamp_flor'; did you mean 'timestamp_floor'"):
        evaluate(parse("timestamp_flor(__time, 'P1D')"), COLUMNS, N)


def test_missing_column_reads_as_null_at_evaluation():
    assert ev("nope + 1") == [None] * 5
    assert ev("nvl(nope, 'z')") == ["z"] * 5


class LazyColumns(Mapping):
    def __init__(self, data):
        self.data = data
        self.loaded = []

    def __getitem__(self, key):
        self.loaded.append(key)
        return self.data[key]

    def __iter__(self):
        raise AssertionError("evaluation must not enumerate the columns")

    def __len__(self):
        raise AssertionError("evaluation must not count the columns")


def test_lazy_mapping_touches_only_referenced_columns_once():
    lazy = LazyColumns(COLUMNS)
    assert evaluate(parse("a + a * b"), lazy, N).to_pylist() == [21, -21, -7, None, 0]
    assert lazy.loaded == ["a", "b"]


def test_chunked_and_narrow_inputs_are_normalized():
    cols = {
        "i": pa.chunked_array([pa.array([1, 2], pa.int8()), pa.array([3], pa.int8())]),
        "u": pa.array([1, 2, 3], pa.uint16()),
        "t": pa.array([1, 2, 3], pa.timestamp("s")),
        "ls": pa.array(["x", "y", None], pa.large_string()),
        "flag": pa.array([True, False, None]),
    }
    assert ev("i * 100 + u", cols, 3) == [101, 202, 303]
    assert ev("timestamp_to_millis(t)", cols, 3) == [1000, 2000, 3000]
    assert ev("concat(ls, '!')", cols, 3) == ["x!", "y!", None]
    assert ev("flag + 1", cols, 3) == [2, 1, None]
    with pytest.raises(ValidationError, match="column 'u' has 3 rows but the batch has 4"):
        evaluate(parse("u"), cols, 4)


def test_constants_expand_to_num_rows():
    out = evaluate(parse("1 + 2 * 3"), {}, 3)
    assert out.type == pa.int64() and out.to_pylist() == [7, 7, 7]
    assert evaluate(parse("concat('a', 'b')"), {}, 2).to_pylist() == ["ab", "ab"]
    assert evaluate(parse("null"), {}, 2).to_pylist() == [None, None]
    assert evaluate_column(parse("null"), {}, 2, {}).type == pa.string()


def test_evaluate_column_casts_to_inferred_type():
    cols = {"f": pa.array([1.5, None], pa.float32()), "s": pa.array(["x", "y"]).dictionary_encode()}
    types = {"f": FLOAT, "s": STRING}
    out = evaluate_column(parse("f"), cols, 2, types)
    assert out.type == pa.float32() and out.to_pylist() == [1.5, None]
    out = evaluate_column(parse("upper(s)"), cols, 2, types)
    assert out.type == pa.string() and out.to_pylist() == ["X", "Y"]
    out = evaluate_column(parse("timestamp_parse('2020-01-01')"), cols, 2, types)
    assert out.type == pa.timestamp("ms", tz="UTC")
    assert out.cast(pa.int64()).to_pylist() == [1_577_836_800_000] * 2
    assert evaluate_column(parse("if(f > 1, 1, 2.5)"), cols, 2, types).to_pylist() == [1.0, 2.5]


def test_column_types_may_be_given_as_names():
    assert infer_type(parse("a + 1"), {"a": "BIGINT"}) == LONG
    assert infer_type(parse("a"), {"a": ColumnType.parse("VARCHAR")}) == STRING


# ---- dictionary-encoded inputs -----------------------------------------------------------------
PAGES = pa.array(["Foo", "bar", None, "Foo", "bar", "Baz"]).dictionary_encode()
DICT_COLUMNS = {"page": PAGES, "n": pa.array([1, 2, 3, 4, 5, 6])}


def test_string_functions_on_dictionary_keep_the_encoding():
    out = evaluate(parse("lower(page)"), DICT_COLUMNS, 6)
    assert pa.types.is_dictionary(out.type)
    assert out.to_pylist() == ["foo", "bar", None, "foo", "bar", "baz"]
    out = evaluate(parse("concat(page, '-x')"), DICT_COLUMNS, 6)
    assert out.to_pylist() == ["Foo-x", "bar-x", None, "Foo-x", "bar-x", "Baz-x"]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("page == 'Foo'", [True, False, None, True, False, False]),
        ("strlen(page)", [3, 3, None, 3, 3, 3]),
        ("isnull(page)", [False, False, True, False, False, False]),
        ("nvl(page, 'none')", ["Foo", "bar", "none", "Foo", "bar", "Baz"]),
        ("if(page == 'bar', 1, 0)", [0, 1, 0, 0, 1, 0]),
        ("concat(page, n)", ["Foo1", "bar2", None, "Foo4", "bar5", "Baz6"]),  # two arrays: decoded
        ("page == page", [True, True, None, True, True, True]),
        ("like(page, 'b%')", [False, True, None, False, True, False]),
    ],
)
def test_dictionary_inputs(text, expected):
    assert ev(text, DICT_COLUMNS, 6) == expected
    decoded = {"page": PAGES.dictionary_decode(), "n": DICT_COLUMNS["n"]}
    assert ev(text, decoded, 6) == expected


def test_dictionary_with_unused_entries_and_narrow_indices():
    arr = pa.DictionaryArray.from_arrays(
        pa.array([0, 0, 1, None, 0, 1, 1, 0], pa.int8()), pa.array(["a", "b", "never-used"])
    )
    assert ev("upper(page)", {"page": arr}, 8) == ["A", "A", "B", None, "A", "B", "B", "A"]
    assert ev("coalesce(page, 'z')", {"page": arr}, 8) == ["a", "a", "b", "z", "a", "b", "b", "a"]
    big = pa.array(["v%d" % (i % 200) for i in range(400)] + [None]).dictionary_encode()
    out = ev("concat(page, '!')", {"page": big}, 401)
    assert out[:3] == ["v0!", "v1!", "v2!"] and out[-1] is None


def test_timestamp_against_string_reads_an_iso_instant():
    assert ev("__time >= '1970-01-02'") == [False, True, None, True, False]
    assert ev("'1970-01-01T00:00:00Z' == __time") == [True, False, None, False, False]
    assert ev("__time < 'garbage'") == [None, None, None, None, None]


def test_empty_batch():
    cols = {"a": pa.array([], pa.int64()), "s": pa.array([], pa.string()).dictionary_encode()}
    assert evaluate(parse("a + 1"), cols, 0).to_pylist() == []
    assert evaluate(parse("lower(s)"), cols, 0).to_pylist() == []
    assert evaluate(parse("1 + 1"), cols, 0).to_pylist() == []
    assert evaluate_predicate(parse("a > 0"), cols, 0).to_pylist() == []


def test_null_arguments_keep_boolean_results_boolean():
    for text in ("a == null", "like(s, null)", "contains_string(null, 'x')", "null < 1"):
        out = evaluate(parse(text), COLUMNS, N)
        assert out.type == pa.bool_() and out.to_pylist() == [None] * N, text
        assert infer_type(parse(text), TYPES) == LONG
