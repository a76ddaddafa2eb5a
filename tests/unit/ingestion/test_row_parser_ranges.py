"""Values out of range for their column are parse exceptions (file, line, column named; counted
against maxParseExceptions), never a failed task with a bare OverflowError; a UTF-8 byte order
mark opening a file is not part of its first line. Regressions, then a generator of hostile
numbers for every numeric column type."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.ingest.external_source import ExternalSource
from common.ingest.row_parser import META_ERROR, META_LINE, parse_file

INT64_MAX = 2**63 - 1


def parse(text: bytes | str, fmt: dict, sig: list, name: str = "in.json") -> pa.Table:
    source = ExternalSource.of({"type": "inline", "data": "x"}, fmt, sig)
    data = text.encode() if isinstance(text, str) else text
    return pa.Table.from_batches(list(parse_file(name, io.BytesIO(data), source.input_format, source.signature)))


def sig(**cols):
    return [{"name": k, "type": v} for k, v in cols.items()]


@pytest.mark.parametrize("line,column,what", [
    ('{"n": 9223372036854775808}', "n", "out of range for BIGINT"),
    ('{"n": -9223372036854775809}', "n", "out of range for BIGINT"),
    ('{"n": 1e30}', "n", "out of range for BIGINT"),
    ('{"n": "1e30"}', "n", "out of range for BIGINT"),
    ('{"n": "99999999999999999999999"}', "n", "out of range for BIGINT"),
    ('{"t": 1e30}', "t", "out of range for a time"),
    ('{"t": 99999999999999999999}', "t", "out of range for a time"),
    ('{"t": "999999999999999999"}', "t", "out of range for a time"),
    ('{"d": ' + "9" * 400 + '}', "d", "out of range for DOUBLE"),
])
def test_out_of_range_is_a_parse_exception(line, column, what):
    text = '{"n": 1, "t": 0, "d": 1.5}\n' + line + '\n{"n": 2, "t": 1000, "d": 2}\n'
    rows = parse(text, {"type": "json"}, sig(n="long", t="timestamp", d="double")).to_pylist()
    assert [r["n"] for r in rows if r[META_ERROR] is None] == [1, 2]
    [bad] = [r for r in rows if r[META_ERROR] is not None]
    assert bad[META_LINE] == 2 and f"column '{column}'" in bad[META_ERROR] and what in bad[META_ERROR]


def test_edges_of_the_range_are_kept():
    text = json.dumps({"n": INT64_MAX, "t": 253402300799999}) + "\n" + json.dumps({"n": -INT64_MAX - 1, "t": -1}) + "\n"
    rows = parse(text, {"type": "json"}, sig(n="long", t="timestamp")).to_pylist()
    assert [r[META_ERROR] for r in rows] == [None, None]
    assert [r["n"] for r in rows] == [INT64_MAX, -INT64_MAX - 1]


@pytest.mark.parametrize("fmt,text", [
    ({"type": "csv", "findColumnsFromHeader": True}, "\ufeffn,s\n1,a\n2,b\n"),
    ({"type": "csv", "columns": ["n", "s"]}, "\ufeff1,a\n2,b\n"),
    ({"type": "tsv", "findColumnsFromHeader": True}, "\ufeffn\ts\n1\ta\n2\tb\n"),
    ({"type": "json"}, '\ufeff{"n": 1, "s": "a"}\n{"n": 2, "s": "b"}\n'),
])
def test_byte_order_mark_on_the_first_line_is_skipped(fmt, text):
    rows = parse(text, fmt, sig(n="long", s="string"), name="in.txt").to_pylist()
    assert [(r["n"], r["s"], r[META_ERROR]) for r in rows] == [(1, "a", None), (2, "b", None)]


hostile = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2**63, -(2**63) - 1, 2**63 - 1, -(2**63), 1e19, -1e19, 1e30, 9.2e18, 2.5, -0.0]),
    st.integers(-(2**70), 2**70).map(str), st.floats(allow_nan=False).map(repr),
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(hostile, min_size=1, max_size=8), kind=st.sampled_from(["long", "double", "timestamp"]))
def test_generated_numbers_become_values_or_parse_exceptions(values, kind):
    # Every row is either a value of the column's type or a parse exception naming the column;
    # nothing escapes as an exception of the parser itself.
    text = "\n".join(json.dumps({"v": v}) for v in values) + "\n"
    rows = parse(text, {"type": "json"}, sig(v=kind)).to_pylist()
    assert [r[META_LINE] for r in rows] == list(range(1, len(values) + 1))
    for r in rows:
        assert r[META_ERROR] is None or "column 'v'" in r[META_ERROR]
