"""TextSplits: big newline-delimited JSON and TSV files cut into byte ranges that Spark tasks parse
in parallel, each range knowing the number of its first line.

A range starts just after a b"\\n" and ends just after one (or at the end of the file), so every
line lies in exactly one range, and UTF-8 never splits there. Its first line number is one more
than the line ends before it, counted the way row_parser's reader (universal newlines) counts
them: "\\n", "\\r\\n" and a lone "\\r" each end a line. The driver finds the cut points and counts
with a streaming byte scan, far cheaper than the parsing it spreads over the cores.

Only formats where a line is a record are cut: CSV fields may hold line breaks and a CSV or TSV
header names the columns of the whole file, so those files (and compressed ones) stay whole.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

MIN_RANGE_BYTES = 16 << 20  # smaller ranges cost more in task overhead than they save
_SCAN_BYTES = 8 << 20
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zstd", ".snappy", ".zip")


@dataclass(frozen=True)
class TextRange:
    start: int  # byte offsets, [start, end)
    end: int
    first_line: int


def splittable(name: str, input_format: dict) -> bool:
    kind = input_format["type"]
    if name.lower().split("?")[0].endswith(_COMPRESSED):
        return False
    return kind == "json" or (kind == "tsv" and not input_format.get("findColumnsFromHeader"))


def _next_line_start(f, offset: int, size: int) -> int:
    """The offset just after the first b"\\n" at or after ``offset`` (``size`` when there is none)."""
    f.seek(offset)
    position = offset
    while position < size:
        block = f.read(1 << 16)
        if not block:
            break
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return size


def _line_ends(f, start: int, end: int, after_cr: bool) -> tuple[int, bool]:
    """Line ends in [start, end), and whether the range ends with a b"\\r"; ``after_cr`` says the
    byte before ``start`` was a b"\\r" (then a leading b"\\n" completes that line end)."""
    f.seek(start)
    count, remaining = 0, end - start
    while remaining > 0:
        block = f.read(min(_SCAN_BYTES, remaining))
        if not block:
            break
        remaining -= len(block)
        count += block.count(b"\n")
        # Most files have no b"\r": one memchr-speed test instead of two more counts, one of them a
        # substring search (the driver's scan of a 570 MB file: 1.5-1.8 s -> 0.5-0.6 s, all serial).
        if b"\r" in block:
            count += block.count(b"\r") - block.count(b"\r\n")
        if after_cr and block[:1] == b"\n":
            count -= 1
        after_cr = block[-1:] == b"\r"
    return count, after_cr


def text_ranges(path: str, input_format: dict, parallelism: int, min_range_bytes: int = MIN_RANGE_BYTES) -> list[TextRange]:
    """The ranges of ``path`` (one, the whole file, when it is small or not splittable)."""
    size = os.path.getsize(path)
    pieces = min(size // max(1, min_range_bytes), 2 * max(1, parallelism))
    if pieces < 2 or not splittable(path, input_format):
        return [TextRange(0, size, 1)]
    with open(path, "rb", buffering=0) as raw:
        f = io.BufferedReader(raw, 1 << 16)
        cuts = sorted({_next_line_start(f, size * i // pieces, size) for i in range(1, pieces)} - {size})
        bounds = [0, *cuts, size]
        ranges, line, after_cr = [], 1, False
        for start, end in zip(bounds, bounds[1:]):
            ranges.append(TextRange(start, end, line))
            ends, after_cr = _line_ends(f, start, end, after_cr)
            line += ends
    skip = input_format.get("skipHeaderRows", 0) or 0
    if skip and len(ranges) > 1 and ranges[1].first_line <= skip:
        return [TextRange(0, size, 1)]  # the header rows must all be in the first range, which skips them
    return ranges


class RangeReader(io.RawIOBase):
    """The bytes [start, end) of a file, as a file."""

    def __init__(self, raw, start: int, end: int) -> None:
        super().__init__()
        self._raw = raw
        self._raw.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        n = self._raw.readinto(view)
        self._left -= n or 0
        return n or 0

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_range(path: str, start: int, end: int):
    """A buffered binary file of the bytes [start, end) of ``path``."""
    return io.BufferedReader(RangeReader(open(path, "rb", buffering=0), start, end), 1 << 20)


__all__ = ["MIN_RANGE_BYTES", "RangeReader", "TextRange", "open_range", "splittable", "text_ranges"]
