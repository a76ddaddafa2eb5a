"""The compiled JSON-lines reader against row_parser.parse_file, which it stands in for in the text
scan: on mean generated lines (unicode, escapes, keys with dots and quotes, mixed types per key,
nulls, -0.0, 1e400, huge integers, blank lines, CRLF and lone CR line ends, whitespace around lines,
malformed lines, arrays of objects, missing columns, values of the wrong type, duplicate keys) both
give the same batches: the same rows in the same order, cut at the same places, the same parse
exceptions, and the same Arrow data (IPC bytes of the signature columns)."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ValidationError
from common.types.column_type import JSON, ColumnType, TypeKind
from common.types.interval import parse_instant
from services.ingestion import _json_lines, json_lines_reader
from services.ingestion.json_lines_reader import parse_json_lines, parse_text
from common.ingest.row_parser import output_schema, parse_file

LONG, DOUBLE, FLOAT = ColumnType(TypeKind.LONG), ColumnType(TypeKind.DOUBLE), ColumnType(TypeKind.FLOAT)
STRING, TIME = ColumnType(TypeKind.STRING), ColumnType(TypeKind.TIMESTAMP)
SIGNATURE = [("ts", LONG), ("doc", JSON), ("s", STRING), ("d", DOUBLE), ("f", FLOAT), ("t", TIME),
             ("a.b", STRING), ("it's", LONG), ("arr", ColumnType(TypeKind.ARRAY, element=STRING))]
COLUMNS = [n for n, _ in SIGNATURE]


def test_the_compiled_reader_is_built():
    # setup.py builds it on `pip install -e .`; without it the text scan reads JSON lines in Python.
    assert json_lines_reader.available(), "run `pip install -e .` (or setup.py build_ext --inplace)"


def _ipc(batch: pa.RecordBatch) -> bytes:
    data = batch.select([n for n, _ in SIGNATURE])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_batch(data)
    return sink.getvalue().to_pybytes()


def assert_same(data: bytes, batch_rows: int = 8192, first_line: int = 1, signature=SIGNATURE) -> list:
    # Neither reader ever raises on what a line holds: a bad line is its parse exception row.
    want = list(parse_file("in.json", io.BytesIO(data), {"type": "json"}, signature, batch_rows, first_line))
    got = list(parse_json_lines("in.json", io.BytesIO(data), signature, batch_rows, first_line))
    assert [b.num_rows for b in got] == [b.num_rows for b in want]
    for g, w in zip(got, want):
        assert g.schema == w.schema == output_schema(signature)
        if not g.equals(w):
            assert g.to_pydict() == w.to_pydict()
        assert g.equals(w)
        if signature is SIGNATURE:
            assert _ipc(g) == _ipc(w)
    return want


# ---- generated lines ----------------------------------------------------------------------------
_KEYS = st.one_of(st.sampled_from(COLUMNS), st.sampled_from(COLUMNS), st.just("t"),
                  st.sampled_from(["x", "a", "a.b.c", 'q"k', "back\\slash", "", "ключ", "😀", "tab\there"]),
                  st.text(max_size=5))
_FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([-0.0, 0.0, 1.0, 1e-4, 1e-5, 1e16, 9e18, 1e300, 0.1, 123.456, 1600000000000.5]))
_INTS = st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-2**70, 2**70), st.integers(-1000, 1000),
                  st.sampled_from([0, 2**63, -2**63, 1600000000000, 253402300799999, 253402300800000,
                                   -62135596800001]))
_STRINGS = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", " \t", "12", " 7 ", "-3", "+4", "1.5", "1e3",
                                                           "x", "é", "\x00", "\n\"\\", "\x1f\x7f", "😀", "0.00001",
                                                           "1e-7", "2020-01-01T00:00:00Z", "\u2028", "nan"]))
# ISO-8601 times, in and around the form the compiled reader reads itself.
_TIMES = st.builds(lambda y, mo, d, sep, h, mi, s, frac, zone: f"{y:04d}-{mo:02d}-{d:02d}" + (
    "" if sep is None else f"{sep}{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"),
    st.sampled_from([0, 1, 1970, 2000, 2020, 2100, 2023, 9999]), st.integers(0, 13), st.integers(0, 32),
    st.sampled_from([None, "T", "T", " ", "t"]), st.integers(0, 24), st.integers(0, 60), st.integers(0, 60),
    st.sampled_from(["", ".", ".5", ".12", ".123", ".1234", ".123456789", ".1234567890", "..1"]),
    st.sampled_from(["", "Z", "z", "+00:00", "-00:00", "+05:30", "-07:00", "+23:59", "+24:00", "-12:60", "+0530",
                     "+05", " "]))
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _STRINGS, _TIMES)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=16)
_OBJECTS = st.dictionaries(_KEYS, _VALUES, max_size=6)

# Line texts json.dumps does not write: what orjson reads otherwise, and bad input.
_ODD = ['{"ts": NaN}', '{"doc": [1, Infinity]}', '{"d": -Infinity}', '{"doc": 1e400}', '{"d": 1e-400}',
        '{"ts": 1, "ts": 2}', '{"doc": {"b": 1, "b": 2}}', '{"doc": 1, "doc": {"c": "dup"}}', '{"x": 1, "x": 2}',
        '{"s":"\\u0061","\\u0073":2}', '{"s": "\\ud800"}', '{"doc": {"\\udc00": 1}}', '{"x": "\\ud800"}',
        '{"doc": {"s": "\\ud83d\\ude00 \\u00e9 \\/ \\b\\f"}}', '{"doc": [1E2, 1.0, -0, 0e5, -0.0, 1.5e3, 1.50]}',
        '{"doc": 12345678901234567890, "ts": 12345678901234567890}', '{"doc": [0.00001, 1e16, 123456789012345678]}',
        '  {"ts" :  2 }  ', 'null', '{}', '[]', '[{}]', '[{"ts": 1}, {"ts": 2, "s": [1]}]', '[null]', '"x"', 'true',
        '\x0b{"ts": 3}\x1c', '\u00a0{"ts": 3}', '{"ts": 3}\u2003', '{"doc": ' + '[' * 120 + ']' * 120 + '}',
        '{"x": ' + '{"a":' * 101 + '1' + '}' * 101 + '}',
        '{"doc": {' + ','.join(f'"k{i}":{i}' for i in range(300)) + '}}',
        '{"ts": 1,}', '{"ts": }', '{"ts": 1} x', '{"ts": 01}', '{"s":"\x01"}', '{"d": .5}', '{"d": 1.}',
        '{"s": "\\x"}', '{"ts": tru}', '{"s": "x}', '{"ts": 1}}', '{"ts" 1}', '{"ts": 1 "s": 2}', '{1: 2}',
        '{"t": "2020-01-01"}', '{"t": "2020-02-29T23:59:59.999Z"}', '{"t": "2021-02-29"}', '{"t": " 2020-01-01"}',
        '{"t": "2020-1-1"}', '{"t": "2020"}', '{"t": "1600000000000"}', '{"t": "0000-01-01"}', '{"t": true}',
        '{"t": 1e400}', '{"ts": "  "}', '{"ts": ""}', '{"d": " "}',
        '{"ts": 9.9e18}', '{"f": 1e39}', '{"f": 3.4028235e38}', '{"arr": null}', '{"arr": ["a"]}', '{"arr": "a"}',
        '{"doc":"\\u2028\\u0000\\u007f"}', '{"arr": ["a", "\\udfff"]}', '{"doc": ["\\ud800x"], "ts": 1}',
        '{"doc": ' + '[' * 600 + ']' * 600 + '}', '{"x": ' + '[' * 1000 + ']' * 1000 + '}',
        '{"s": ' + '{"a":' * 950 + '1' + '}' * 950 + '}', '{"doc": [1e400, -1e400, 1e308]}', '{"s": 1e400}',
        '{"doc": 1' + '0' * 5000 + '}', '{"doc": "e-5 0.0000 e+7"}', '{"s": "x\\ny"}', '{"ts":1}\x00']
_ENDINGS = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


def _line(obj, ascii_: bool, spaced: bool) -> str:
    if spaced:
        return json.dumps(obj, ensure_ascii=ascii_, indent=None, separators=(", ", ": "))
    return json.dumps(obj, ensure_ascii=ascii_, separators=(",", ":"))


_LINES = st.lists(st.tuples(st.one_of(_OBJECTS, _OBJECTS, _OBJECTS, st.lists(_OBJECTS, min_size=1, max_size=3)),
                            st.booleans(), st.booleans(),
                            st.one_of(st.none(), st.none(), st.none(), st.sampled_from(_ODD + ["", "  ", "\t"])),
                            _ENDINGS), min_size=0, max_size=14)


def _data(drawn, last_ending: bool) -> bytes:
    out = []
    for i, (obj, ascii_, spaced, odd, ending) in enumerate(drawn):
        text = odd if odd is not None else _line(obj, ascii_, spaced)
        out.append(text + (ending if i < len(drawn) - 1 or last_ending else ""))
    return "".join(out).encode("utf-8", "surrogatepass")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_LINES, st.booleans(), st.sampled_from([1, 2, 3, 5, 8192]), st.sampled_from([1, 7]))
def test_the_compiled_reader_matches_row_parser(drawn, last_ending, batch_rows, first_line):
    assert_same(_data(drawn, last_ending), batch_rows, first_line)


@pytest.mark.parametrize("text", _ODD + ["", " ", "\ufeff"])
def test_each_odd_line_beside_plain_ones(text):
    lines = ['{"ts": 1, "doc": {"a": 1}, "s": "x"}', text, '{"doc": [1, "y"], "ts": 2, "d": 2.5}', "",
             '{"s": null}']
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    for rows in (1, 2, 8192):
        assert_same(data, rows)


def test_invalid_utf8_bytes_and_a_byte_order_mark():
    data = b'\xef\xbb\xbf{"ts": 1}\n{"s": "\xff"}\n{"s": "\xc3\xa9"}\n{"doc": "\xed\xa0\x80"}\n{"ts": 2}'
    want = assert_same(data)
    errors = want[0].column("__strata_error").to_pylist()
    assert errors.count("the line is not valid UTF-8") == 2 and errors[0] is None


def test_parse_exceptions_keep_line_reason_and_raw_text():
    data = b'{"ts": 1}\n\n{"ts": \n{"ts": "abc"}\r\n{"ts": 3}\n'
    batch = assert_same(data, first_line=40)[0]
    assert batch.column("__strata_line").to_pylist() == [40, 42, 43, 44]
    assert batch.column("__strata_raw").to_pylist() == [None, '{"ts":', '{"ts": "abc"}', None]
    assert batch.column("__strata_error").to_pylist()[1].startswith("invalid JSON")


def test_batches_end_where_row_parser_ends_them_around_arrays_of_objects_and_blank_lines():
    lines = ['{"ts": 1}', '[{"ts": 2}, {"ts": 3}, {"ts": 4}]', '\u00a0', '{"ts": 5}', '[{"ts": 6}, {"ts": 7}]',
             '{"ts": 8}', '\u3000', '{"ts": 9}', '{"ts": 10}'] * 3
    data = "\n".join(lines).encode()
    for rows in (1, 2, 3, 4, 5, 7, 100):
        assert_same(data, rows)


def test_a_long_input_read_in_several_pieces(monkeypatch):
    # Small reads so batches span what is buffered, and lines cross read boundaries (CRLF too).
    monkeypatch.setattr(json_lines_reader, "CHUNK_BYTES", 37)
    monkeypatch.setattr(json_lines_reader, "LOW_BYTES", 20)
    lines = [json.dumps({"ts": i, "doc": {"i": i, "s": "é" * (i % 5), "l": [i, 1.5]}, "s": str(i)}) for i in range(300)]
    lines[17] = '{"ts": NaN}'
    lines[101] = '[{"ts": 1}, {"ts": 2}]'
    data = "\r\n".join(lines).encode()
    for rows in (1, 64, 8192):
        assert_same(data, rows)


def test_the_bench_documents_are_all_read_by_the_compiled_reader():
    from bench.nested import documents

    table, _ = documents(3000, 5)
    lines = [f'{{"ts":{t},"doc":{d}}}' for t, d in zip(table.column("__time").to_pylist(),
                                                        table.column("doc").to_pylist())]
    data = ("\n".join(lines) + "\n").encode()
    signature = [("ts", LONG), ("doc", JSON)]
    assert_same(data, signature=signature)
    _, _, rows, _, _, fallbacks = _json_lines.read(data, 0, len(data), 1, 10**9,
                                                   ((b"ts", 1), (b"doc", 5)))
    # The only lines left to row_parser are those with a number json prints in exponent form.
    assert rows + len(fallbacks) == 3000 and all("e-" in lines[f[1] - 1] for f in fallbacks)


def test_parse_text_falls_back_to_row_parser(monkeypatch, caplog):
    import gzip

    data = b'{"ts": 1, "doc": {"a": 1}}\n{"ts": NaN}\n'
    for name, raw in (("in.json.gz", gzip.compress(data)), ("in.json", data)):
        want = list(parse_file(name, io.BytesIO(raw), {"type": "json"}, SIGNATURE))
        got = list(parse_text(name, io.BytesIO(raw), {"type": "json"}, SIGNATURE))
        assert [b.to_pydict() for b in got] == [b.to_pydict() for b in want]
    monkeypatch.setattr(json_lines_reader, "ENABLED", False)
    assert json_lines_reader.native_enabled() is False
    monkeypatch.setattr(json_lines_reader, "ENABLED", True)
    monkeypatch.setattr(json_lines_reader, "_json_lines", None)
    monkeypatch.setattr(json_lines_reader, "_warned", False)
    with caplog.at_level("WARNING", logger=json_lines_reader.__name__):
        assert json_lines_reader.native_enabled() is False
        got = list(parse_text("in.json", io.BytesIO(data), {"type": "json"}, SIGNATURE))
    assert got[0].num_rows == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == json_lines_reader.__name__]
    assert len(warnings) == 1 and "pip install -e ." in warnings[0]  # once, however many inputs


class _Failing(io.RawIOBase):
    """A file whose bytes past ``good`` cannot be read (a disk or network error)."""

    def __init__(self, data: bytes, good: int) -> None:
        self.data, self.good, self.at = data, good, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.at >= self.good:
            raise OSError("the disk is gone")
        n = min(len(b), self.good - self.at)
        b[:n] = self.data[self.at:self.at + n]
        self.at += n
        return n


def test_an_input_that_cannot_be_read_to_its_end_gives_row_parsers_error_row():
    data = b'{"ts": 1}\n{"ts": 2}\r\n{"ts": NaN}\n{"ts": 4, "doc": {"a": 1}}\n'
    good = data.index(b"4") + 1
    want = list(parse_file("in.json", io.BufferedReader(_Failing(data, good)), {"type": "json"}, SIGNATURE))
    got = list(parse_json_lines("in.json", io.BufferedReader(_Failing(data, good)), SIGNATURE))
    assert [b.to_pydict() for b in got] == [b.to_pydict() for b in want]
    assert want[0].column("__strata_error").to_pylist()[-1] == "cannot read the file past line 3: the disk is gone"


@settings(max_examples=300, deadline=None)
@given(st.lists(_TIMES, min_size=1, max_size=20))
def test_iso_times_read_as_parse_instant_reads_them(times):
    data = "\n".join(json.dumps({"t": t, "ts": 1}) for t in times).encode()
    assert_same(data, signature=[("t", TIME), ("ts", LONG)])
    _, _, _, _, _, fallbacks = _json_lines.read(data, 0, len(data), 1, 10**9, ((b"t", 4), (b"ts", 1)))
    for _, line, _, _, _ in fallbacks:  # the common forms are read by the compiled reader itself
        t = times[line - 1]
        common = len(t) == 10 or (len(t) in (20, 24) and t[10] in "T " and t[-1] == "Z") or (
            len(t) in (25, 29) and t[10] in "T " and t[-6:] in ("+00:00", "-00:00", "+05:30", "-07:00", "+23:59"))
        try:
            ms = parse_instant(t)
        except ValidationError:
            continue
        if -62135596800000 <= ms <= 253402300799999:  # else row_parser words the range error
            assert not common, t


def test_the_text_scan_writes_the_same_blobs_with_either_reader(tmp_path, monkeypatch):
    # What leaves a reading task (blobs, counts, parse exceptions, key samples) is byte-identical.
    from common.ingest.statement import parse_ingestion
    from services.ingestion.text_scan import MILLIS, PICK, TextScan, scan_listing

    day = 86_400_000
    lines = [json.dumps({"ts": 1_600_000_000_000 + (i % 3) * day + i, "doc": {"a": i, "b": [i, "é", 1.5], "c": None},
                         "n": i, "s": f"x{i}"}, separators=(",", ":") if i % 2 else (", ", ": ")) for i in range(3000)]
    lines[5], lines[77], lines[901] = '{"ts": NaN}', "", '[{"ts": 1600000000000, "n": 1}, {"ts": 1600000000001}]'
    lines[1000], lines[2000] = '{"ts": 1600000000000, "doc": {"x": 1e-7}}', '{"ts": 1600000000000, "n": "many"}'
    path = tmp_path / "x.json"
    path.write_text("\r\n".join(lines))
    stmt = parse_ingestion(f"INSERT INTO e SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc, n AS m, s FROM TABLE("
                           f"localfiles(files => ARRAY['{path}'], format => 'json')) EXTEND (ts BIGINT, "
                           "doc TYPE('COMPLEX<json>'), n BIGINT, s VARCHAR) PARTITIONED BY DAY")
    [source] = stmt.sources.values()
    scan = TextScan(source.input_format, source.signature, (
        ("__time", "ts", MILLIS, pa.timestamp("us", tz="UTC")), ("doc", "doc", PICK, pa.string()),
        ("m", "n", PICK, pa.int64()), ("s", "s", PICK, pa.string())))
    listing = [pa.RecordBatch.from_pylist([{"name": str(path), "path": str(path), "data": None, "spark_file": None,
                                            "start": None, "end": None, "first_line": 1}])]
    outputs = []
    for enabled in (False, True):
        monkeypatch.setattr(json_lines_reader, "ENABLED", enabled)
        outputs.append([b.to_pylist() for b in scan_listing(listing, scan, stmt.partitioned_by, ("__time",), 0.5)])
    assert outputs[0] == outputs[1]
    assert sum(r["kind"] == 0 for b in outputs[1] for r in b) >= 3  # a blob per day
