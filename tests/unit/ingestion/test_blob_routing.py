"""Routing the text scan's blobs to segments (text_scan.route_blobs) when a chunk is cut into
several segments: a blob whose rows all fall in one key range is passed on as it is (only its key
columns are decoded to find out); a blob that straddles a boundary is cut, and every row still
lands in the segment its key says."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from common.types.granularity import Granularity
from services.ingestion.build import decode_blob, encode_blob
from services.ingestion.partitioning import CHUNK_COLUMN, plan_partitions
from services.ingestion.text_scan import route_blobs

DAY = 86_400_000


def _blob(times_ms, keys=None):
    cols = {"__time": pa.array(np.asarray(times_ms, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
            "doc": pa.array([f'{{"i": {t}}}' for t in times_ms])}
    if keys is not None:
        cols["k"] = pa.array(keys)
    return encode_blob(pa.table(cols).to_batches())


def _route(plan, blobs):
    rows = pa.RecordBatch.from_arrays([pa.array([DAY] * len(blobs), pa.int64()), pa.concat_arrays(blobs)],
                                      names=["chunk", "blob"])
    return [r for b in route_blobs([rows], plan) for r in b.to_pylist()]


def _expected_parts(plan, blob):
    table = decode_blob(blob[0].as_buffer())
    batch = table.append_column(CHUNK_COLUMN, pa.array(np.full(table.num_rows, DAY, dtype=np.int64))).to_batches()[0]
    return plan.assign(batch).to_pylist(), table.column("doc").to_pylist()


def test_blobs_inside_one_time_range_keep_their_bytes_and_straddling_ones_are_cut():
    gran = Granularity.parse("DAY")
    samples = [((1, DAY + k * 1000),) for k in range(100)]
    plan = plan_partitions({DAY: 100}, gran, 50, {DAY: samples}, ("__time",))
    [boundary] = plan.chunks[DAY].boundaries
    b = boundary[0][1] - DAY
    low, high, across = (_blob([DAY + t for t in range(0, b, 1000)]), _blob([DAY + t for t in range(b, 100_000, 1000)]),
                         _blob([DAY + t for t in range(b - 5000, b + 5000, 1000)]))
    out = _route(plan, [low, high, across])
    first = plan.chunks[DAY].first_index
    assert (out[0]["part"], out[0]["blob"]) == (first, low[0].as_py())  # the bytes as they were
    assert (out[1]["part"], out[1]["blob"]) == (first + 1, high[0].as_py())
    got = {}
    for r in out[2:]:
        got.setdefault(r["part"], []).extend(decode_blob(pa.py_buffer(r["blob"])).column("doc").to_pylist())
    parts, docs = _expected_parts(plan, across)
    want = {}
    for p, d in zip(parts, docs):
        want.setdefault(p, []).append(d)
    assert got == want and sorted(got) == [first, first + 1]


def test_a_clustered_key_decides_too():
    gran = Granularity.parse("DAY")
    samples = [((1, f"k{i:02d}"),) for i in range(40)]
    plan = plan_partitions({DAY: 40}, gran, 10, {DAY: samples}, ("k",))
    assert plan.chunks[DAY].parts == 4
    times = [DAY + i for i in range(6)]
    inside = _blob(times, ["k00", "k01", "k00", "k02", "k01", "k00"])
    mixed = _blob(times, ["k00", "k39", "k15", "k02", "k25", "k00"])
    out = _route(plan, [inside, mixed])
    assert out[0]["blob"] == inside[0].as_py() and out[0]["part"] == _expected_parts(plan, inside)[0][0]
    got = {}
    for r in out[1:]:
        got.setdefault(r["part"], []).extend(decode_blob(pa.py_buffer(r["blob"])).column("k").to_pylist())
    parts, _ = _expected_parts(plan, mixed)
    keys = decode_blob(mixed[0].as_buffer()).column("k").to_pylist()
    want = {}
    for p, k in zip(parts, keys):
        want.setdefault(p, []).append(k)
    assert {p: sorted(v) for p, v in got.items()} == {p: sorted(v) for p, v in want.items()} and len(want) == 4
