"""SegmentCache on a real volume smaller than its max_cache_bytes (a small tmpfs): a download the
volume cannot hold is refused before a byte is written, with an error naming the volume; an
unserved segment is evicted to make room; a download that still runs out of space (ENOSPC: the
evicted file was still mapped) leaves no file behind and is not counted; the segments already
served stay readable."""

from __future__ import annotations

import os
import subprocess

import pytest

from common.demo import table as demo_table
from common.query import execute
from common.segment.time_partitioner import build_segments
from services.deep_storage import DeepStorageError, LocalDeepStorage, deep_storage_key
from services.historical.core.cache_plan import CacheFullError
from services.historical.segment_cache import SegmentCache

PAGE = 4096  # tmpfs allocates whole pages


def _pages(nbytes: int) -> int:
    return -(-nbytes // PAGE)


@pytest.fixture
def volume(tmp_path, segments):
    """A tmpfs that holds the first four segments (each with its one-page sidecar) and half of
    the fifth: sized from the segments as built, so a change in the format's size cannot make
    all five fit."""
    _, items = segments
    pages = sum(_pages(size) + 1 for _, _, size, _ in items[:4]) + _pages(items[4][2]) // 2
    path = tmp_path / "cache"
    path.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={pages * PAGE // 1024}k", "tmpfs", str(path)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs for the cache ({exc}); needs root or CAP_SYS_ADMIN")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the cache ({done.stderr.strip()}); needs root or CAP_SYS_ADMIN")
    try:
        yield str(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.fixture
def segments(tmp_path):
    """Five segments of one day pushed to a local deep storage: [(id, key, size, rows)]."""
    data = demo_table(10_000, start="2020-01-01", days=1)
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    out = []
    for path, manifest in sorted(build_segments(data, "vol", str(tmp_path / "built"), rows_per_segment=2_000),
                                 key=lambda pm: pm[1].segment_id):
        key = deep_storage_key(manifest.segment_id)
        storage.push(path, key)
        out.append((manifest.segment_id, key, os.path.getsize(path), manifest.num_rows))
    assert len(out) == 5
    return storage, out


def rows(segment) -> int:
    query = {"queryType": "timeseries", "dataSource": "vol", "intervals": ["2020-01-01/2020-01-02"],
             "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]}
    return execute(query, [segment]).table.to_pylist()[0]["n"]


def test_a_download_the_volume_cannot_hold_is_refused_before_writing(volume, segments):
    storage, items = segments
    cache = SegmentCache(volume, 1 << 30, storage)  # max_cache_bytes far beyond the volume
    loaded = [cache.load(sid, key, size) for sid, key, size, _ in items[:4]]
    sid, key, size, _ = items[4]
    with pytest.raises(CacheFullError) as err:
        cache.load(sid, key, size)
    message = str(err.value)
    assert message.startswith(f"cannot cache segment {sid} ({size} bytes): the cache volume of {volume} has ")
    assert "max_cache_bytes (1073741824) is more than the volume holds" in message
    # Nothing of the refused segment was written; what is served stays whole and readable.
    assert sorted(os.listdir(volume)) == sorted(f for s, *_ in items[:4]
                                                for f in (os.path.basename(cache.path(s)),
                                                          os.path.basename(cache.path(s)) + ".json"))
    assert not cache.is_cached(sid) and cache.used_bytes() == sum(item[2] for item in items[:4])
    assert [rows(s) for s in loaded] == [item[3] for item in items[:4]]

    # A segment the coordinator dropped is evicted to make room on the volume. While a query
    # still reads it (here: this test holds a lease), unlinking frees no space, so the download
    # runs out of room half-way: ENOSPC, and no partial file is left or counted.
    dropped = items[0][0]
    (reading,), _ = cache.leases([dropped])
    assert cache.drop(dropped)
    with pytest.raises(DeepStorageError, match="No space left on device"):
        cache.load(sid, key, size)
    assert sorted(os.listdir(volume)) == sorted(f for s, *_ in items[1:4]
                                                for f in (os.path.basename(cache.path(s)),
                                                          os.path.basename(cache.path(s)) + ".json"))
    assert not cache.is_cached(sid) and not cache.is_cached(dropped)
    assert cache.used_bytes() == sum(item[2] for item in items[1:4])
    # Once the last lease is released the file is closed and its blocks free (the segment object
    # is still referenced, by ``loaded``), and the retried load succeeds.
    reading.lease.release()
    assert loaded[0] is reading and reading.lease.closed
    assert rows(cache.load(sid, key, size)) == items[4][3]
    assert cache.served() == sorted(item[0] for item in items[1:])
