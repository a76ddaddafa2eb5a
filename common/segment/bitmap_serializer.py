"""Bulk serialization of one Roaring bitmap per dictionary id, in Roaring's portable format.

A segment needs a bitmap for every distinct value of every string column: hundreds of thousands
of small bitmaps per million rows. Building each through pyroaring costs a Python round trip per
bitmap, which alone would cap segment builds well below a million rows per second. This module
writes valid portable-format bitmaps (array and bitset containers; no run containers yet, so a
column sorted by value stores 8 KiB bitsets where runs would be smaller) for all ids at once
with numpy; readers still use ``BitMap.deserialize``.

Portable format, per bitmap: cookie 12346 (u32), container count (u32), per container
(key u16, cardinality-1 u16), per container its byte offset (u32), then the containers:
arrays of u16 low bits for up to 4096 values, else 8192-byte bitsets.
"""

from __future__ import annotations

import numpy as np

_COOKIE_NO_RUN = 12346
_ARRAY_MAX = 4096
_BITSET_BYTES = 8192


def _put(buf: np.ndarray, positions: np.ndarray, values: np.ndarray, dtype: str) -> None:
    raw = np.ascontiguousarray(values.astype(dtype)).view(np.uint8)
    width = np.dtype(dtype).itemsize
    raw = raw.reshape(-1, width)
    buf[positions[:, None] + np.arange(width)] = raw


def serialize_grouped(rows: np.ndarray, ids: np.ndarray, num_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """Serialize one bitmap per id.

    ``rows`` are row numbers grouped by id and ascending within an id; ``ids`` gives each entry's
    id (non-decreasing). Returns (bytes as uint8, offsets of length num_ids + 1).
    """
    n = len(rows)
    rows = rows.astype(np.uint32, copy=False)
    ids = ids.astype(np.int64, copy=False)
    high = (rows >> 16).astype(np.int64)
    low = (rows & 0xFFFF).astype(np.int64)

    # Containers: runs of equal (id, high 16 bits).
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = (ids[1:] != ids[:-1]) | (high[1:] != high[:-1])
    starts = np.flatnonzero(new)
    card = np.diff(np.append(starts, n))
    c_id = ids[starts]
    c_key = high[starts]
    is_bitset = card > _ARRAY_MAX
    payload = np.where(is_bitset, _BITSET_BYTES, 2 * card).astype(np.int64)

    per_id = np.bincount(c_id, minlength=num_ids).astype(np.int64)
    header = 8 + 8 * per_id
    payload_per_id = np.zeros(num_ids, dtype=np.int64)
    np.add.at(payload_per_id, c_id, payload)
    sizes = header + payload_per_id
    offsets = np.zeros(num_ids + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buf = np.zeros(int(offsets[-1]), dtype=np.uint8)

    _put(buf, offsets[:-1], np.full(num_ids, _COOKIE_NO_RUN), "<u4")
    _put(buf, offsets[:-1] + 4, per_id, "<u4")
    if n == 0:
        return buf, offsets

    first_of_id = np.cumsum(per_id) - per_id
    index_in_id = np.arange(len(starts)) - first_of_id[c_id]
    base = offsets[c_id]
    _put(buf, base + 8 + 4 * index_in_id, c_key, "<u2")
    _put(buf, base + 10 + 4 * index_in_id, card - 1, "<u2")
    before = np.cumsum(payload) - payload  # payload bytes of all earlier containers
    relative = header[c_id] + before - before[first_of_id[c_id]]
    _put(buf, base + 8 + 4 * per_id[c_id] + 4 * index_in_id, relative, "<u4")
    data_at = base + relative

    container_of = np.cumsum(new) - 1
    in_array = ~is_bitset[container_of]
    if in_array.any():
        j = container_of[in_array]
        dest = data_at[j] + 2 * (np.flatnonzero(in_array) - starts[j])
        _put(buf, dest, low[in_array], "<u2")
    if is_bitset.any():
        slots = np.full(len(starts), -1, dtype=np.int64)
        bitset_ids = np.flatnonzero(is_bitset)
        slots[bitset_ids] = np.arange(len(bitset_ids))
        sel = ~in_array
        words = np.zeros(len(bitset_ids) * 1024, dtype=np.uint64)
        lo = low[sel]
        np.bitwise_or.at(words, slots[container_of[sel]] * 1024 + (lo >> 6),
                         np.left_shift(np.uint64(1), (lo & 63).astype(np.uint64)))
        as_bytes = words.view(np.uint8).reshape(len(bitset_ids), _BITSET_BYTES)
        buf[data_at[bitset_ids][:, None] + np.arange(_BITSET_BYTES)] = as_bytes
    return buf, offsets


_CHUNK = 1 << 16


def serialize_mask(mask: np.ndarray) -> bytes:
    """The portable-format bitmap of the rows where ``mask`` (bool) is true.

    A filter answered from codes, not stored bitmaps, matches a boolean mask; when many rows
    match, turning it into row numbers and feeding them to pyroaring one by one costs several
    times the scan. Here each 65536-row chunk becomes one container straight from the mask: a
    bitset by ``packbits`` when it has more than 4096 rows, else the chunk's row numbers.
    """
    mask = np.asarray(mask, dtype=bool)
    n = len(mask)
    chunks = (n + _CHUNK - 1) // _CHUNK
    whole = n // _CHUNK
    counts = np.zeros(chunks, dtype=np.int64)
    if whole:
        counts[:whole] = mask[:whole * _CHUNK].reshape(whole, _CHUNK).sum(axis=1)
    if chunks > whole:
        counts[whole] = int(mask[whole * _CHUNK:].sum())
    keys = np.flatnonzero(counts)
    payloads = []
    for key in keys:
        piece = mask[key * _CHUNK:(key + 1) * _CHUNK]
        if counts[key] > _ARRAY_MAX:
            if len(piece) < _CHUNK:
                piece = np.concatenate([piece, np.zeros(_CHUNK - len(piece), dtype=bool)])
            payloads.append(np.packbits(piece, bitorder="little").tobytes())
        else:
            payloads.append(np.flatnonzero(piece).astype("<u2").tobytes())
    head = np.array([_COOKIE_NO_RUN, len(keys)], dtype="<u4").tobytes()
    descriptive = np.empty(2 * len(keys), dtype="<u2")
    descriptive[0::2] = keys
    descriptive[1::2] = counts[keys] - 1
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    offsets = 8 + 8 * len(keys) + np.cumsum(sizes) - sizes
    return head + descriptive.tobytes() + offsets.astype("<u4").tobytes() + b"".join(payloads)
