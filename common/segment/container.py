"""The segment container: one file holding named internal parts and a manifest, memory-mapped.

Layout (all integers little-endian)::

    magic "STRSEG\\x00\\x01"                      8 bytes
    part, part, ...                              each starts on a 64-byte boundary
    manifest (JSON, see manifest.py)
    footer: manifest offset u64, manifest length u64, manifest crc32 u32,
            container version u32, tail magic "STRSEGND"   32 bytes

One file per segment keeps deep storage to one object per segment, like Druid's smoosh files.
Parts are Arrow IPC streams or raw bytes. An uncompressed part is read in place: readers slice
the memory map, so nothing is copied. A compressed part (one zstd or LZ4 block, its codec and
decoded length recorded in the manifest, see part_codec.py) is decoded on use and kept in the
process's bounded ``DecodedPartCache``; readers ask the container every time instead of
holding decoded parts, so that budget bounds them.
A reader checks the footer, the manifest checksum, every part's bounds and codec on open, and
each part's crc32 (over the stored bytes) the first time it is read, so corrupted bytes raise
instead of producing rows.
"""

from __future__ import annotations

import itertools
import os
import struct
import tempfile
import threading
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from common.errors import SegmentCorruptError
from common.segment.part_cache import PROCESS_CACHE, DecodedPartCache
from common.segment.part_codec import CODECS, CodecError, PartCompression, decompress, parse_codec

MAGIC = b"STRSEG\x00\x01"
TAIL_MAGIC = b"STRSEGND"
CONTAINER_VERSION = 1
_FOOTER = struct.Struct("<QQII8s")
_ALIGN = 64


def crc32(data) -> int:
    return zlib.crc32(memoryview(data)) & 0xFFFFFFFF


def write_container(path: str, parts: dict[str, pa.Buffer | bytes], make_manifest: Callable[[dict], bytes],
                    compression: PartCompression | None = None) -> None:
    """Write ``parts`` then the manifest that ``make_manifest(entries)`` returns, atomically.

    ``entries`` maps part name -> (offset, length, crc32) for a part stored as is, and
    (offset, stored length, crc32 of the stored bytes, codec, decoded length) for a part that
    ``compression`` compressed. The file appears at ``path`` only when complete (temp file in
    the same directory, fsync, rename).
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".sseg", dir=directory)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            out.write(MAGIC)
            pos = len(MAGIC)
            entries = {}
            for name, data in parts.items():
                pad = (-pos) % _ALIGN
                if pad:
                    out.write(b"\x00" * pad)
                    pos += pad
                raw_length = memoryview(data).nbytes
                stored, codec = compression.encode(data) if compression is not None else (data, None)
                view = memoryview(stored)
                out.write(view)
                check = crc32(view)
                entries[name] = (pos, view.nbytes, check) if codec is None else \
                    (pos, view.nbytes, check, codec, raw_length)
                pos += view.nbytes
            manifest = make_manifest(entries)
            out.write(manifest)
            out.write(_FOOTER.pack(pos, len(manifest), crc32(manifest), CONTAINER_VERSION, TAIL_MAGIC))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ipc_bytes(array: pa.Array) -> pa.Buffer:
    """An Arrow IPC stream holding one column named 'v' (uncompressed, so it can be mapped)."""
    batch = pa.record_batch([array], names=["v"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


_TOKENS = itertools.count(1)


class Container:
    """A memory-mapped segment file. ``part(name)`` returns a checksum-verified buffer: zero-copy
    for an uncompressed part, decoded through ``cache`` for a compressed one."""

    def __init__(self, path: str, label: str | None = None, cache: DecodedPartCache | None = None) -> None:
        self.path = path
        self._cache = cache if cache is not None else PROCESS_CACHE
        self._token = next(_TOKENS)  # keys this open file's cache entries (a reopened file gets new ones)
        self._arrays: dict[str, pa.Array] = {}
        self.label = label or os.path.basename(path)
        self.segment_id = None  # set once the manifest names the segment
        try:
            # The descriptor stays open so the mapped file can be checked (fstat) before its bytes
            # are touched: a file truncated under a mapping kills the process with SIGBUS on the
            # first read past its new end, so a changed file must be noticed, not read.
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise SegmentCorruptError(f"segment {self.label}: cannot open {path}: {exc}") from None
        try:
            self._identity = _identity(os.fstat(self._fd))
            self._map = pa.memory_map(path, "r")
        except (FileNotFoundError, pa.ArrowIOError, OSError) as exc:
            os.close(self._fd)
            raise SegmentCorruptError(f"segment {self.label}: cannot open {path}: {exc}") from None
        self._buf = self._map.read_buffer()
        if self._buf.size != self._identity[2]:
            self.close()
            self._fail("size check failed: the file changed while it was being opened")
        self._verified: set[str] = set()
        self._lock = threading.Lock()
        size = self._buf.size
        if size < len(MAGIC) + _FOOTER.size:
            self._fail(f"size check failed: file is {size} bytes, too short to be a segment (truncated?)")
        if self._buf.slice(0, len(MAGIC)).to_pybytes() != MAGIC:
            self._fail("magic check failed: the file does not start with the segment magic")
        m_off, m_len, m_crc, version, tail = _FOOTER.unpack(self._buf.slice(size - _FOOTER.size).to_pybytes())
        if tail != TAIL_MAGIC:
            self._fail("footer check failed: tail magic missing (truncated or overwritten file)")
        if version > CONTAINER_VERSION:
            self._fail(f"container version check failed: version {version}, this reader knows {CONTAINER_VERSION}")
        if m_off + m_len != size - _FOOTER.size or m_off < len(MAGIC):
            self._fail(f"footer check failed: manifest at {m_off}+{m_len} does not end at the footer")
        self.manifest_bytes = self._buf.slice(m_off, m_len).to_pybytes()
        if crc32(self.manifest_bytes) != m_crc:
            self._fail("manifest checksum check failed")
        self._manifest_offset = m_off

    def _fail(self, what: str):
        raise SegmentCorruptError(f"segment {self.label}: {what}", self.segment_id)

    def check_unchanged(self) -> None:
        """Raise SegmentCorruptError if the mapped file was truncated, rewritten or touched since
        it was opened. strata never changes a mapped file (new copies get new inodes by rename,
        evicted ones are unlinked), so a change is damage from outside: reading the mapping then
        could SIGBUS (past a new end) or give bytes that no checksum covered any more."""
        if self._fd < 0:
            # Closed (evicted, its file unlinked by the cache): a reader still holding it reads the
            # mapping Arrow keeps alive for its buffers, and no path leads to that file any more.
            return
        try:
            now = _identity(os.fstat(self._fd))
        except OSError as exc:
            self._fail(f"file check failed: cannot stat {self.path}: {exc}")
        if now != self._identity:
            self._fail(f"file check failed: {self.path} changed under the mapping (size {self._identity[2]} -> "
                       f"{now[2]} bytes); the copy is dropped and fetched again")

    def check_bounds(self, entries: dict) -> None:
        for name, entry in entries.items():
            if entry.offset < len(MAGIC) or entry.offset + entry.length > self._manifest_offset:
                self._fail(f"bounds check failed for part '{name}': {entry.offset}+{entry.length} lies outside the data")
            if entry.codec is not None and (not isinstance(entry.codec, str) or parse_codec(entry.codec) is None):
                self._fail(f"codec check failed for part '{name}': codec '{entry.codec}' is unknown to this version "
                           f"(known: {', '.join(CODECS)}, each optionally after shuffle8/, shuffle4/ or "
                           "shuffle2/); upgrade strata")
            if entry.codec is not None and (not isinstance(entry.raw_length, int) or entry.raw_length < 0):
                self._fail(f"codec check failed for part '{name}': decoded length {entry.raw_length!r} is not a size")
        self._entries = entries

    @property
    def size(self) -> int:
        return self._buf.size

    def part_length(self, name: str) -> int:
        """Stored bytes of a part (compressed size for a compressed part): what a read touches."""
        entry = self._entries.get(name)
        return 0 if entry is None else entry.length

    def stored_part(self, name: str) -> pa.Buffer:
        """A part's bytes as stored in the file (zero-copy), checksum-verified on first use."""
        entry = self._entries.get(name)
        if entry is None:
            self._fail(f"part check failed: no internal part '{name}'")
        self.check_unchanged()
        buf = self._buf.slice(entry.offset, entry.length)
        if name not in self._verified:
            if crc32(buf) != entry.crc32:
                self._fail(f"checksum check failed for part '{name}'")
            with self._lock:
                self._verified.add(name)
        return buf

    def _decoded(self, name: str) -> pa.Buffer:
        entry = self._entries[name]
        try:
            return decompress(entry.codec, self.stored_part(name), entry.raw_length)
        except CodecError as exc:
            self._fail(f"decompress check failed for part '{name}': {exc}")

    def part(self, name: str) -> pa.Buffer:
        """A part's bytes as written: the mapped bytes, or the decoded block of a compressed part."""
        buf = self.stored_part(name)
        entry = self._entries[name]
        if entry.codec is None:
            return buf
        return self._cache.get((self._token, name, "bytes"), lambda: self._decoded(name), entry.raw_length)

    def _parse(self, name: str, buf: pa.Buffer) -> pa.Array:
        try:
            reader = pa.ipc.open_stream(pa.BufferReader(buf))
            batch = reader.read_next_batch()
        except (pa.ArrowInvalid, OSError, StopIteration) as exc:
            self._fail(f"decode check failed for part '{name}': {exc}")
        return batch.column(0)

    def array(self, name: str) -> pa.Array:
        """A part written by ``ipc_bytes``: read in place when uncompressed, else decoded once and
        kept in the bounded cache. Callers should not hold it beyond their query."""
        arr = self._arrays.get(name)
        if arr is not None:
            return arr
        buf = self.stored_part(name)
        entry = self._entries[name]
        if entry.codec is not None:
            return self._cache.get((self._token, name, "array"),
                                   lambda: self._parse(name, self._decoded(name)), entry.raw_length)
        arr = self._parse(name, buf)
        with self._lock:
            self._arrays.setdefault(name, arr)
        return arr

    def derived(self, name: str, kind: str, load: Callable[[], Any], nbytes: int) -> Any:
        """A value computed from part ``name`` (unpacked codes, looked-up numbers), kept in the
        same bounded cache as decoded parts and dropped with them when this file closes. Like a
        part read, it first checks the file did not change under the mapping."""
        self.check_unchanged()
        return self._cache.get((self._token, name, kind), load, nbytes)

    def verify_all(self) -> None:
        """Every part's checksum, over the stored bytes (for a compressed part, the checksum
        proves the block is what the writer wrote, so it is not decoded here)."""
        for name in self._entries:
            self.stored_part(name)

    def close(self) -> None:
        self._cache.evict(self._token)
        with self._lock:
            self._arrays.clear()
        self._map.close()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _identity(st: os.stat_result) -> tuple:
    # Not ctime: unlinking an evicted file changes it, and an unlinked mapping is still intact.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

