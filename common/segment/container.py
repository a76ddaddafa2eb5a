"""The segment container: one file holding named internal parts and a manifest, read with pread.

Layout (all integers little-endian)::

    magic "STRSEG\\x00\\x01"                      8 bytes
    part, part, ...                              each starts on a 64-byte boundary
    manifest (JSON, see manifest.py)
    footer: manifest offset u64, manifest length u64, manifest crc32 u32,
            container version u32, tail magic "STRSEGND"   32 bytes

One file per segment keeps deep storage to one object per segment, like Druid's smoosh files.
Parts are Arrow IPC streams or raw bytes. The file is not memory-mapped: a mapped file truncated
from outside kills the process with SIGBUS on the next read past its new end, which no check
before the read can rule out (the truncation can land between the check and the read). Instead a
part is read with a positioned read into memory, its crc32 (over the stored bytes) is checked on
every read, a compressed part (one zstd or LZ4 block, its codec and decoded length recorded in the
manifest, see part_codec.py) is decoded, and the result is kept in the process's bounded
``DecodedPartCache``; readers ask the container every time instead of holding parts, so that
budget bounds them. A truncated file gives a short read and a rewritten one a checksum mismatch:
both raise SegmentCorruptError instead of producing rows or a crash.
A reader checks the footer, the manifest checksum, every part's bounds and codec on open.
"""

from __future__ import annotations

import itertools
import os
import struct
import tempfile
import weakref
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

import pyarrow as pa

from common.errors import SegmentCorruptError, StrataError
from common.segment.part_cache import PROCESS_CACHE, DecodedPartCache
from common.segment.part_codec import CODECS, CodecError, PartCompression, decompress, parse_codec

MAGIC = b"STRSEG\x00\x01"
TAIL_MAGIC = b"STRSEGND"
CONTAINER_VERSION = 1
_FOOTER = struct.Struct("<QQII8s")
_ALIGN = 64


def crc32(data) -> int:
    return zlib.crc32(memoryview(data)) & 0xFFFFFFFF


def _family(name: str) -> str:
    """Parts that differ only in a trailing number (``added/block0``, ``added/block1``) are blocks
    of one column: they share a shuffle width."""
    return name.rstrip("0123456789")


def _compressed(parts: dict[str, pa.Buffer | bytes], compression: PartCompression, pool: Executor | None,
                overrides: Mapping[str, PartCompression] | None = None) -> dict:
    """Each part as (stored bytes, codec or None). The shuffle width is tried on a sample of a
    family's first part only (the trials cost more than compressing the part itself), and
    families compress in ``pool``'s threads when given (the codecs release the GIL).
    ``overrides``: part name -> the policy for that part instead of ``compression``."""
    families: dict[str, list[str]] = {}
    for name in parts:
        families.setdefault(_family(name), []).append(name)

    def family(names: list[str]) -> list[tuple[str, tuple]]:
        width, out = None, []
        for name in names:
            policy = overrides.get(name, compression) if overrides else compression
            stored, codec, used = policy.encode_with_width(parts[name], width)
            if used is not None:
                width = used
            out.append((name, (stored, codec)))
        return out

    groups = list(families.values())
    done = pool.map(family, groups) if pool is not None and len(groups) > 1 else map(family, groups)
    return dict(item for group in done for item in group)


def write_container(path: str, parts: dict[str, pa.Buffer | bytes], make_manifest: Callable[[dict], bytes],
                    compression: PartCompression | None = None, pool: Executor | None = None,
                    overrides: Mapping[str, PartCompression] | None = None, durable: bool = True) -> None:
    """Write ``parts`` then the manifest that ``make_manifest(entries)`` returns, atomically.

    ``entries`` maps part name -> (offset, length, crc32) for a part stored as is, and
    (offset, stored length, crc32 of the stored bytes, codec, decoded length) for a part that
    ``compression`` compressed. The file appears at ``path`` only when complete (temp file in
    the same directory, fsync, rename). ``pool``: threads to compress parts in. ``overrides``:
    part name -> its own policy (a projection's sketch part is compressed harder: builder.py).
    ``durable`` False leaves out the fsync (the file still appears only when complete).
    """
    stored_parts = _compressed(parts, compression, pool, overrides) if compression is not None else None

    def items():
        for name, data in parts.items():
            stored, codec = stored_parts[name] if stored_parts is not None else (data, None)
            yield name, stored, codec, memoryview(data).nbytes

    _write(path, items(), make_manifest, durable)


def write_stored_parts(path: str, parts: Mapping[str, tuple[bytes, str | None, int | None]],
                       make_manifest: Callable[[dict], bytes]) -> None:
    """A container of parts already stored (as another container holds them: name -> (stored
    bytes, codec or None, decoded length or None)), copied as they are; entries as
    ``write_container``'s. A historical's partial copy is made this way."""
    _write(path, ((name, stored, codec, raw) for name, (stored, codec, raw) in parts.items()), make_manifest)


def _write(path: str, items, make_manifest: Callable[[dict], bytes], durable: bool = True) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".sseg", dir=directory)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            out.write(MAGIC)
            pos = len(MAGIC)
            entries = {}
            for name, stored, codec, raw_length in items:
                pad = (-pos) % _ALIGN
                if pad:
                    out.write(b"\x00" * pad)
                    pos += pad
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
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ipc_bytes(array: pa.Array) -> pa.Buffer:
    """An Arrow IPC stream holding one column named 'v' (uncompressed: the container compresses)."""
    batch = pa.record_batch([array], names=["v"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


_TOKENS = itertools.count(1)


class Container:
    """An open segment file, read with positioned reads. ``part(name)`` returns a buffer in memory
    whose crc32 matched the manifest when it was read; parts are kept in the bounded ``cache``
    (decoded first when compressed), so the file is read again only after an eviction."""

    def __init__(self, path: str, label: str | None = None, cache: DecodedPartCache | None = None) -> None:
        self.path = path
        self._cache = cache if cache is not None else PROCESS_CACHE
        self._token = next(_TOKENS)  # keys this open file's cache entries (a reopened file gets new ones)
        self.label = label or os.path.basename(path)
        self.segment_id = None  # set once the manifest names the segment
        self._closed = False
        self._entries: dict = {}
        try:
            # One descriptor, closed by ``release_file`` (a Segment does it when its last lease
            # ends, see segment_lease.py) or when this object is collected: a reader holding a
            # lease after an eviction keeps reading the inode it verified (unlinked, or with a
            # new copy renamed over its path), and the descriptor is never closed under it.
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise SegmentCorruptError(f"segment {self.label}: cannot open {path}: {exc}") from None
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)
        try:
            self._identity = _identity(os.fstat(fd))
            self._open_checks()
        except OSError as exc:
            self.close()
            self._finalizer()
            raise SegmentCorruptError(f"segment {self.label}: cannot open {path}: {exc}") from None
        except BaseException:
            self.close()
            self._finalizer()
            raise

    def _open_checks(self) -> None:
        size = self._identity[2]
        if size < len(MAGIC) + _FOOTER.size:
            self._fail(f"size check failed: file is {size} bytes, too short to be a segment (truncated?)")
        if self._read(0, len(MAGIC), "magic").to_pybytes() != MAGIC:
            self._fail("magic check failed: the file does not start with the segment magic")
        footer = self._read(size - _FOOTER.size, _FOOTER.size, "footer").to_pybytes()
        m_off, m_len, m_crc, version, tail = _FOOTER.unpack(footer)
        if tail != TAIL_MAGIC:
            self._fail("footer check failed: tail magic missing (truncated or overwritten file)")
        if version > CONTAINER_VERSION:
            self._fail(f"container version check failed: version {version}, this reader knows {CONTAINER_VERSION}")
        if m_off + m_len != size - _FOOTER.size or m_off < len(MAGIC):
            self._fail(f"footer check failed: manifest at {m_off}+{m_len} does not end at the footer")
        self.manifest_bytes = self._read(m_off, m_len, "manifest").to_pybytes()
        if crc32(self.manifest_bytes) != m_crc:
            self._fail("manifest checksum check failed")
        self._manifest_offset = m_off

    def _fail(self, what: str):
        raise SegmentCorruptError(f"segment {self.label}: {what}", self.segment_id)

    def _read(self, offset: int, length: int, what: str) -> pa.Buffer:
        """``length`` bytes at ``offset`` into a fresh (64-byte aligned) buffer. Positioned reads
        instead of a memory map: a file truncated under a mapping kills the process with SIGBUS
        on the next touch of a page past its new end, while a short read is just an error."""
        if self._fd < 0:
            raise StrataError(f"segment {self.label}: read of {what} after its file was released: "
                              f"the reader held no lease on the segment")
        buf = pa.allocate_buffer(length)
        view = memoryview(buf)
        done = 0
        try:
            while done < length:
                got = os.preadv(self._fd, [view[done:]], offset + done)
                if got == 0:
                    break
                done += got
        except OSError as exc:
            self._fail(f"read check failed for {what}: cannot read {self.path}: {exc}")
        if done < length:
            self._fail(f"size check failed for {what}: only {done} of {length} bytes at offset {offset} could be "
                       f"read: {self.path} was truncated from outside; the copy is dropped and fetched again")
        return buf

    def check_unchanged(self) -> None:
        """Raise SegmentCorruptError if the file was truncated, rewritten or touched since it was
        opened. strata never changes a segment file in place (new copies get new inodes by
        rename, evicted ones are unlinked), so a change is damage from outside. Reads are safe
        anyway (each part read is checked against its crc32 and a short read is an error); this
        makes a query fail, and the copy get fetched again, as soon as the change is visible,
        even when every part the query needs is already in memory."""
        if self._closed or self._fd < 0:
            # Evicted (its file unlinked by the cache) or replaced: no path leads to that inode
            # any more, and a reader still holding it reads what it verified.
            return
        try:
            now = _identity(os.fstat(self._fd))
        except OSError as exc:
            self._fail(f"file check failed: cannot stat {self.path}: {exc}")
        if now != self._identity:
            self._fail(f"file check failed: {self.path} changed on disk since it was opened (size "
                       f"{self._identity[2]} -> {now[2]} bytes); the copy is dropped and fetched again")

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
        return self._identity[2]

    def part_length(self, name: str) -> int:
        """Stored bytes of a part (compressed size for a compressed part): what a read touches."""
        entry = self._entries.get(name)
        return 0 if entry is None else entry.length

    def stored_part(self, name: str) -> pa.Buffer:
        """A part's bytes as stored in the file, read now and checked against its crc32."""
        entry = self._entries.get(name)
        if entry is None:
            self._fail(f"part check failed: no internal part '{name}'")
        buf = self._read(entry.offset, entry.length, f"part '{name}'")
        if crc32(buf) != entry.crc32:
            self._fail(f"checksum check failed for part '{name}'")
        return buf

    def _decoded(self, name: str) -> pa.Buffer:
        entry = self._entries[name]
        if entry.codec is None:
            return self.stored_part(name)
        try:
            return decompress(entry.codec, self.stored_part(name), entry.raw_length)
        except CodecError as exc:
            self._fail(f"decompress check failed for part '{name}': {exc}")

    def _memory_size(self, name: str) -> int:
        entry = self._entries.get(name)
        if entry is None:
            self._fail(f"part check failed: no internal part '{name}'")
        return entry.length if entry.codec is None else entry.raw_length

    def _cached(self, name: str, kind: str, load, check: bool = True):
        size = self._memory_size(name)
        # A file damaged on disk fails the query at its next part access even when the parts it
        # needs are in memory, so the copy is dropped and fetched again before anything else.
        # (``check=False``: the caller checked just before, for several parts read together.)
        if check:
            self.check_unchanged()
        if self._closed:
            return load()  # its entries were dropped on close; a late reader must not add more
        return self._cache.get((self._token, name, kind), load, size)

    def part(self, name: str) -> pa.Buffer:
        """A part's bytes as written (decoded when compressed), from the cache or read now."""
        return self._cached(name, "bytes", lambda: self._decoded(name))

    def _parse(self, name: str, buf: pa.Buffer) -> pa.Array:
        try:
            schema, at = _stream_schema(buf)
            batch = pa.ipc.read_record_batch(buf.slice(at), schema) if schema is not None else \
                pa.ipc.open_stream(pa.BufferReader(buf)).read_next_batch()
        except (pa.ArrowInvalid, OSError, StopIteration) as exc:
            self._fail(f"decode check failed for part '{name}': {exc}")
        return batch.column(0)

    def array(self, name: str, check: bool = True) -> pa.Array:
        """A part written by ``ipc_bytes``, parsed once and kept in the bounded cache. Callers
        should not hold it beyond their query. ``check=False`` skips ``check_unchanged`` for a
        caller that made it just before reading several parts."""
        return self._cached(name, "array", lambda: self._parse(name, self._decoded(name)), check)

    def derived(self, name: str, kind: str, load: Callable[[], Any], nbytes: int) -> Any:
        """A value computed from part ``name`` (unpacked codes, looked-up numbers), kept in the
        same bounded cache as decoded parts and dropped with them when this file closes. Like a
        part read, it first checks the file did not change under the mapping."""
        self.check_unchanged()
        if self._closed:
            return load()  # its entries were dropped on close; a late reader must not add more
        return self._cache.get((self._token, name, kind), load, nbytes)

    def cached(self, name: str, kind: str) -> Any:
        """What ``array(name)`` (kind "array") or ``derived(name, kind, ...)`` would return, if it
        is in the cache now; else None, and nothing is read or decoded."""
        if self._closed:
            return None
        return self._cache.peek((self._token, name, kind))

    def fits_cache(self, nbytes: int) -> bool:
        """Whether a derived value of ``nbytes`` would be a small share of the cache's budget
        (an eighth), so keeping it does not push out the parts it is derived from."""
        return nbytes * 8 <= self._cache.max_bytes

    def verify_all(self) -> None:
        """Every part's checksum, over the stored bytes (for a compressed part, the checksum
        proves the block is what the writer wrote, so it is not decoded here)."""
        for name in self._entries:
            self.stored_part(name)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Drop this file's cached parts and stop caching new ones. The descriptor is closed
        when the last reader lets go of this object (see __init__); arrays already handed out
        stay valid either way: they live in memory, not in the file."""
        self._closed = True
        self._cache.evict(self._token)

    def release_file(self) -> None:
        """Close the descriptor now (an unlinked file's blocks are freed); reads fail after it."""
        self._fd = -1
        self._finalizer()


# Schema message bytes -> schema. A column's blocks repeat one schema message, and reading the
# batch after it with a known schema costs about a third of opening the stream anew (12 against
# 35 us a part; a cold scan of two 2M-row columns in 8192-row blocks reads about 500 parts).
_SCHEMAS: dict[bytes, pa.Schema | None] = {}
_MAX_SCHEMAS = 4096
_UNSEEN = object()


def _stream_schema(buf: pa.Buffer) -> tuple[pa.Schema | None, int]:
    """(schema, offset of the next message) of an IPC stream that opens with a schema message
    in the current framing (0xFFFFFFFF, metadata length, metadata); (None, 0) otherwise, and the
    caller opens the stream the usual way."""
    if buf.size < 8:
        return None, 0
    head = memoryview(buf)[:8]
    marker, length = struct.unpack("<Ii", head)
    at = 8 + length
    if marker != 0xFFFFFFFF or length <= 0 or at > buf.size:
        return None, 0
    key = buf.slice(0, at).to_pybytes()
    # One get (not a test then an index): another thread may clear the memo in between.
    schema = _SCHEMAS.get(key, _UNSEEN)
    if schema is _UNSEEN:
        schema = pa.ipc.read_schema(pa.BufferReader(buf.slice(0, at)))
        # Dictionary-typed fields need the stream's dictionary batches: those open the stream.
        if "dictionary<" in str(schema):
            schema = None
        if len(_SCHEMAS) >= _MAX_SCHEMAS:
            _SCHEMAS.clear()
        _SCHEMAS[key] = schema
    return (schema, at) if schema is not None else (None, 0)


def _identity(st: os.stat_result) -> tuple:
    # Not ctime: unlinking an evicted file changes it, and an unlinked mapping is still intact.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

