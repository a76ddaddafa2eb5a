"""A segment file truncated or rewritten under a process that has it mapped: the process must
not die of SIGBUS and must not return rows from the changed bytes; it raises SegmentCorruptError
(which makes a historical drop the copy and fetch it again).

The reader runs in a subprocess, so a SIGBUS shows as its exit status instead of killing pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.query import execute
from common.segment import Segment
from common.segment.time_partitioner import build_segments

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

READER = textwrap.dedent("""
    import sys
    from common.errors import SegmentCorruptError
    from common.query import execute
    from common.segment import Segment

    segment = Segment.open(sys.argv[1])
    def query(columns):
        q = {"queryType": "scan", "dataSource": "t", "intervals": ["2015-09-01/2015-10-01"], "columns": columns}
        return execute(q, [segment]).table
    print("rows", query(["x"]).num_rows, flush=True)  # maps and reads x (cached from now on)
    sys.stdin.readline()  # the parent changes the file now
    for columns in (["x"], ["s", "x"]):  # a column already read, and one read for the first time
        try:
            print("rows", query(columns).num_rows, flush=True)
        except SegmentCorruptError as exc:
            print("corrupt", exc, flush=True)
""")


def _segment_file(tmp_path) -> str:
    n = 200_000
    table = pa.table({"__time": pa.array([1442016000000 + i for i in range(n)], pa.int64()).cast(
        pa.timestamp("ms", tz="UTC")), "x": pa.array(range(n), pa.int64()),
        "s": pa.array([f"value-{i % 1000}" for i in range(n)])})
    [(path, _)] = list(build_segments(table, "t", str(tmp_path), segment_granularity="day", version="v1"))
    return path


def _run_reader(path: str, change) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", READER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stdout.readline()
        assert first.startswith("rows 200000"), first + proc.stderr.read()
        change(path)
        out, err = proc.communicate("go\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return proc.returncode, out.splitlines()


def _truncate(path: str) -> None:
    os.truncate(path, os.path.getsize(path) // 3)


def _overwrite_in_place(path: str) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # same size, different bytes: only the file's identity tells
        f.seek(size // 2)
        f.write(b"\xff" * 4096)


@pytest.mark.parametrize("change", [_truncate, _overwrite_in_place], ids=["truncated", "overwritten"])
def test_reader_survives_and_refuses_the_changed_file(tmp_path, change):
    code, lines = _run_reader(_segment_file(tmp_path), change)
    assert code == 0, f"reader died (signal {-code if code < 0 else code}): {lines}"
    assert len(lines) == 2 and all(line.startswith("corrupt") for line in lines), lines
    assert "changed under the mapping" in lines[0]


def test_replacing_by_rename_keeps_the_mapping_valid(tmp_path):
    # What the cache does with a new copy: a new file renamed over the name. The mapped inode is
    # untouched, so the open segment keeps answering from the bytes it verified.
    path = _segment_file(tmp_path)
    segment = Segment.open(path)
    q = {"queryType": "timeseries", "dataSource": "t", "intervals": ["2015-09-01/2015-10-01"], "granularity": "all",
         "aggregations": [{"type": "longSum", "name": "s", "fieldName": "x"}]}
    want = execute(q, [segment]).table.to_pylist()
    other = _segment_file(tmp_path / "other")
    os.replace(other, path)
    assert execute(q, [segment]).table.to_pylist() == want
    segment.close()


def test_check_unchanged_names_the_segment(tmp_path):
    path = _segment_file(tmp_path)
    segment = Segment.open(path)
    _truncate(path)
    with pytest.raises(SegmentCorruptError, match="changed under the mapping") as info:
        segment.check_unchanged()
    assert info.value.segment_id == segment.id
    segment.close()
