"""The text scan's executor side without Spark: one task's blobs, counts, parse exceptions and
sampled keys, and the routing of blobs to segments."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.types.granularity import Granularity
from services.ingestion.build import decode_blob
from services.ingestion.partitioning import plan_partitions
from common.ingest.row_parser import parse_file
from common.ingest.statement import parse_ingestion
from services.ingestion.text_scan import (
    BLOB,
    COUNT,
    KEYS,
    MILLIS,
    PICK,
    SAMPLE,
    TOTALS,
    TextScan,
    keys_of,
    picked_columns,
    route_blobs,
    scan_listing,
    totals_of,
)

DAY = 86_400_000
T0 = 1_600_000_000_000 // DAY * DAY


def _scan(path):
    stmt = parse_ingestion(f"INSERT INTO e SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc, n AS m FROM TABLE(localfiles("
                           f"files => ARRAY['{path}'], format => 'json')) "
                           "EXTEND (ts BIGINT, doc TYPE('COMPLEX<json>'), n BIGINT) PARTITIONED BY DAY")
    [source] = stmt.sources.values()
    return stmt, source, TextScan(source.input_format, source.signature, (
        ("__time", "ts", MILLIS, pa.timestamp("us", tz="UTC")), ("doc", "doc", PICK, pa.string()),
        ("m", "n", PICK, pa.int64())))


def _listing(path):
    return [pa.RecordBatch.from_pylist([{"name": path, "path": path, "data": None, "spark_file": None, "start": None,
                                         "end": None, "first_line": 1}])]


def _rows(out, kind):
    return [r for b in out for r in b.to_pylist() if r["kind"] == kind]


def test_one_task_blobs_counts_errors_and_keys(tmp_path):
    path = str(tmp_path / "x.json")
    lines = [json.dumps({"ts": T0 + (i % 3) * DAY + i, "doc": {"a": i, "b": [i, "x"]}, "n": i}) for i in range(300)]
    lines[7] = "{broken"
    lines[8] = json.dumps({"doc": {}, "n": 1})  # null time: counted apart
    lines[9] = json.dumps({"ts": T0, "n": "many"})
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    stmt, source, scan = _scan(path)
    out = list(scan_listing(_listing(path), scan, stmt.partitioned_by, ("__time",), 1.0))
    totals = totals_of([{**r} for r in _rows(out, COUNT) + _rows(out, TOTALS) + _rows(out, SAMPLE)])
    assert totals.rows_read == 300 and totals.parse_exceptions == 2
    assert [(s.line, s.reason[:10]) for s in totals.samples] == [(8, "invalid JS"), (10, "column 'n'")]
    assert totals.counts == {None: 1, T0: 99, T0 + DAY: 99, T0 + 2 * DAY: 99}
    # The blobs hold exactly the good, timed rows of row_parser, renamed, one chunk each.
    parsed = pa.Table.from_batches(list(parse_file(path, open(path, "rb"), source.input_format, source.signature)))
    good = parsed.filter(pa.compute.and_(parsed.column("__strata_error").is_null(), parsed.column("ts").is_valid()))
    got = []
    for r in _rows(out, BLOB):
        table = decode_blob(pa.py_buffer(r["blob"]))
        assert table.column_names == ["__time", "doc", "m"]
        starts = {(t // 1000 - T0) // DAY for t in table.column("__time").cast(pa.int64()).to_pylist()}
        assert starts == {(r["chunk"] - T0) // DAY}
        got.extend(zip(table.column("doc").to_pylist(), table.column("m").to_pylist()))
    assert sorted(got) == sorted(zip(good.column("doc").to_pylist(), good.column("n").to_pylist()))
    keys = keys_of(_rows(out, KEYS), ("__time",))
    assert {c: len(k) for c, k in keys.items()} == {T0: 99, T0 + DAY: 99, T0 + 2 * DAY: 99}


def test_millis_beyond_a_time_name_the_column(tmp_path):
    path = str(tmp_path / "x.json")
    with open(path, "w") as f:
        f.write(json.dumps({"ts": 2**62, "doc": {}}) + "\n")
    stmt, _, scan = _scan(path)
    with pytest.raises(ValidationError, match="column 'ts': 4611686018427387904 is out of range for MILLIS_TO_TIME"):
        list(scan_listing(_listing(path), scan, stmt.partitioned_by))


def test_routing_keeps_whole_chunks_and_cuts_split_ones():
    from services.ingestion.build import encode_blob

    gran = Granularity.parse("DAY")
    times = pa.array(np.arange(10) * 1000 * 1000, pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_arrays([times, pa.array(range(10), pa.int64())], names=["__time", "v"])
    whole = encode_blob([batch])
    plan = plan_partitions({0: 10, DAY: 10}, gran, 5, {DAY: [((1, k * 1000),) for k in range(10)]}, ("__time",))
    rows = pa.RecordBatch.from_arrays([pa.array([0, DAY], pa.int64()), pa.concat_arrays([whole, whole])],
                                      names=["chunk", "blob"])
    out = [r for b in route_blobs([rows], plan) for r in b.to_pylist()]
    assert out[0]["part"] == 0 and out[0]["blob"] == whole[0].as_py()  # the bytes as they were
    cut = {r["part"]: decode_blob(pa.py_buffer(r["blob"])).column("v").to_pylist() for r in out[1:]}
    assert sorted(cut) == [1, 2] and sorted(cut[1] + cut[2]) == list(range(10))
    assert max(cut[1]) < min(cut[2])


@pytest.mark.parametrize("select, picked", [
    ("MILLIS_TO_TIMESTAMP(ts) AS __time, doc, n AS m", [("__time", "ts", MILLIS), ("doc", "doc", PICK),
                                                          ("m", "n", PICK)]),
    ("MILLIS_TO_TIMESTAMP(ts) AS __time, n + 1 AS m", None),
    ("MILLIS_TO_TIMESTAMP(ts) AS t2, doc", None),
    ("MILLIS_TO_TIMESTAMP(ts) AS __time, missing", None),
    ("DISTINCT MILLIS_TO_TIMESTAMP(ts) AS __time, doc", None),
])
def test_picked_columns(select, picked):
    stmt = parse_ingestion(f"INSERT INTO e SELECT {select} FROM TABLE(localfiles(files => ARRAY['/x.json'], "
                           "format => 'json')) EXTEND (ts BIGINT, doc TYPE('COMPLEX<json>'), n BIGINT) "
                           "PARTITIONED BY DAY")
    [(name, source)] = stmt.sources.items()
    assert picked_columns(stmt.select, name, source.signature) == picked
