"""SegmentCache over a local directory and a real S3 server: verified loads, reuse across a restart
without pulling, LRU eviction that never touches served segments, corruption detected and repaired
by pulling again, single pulls under concurrent loads, and segments that stay readable while in
use even after eviction."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError, ValidationError
from common.query import execute
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.types import parse_instant
from services.historical.core.cache_plan import CacheFullError
from services.historical.segment_cache import SegmentCache
from services.deep_storage import (
    DeepStorage,
    DeepStorageNotFoundError,
    LocalDeepStorage,
    S3DeepStorage,
    deep_storage_key,
)
from tests.fixtures.s3_server import s3_server  # noqa: F401

DAY_MS = 86_400_000
T0 = parse_instant("2020-01-01")
ROWS_PER_DAY = 300


class CountingStorage(DeepStorage):
    """Delegates to a real storage, counting pulls per key; ``delay_s`` slows pulls down."""

    def __init__(self, inner: DeepStorage, delay_s: float = 0.0) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.pulls: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def total_pulls(self) -> int:
        return sum(self.pulls.values())

    def push(self, local_path, key):
        return self.inner.push(local_path, key)

    def pull(self, key, local_path):
        with self._lock:
            self.pulls[key] = self.pulls.get(key, 0) + 1
        time.sleep(self.delay_s)
        return self.inner.pull(key, local_path)

    def delete(self, key):
        return self.inner.delete(key)

    def exists(self, key):
        return self.inner.exists(key)

    def size(self, key):
        return self.inner.size(key)

    def uri(self, key):
        return self.inner.uri(key)


class Built:
    def __init__(self, table, items):
        self.table = table
        self.items = items  # [(segment id, local path, size, day)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    n = ROWS_PER_DAY * 3
    table = pa.table({
        "__time": pa.array([T0 + (i % 3) * DAY_MS + i * 1000 for i in range(n)], pa.int64()),
        "channel": [f"#c{i % 7}" for i in range(n)],
        "added": pa.array([i * 3 % 101 for i in range(n)], pa.int64()),
    })
    out = build_segments(table, "wiki", str(tmp_path_factory.mktemp("built")), version="v1")
    items = []
    for day, (path, manifest) in enumerate(sorted(out, key=lambda pm: pm[1].segment_id)):
        items.append((manifest.segment_id, path, os.path.getsize(path), day))
    return Built(table, items)


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path, built) -> CountingStorage:
    if request.param == "local":
        inner: DeepStorage = LocalDeepStorage(str(tmp_path / "deep"))
    else:
        server = request.getfixturevalue("s3_server")
        inner = S3DeepStorage(server.bucket, f"{server.prefix}/{uuid.uuid4().hex[:8]}", server.endpoint, server.region)
    for sid, path, _, _ in built.items:
        inner.push(path, deep_storage_key(sid))
    return CountingStorage(inner)


def expected(built: Built, day: int) -> tuple[int, int]:
    times = built.table.column("__time").to_pylist()
    added = built.table.column("added").to_pylist()
    rows = [a for t, a in zip(times, added) if T0 + day * DAY_MS <= t < T0 + (day + 1) * DAY_MS]
    return len(rows), sum(rows)


def totals(segment: Segment) -> tuple[int, int]:
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2020-01-01/2020-01-04"],
             "granularity": "all", "aggregations": [{"type": "count", "name": "n"},
                                                    {"type": "longSum", "name": "added", "fieldName": "added"}]}
    row = execute(query, [segment]).table.to_pylist()[0]
    return row["n"], row["added"]


def load(cache: SegmentCache, item) -> Segment:
    sid, _, size, _ = item
    return cache.load(sid, deep_storage_key(sid), size)


def cache_files(cache: SegmentCache, built: Built) -> list[str]:
    """What the cache directory should hold for all built segments: each file and its sidecar."""
    names = [os.path.basename(cache.path(sid)) for sid, *_ in built.items]
    return sorted(names + [n + ".json" for n in names])


def flip_middle_byte(path: str, segment: Segment) -> None:
    """Flip the byte in the middle of the file, or of the part nearest it (padding between parts
    is not covered by a checksum, so a flip there would rightly go unnoticed)."""
    size = os.path.getsize(path)
    parts = sorted(segment.manifest.files.values(), key=lambda e: abs(e.offset + e.length // 2 - size // 2))
    entry = next(e for e in parts if e.length > 0)
    pos = size // 2 if entry.offset <= size // 2 < entry.offset + entry.length else entry.offset + entry.length // 2
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0xFF]))


def test_load_gives_a_verified_queryable_segment(storage, built, tmp_path):
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    segments = [load(cache, item) for item in built.items]
    for segment, (sid, _, size, day) in zip(segments, built.items):
        assert segment.id == sid
        assert totals(segment) == expected(built, day)
        assert cache.get(sid) is segment
        assert os.path.getsize(cache.path(sid)) == size
        sidecar = json.loads(open(cache.path(sid) + ".json").read())
        assert sidecar["key"] == deep_storage_key(sid)
    assert cache.used_bytes() == sum(item[2] for item in built.items)
    assert cache.served() == sorted(item[0] for item in built.items)
    # Loading a served segment again reuses it.
    assert load(cache, built.items[0]) is segments[0]
    assert storage.total_pulls == 3 and cache.pulls == 3
    assert sorted(os.listdir(cache.cache_dir)) == cache_files(cache, built)


def test_size_unknown_is_asked_from_storage(storage, built, tmp_path):
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    sid, _, size, day = built.items[1]
    assert totals(cache.load(sid, deep_storage_key(sid), 0)) == expected(built, day)
    assert cache.used_bytes() == size


def test_restart_reuses_cached_files_without_pulling(storage, built, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = SegmentCache(cache_dir, 10 << 20, storage)
    for item in built.items:
        load(first, item)
    first.close()
    # Leftovers a crash could leave: a half-written pull, a file that is not a segment, an orphan sidecar.
    with open(os.path.join(cache_dir, ".tmp-abc.part"), "wb") as f:
        f.write(b"partial")
    with open(os.path.join(cache_dir, "junk.sseg"), "wb") as f:
        f.write(b"not a segment at all, but long enough to be read as one" * 4)
    with open(os.path.join(cache_dir, "gone.sseg.json"), "w") as f:
        f.write("{}")
    pulls = storage.total_pulls

    second = SegmentCache(cache_dir, 10 << 20, storage)
    restored = second.restore()
    assert restored == sorted(item[0] for item in built.items)
    assert sorted(os.listdir(cache_dir)) == cache_files(second, built)
    assert second.served() == restored
    assert second.used_bytes() == sum(item[2] for item in built.items)
    # Served straight away (parts are checksummed lazily on first read) ...
    sid, _, _, day = built.items[0]
    assert totals(second.get(sid)) == expected(built, day)
    # ... and the full verification happens on load or in verify_pending, locally.
    assert totals(load(second, built.items[0])) == expected(built, day)
    assert second.verify_pending() == {}
    for sid, _, _, day in built.items:
        assert totals(load(second, (sid, None, 0, day))) == expected(built, day)
    assert storage.total_pulls == pulls and second.pulls == 0


def test_lru_eviction_never_evicts_served_segments(storage, built, tmp_path):
    (a, *_), (b, *_), (c, *_) = built.items
    sizes = sorted(item[2] for item in built.items)
    max_bytes = sizes[1] + sizes[2] + 1  # any two fit, never three
    cache = SegmentCache(str(tmp_path / "cache"), max_bytes, storage)
    load(cache, built.items[0])
    load(cache, built.items[1])
    with pytest.raises(CacheFullError) as err:
        load(cache, built.items[2])
    assert str(err.value).startswith(f"cannot cache segment {c} ({built.items[2][2]} bytes): max_cache_bytes is "
                                     f"{max_bytes} and 2 served or loading segments hold")
    assert not os.path.exists(cache.path(c)) and not cache.is_cached(c)
    assert cache.cached() == [a, b]

    assert cache.drop(a) is True
    assert cache.get(a) is None and cache.is_cached(a) and os.path.exists(cache.path(a))  # kept until needed
    load(cache, built.items[2])
    assert not os.path.exists(cache.path(a)) and not os.path.exists(cache.path(a) + ".json")
    assert cache.served() == [b, c] and cache.cached() == [b, c]

    # Among unserved segments the least recently used goes first: c is dropped before b, but b
    # was used after that, so loading a evicts c.
    cache.drop(c)
    cache.drop(b)
    pulls = storage.total_pulls
    load(cache, built.items[1])  # reuse: served again, no pull
    assert storage.total_pulls == pulls
    cache.drop(b)
    load(cache, built.items[0])
    assert cache.cached() == [b, a]
    assert not os.path.exists(cache.path(c)) and os.path.exists(cache.path(b))
    assert cache.used_bytes() == built.items[0][2] + built.items[1][2] <= max_bytes
    assert cache.drop(c) is False


def test_corrupted_cached_file_is_detected_and_pulled_again(storage, built, tmp_path):
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    sid, _, _, day = built.items[1]
    key = deep_storage_key(sid)
    segment = load(cache, built.items[1])
    assert cache.verify(sid) is True and storage.pulls[key] == 1
    flip_middle_byte(cache.path(sid), segment)
    assert cache.verify(sid) is False  # found, and replaced with a fresh copy
    assert storage.pulls[key] == 2
    fresh = cache.get(sid)
    assert fresh is not segment and totals(fresh) == expected(built, day)
    assert Segment.open(cache.path(sid), verify=True).id == sid
    assert cache.verify(sid) is True and storage.pulls[key] == 2
    assert cache.served() == [sid]


def test_corruption_found_after_a_restart(storage, built, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = SegmentCache(cache_dir, 10 << 20, storage)
    for item in built.items[:2]:
        segment = load(first, item)
    first.close()
    sid, _, _, day = built.items[1]
    flip_middle_byte(first.path(sid), segment)

    second = SegmentCache(cache_dir, 10 << 20, storage)
    assert sid in second.restore()  # cheap checks cannot see a flipped byte inside a part
    assert totals(load(second, built.items[1])) == expected(built, day)  # load does the full check
    assert storage.pulls[deep_storage_key(sid)] == 2

    flip_middle_byte(first.path(sid), segment)
    third = SegmentCache(cache_dir, 10 << 20, storage)
    third.restore()
    assert third.verify_pending() == {sid: "repulled"}
    assert storage.pulls[deep_storage_key(sid)] == 3
    assert totals(third.get(sid)) == expected(built, day)
    assert third.served() == sorted(item[0] for item in built.items[:2])


def test_corrupt_copy_in_deep_storage_fails_clearly(storage, built, tmp_path):
    sid, path, size, _ = built.items[0]
    bad = tmp_path / "bad.sseg"
    bad.write_bytes(open(path, "rb").read())
    flip_middle_byte(str(bad), Segment.open(path))
    key = deep_storage_key(sid)
    storage.push(str(bad), key)
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    with pytest.raises(SegmentCorruptError) as err:
        cache.load(sid, key, size)
    msg = str(err.value)
    assert msg.startswith(f"segment {sid}: the copy pulled from {storage.uri(key)} failed verification twice")
    assert "checksum check failed" in msg and "re-ingest" in msg
    assert storage.pulls[key] == 2
    assert os.listdir(cache.cache_dir) == [] and cache.used_bytes() == 0 and not cache.is_cached(sid)


def test_missing_key_leaves_nothing_behind(storage, built, tmp_path):
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    sid = built.items[0][0]
    for size in (1000, 0):
        with pytest.raises(DeepStorageNotFoundError, match="wiki/missing.sseg"):
            cache.load(sid, "wiki/missing.sseg", size)
    assert os.listdir(cache.cache_dir) == [] and cache.used_bytes() == 0 and cache.cached() == []


def test_concurrent_loads_of_one_segment_pull_once(storage, built, tmp_path):
    storage.delay_s = 0.2
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    results, errors = [], []
    start = threading.Barrier(9)

    def worker(item):
        start.wait(10)
        try:
            results.append((item[0], load(cache, item)))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(built.items[0],)) for _ in range(8)]
    threads.append(threading.Thread(target=worker, args=(built.items[1],)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(results) == 9
    first = [seg for sid, seg in results if sid == built.items[0][0]]
    assert len(first) == 8 and all(seg is first[0] for seg in first)
    assert storage.pulls == {deep_storage_key(built.items[0][0]): 1, deep_storage_key(built.items[1][0]): 1}
    assert totals(first[0]) == expected(built, 0)


def test_segments_in_use_survive_eviction(storage, built, tmp_path):
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage)
    (a, _, _, day_a), (b, _, _, day_b) = built.items[0], built.items[1]
    load(cache, built.items[0])
    with cache.acquire(a) as segment:
        assert cache.evict(a) is True
        assert not os.path.exists(cache.path(a)) and cache.get(a) is None
        assert totals(segment) == expected(built, day_a)  # still open: closing waits for release
        assert not segment._container.closed
    assert segment._container.closed
    with cache.acquire(a) as missing:
        assert missing is None
    # A plain get() holder takes no lease: holding the object does not keep the evicted file
    # (its descriptor is closed and its blocks freed at eviction).
    held = load(cache, built.items[1])
    cache.drop(b)
    assert cache.evict(b) is True
    assert held.lease.closed and held._container._fd == -1
    assert not any(os.readlink(f"/proc/self/fd/{fd}").startswith(cache.path(b)) for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}"))
    # Evicted means gone: the next load pulls a fresh copy.
    load(cache, built.items[0])
    assert storage.pulls[deep_storage_key(a)] == 2



BY_CHANNEL = {"type": "aggregate", "name": "by_channel", "groupingColumns": [{"type": "string", "name": "channel"}],
              "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"}]}
CHANNELS = {"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2020-01-01/2020-01-04"], "granularity": "all",
            "dimensions": ["channel"], "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"}]}


def projected_segment(storage, built, tmp_path):
    """The first day's segment with a by_channel projection and a long text column, pushed to
    ``storage``: (its id, rows, deep storage key, whole size, the groupBy by channel's answer)."""
    from common.query.projection import ProjectionSpec, projection_rows
    from common.segment.builder import build_segment

    sid, _, _, _ = built.items[0]
    times = built.table.column("__time").to_numpy()
    rows = built.table.filter(pa.array((times >= sid.interval.start) & (times < sid.interval.end)))
    rows = rows.set_column(0, "__time", rows.column("__time").cast(pa.timestamp("ms", tz="UTC")))
    rows = rows.append_column("comment", pa.array([f"a longer text column {i} " * 4 for i in range(rows.num_rows)]))
    whole_path = str(tmp_path / "whole.sseg")
    build_segment(rows, whole_path, sid, projections=[projection_rows(ProjectionSpec.from_json(BY_CHANNEL), rows)])
    key = f"wiki/projected-{sid.interval.start}.sseg"
    storage.push(whole_path, key)
    whole_size = os.path.getsize(whole_path)
    whole = Segment.open(whole_path)
    want = execute({**CHANNELS, "context": {"noProjections": True}}, [whole]).table.to_pylist()
    whole.close()
    return sid, rows, key, whole_size, want


@pytest.mark.parametrize("ranged", [True, False], ids=["byte-ranges", "whole-pull-cut-here"])
def test_a_partial_load_keeps_only_the_projection(storage, built, tmp_path, ranged):
    sid, rows, key, whole_size, want = projected_segment(storage, built, tmp_path)
    source = storage.inner if ranged else storage  # CountingStorage has no byte ranges
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, source)
    part = cache.load(sid, key, whole_size, ("by_channel",))
    assert part.manifest.partial_projections == ("by_channel",) and part.loaded_projections == ("by_channel",)
    assert os.path.getsize(cache.path(sid)) < whole_size / 2 and cache.used_bytes() == part.size
    assert execute(CHANNELS, [part]).table.to_pylist() == want
    assert not [n for n in os.listdir(cache.cache_dir) if n.endswith(".whole")]  # the cut's source is gone
    assert cache.load(sid, key, whole_size, ("by_channel",)) is part  # the same cut again: reused

    # After a restart the partial copy is restored as one; asked whole, the segment is fetched whole.
    again = SegmentCache(str(tmp_path / "cache"), 10 << 20, source)
    again.restore()
    assert again.get(sid).loaded_projections == ("by_channel",)
    flip_middle_byte(again.path(sid), again.get(sid))  # damaged on disk: repaired as the same cut
    assert again.verify(sid) is False
    assert again.get(sid).manifest.partial_projections == ("by_channel",)
    assert execute(CHANNELS, [again.get(sid)]).table.to_pylist() == want
    full = again.load(sid, key, whole_size)
    assert full.manifest.partial_projections is None and full.loaded_projections is None
    assert os.path.getsize(again.path(sid)) == whole_size and totals(full)[0] == rows.num_rows
    assert again.load(sid, key, whole_size, ("by_channel",)).manifest.partial_projections == ("by_channel",)


def test_another_cut_is_swapped_in_while_queries_finish_on_the_old_copy(storage, built, tmp_path):
    sid, rows, key, whole_size, want = projected_segment(storage, built, tmp_path)
    cache = SegmentCache(str(tmp_path / "cache"), 10 << 20, storage.inner)
    part = cache.load(sid, key, whole_size, ("by_channel",))
    with cache.acquire(sid) as leased:  # a query in flight on the partial copy
        full = cache.load(sid, key, whole_size)  # partial -> whole, fetched beside it and swapped
        assert full is not leased and full.manifest.partial_projections is None
        assert cache.get(sid) is full and os.path.getsize(cache.path(sid)) == whole_size
        assert cache.used_bytes() == full.size
        assert not leased._container.closed  # the old copy answers the query that holds it
        assert execute(CHANNELS, [leased]).table.to_pylist() == want
    assert leased._container.closed  # and goes with its last lease
    assert totals(full)[0] == rows.num_rows and execute(CHANNELS, [full]).table.to_pylist() == want
    # A cut that cannot be made (a projection the segment lacks) fails and keeps the copy served.
    with pytest.raises(ValidationError, match="has none of the projections"):
        cache.load(sid, key, whole_size, ("by_page",))
    assert cache.get(sid) is full and not full._container.closed
    assert not [n for n in os.listdir(cache.cache_dir) if n.startswith(".tmp-")]
    # whole -> partial: the bytes shrink to the projection's.
    again = cache.load(sid, key, whole_size, ("by_channel",))
    assert again.manifest.partial_projections == ("by_channel",) and cache.used_bytes() == again.size < whole_size / 2
    assert execute(CHANNELS, [again]).table.to_pylist() == want
    assert part._container.closed and full._container.closed
