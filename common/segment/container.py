"""The segment container: one file holding named internal parts and a manifest, memory-mapped.

Layout (all integers little-endian)::

    magic "STRSEG\\x00\\x01"                      8 bytes
    part, part, ...                              each starts on a 64-byte boundary
    manifest (JSON, see manifest.py)
    footer: manifest offset u64, manifest length u64, manifest crc32 u32,
            container version u32, tail magic "STRSEGND"   32 bytes

One file per segment keeps deep storage to one object per segment, like Druid's smoosh files.
Parts are Arrow IPC streams or raw bytes; readers slice the memory map, so nothing is copied.
A reader checks the footer, the manifest checksum and every part's bounds on open, and each
part's crc32 the first time it is read, so corrupted bytes raise instead of producing rows.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import zlib
from collections.abc import Callable

import pyarrow as pa

from common.errors import SegmentCorruptError

MAGIC = b"STRSEG\x00\x01"
TAIL_MAGIC = b"STRSEGND"
CONTAINER_VERSION = 1
_FOOTER = struct.Struct("<QQII8s")
_ALIGN = 64


def crc32(data) -> int:
    return zlib.crc32(memoryview(data)) & 0xFFFFFFFF


def write_container(path: str, parts: dict[str, pa.Buffer | bytes], make_manifest: Callable[[dict], bytes]) -> None:
    """Write ``parts`` then the manifest that ``make_manifest(entries)`` returns, atomically.

    ``entries`` maps part name -> (offset, length, crc32). The file appears at ``path`` only when
    complete (temp file in the same directory, fsync, rename).
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
                view = memoryview(data)
                out.write(view)
                entries[name] = (pos, view.nbytes, crc32(view))
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


class Container:
    """A memory-mapped segment file. ``part(name)`` returns a zero-copy, checksum-verified buffer."""

    def __init__(self, path: str, label: str | None = None) -> None:
        self.path = path
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
        self._entries = entries

    @property
    def size(self) -> int:
        return self._buf.size

    def part_length(self, name: str) -> int:
        entry = self._entries.get(name)
        return 0 if entry is None else entry.length

    def part(self, name: str) -> pa.Buffer:
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

    def array(self, name: str) -> pa.Array:
        """A part written by ``ipc_bytes``, read without copying."""
        buf = self.part(name)
        try:
            reader = pa.ipc.open_stream(pa.BufferReader(buf))
            batch = reader.read_next_batch()
        except (pa.ArrowInvalid, OSError, StopIteration) as exc:
            self._fail(f"decode check failed for part '{name}': {exc}")
        return batch.column(0)

    def verify_all(self) -> None:
        for name in self._entries:
            self.part(name)

    def close(self) -> None:
        self._map.close()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _identity(st: os.stat_result) -> tuple:
    # Not ctime: unlinking an evicted file changes it, and an unlinked mapping is still intact.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

