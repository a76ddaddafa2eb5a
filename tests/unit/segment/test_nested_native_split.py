"""The compiled field split of nested JSON columns against the Python split it replaces: on mean
generated documents (unicode keys, keys with dots, quotes and escapes, mixed types per path, nulls,
empty objects and arrays, arrays of objects, deep nesting, huge integers, -0.0, 1e400, duplicate
keys, NaN, lone surrogates, malformed text) both give the same fields, types, rows, values, boolean
counts, raw-drop decision, guard result and errors, and encode_nested writes byte-identical parts."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ValidationError
from common.segment import nested_native_split
from common.segment.nested_column import _FieldValues, encode_nested
from common.segment.nested_fields import NestedOptions, split_documents
from common.segment.nested_native_split import split_native
from common.types.column_type import JSON


def test_the_compiled_split_is_built():
    # setup.py builds it on `pip install -e .`; without it every column takes the Python split.
    assert nested_native_split.available(), "run `pip install -e .` (or setup.py build_ext --inplace)"


def _values(kind, vals) -> list:
    if isinstance(vals, pa.Array):
        return vals.to_pylist()
    if kind == "STRING":
        return list(vals)
    if kind == "ARRAY":
        return [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in vals]
    dtype = np.int64 if kind == "LONG" else np.float64
    return [repr(v) for v in np.asarray(vals, dtype=dtype).tolist()]


def _view(split) -> tuple:
    fields = []
    for f in split.fields:
        grouped = _FieldValues(f)
        groups = {k: (None if pos is None else pos.tolist(), _values(k, vals))
                  for k, (pos, vals) in grouped.groups.items()}
        fields.append((f.path, list(f.types), f.booleans, f.long_count, grouped.rows.tolist(), groups))
    return (fields, split.rebuildable, list(split.dropped_paths), split.null_rows().tolist(),
            split.raw_texts().to_pylist())


def _python(texts, options=None):
    try:
        return _view(split_documents(list(texts), options))
    except (ValidationError, UnicodeError) as exc:  # (lone surrogates fail when the texts go to Arrow)
        return ("error", str(exc))


def _native(texts, options=None, arrow=True):
    source = pa.array(list(texts), pa.string()) if arrow else list(texts)
    try:
        split = split_native(source, options)
    except ValidationError as exc:
        return ("error", str(exc))
    return None if split is None else _view(split)


def assert_same(texts, options=None):
    want = _python(texts, options)
    for arrow in (True, False):
        got = _native(texts, options, arrow)
        if got is not None:
            assert got == want


def _encoded(texts, options=None) -> tuple:
    enc = encode_nested(pa.array(texts, pa.string()), JSON, options)
    return {k: v.to_pybytes() for k, v in enc.parts.items()}, enc.stats, enc.spec.to_json()


def assert_same_column(texts, options=None):
    outcomes = []
    was = nested_native_split.ENABLED
    try:
        for enabled in (False, True):
            nested_native_split.ENABLED = enabled
            try:
                outcomes.append(_encoded(texts, options))
            except (ValidationError, ValueError, UnicodeError, pa.ArrowException) as exc:
                outcomes.append((type(exc), str(exc)))
    finally:
        nested_native_split.ENABLED = was
    assert outcomes[0] == outcomes[1]


# ---- generated documents ----------------------------------------------------------------------
_KEYS = st.one_of(st.sampled_from(["a", "b", "c", "a.b", "it's", 'q"k', "back\\slash", "", "ключ", "0", "[0]",
                                   "x y", "tab\there", "\u2028", "😀", "$", "a['b']"]),
                  st.text(max_size=6))
_FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([-0.0, 0.0, 1.0, 1e-4, 1e16,
                                                                                        9999999999999998.0, 1e-5, 0.1]))
_INTS = st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**63, -2**63]))
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, st.text(max_size=8),
                     st.sampled_from(["", "x", "é", "\x00", "\n\"\\", "\x1f\x7f", "😀"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=20)
_SHAPED = st.fixed_dictionaries({"user": st.fixed_dictionaries({"id": _INTS, "name": st.text(max_size=4)}),
                                 "v": _SCALARS, "tags": st.lists(_SCALARS, max_size=3)},
                                optional={"extra": _VALUES, "arr": st.lists(st.dictionaries(_KEYS, _SCALARS, max_size=2),
                                                                              max_size=3)})

# Texts json.dumps does not write: what orjson or the C split read otherwise, and bad input.
_ODD_TEXTS = ['{"a": NaN}', '{"a": [1, Infinity]}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": 1e-400}',
              '{"a": 1, "a": {"c": "dup"}}', '{"a": {"b": 1, "b": 2}}', '{"a":"\\u0061","\\u0061":2}',
              '{"a": "\\ud800"}', '{"\\udc00": 1}', '{"s": "\\ud83d\\ude00 \\u00e9 \\/ \\b\\f"}',
              '{"a": 1E2, "b": 1.0, "c": -0, "d": 0e5, "e": -0.0, "f": 1.5e3, "g": 12345678901234567890}',
              '{"a": 0.00001, "b": 1e16, "c": 123456789012345678}', '  {"a" :  2 }  ', 'null', ' null ', '{}', '[]',
              '[{}]', '[null]', '"\\u0000"', 'true', '{"a":[true,1]}', '{"a":[1,2.5]}', '{"a":["x",1,2.5,true,null]}',
              '[' * 150 + ']' * 150, '{"a":' * 102 + '1' + '}' * 102, '{"a":' * 100 + '[]' + '}' * 100,
              '{"a":' * 101 + '{}' + '}' * 101, '[' + ','.join('{"k":1}' for _ in range(1000)) + ']']
_BAD_TEXTS = ['{"a": 1,}', '{"a": }', '', '  ', '{"a": 1} x', '[1,]', '01', '{"a": 01}', '\ufeff{"a": 1}',
              '{"a":"\x01"}', '{"a": .5}', '{"a": 1.}', '{"a": "\\x"}', '{"a": tru}', '{"a": "x}', '[' * 1000]


def _text(doc, ensure_ascii: bool, spaced: bool) -> str | None:
    if doc is None:
        return None
    if spaced:
        return json.dumps(doc, ensure_ascii=ensure_ascii, indent=1)
    return json.dumps(doc, ensure_ascii=ensure_ascii, separators=(",", ":"))


# Per document: generated, or an odd text (malformed ones fail the whole column: tested one by one).
_DOCS = st.lists(st.tuples(st.one_of(_VALUES, _SHAPED, _SHAPED), st.booleans(), st.booleans(),
                           st.one_of(st.none(), st.none(), st.sampled_from(_ODD_TEXTS))), min_size=1, max_size=12)


def _texts(drawn) -> list:
    return [odd if odd is not None else _text(doc, ascii_, spaced) for doc, ascii_, spaced, odd in drawn]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCS, st.sampled_from([None, 0, 1, 3]))
def test_the_compiled_split_matches_the_python_split(drawn, max_fields):
    options = None if max_fields is None else NestedOptions(max_fields=max_fields)
    assert_same(_texts(drawn), options)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCS)
def test_encode_nested_writes_the_same_column_either_way(drawn):
    assert_same_column(_texts(drawn))


@pytest.mark.parametrize("text", _ODD_TEXTS + _BAD_TEXTS)
def test_each_odd_document_beside_plain_ones(text):
    assert_same(['{"a": 1, "b": {"c": "x"}}', text, '{"b": {"c": "y"}, "a": true}', None])


def test_malformed_documents_name_the_same_row_either_way():
    texts = ['{"a": 1}', '{"a": NaN}', '{"a": ', '{"b": 2}']
    assert _native(texts) == _python(texts) == ("error", "row 2: malformed JSON: Expecting value: line 1 column 7 "
                                                         "(char 6)")


def test_nan_and_numbers_beyond_a_double_split_as_jackson_prints_them_either_way():
    # JSON has no NaN or infinity: such a document reads as Druid's Jackson prints it ("NaN",
    # "Infinity"), in both splits, so the column's text is JSON (common/json/document_text.py).
    texts = ['{"a": [1.5]}', '{"a": [NaN]}', '{"b": 1e400, "c": -1e999}']
    assert_same_column(texts)
    assert _view(split_native(pa.array(texts))) == _python(texts)
    assert _python(texts)[4][1:] == ['{"a":["NaN"]}', '{"b":"Infinity","c":"-Infinity"}']


def test_lone_surrogates_are_an_error_naming_the_row_either_way():
    # No UTF-8 text holds one; ingestion makes such a line a parse exception before any build.
    for enabled in (False, True):
        with pytest.raises(ValidationError, match=r"row 1: the JSON document holds a lone UTF-16 surrogate "
                                                  r"\(\\ud800\)"):
            nested_native_split.ENABLED = enabled
            try:
                _encoded(['{"a": 1}', '{"a": "\\ud800"}'], None)
            finally:
                nested_native_split.ENABLED = True
    assert_same_column(['{"a": 1}', '{"a": "\\ud800"}'])


@pytest.mark.parametrize("props", [{"skipPaths": ["$.a"]}, {"skipPaths": ["re:^\\$\\.b"]},
                                   {"typedPaths": {"$.a": "DOUBLE", "$.b.c": "VARCHAR"}}, {"maxFields": 1},
                                   {"keepRaw": True}, {"keepRaw": False}])
def test_column_options_give_the_same_column_either_way(props):
    texts = ['{"a": 1, "b": {"c": "x", "d": [1, 2]}}', '{"a": "2.5", "b": {"c": 3}}', None, '{"b": {"c": true}}',
             '{"a": 1e-7}']
    assert_same_column(texts, NestedOptions.from_properties(props, "doc"))


def test_sliced_and_large_string_arrays_read_their_own_rows():
    texts = ['{"a": 1}', None, '{"a": "x", "b": [1]}', '{"b": []}', '{"c": {"d": 2.5}}']
    whole = pa.array(texts, pa.string())
    for arr in (whole.slice(1, 3), pa.array(texts, pa.large_string()).slice(2),
                pa.chunked_array([whole.slice(0, 2), whole.slice(2)])):
        got = _view(split_native(arr))
        assert got == _python(arr.to_pylist())


def test_the_bench_documents_split_the_same_and_drop_the_raw_values():
    from bench.nested import documents

    table, _ = documents(2000, 3)
    texts = table.column("doc").to_pylist()
    split = split_native(table.column("doc"))
    assert split.rebuildable and not split._python_texts  # every document read by the C pass
    assert _view(split) == _python(texts)


def _number_text(value: float, form: int) -> str:
    if form == 0:
        return repr(value)
    if form == 1:
        return f"{value:.{abs(hash(value)) % 18}f}"  # trailing zeros, or digits beyond the shortest
    if form == 2:
        return f"{value:.17g}"
    return str(int(value)) if abs(value) < 1e18 else repr(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e17, max_value=1e17),
                                    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e-3, max_value=1e-3),
                                    st.integers(-2**60, 2**60).map(float)),
                          st.integers(0, 3)), min_size=1, max_size=6))
def test_numbers_print_and_widen_as_python_does(numbers):
    # Raw texts are kept (the null), so every number is printed back; arrays widen ints to doubles
    # or print numbers as strings.
    texts = []
    for value, form in numbers:
        t = _number_text(value, form)
        texts.append(f'{{"a": {t}, "b": [{t}, 1, -0, {2**53 + 1}], "c": ["x", {t}, 7], "d": [{t}], "n": null}}')
    assert_same(texts)
    assert_same_column(texts)


# Strings sharing long prefixes (ties on the radix key), NULs, empty strings, strings that are
# prefixes of others, multi-byte UTF-8 (byte order, not code-point order of UTF-16).
_sort_text = st.one_of(st.text(max_size=12),
                       st.builds(lambda a, b: a + b, st.sampled_from(["", "abcdefgh", "abcdefg", "abcdefgh\x00",
                                                                       "\x00\x00", "\U0001f600", "\uffff"]),
                                 st.text(alphabet="ab\x00\u00e9\U0001f600", max_size=6)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_sort_text, max_size=60), st.integers(0, 5), st.booleans())
def test_the_compiled_string_sort_gives_arrows_order(values, cut, large):
    # The dictionaries' order comes from sort_order; it must be pc.sort_indices' (stable) order on
    # any string array, sliced or large, equal values included.
    arr = pa.array(values, pa.large_string() if large else pa.string()).slice(min(cut, len(values)))
    want = pa.compute.sort_indices(arr).to_numpy()
    got = nested_native_split.sort_order(arr)
    assert got.tolist() == want.tolist()


def test_without_the_extension_the_python_split_runs_and_says_so_once(monkeypatch, caplog):
    texts = ['{"a": 1, "b": ["x"]}', None, '{"a": 2.5}']
    want = _encoded(texts)
    monkeypatch.setattr(nested_native_split, "_nested_split", None)
    monkeypatch.setattr(nested_native_split, "_warned", False)
    with caplog.at_level("WARNING", logger=nested_native_split.__name__):
        assert _encoded(texts) == want
        assert _encoded(texts) == want
    warnings = [r for r in caplog.records if "not built" in r.getMessage()]
    assert len(warnings) == 1 and "pip install -e ." in warnings[0].getMessage()
