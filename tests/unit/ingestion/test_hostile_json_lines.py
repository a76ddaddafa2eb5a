"""Hostile but valid (or nearly valid) JSON lines, read by the compiled reader and by row_parser
side by side: a lone surrogate escape, a document nested hundreds of levels, numbers beyond a
double, a file that is only part of a byte order mark. Each bad line is one parse exception row
with its file, line, reason and raw text (what text_scan counts against maxParseExceptions); the
lines around it are read as usual; nothing raises out of the reader."""

from __future__ import annotations

import io
import json

import pytest

from common.json.document_text import MAX_DOCUMENT_DEPTH
from common.types.column_type import JSON, ColumnType, TypeKind
from services.ingestion import json_lines_reader
from services.ingestion.json_lines_reader import parse_json_lines
from common.ingest.row_parser import META_ERROR, META_FILE, META_LINE, META_RAW, parse_file

LONG, STRING = ColumnType(TypeKind.LONG), ColumnType(TypeKind.STRING)
SIGNATURE = [("ts", LONG), ("doc", JSON), ("s", STRING), ("arr", ColumnType(TypeKind.ARRAY, element=STRING))]


def _native(data: bytes, signature=SIGNATURE) -> list:
    assert json_lines_reader.available(), "run `setup.py build_ext --inplace`"
    return list(parse_json_lines("in.json", io.BytesIO(data), signature))


def _python(data: bytes, signature=SIGNATURE) -> list:
    return list(parse_file("in.json", io.BytesIO(data), {"type": "json"}, signature))


READERS = pytest.mark.parametrize("read", [_native, _python], ids=["c", "python"])


def _rows(batches) -> list[dict]:
    return [r for b in batches for r in b.to_pylist()]


def _around(bad: str) -> bytes:
    return "\n".join(['{"ts": 1, "doc": {"a": 1}, "s": "x"}', bad, '{"ts": 3, "s": "z", "arr": ["q"]}']).encode()


def _one_exception_at_line_2(rows: list[dict], reason: str) -> dict:
    assert [r[META_LINE] for r in rows] == [1, 2, 3]
    assert [r[META_FILE] for r in rows] == ["in.json"] * 3
    assert rows[0][META_ERROR] is None and rows[2][META_ERROR] is None
    assert rows[0]["doc"] == '{"a":1}' and rows[2]["arr"] == ["q"] and rows[2]["s"] == "z"
    bad = rows[1]
    assert reason in bad[META_ERROR], bad[META_ERROR]
    assert bad[META_RAW] and all(bad[c] is None for c, _ in SIGNATURE)
    return bad


@READERS
@pytest.mark.parametrize("line, column", [
    ('{"ts": 2, "s": "\\ud800"}', "s"),
    ('{"ts": 2, "s": "ok \\udc00 ok"}', "s"),
    ('{"ts": 2, "doc": {"a": "\\ud800"}}', "doc"),
    ('{"ts": 2, "doc": {"\\udbff": 1}}', "doc"),
    ('{"ts": 2, "doc": "\\ud83d"}', "doc"),
    ('{"ts": 2, "arr": ["a", "\\ude00"]}', "arr"),
])
def test_a_lone_surrogate_in_a_string_or_json_column_is_one_parse_exception(read, line, column):
    bad = _one_exception_at_line_2(_rows(read(_around(line))), "lone UTF-16 surrogate escape")
    assert bad[META_ERROR].startswith(f"column '{column}'")
    assert bad[META_RAW] == line


@READERS
def test_lone_surrogates_elsewhere_and_pairs_are_fine(read):
    rows = _rows(read(_around('{"ts": 2, "other": "\\ud800", "s": "\\ud83d\\ude00", "doc": ["\\ud83d\\ude00"]}')))
    assert [r[META_ERROR] for r in rows] == [None] * 3
    assert rows[1]["s"] == "😀" and rows[1]["doc"] == '["😀"]'


def _deep(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1)


@READERS
@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("where", ["doc", "s", "unread"])
def test_a_document_nested_beyond_the_limit_is_one_parse_exception(read, kind, where):
    line = f'{{"ts": 2, "{where}": {_deep(MAX_DOCUMENT_DEPTH + 1, kind)}}}'
    bad = _one_exception_at_line_2(_rows(read(_around(line))), f"deeper than {MAX_DOCUMENT_DEPTH} levels")
    assert bad[META_ERROR].startswith("the line nests arrays/objects")


@READERS
@pytest.mark.parametrize("depth", [99, 101, 500, 600, MAX_DOCUMENT_DEPTH])
def test_documents_up_to_the_limit_are_read_whole(read, depth):
    # 500+ levels failed the whole INSERT with a RecursionError before.
    text = _deep(depth, "object")
    rows = _rows(read(_around(f'{{"ts": 2, "doc": {text}}}')))
    assert [r[META_ERROR] for r in rows] == [None] * 3
    assert rows[1]["doc"] == text.replace(" ", "")


@READERS
def test_the_limit_does_not_depend_on_the_stack_left(read):
    # A Spark worker starts at Python's default recursion limit, with frames of its own below.
    import sys

    def at_depth(n: int):
        return at_depth(n - 1) if n else _rows(read(_around(f'{{"ts": 2, "doc": {_deep(MAX_DOCUMENT_DEPTH, "array")}}}')))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        rows = at_depth(300)
    finally:
        sys.setrecursionlimit(max(old, sys.getrecursionlimit()))
    assert [r[META_ERROR] for r in rows] == [None] * 3


@READERS
def test_numbers_beyond_a_double_are_kept_as_jackson_prints_them(read):
    data = "\n".join(['{"ts": 1, "doc": {"a": 1e400, "b": [-1e400, 1e308, 1.5]}, "s": 1e400}',
                      '{"ts": 2, "doc": -1e999, "s": -1e400}', '{"ts": 3, "doc": {"n": NaN}, "s": NaN}']).encode()
    rows = _rows(read(data))
    assert [r[META_ERROR] for r in rows] == [None] * 3
    docs = [r["doc"] for r in rows]
    assert docs == ['{"a":"Infinity","b":["-Infinity",1e+308,1.5]}', '"-Infinity"', '{"n":"NaN"}']
    assert all(json.loads(d) is not None for d in docs)  # JSON text, which json.loads(strict) reads
    assert [r["s"] for r in rows] == ["Infinity", "-Infinity", "NaN"]  # Java's Double.toString


@READERS
def test_an_integer_too_long_for_python_is_one_parse_exception(read):
    bad = _one_exception_at_line_2(_rows(read(_around('{"ts": 2, "doc": 1' + "0" * 5000 + "}"))), "invalid JSON")
    assert "digits" in bad[META_ERROR]


@pytest.mark.parametrize("data, want", [
    (b"\xef", [(1, "the line is not valid UTF-8")]),
    (b"\xef\xbb", [(1, "the line is not valid UTF-8")]),
    (b"\xef\xbb\n", [(1, "the line is not valid UTF-8")]),
    (b"\xef\xbb\xbf", []),
    (b"\xef\xbb\xbf\n", []),
    (b"\xef\xbb\n{\"ts\": 5}\n", [(1, "the line is not valid UTF-8"), (2, None)]),
    (b"\xef\xbb{\"ts\": 5}", [(1, "the line is not valid UTF-8")]),
    (b"\xef\xbb\xbf{\"ts\": 5}", [(1, None)]),
    (b"\xef\xbb\xbf\xef\xbb\xbf{\"ts\": 5}", [(1, "invalid JSON")]),
])
def test_a_truncated_byte_order_mark_reads_the_same_in_both_readers(data, want):
    got = []
    for read in (_native, _python):
        rows = _rows(read(data))
        got.append([(r[META_LINE], r[META_ERROR] and r[META_ERROR][:len(e or "")])
                    for r, (_, e) in zip(rows, want)] if len(rows) == len(want) else rows)
    assert got[0] == got[1] == want


@pytest.mark.parametrize("data", [b"\xef\xbb", b'{"s": "\\ud800"}', b'{"doc": ' + b"[" * 2000 + b"]" * 2000 + b"}"])
def test_the_readers_agree_byte_for_byte(data):
    native, python = _native(data), _python(data)
    assert [b.to_pydict() for b in native] == [b.to_pydict() for b in python]


class _Trickle(io.RawIOBase):
    """A stream that gives one byte per read (a slow network read)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.at >= len(self.data):
            return 0
        b[0] = self.data[self.at]
        self.at += 1
        return 1


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf{\"ts\": 5}\n{\"ts\": 6}", b"\xef\xbb", b"\xef\xbb\n{\"ts\": 6}"])
def test_a_byte_order_mark_read_a_byte_at_a_time(data):
    native = list(parse_json_lines("in.json", _Trickle(data), SIGNATURE))
    python = list(parse_file("in.json", io.BufferedReader(_Trickle(data), 1), {"type": "json"}, SIGNATURE))
    assert [b.to_pydict() for b in native] == [b.to_pydict() for b in python] == [b.to_pydict() for b in _python(data)]


def test_a_csv_json_column_holding_hostile_text_is_one_parse_exception_per_row():
    deep = "[" * (MAX_DOCUMENT_DEPTH + 1) + "]" * (MAX_DOCUMENT_DEPTH + 1)
    rows = ["n,j", '1,"{""a"": 1e400}"', '2,"{""a"": ""\\ud800""}"', f"3,{deep}", '4,"[1, 2]"']
    batches = parse_file("in.csv", io.BytesIO("\n".join(rows).encode()), {"type": "csv", "findColumnsFromHeader": True},
                         [("n", LONG), ("j", JSON)])
    got = [(r[META_LINE], r["j"], r[META_ERROR] and r[META_ERROR][:60]) for r in _rows(batches)]
    assert got == [(2, '{"a":"Infinity"}', None),
                   (3, None, "column 'j': the value holds a lone UTF-16 surrogate escape ("),
                   (4, None, "column 'j' holds JSON that nests arrays/objects deeper than "),
                   (5, "[1,2]", None)]
