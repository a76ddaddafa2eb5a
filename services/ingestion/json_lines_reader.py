"""The text scan's reader of newline-delimited JSON: the compiled reader, with row_parser for the
lines it leaves.

``services.ingestion._json_lines`` (C, built by setup.py) reads the lines of a byte range and hands
back Arrow buffers per signature column (string and JSON text offsets and data, int64, double and
time values with validity bitmaps), so Python builds each batch with ``from_buffers`` and never
makes an object per line. The batches are exactly those of ``row_parser.parse_file``: the same
columns, values, row order and batch boundaries. A line the C reader cannot be sure to read the
same way (malformed, not an object, NaN, huge integers, number texts that print differently,
duplicate keys, deep nesting, lone surrogates, strings in numeric or time columns, values that do
not fit their column, ...) is read by row_parser (``json_line_rows``) and its rows put in its
place, so parse exceptions keep their file, line, reason and raw text.

Compressed files, other formats, ``STRATA_JSON_READER=python`` (tests compare the two) and a
missing extension (logged once) take ``row_parser.parse_file``.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.types.column_type import TypeKind
from common.ingest.row_parser import (BATCH_ROWS, decompressed, json_line_rows, output_schema, parse_file,
                                          read_error_batch)

try:
    from services.ingestion import _json_lines
except ImportError:  # not built: row_parser reads every line
    _json_lines = None

_log = logging.getLogger(__name__)
_warned = False

# "python" forces row_parser for every line (tests compare the two; benchmarks measure both).
ENABLED = os.environ.get("STRATA_JSON_READER", "native") != "python"

# Column kinds of the C reader (K_* in _json_lines.c); any other type is read only when null.
_KINDS = {TypeKind.STRING: 0, TypeKind.LONG: 1, TypeKind.DOUBLE: 2, TypeKind.FLOAT: 3, TypeKind.TIMESTAMP: 4,
          TypeKind.COMPLEX: 5}
_OTHER = 6
CHUNK_BYTES = 32 << 20   # the read buffer
LOW_BYTES = 12 << 20     # read more before a batch when fewer bytes are buffered (a batch rarely spans two reads)
_BOM = b"\xef\xbb\xbf"


def available() -> bool:
    return _json_lines is not None


def native_enabled() -> bool:
    """Whether the compiled reader runs (built and not turned off); warns once when it is missing."""
    global _warned
    if _json_lines is None and ENABLED and not _warned:
        _warned = True
        _log.warning("the compiled JSON lines reader (services.ingestion._json_lines) is not built; the text "
                     "scan reads JSON lines in Python (slower). Run `pip install -e .` to build it.")
    return _json_lines is not None and ENABLED


def parse_text(name: str, stream: BinaryIO, input_format: dict, signature,
               first_line: int = 1) -> Iterator[pa.RecordBatch]:
    """row_parser.parse_file's batches of one input file or line-aligned range, read by the compiled
    reader when it can (an uncompressed JSON-lines input, the extension built and enabled)."""
    if input_format["type"] != "json" or not native_enabled() or not _plain(name, stream):
        return parse_file(name, stream, input_format, signature, first_line=first_line)
    return parse_json_lines(name, stream, signature, first_line=first_line)


def _plain(name: str, stream: BinaryIO) -> bool:
    try:
        return decompressed(name, stream) is stream
    except ValidationError:  # an unsupported compression: parse_file words the error
        return False


class _Input:
    """The bytes read so far, data[:size]; [pos, limit) holds whole lines (limit is past a line end,
    or the end of the input). Reads fill one reused buffer, after moving what is left of the last
    read to its front; it grows only for a line longer than itself. The buffer is an anonymous
    memory map: nothing is written to it before a read (a bytearray would be zeroed first), so a
    small input costs no more than its bytes."""

    def __init__(self, stream: BinaryIO, first_line: int) -> None:
        self.stream = stream
        self.data = mmap.mmap(-1, CHUNK_BYTES)
        self.size = self.pos = self.limit = 0
        self.eof = False
        self.error: Exception | None = None  # the input could not be read further (row_parser's error row)
        self.first = True
        self.line = first_line

    def refill(self) -> None:
        # One raw read at a time (readinto1): a read that fails keeps the bytes read before it.
        read = getattr(self.stream, "readinto1", None) or self.stream.readinto
        while not self.eof:
            rest = self.size - self.pos
            if rest == len(self.data):
                grown = mmap.mmap(-1, 2 * len(self.data))
                with memoryview(self.data) as view:
                    grown[:rest] = view
                self.data.close()
                self.data = grown
            elif self.pos:
                with memoryview(self.data) as view:
                    view[:rest] = view[self.pos:self.size]
            self.limit -= self.pos
            self.size, self.pos = rest, 0
            try:
                with memoryview(self.data) as view:
                    got = read(view[rest:]) or 0
            except (OSError, EOFError) as exc:  # the lines read so far stay; an unfinished last one does not
                self.error, self.eof = exc, True
                return
            if not got:
                self.eof = True
                break
            self.size += got
            if self.first and self.size >= len(_BOM):  # a byte order mark opening the input is not text
                self.first = False  # (decided once three bytes are in: a read may bring fewer)
                if self.data[:3] == _BOM:
                    self.pos = 3
            end = self.data.rfind(b"\n", rest, self.size)
            if end >= 0:
                self.limit = end + 1
            if self.limit - self.pos >= LOW_BYTES or (end >= 0 and self.size == len(self.data)):
                break
        if self.eof:
            self.limit = self.size

    def close(self) -> None:
        self.data.close()


def parse_json_lines(name: str, stream: BinaryIO, signature, batch_rows: int = BATCH_ROWS,
                     first_line: int = 1) -> Iterator[pa.RecordBatch]:
    """row_parser.parse_file's batches of an uncompressed JSON-lines input (lines from ``first_line``)."""
    schema = output_schema(signature)
    spec = tuple((n.encode("utf-8"), _KINDS.get(t.kind, _OTHER)) for n, t in signature)
    name_bytes = name.encode("utf-8", "surrogateescape")
    inp = _Input(stream, first_line)
    try:
        yield from _batches(inp, name, name_bytes, signature, schema, spec, batch_rows)
    finally:
        inp.close()


def _batches(inp: _Input, name: str, name_bytes: bytes, signature, schema: pa.Schema, spec,
             batch_rows: int) -> Iterator[pa.RecordBatch]:
    pieces: list[pa.RecordBatch] = []
    need = batch_rows
    while True:
        if not inp.eof and inp.limit - inp.pos < LOW_BYTES:
            inp.refill()
        if inp.pos >= inp.limit:
            break
        out = _json_lines.read(inp.data, inp.pos, inp.limit, inp.line, need, spec)
        piece = _piece(name, name_bytes, signature, schema, spec, out, inp)
        if piece.num_rows:
            pieces.append(piece)
        need -= piece.num_rows
        if need <= 0:
            yield pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)
            pieces, need = [], batch_rows
    if inp.error is not None:
        pieces.append(read_error_batch(name, signature, inp.line - 1, inp.error))
    if pieces:
        yield pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)


def _column(field: pa.Field, kind: int, rows: int, col: tuple) -> pa.Array:
    nulls, validity, *buffers = col
    if kind == _OTHER:  # all null (a value there is left to row_parser); built as row_parser builds it
        return pa.array([None] * rows, field.type)
    buffers = [None if validity is None else pa.py_buffer(validity)] + [pa.py_buffer(b) for b in buffers]
    return pa.Array.from_buffers(field.type, rows, buffers, null_count=nulls)


def _meta(name: str, name_bytes: bytes, rows: int, lines: bytes) -> list[pa.Array]:
    offsets = np.arange(rows + 1, dtype=np.int32) * np.int32(len(name_bytes))
    files = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(name_bytes * rows)])
    return [files, pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(lines)]),
            pa.nulls(rows, pa.string()), pa.nulls(rows, pa.string())]


def _piece(name: str, name_bytes: bytes, signature, schema: pa.Schema, spec, out, inp: _Input) -> pa.RecordBatch:
    """The rows of one C read, with row_parser's rows of the lines it left in their places. A left
    line that gives other than one row (blank, an array of objects) ends the piece, and reading goes
    on after it, so batches end where row_parser's do."""
    pos, line, rows, lines, columns, fallbacks = out
    inp.pos, inp.line = pos, line
    arrays = [_column(f, kind, rows, col) for f, (_, kind), col in zip(schema, spec, columns)]
    batch = pa.RecordBatch.from_arrays(arrays + _meta(name, name_bytes, rows, lines), schema=schema)
    if not fallbacks:
        return batch
    data = inp.data
    texts = [(ln, data[start:end].decode("utf-8", "surrogateescape")) for _, ln, start, end, _ in fallbacks]
    python, counts = json_line_rows(name, signature, texts)
    cut = next((i for i, c in enumerate(counts) if c != 1), None)
    if cut is not None:
        row_pos, ln, _, _, nxt = fallbacks[cut]
        fallbacks, counts = fallbacks[:cut + 1], counts[:cut + 1]
        inp.pos, inp.line = nxt, ln + 1
        batch = batch.slice(0, row_pos)
        python = python.slice(0, sum(counts))
    c_rows, py_rows = batch.num_rows, python.num_rows
    at = np.array([f[0] for f in fallbacks], dtype=np.int64)            # C rows before each left line
    before = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # row_parser rows before each
    order = np.empty(c_rows + py_rows, dtype=np.int64)
    c_index = np.arange(c_rows, dtype=np.int64)
    order[c_index + before[np.searchsorted(at, c_index, side="right")]] = c_index
    owner = np.repeat(np.arange(len(counts)), counts)
    order[at[owner] + np.arange(py_rows, dtype=np.int64)] = c_rows + np.arange(py_rows, dtype=np.int64)
    return pa.concat_batches([batch, python]).take(pa.array(order))


__all__ = ["available", "native_enabled", "parse_json_lines", "parse_text"]
