"""Part codecs: how a segment part's stored bytes relate to the bytes its readers parse.

A part is stored either as is (read as it is stored) or compressed as one block with
a codec that the manifest records beside the part's offset, length and crc32 (the checksum
covers the stored bytes, so bit rot is caught before decompression). Any segment with a
compressed part lists ``compressedParts`` in ``requiredFeatures``, so an older reader refuses it
instead of parsing compressed bytes as Arrow.

Before compressing, the writer may byte-shuffle a part (``shuffle8/zstd``: the first bytes of every
8-byte word, then the second bytes, ..., as Blosc does), which turns the mostly-zero high bytes
of sorted times, small counts and wide dictionary codes into long runs: on the demo rows it
makes ``__time`` 23% and the high-cardinality ``page`` column's int32 codes 19% smaller after zstd. The width
is picked per part from a sample (no shuffle, 8, 4 or 2), so doubles, signed deltas and strings,
which shuffling makes worse, stay unshuffled.

The writer compresses every part and keeps the compressed bytes only when they save enough:
codes, numbers and dictionaries shrink 2-8x on the demo rows, while small parts and some Roaring
bitmaps (a 50-value column's) barely shrink and stay uncompressed, so reading them decodes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

# The requiredFeatures entry of a segment with at least one compressed part.
COMPRESSED_PARTS = "compressedParts"

# Manifest codec name -> pyarrow codec name. Both are whole-buffer frame formats. A manifest entry
# names a codec, optionally after a byte-shuffle filter: "shuffle8/zstd".
CODECS = {"zstd": "zstd", "lz4_frame": "lz4"}
SHUFFLE_WIDTHS = (8, 4, 2)
_SAMPLE_BYTES = 256 * 1024


def parse_codec(name: str) -> tuple[int, str] | None:
    """(shuffle width or 0, codec) of a manifest codec name; None when this version does not know it."""
    width, _, base = name.rpartition("/")
    if base not in CODECS:
        return None
    if not width:
        return 0, base
    if width.startswith("shuffle") and width[7:].isdigit() and int(width[7:]) in SHUFFLE_WIDTHS:
        return int(width[7:]), base
    return None


def shuffle(data, width: int) -> pa.Buffer:
    """Byte ``i`` of every ``width``-byte word together, for i = 0..width-1; a tail shorter than a
    word stays at the end as it was."""
    raw = np.frombuffer(data, dtype=np.uint8)
    whole = len(raw) // width * width
    out = np.empty(len(raw), dtype=np.uint8)
    out[:whole] = raw[:whole].reshape(-1, width).T.ravel()
    out[whole:] = raw[whole:]
    return pa.py_buffer(out)


def unshuffle(data, width: int) -> pa.Buffer:
    raw = np.frombuffer(data, dtype=np.uint8)
    whole = len(raw) // width * width
    out = np.empty(len(raw), dtype=np.uint8)
    # One strided write per byte plane: about twice as fast as copying the transposed view in
    # one go (0.6 against 1.1 ms for 2.4 MB), which a cold read of a long column pays per block.
    words = out[:whole].reshape(-1, width)
    planes = raw[:whole].reshape(width, -1)
    for i in range(width):
        words[:, i] = planes[i]
    out[whole:] = raw[whole:]
    return pa.py_buffer(out)


class CodecError(Exception):
    """A stored block did not decompress to the recorded length (the caller names the part)."""


@dataclass(frozen=True)
class PartCompression:
    """The writer's policy. ``level`` None is the codec's default. On 1M demo rows (no shuffle)
    zstd level 1 stored 29.7 bytes/row, level 3 29.5 and level 9 28.7 at twice the build time.
    A part stays uncompressed when it is under ``min_bytes`` or compression saves less than
    ``min_saving`` of its size (it is then read as stored and never decompressed)."""

    codec: str = "zstd"
    level: int | None = 1
    min_saving: float = 0.2
    min_bytes: int = 4096
    try_shuffle: bool = True

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"unknown segment part codec '{self.codec}'; use one of {', '.join(CODECS)}")
        if not 0.0 <= self.min_saving < 1.0:
            raise ValueError(f"min_saving must be in [0, 1), got {self.min_saving}")

    def encode(self, data, width: int | None = None) -> tuple[pa.Buffer | memoryview, str | None]:
        """(bytes to store, codec name or None when the part stays uncompressed). ``width``: the
        shuffle width to use (0 for none) instead of trying each on a sample."""
        stored, codec, _ = self.encode_with_width(data, width)
        return stored, codec

    def encode_with_width(self, data, width: int | None = None) -> tuple[pa.Buffer | memoryview, str | None, int | None]:
        """As ``encode``, plus the shuffle width it used (None when the part was too small to try
        one), so that a caller can hand it to the next part of the same kind."""
        view = memoryview(data)
        if view.nbytes < self.min_bytes:
            return view, None, None
        codec = pa.Codec(CODECS[self.codec], compression_level=self.level) if self.level is not None \
            else pa.Codec(CODECS[self.codec])
        if not self.try_shuffle:
            width = 0
        elif width is None or (width and view.nbytes < 4 * width):
            width = self._best_width(codec, view)
        source = shuffle(view, width) if width else pa.py_buffer(view)
        packed = codec.compress(source, asbytes=False)
        if packed.size > view.nbytes * (1.0 - self.min_saving):
            return view, None, width
        return packed, f"shuffle{width}/{self.codec}" if width else self.codec, width

    @staticmethod
    def _best_width(codec: pa.Codec, view: memoryview) -> int:
        """The shuffle width (0 for none) whose sample compresses smallest; ties keep no shuffle.

        The sample is four slices spread over the part, not its head: a string part starts with
        its offsets (which shuffle well) and continues with text (which shuffles badly)."""
        if view.nbytes > _SAMPLE_BYTES:
            piece = _SAMPLE_BYTES // 4
            starts = [(i * (view.nbytes - piece) // 3) // 8 * 8 for i in range(4)]
            slices = [view[s:s + piece] for s in starts]
        else:
            slices = [view]

        def size(width: int) -> float:
            parts = [shuffle(p, width) if width else p for p in slices]
            joined = pa.py_buffer(b"".join(memoryview(p) for p in parts))
            return codec.compress(joined, asbytes=False).size

        sizes = {0: size(0)}
        for width in SHUFFLE_WIDTHS:
            if view.nbytes >= 4 * width:
                # Below 95% of the plain size only: a shuffle costs a pass on every decode.
                sizes[width] = size(width) / 0.95
        return min(sizes, key=lambda w: (sizes[w], w != 0))


DEFAULT_COMPRESSION = PartCompression()

# A projection's HLL sketch column (one serialized sketch per pre-aggregated row) is most of the
# projection's bytes. Level 1 finds little in it; from level 17 (zstd's optimal parser) zstd
# matches the 4-byte coupons a user leaves in the sketches of several hours of one channel.
# On one 10M-row benchmark day segment (1,200 sketches, 1.40 MB): level 1 907 KB (3 ms),
# 9 729 KB (39 ms), 15 713 KB (520 ms), 17 630 KB (383 ms), 19 628 KB (590 ms); decoding takes
# 1.1-1.7 ms at every level. Shuffling never helps sketch bytes, so it is not tried.
SKETCH_ZSTD_LEVEL = 17


def for_sketches(policy: PartCompression) -> PartCompression:
    """The policy for a part of serialized sketches, from the build's policy."""
    if policy.codec != "zstd":
        return replace(policy, try_shuffle=False)
    return replace(policy, level=max(policy.level or 3, SKETCH_ZSTD_LEVEL), try_shuffle=False)


def decompress(codec: str, stored: pa.Buffer, raw_length: int) -> pa.Buffer:
    """The part's bytes as written; CodecError when they do not decompress to ``raw_length``."""
    parsed = parse_codec(codec)
    if parsed is None:
        raise CodecError(f"unknown codec '{codec}'")
    width, base = parsed
    try:
        out = pa.Codec(CODECS[base]).decompress(stored, decompressed_size=raw_length, asbytes=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CodecError(f"{codec} block does not decompress: {exc}") from None
    if out.size != raw_length:
        raise CodecError(f"{codec} block decompressed to {out.size} bytes, the manifest records {raw_length}")
    return unshuffle(out, width) if width else out


__all__ = ["CODECS", "COMPRESSED_PARTS", "CodecError", "DEFAULT_COMPRESSION", "PartCompression", "SKETCH_ZSTD_LEVEL",
           "decompress", "for_sketches", "parse_codec", "shuffle", "unshuffle"]
