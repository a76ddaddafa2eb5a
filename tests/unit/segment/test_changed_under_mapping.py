"""A segment file truncated or rewritten under a process that has it open: the process must not
die (a memory-mapped reader died of SIGBUS) and must not return rows from the changed bytes; it
raises SegmentCorruptError (which makes a historical drop the copy and fetch it again).

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
    assert "changed on disk" in lines[0]


def test_replacing_by_rename_keeps_the_mapping_valid(tmp_path):
    # What the cache does with a new copy: a new file renamed over the name. The open inode is
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
    with pytest.raises(SegmentCorruptError, match="changed on disk") as info:
        segment.check_unchanged()
    assert info.value.segment_id == segment.id
    segment.close()


# The reader opens the file and runs a query in a loop with no part cache (every query reads every
# part from the file) while the parent truncates and rewrites the file in place between and during
# its reads. A check before each read cannot close the window between the check and the read: only
# reads that cannot fault can. Each opened copy is what a historical serves after a fetch.
LOOP_READER = textwrap.dedent("""
    import sys
    from common.errors import SegmentCorruptError
    from common.query import execute
    from common.segment import Segment
    from common.segment.part_cache import configure

    configure(0)  # keep nothing: every query reads every part from the file
    q = {"queryType": "timeseries", "dataSource": "t", "intervals": ["2015-09-01/2015-10-01"], "granularity": "all",
         "aggregations": [{"type": "longSum", "name": "x", "fieldName": "x"}, {"type": "count", "name": "c"}]}
    want = [{"x": sum(range(200_000)), "c": 200_000}]

    def once():
        try:
            segment = Segment.open(sys.argv[1])
            rows = execute(q, [segment]).table.to_pylist()
        except SegmentCorruptError:
            return "corrupt"
        segment.close()
        got = [{"x": r["x"], "c": r["c"]} for r in rows]
        return "ok" if got == want else f"wrong {rows}"

    for _ in range(int(sys.argv[2])):
        print(once(), flush=True)
    sys.stdin.readline()  # the parent left the file whole
    print("final", once(), flush=True)
""")


def _mutate(path: str, original: bytes, step: int) -> None:
    with open(path, "r+b") as f:  # in place, same inode: what an outside tool would do
        if step % 2:
            f.truncate(len(original) * (step % 7 + 1) // 9)
        else:
            f.seek(len(original) // 2)
            f.write(b"\xa5" * 65536)
            f.flush()
        f.seek(0)
        f.write(original)  # whole again, so later opens can succeed too
        f.truncate(len(original))


def test_reader_looping_over_a_file_truncated_and_rewritten_mid_query_survives(tmp_path):
    path = _segment_file(tmp_path)
    with open(path, "rb") as f:
        original = f.read()
    queries = 200
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", LOOP_READER, path, str(queries)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    seen = []
    try:
        for step in range(queries):
            line = proc.stdout.readline()
            if not line:
                break  # the reader died: asserted below
            seen.append(line.strip())
            for burst in range(3):  # while the reader's next query opens and reads the file
                _mutate(path, original, step * 3 + burst)
        out, err = proc.communicate("go\n", timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 0, f"reader died (exit status {proc.returncode}, a negative one is a signal) after "\
                                 f"{len(seen)} queries: {err[-2000:]}"
    assert len(seen) == queries and set(seen) <= {"ok", "corrupt"}, [s for s in seen if s not in ("ok", "corrupt")]
    assert "corrupt" in seen, "no query saw the file change"
    assert out.splitlines() == ["final ok"], out  # a whole copy opened again answers right
