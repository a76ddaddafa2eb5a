"""The vectorized HLL union gives the same sketches (same estimates, alone and merged further)
as the datasketches union it replaces, for every sketch mode and at the mode boundaries."""

from __future__ import annotations

import random

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest

from common.query.hll_union import _decode, union_images
from common.query.sketch_aggregators import HllSketch

SIZES = [0, 1, 5, 7, 8, 9, 50, 300, 383, 384, 385, 386, 1000, 5000, 60000]


def _estimate(blob: bytes, lg_k: int) -> float:
    return HllSketch("x", field_name="x", lg_k=lg_k)._estimate(blob)


def _reference(values: pa.Array, gid: np.ndarray, groups: int, lg_k: int) -> list[bytes]:
    unions = [ds.hll_union(lg_k) for _ in range(groups)]
    for g, blob in zip(gid.tolist(), values.to_pylist()):
        if blob is not None:
            unions[g].update(ds.hll_sketch.deserialize(blob))
    return [u.get_result(ds.tgt_hll_type.HLL_4).serialize_compact() for u in unions]


def _sketch(rng: random.Random, lg_k: int, size: int):
    sketch = ds.hll_sketch(lg_k, rng.choice([ds.tgt_hll_type.HLL_4, ds.tgt_hll_type.HLL_8]))
    start = rng.randint(0, 100_000)
    for v in range(start, start + size):
        sketch.update(v if rng.random() < 0.5 else f"u{v}")
    return sketch


@pytest.mark.parametrize("seed", range(40))
def test_union_matches_datasketches(seed):
    rng = random.Random(seed)
    lg_k = rng.choice([8, 11, 12, 12, 14])
    groups = rng.randint(1, 5)
    n = rng.randint(0, 25)
    blobs = []
    for _ in range(n):
        sketch = _sketch(rng, lg_k, rng.choice(SIZES))
        form = rng.random()
        blobs.append(None if form < 0.05 else sketch.serialize_updatable() if form < 0.3 else sketch.serialize_compact())
    # A slice, so the array's offset is not zero.
    values = pa.array([b"junk"] + blobs, pa.binary()).slice(1)
    gid = np.array([rng.randrange(groups) for _ in range(n)], np.int64)
    got = union_images(values, gid, groups, lg_k)
    assert got is not None
    expected = _reference(values, gid, groups, lg_k)
    other = _sketch(rng, lg_k, rng.choice(SIZES))
    for g in range(groups):
        assert _estimate(got[g].as_py(), lg_k) == _estimate(expected[g], lg_k)
        # Merged further (as the broker does), the two results still agree.
        merged = []
        for blob in (got[g].as_py(), expected[g]):
            union = ds.hll_union(lg_k)
            union.update(ds.hll_sketch.deserialize(blob))
            union.update(other)
            merged.append(_estimate(union.get_result().serialize_compact(), lg_k))
        assert merged[0] == merged[1]


def test_other_forms_fall_back():
    sketch = ds.hll_sketch(12, ds.tgt_hll_type.HLL_6)
    for v in range(5000):
        sketch.update(v)
    assert union_images(pa.array([sketch.serialize_compact()]), np.zeros(1, np.int64), 1, 12) is None
    small = ds.hll_sketch(10)
    small.update(1)
    assert union_images(pa.array([small.serialize_compact()]), np.zeros(1, np.int64), 1, 12) is None
    assert union_images(pa.array([b"\x01\x02"]), np.zeros(1, np.int64), 1, 12) is None


def test_combine_through_aggregator_falls_back_with_same_answer():
    agg = HllSketch("u", field_name="user", lg_k=12)
    sketches = [ds.hll_sketch(12, ds.tgt_hll_type.HLL_6), ds.hll_sketch(12)]
    for i, s in enumerate(sketches):
        for v in range(i * 300, i * 300 + 700):
            s.update(v)
    values = pa.array([s.serialize_compact() for s in sketches], pa.binary())
    out = agg.combine(values, np.zeros(2, np.int64), 1)
    assert agg.finalize(out).to_pylist() == [_estimate(_reference(values, np.zeros(2, np.int64), 1, 12)[0], 12)]


def test_a_kept_decoding_serves_every_grouping_with_the_same_results():
    rng = random.Random(7)
    blobs = [_sketch(rng, 12, rng.choice(SIZES)).serialize_compact() for _ in range(60)]
    values = pa.array(blobs, pa.binary())
    made = []

    def keep(kind, make):  # a source keeping one decoding of its stored column
        if not made:
            made.append(make(values))
        return made[0]

    for groups in (1, 3, 7, 1, 60):  # the same column again and again, grouped differently
        gid = np.array([rng.randrange(groups) for _ in range(len(blobs))], np.int64)
        got = union_images(values, gid, groups, 12, keep)
        expected = _reference(values, gid, groups, 12)
        assert [_estimate(b, 12) for b in got.to_pylist()] == [_estimate(b, 12) for b in expected]
    assert len(made) == 1  # decoded once


def test_a_kept_decoding_of_another_length_is_not_used():
    # What a source keeps is of its whole stored column; values of another length (rows taken)
    # are decoded as given.
    rng = random.Random(5)
    whole = pa.array([_sketch(rng, 12, 300).serialize_compact() for _ in range(6)], pa.binary())
    part = whole.slice(0, 4)
    gid = np.zeros(4, np.int64)
    got = union_images(part, gid, 1, 12, lambda kind, make: _decode(whole, 12))
    assert _estimate(got.to_pylist()[0], 12) == _estimate(_reference(part, gid, 1, 12)[0], 12)



def test_a_kept_decoding_holds_the_whole_columns_registers():
    # A one-group union of a whole stored column (a day bucket over a day segment's hourly
    # projection) is the union made once with the kept decoding: the same image as folding the
    # column's rows and coupons at every run, and the same estimate as datasketches.
    rng = random.Random(11)
    blobs = [_sketch(rng, 12, size).serialize_compact() for size in (3, 60000, 40, 5000, 0, 700, 9)]
    values = pa.array(blobs + [None], pa.binary())
    kept = _decode(values, 12, whole=True)
    assert kept.whole is not None
    assert _decode(values, 12).whole is None  # a query's own rows: nothing folded ahead
    gid = np.zeros(len(values), np.int64)
    got = union_images(values, gid, 1, 12, lambda kind, make: kept)
    assert got.to_pylist() == union_images(values, gid, 1, 12).to_pylist()
    assert _estimate(got.to_pylist()[0], 12) == _estimate(_reference(values, gid, 1, 12)[0], 12)
    coupons_only = pa.array([_sketch(rng, 12, 30).serialize_compact() for _ in range(4)], pa.binary())
    assert _decode(coupons_only, 12, whole=True).whole is None  # no HLL-mode row: no registers to hold
