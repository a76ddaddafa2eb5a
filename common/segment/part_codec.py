"""Part codecs: how a segment part's stored bytes relate to the bytes its readers parse.

A part is stored either as is (memory-mapped and read in place) or compressed as one block with
a codec that the manifest records beside the part's offset, length and crc32 (the checksum
covers the stored bytes, so bit rot is caught before decompression). Any segment with a
compressed part lists ``compressedParts`` in ``requiredFeatures``, so an older reader refuses it
instead of parsing compressed bytes as Arrow.

The writer compresses every part and keeps the compressed bytes only when they save enough:
codes, numbers and dictionaries shrink 2-8x on the demo rows, while small parts and some Roaring
bitmaps (a 50-value column's) barely shrink and stay mapped, so reading them costs nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# The requiredFeatures entry of a segment with at least one compressed part.
COMPRESSED_PARTS = "compressedParts"

# Manifest codec name -> pyarrow codec name. Both are whole-buffer frame formats.
CODECS = {"zstd": "zstd", "lz4_frame": "lz4"}


class CodecError(Exception):
    """A stored block did not decompress to the recorded length (the caller names the part)."""


@dataclass(frozen=True)
class PartCompression:
    """The writer's policy. ``level`` None is the codec's default. On the demo rows zstd level 1
    stores 29.7 bytes/row, level 3 29.5 and level 9 28.7 at twice the build time, so level 1.
    A part stays uncompressed when it is under ``min_bytes`` or compression saves less than
    ``min_saving`` of its size (it is then memory-mapped and never decompressed)."""

    codec: str = "zstd"
    level: int | None = 1
    min_saving: float = 0.2
    min_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"unknown segment part codec '{self.codec}'; use one of {', '.join(CODECS)}")
        if not 0.0 <= self.min_saving < 1.0:
            raise ValueError(f"min_saving must be in [0, 1), got {self.min_saving}")

    def encode(self, data) -> tuple[pa.Buffer | memoryview, str | None]:
        """(bytes to store, codec name or None when the part stays uncompressed)."""
        view = memoryview(data)
        if view.nbytes < self.min_bytes:
            return view, None
        codec = pa.Codec(CODECS[self.codec], compression_level=self.level) if self.level is not None \
            else pa.Codec(CODECS[self.codec])
        packed = codec.compress(pa.py_buffer(view), asbytes=False)
        if packed.size > view.nbytes * (1.0 - self.min_saving):
            return view, None
        return packed, self.codec


DEFAULT_COMPRESSION = PartCompression()


def decompress(codec: str, stored: pa.Buffer, raw_length: int) -> pa.Buffer:
    """The part's bytes as written; CodecError when they do not decompress to ``raw_length``."""
    name = CODECS.get(codec)
    if name is None:
        raise CodecError(f"unknown codec '{codec}'")
    try:
        out = pa.Codec(name).decompress(stored, decompressed_size=raw_length, asbytes=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CodecError(f"{codec} block does not decompress: {exc}") from None
    if out.size != raw_length:
        raise CodecError(f"{codec} block decompressed to {out.size} bytes, the manifest records {raw_length}")
    return out


__all__ = ["CODECS", "COMPRESSED_PARTS", "CodecError", "DEFAULT_COMPRESSION", "PartCompression", "decompress"]
