"""A vectorized union of serialized DataSketches HLL sketches, one result per group.

A projection stores one HLL sketch per pre-aggregated row, so a query over it merges thousands of
small sketches; deserializing each one through the datasketches binding costs microseconds apiece
and dominated such queries. Instead the serialized images of a whole column are read at once with
numpy: coupon-mode sketches (LIST, SET) as their coupons, HLL-mode sketches (HLL_4, HLL_8) as
their registers, and merged per group exactly as a datasketches ``hll_union`` would:

- a group whose inputs are all coupon-mode keeps the set of distinct coupons while it is small
  enough that a union would still hold coupons (the union promotes to registers once
  ``4 * count > 3 * 2^(lgK-3)``), and is written as a LIST or SET image;
- otherwise its registers are the maximum per slot over every input's registers and coupons,
  written as an HLL_8 image marked out-of-order (so any estimator uses the composite estimate,
  a function of the registers only).

The result therefore does not depend on merge order, and estimation stays with datasketches (the
images are ordinary sketches it deserializes). Inputs in any other form (another lgK, HLL_6,
big-endian, a version this does not know) make ``union_images`` return None and the caller falls
back to the datasketches union.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


_SER_VER = 1
_FAMILY = 7
_LIST, _SET, _HLL = 0, 1, 2
_HLL_4, _HLL_8 = 0, 2
_COMPACT, _EMPTY, _OUT_OF_ORDER = 8, 4, 16
_HLL_PREAMBLE = 40
_LIST_LG_ARR = 3
_SET_MIN_LG_ARR = 5


def _promotes(count: np.ndarray, lg_k: int) -> np.ndarray:
    """Whether a union holding ``count`` distinct coupons has switched to registers."""
    return 4 * count > 3 << (lg_k - 3)


def _gather_ints(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The little-endian uint32 values in each [start, end) byte range, and each value's range index."""
    counts = (ends - starts) // 4
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(starts)), counts)
    first = np.cumsum(counts) - counts
    pos = starts[owner] + 4 * (np.arange(total) - first[owner])
    # Rows start at any byte, so read through the four uint32 views of the buffer, one per
    # alignment, instead of assembling each value from its bytes.
    ints = np.empty(total, np.uint32)
    align = pos & 3
    for a in range(4):
        at = align == a
        if at.any():
            view = data[a:a + (len(data) - a) // 4 * 4].view("<u4")
            ints[at] = view[(pos[at] - a) >> 2]
    return ints, owner


@dataclass(frozen=True)
class _Decoded:
    """A column of sketch images read once: HLL-mode rows as registers, the rest as coupons."""
    hll_rows: np.ndarray  # row numbers of HLL-mode images
    row_regs: np.ndarray  # their registers, (len(hll_rows), k) uint8
    coupons: np.ndarray  # uint32 coupons of coupon-mode images
    coupon_rows: np.ndarray  # the row number of each coupon
    rows: int  # rows of the column decoded
    # The image of every row's union, for a stored column that holds an HLL-mode image (see
    # ``_decode``'s ``whole``), else None.
    whole: bytes | None = None

    @property
    def nbytes(self) -> int:
        return (self.hll_rows.nbytes + self.row_regs.nbytes + self.coupons.nbytes + self.coupon_rows.nbytes
                + (len(self.whole) if self.whole is not None else 0))


def union_images(values: pa.Array, gid: np.ndarray, groups: int, lg_k: int, keep=None) -> pa.Array | None:
    """One serialized sketch per group (binary), or None when some input is not handled here.

    ``keep``: when ``values`` is every row of a stored column, its source's ``RowSource.derived``
    for it: the decoding is then made from the stored column once and kept with the segment's
    open file (keyed by that file, never by buffer addresses, so a freed and reused buffer cannot
    find another column's decoding; charged to the node's part budget, dropped when the file
    closes). Without it (rows selected per query, a merge's images) the column is decoded here."""
    if lg_k < 8 or not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        return None
    decoded = keep(f"hll-decoded-{lg_k}", lambda stored: _decode(stored, lg_k, whole=True)) \
        if keep is not None else None
    if decoded is None or decoded.rows != len(values):
        decoded = _decode(values, lg_k)
    if decoded is None:
        return None
    return _merge(decoded, np.asarray(gid, dtype=np.int64), groups, lg_k)


def _decode(values: pa.Array, lg_k: int, whole: bool = False) -> _Decoded | None:
    """``values`` read with numpy, or None when some image is in a form this does not handle.

    ``whole``: also the union of every row (when some row is in HLL mode), for a decoding kept
    with a stored column. A query whose one group takes the whole column (a day bucket over a day
    segment's hourly projection) takes it as that group's image: folding the column's coupons
    (``np.maximum.at`` over tens of thousands of them) and writing the image again at every run
    cost more than the rest of such a query. Like the decoding, that union is a function of the
    stored bytes alone (whatever the query: it is the column's, not a query's), made once per open
    file, charged with the decoding and dropped with it; what a query does with it (its other
    groups, the other segments' sketches it is merged with) is done at every run."""
    n = len(values)
    k = 1 << lg_k
    if n:
        large = pa.types.is_large_binary(values.type)
        offsets = np.frombuffer(values.buffers()[1], np.int64 if large else np.int32, n + 1,
                                values.offset * (8 if large else 4)).astype(np.int64)
        buf = values.buffers()[2]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
        starts, ends = offsets[:-1], offsets[1:]
    else:
        data = np.zeros(0, np.uint8)
        starts = ends = np.zeros(0, np.int64)
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool) if values.null_count \
        else np.ones(n, bool)
    if valid.any() and (ends - starts)[valid].min() < 8:
        return None
    head = np.zeros((n, 8), np.uint8)
    head[:, 1], head[:, 2], head[:, 3] = _SER_VER, _FAMILY, lg_k
    head[:, 0] = 2  # a null row reads as an empty LIST image
    if valid.any():
        head[valid] = data[starts[valid][:, None] + np.arange(8)]
    ends = np.where(valid, ends, starts + 8)
    pre, ser, fam, lgk, flags, modeb = head[:, 0], head[:, 1], head[:, 2], head[:, 3], head[:, 5], head[:, 7]
    mode, tgt = modeb & 3, modeb >> 2
    if (ser != _SER_VER).any() or (fam != _FAMILY).any() or (lgk != lg_k).any() or (flags & 1).any():
        return None
    coupon_rows = mode != _HLL
    if (mode == 3).any() or (pre[coupon_rows] != np.where(mode[coupon_rows] == _LIST, 2, 3)).any():
        return None
    hll_rows = ~coupon_rows
    if (pre[hll_rows] != 10).any() or ((tgt[hll_rows] != _HLL_4) & (tgt[hll_rows] != _HLL_8)).any():
        return None
    h4 = hll_rows & (tgt == _HLL_4)
    h8 = hll_rows & (tgt == _HLL_8)
    if ((ends - starts)[h4] < _HLL_PREAMBLE + k // 2).any() or ((ends - starts)[h8] != _HLL_PREAMBLE + k).any():
        return None

    # Coupons: every int after a coupon-mode preamble, and the aux pairs after HLL_4 nibbles
    # (both pack slot | value << 26; unused hash-table slots are 0).
    c_start = np.where(coupon_rows, starts + 4 * pre.astype(np.int64), starts + _HLL_PREAMBLE + k // 2)
    c_start = np.where(valid, c_start, ends)
    sel = coupon_rows | h4
    ints, owner = _gather_ints(data, c_start[sel], ends[sel])
    row_of = np.flatnonzero(sel)[owner]
    nonzero = ints != 0
    ints, row_of = ints[nonzero], row_of[nonzero]

    hll_idx = np.flatnonzero(hll_rows)
    row_regs = np.empty((len(hll_idx), k), np.uint8)
    is4 = h4[hll_idx]
    r4 = hll_idx[is4]
    if len(r4):
        packed = data[starts[r4][:, None] + _HLL_PREAMBLE + np.arange(k // 2)]
        nib = np.empty((len(r4), k), np.uint8)
        nib[:, 0::2] = packed & 15
        nib[:, 1::2] = packed >> 4
        cur_min = data[starts[r4] + 6][:, None]
        # Nibble 15 marks a value kept in the aux table, whose pairs are patched in below.
        row_regs[is4] = np.where(nib == 15, 0, nib + cur_min)
    r8 = hll_idx[~is4]
    if len(r8):
        row_regs[~is4] = data[starts[r8][:, None] + _HLL_PREAMBLE + np.arange(k)]
    aux = hll_rows[row_of]
    if aux.any():
        _scatter_max(row_regs, np.searchsorted(hll_idx, row_of[aux]), ints[aux], k)
    coupons, coupon_rows = ints[~aux], row_of[~aux]
    image = _register_image(_whole_registers(row_regs, coupons, k), lg_k) if whole and len(hll_idx) else None
    return _Decoded(hll_idx, row_regs, coupons, coupon_rows, n, image)


def _merge(decoded: _Decoded, gid: np.ndarray, groups: int, lg_k: int) -> pa.Array:
    k = 1 << lg_k
    ints, row_of, hll_idx = decoded.coupons, decoded.coupon_rows, decoded.hll_rows
    if groups == 1 and len(hll_idx):
        # The whole column into one group that holds registers (a coarse bucket over a
        # projection): no grouping work at all, and none either when the decoding of a stored
        # column holds its union (``_decode``'s ``whole``).
        image = decoded.whole
        if image is None:
            image = _register_image(_whole_registers(decoded.row_regs, ints, k), lg_k)
        return pa.array([image], pa.binary())
    # Registers of HLL-mode rows, merged per group by maximum.
    hll_gid = gid[hll_idx]
    hll_groups = np.unique(hll_gid)
    regs = np.zeros((len(hll_groups), k), np.uint8)
    if len(hll_idx):
        slot_of_group = np.searchsorted(hll_groups, hll_gid)
        order = np.argsort(slot_of_group, kind="stable")
        # (ufunc.reduceat along axis 0 is orders of magnitude slower than a reduce per slice.)
        edges = np.searchsorted(slot_of_group[order], np.arange(len(hll_groups) + 1))
        for i in range(len(hll_groups)):
            rows = order[edges[i]:edges[i + 1]]
            if len(rows) == len(hll_idx):
                np.maximum.reduce(decoded.row_regs, axis=0, out=regs[i])
            else:
                np.maximum.reduce(decoded.row_regs[rows], axis=0, out=regs[i])

    # Coupons of groups that already hold registers go straight into them; the others are
    # deduplicated per group, and a group whose distinct count would promote a union joins them.
    cg = gid[row_of]
    has_regs = np.zeros(groups, bool)
    has_regs[hll_groups] = True
    direct = has_regs[cg]
    if direct.any():
        _scatter_max(regs, np.searchsorted(hll_groups, cg[direct]), ints[direct], k)
    keys = np.sort((cg[~direct] << 32) | ints[~direct].astype(np.int64))
    if len(keys):
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    kg, kc = keys >> 32, (keys & 0xFFFFFFFF).astype(np.uint32)
    per_group = np.bincount(kg, minlength=groups)[:groups] if len(kg) else np.zeros(groups, np.int64)
    promoted = _promotes(per_group, lg_k)
    registers_mode = has_regs | promoted
    reg_groups = np.flatnonzero(registers_mode)
    if promoted.any():
        grown = np.zeros((len(reg_groups), k), np.uint8)
        grown[np.searchsorted(reg_groups, hll_groups)] = regs
        regs = grown
        to_regs = promoted[kg]
        _scatter_max(regs, np.searchsorted(reg_groups, kg[to_regs]), kc[to_regs], k)

    out: list[bytes] = [b""] * groups
    bounds = np.searchsorted(kg, np.arange(groups + 1))
    for g in np.flatnonzero(~registers_mode).tolist():
        out[g] = _coupon_image(kc[bounds[g]:bounds[g + 1]], lg_k)
    for i, g in enumerate(reg_groups.tolist()):
        out[g] = _register_image(regs[i], lg_k)
    return pa.array(out, pa.binary())


def _whole_registers(row_regs: np.ndarray, coupons: np.ndarray, k: int) -> np.ndarray:
    """The registers of every HLL-mode row and coupon together."""
    regs = np.maximum.reduce(row_regs, axis=0)
    np.maximum.at(regs, (coupons & (k - 1)).astype(np.intp), (coupons >> 26).astype(np.uint8))
    return regs


def _scatter_max(regs: np.ndarray, rows: np.ndarray, coupons: np.ndarray, k: int) -> None:
    """Raise each coupon's register (row, slot) to the coupon's value."""
    flat = regs.reshape(-1)
    np.maximum.at(flat, rows.astype(np.int64) * k + (coupons & (k - 1)).astype(np.int64),
                  (coupons >> 26).astype(np.uint8))


def _coupon_image(coupons: np.ndarray, lg_k: int) -> bytes:
    count = len(coupons)
    body = coupons.astype("<u4").tobytes()
    if count == 0:
        return bytes((2, _SER_VER, _FAMILY, lg_k, _LIST_LG_ARR, _COMPACT | _EMPTY, 0, _LIST))
    if count < 1 << _LIST_LG_ARR:
        return bytes((2, _SER_VER, _FAMILY, lg_k, _LIST_LG_ARR, _COMPACT, count, _LIST)) + body
    lg_arr = _SET_MIN_LG_ARR
    while 4 * count > 3 << lg_arr:
        lg_arr += 1
    return bytes((3, _SER_VER, _FAMILY, lg_k, lg_arr, _COMPACT, 0, _SET)) + struct.pack("<i", count) + body


def _register_image(regs: np.ndarray, lg_k: int) -> bytes:
    inv = np.ldexp(1.0, -regs.astype(np.int32))
    low = regs < 32
    kxq0, kxq1 = float(inv[low].sum()), float(inv[~low].sum())
    zeros = int((regs == 0).sum())
    head = bytes((10, _SER_VER, _FAMILY, lg_k, 0, _COMPACT | _OUT_OF_ORDER, 0, _HLL | _HLL_8 << 2))
    return head + struct.pack("<dddii", 0.0, kxq0, kxq1, zeros, 0) + regs.tobytes()
