"""PreparedQuery and PreparedCache (issue 24): a query prepared once and run again gives what a cold
run gives, rows and statistics; a changed declared type is another preparation; the cache is
bounded in entries and bytes, charged to the node's memory budget, and drops what it prepared over
a segment as soon as that segment retires."""

from __future__ import annotations

import os

import pytest

from common.bounded_cache import BoundedCache
from common.query import engine, query_runner
from common.query.model import query_from_json
from common.query.prepared_query import BASE_BYTES, PreparedCache, PreparedKey, PreparedQuery
from common.segment.part_cache import DecodedPartCache
from common.segment.segment import Segment
from common.types.column_type import ColumnType
from tests.unit.query.test_projections import CORPUS, _same, segments  # noqa: F401 - segments is a fixture

CODES = {"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
         "granularity": "all", "dimensions": ["code"],
         "filter": {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#fr.wikipedia"]},
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}


def _run(cache: PreparedCache, query: dict, segments, declared: dict):
    """What a historical does: prepared under the broker's declared types, run, finalized."""
    key = PreparedKey(query_runner.fingerprint(query), tuple(declared.items()), tuple(s.generation for s in segments))

    def make() -> PreparedQuery:
        made = query_runner.prepared_over(query_from_json(query), segments)
        made.schema = declared
        return made

    prepared = cache.prepared(key, segments, make)
    merged = query_runner.QueryRunner().run(prepared)
    return engine.finalize(prepared.query, merged, declared), merged.stats, prepared


@pytest.mark.parametrize("query", CORPUS[::4] + [CODES], ids=[f"q{i}" for i in range(0, len(CORPUS), 4)] + ["codes"])
def test_the_same_query_cold_and_warm_gives_the_same_rows_and_statistics(segments, query):
    schema = engine.union_schema(segments)
    cold, cold_stats, _ = _run(PreparedCache(memory=None), query, segments, schema)
    warm_cache = PreparedCache(memory=None)
    first, first_stats, prepared = _run(warm_cache, query, segments, schema)
    for _ in range(2):
        warm, warm_stats, again = _run(warm_cache, query, segments, schema)
        assert again is prepared  # found again, not prepared again
        assert _same(warm, cold) and warm_stats == cold_stats, query
    assert _same(first, cold) and first_stats == cold_stats
    # In-process, too: execute cold (nothing prepared) and warm agree.
    query_runner.PREPARED.clear()
    cold_rows = query_runner.execute(query, segments)
    warm_rows = query_runner.execute(query, segments)
    assert _same(warm_rows.table, cold_rows.table) and warm_rows.stats == cold_rows.stats


@pytest.mark.parametrize("declared", ["LONG", "DOUBLE"])
def test_a_warm_query_honours_a_changed_declared_type(segments, declared):
    schema = engine.union_schema(segments)
    numeric = {**schema, "code": ColumnType.parse(declared)}
    cache = PreparedCache(memory=None)
    as_text, _, text_prepared = _run(cache, CODES, segments, schema)
    as_number, _, number_prepared = _run(cache, CODES, segments, numeric)
    assert number_prepared is not text_prepared
    cold_number, cold_stats, _ = _run(PreparedCache(memory=None), CODES, segments, numeric)
    assert _same(as_number, cold_number) and not _same(as_number, as_text)
    again, again_stats, prepared = _run(cache, CODES, segments, numeric)  # warm, under the new type
    assert prepared is number_prepared and _same(again, cold_number) and again_stats == cold_stats
    back, _, prepared = _run(cache, CODES, segments, schema)  # and back again
    assert prepared is text_prepared and _same(back, as_text)


class _Lease:
    def __init__(self) -> None:
        self.listeners = []
        self.kept = {}  # what the real lease's ``hold`` keeps alive

    def on_retire(self, listener) -> bool:
        self.listeners.append(listener)
        return True

    def retire(self) -> None:
        for listener in self.listeners:
            listener()
        self.kept.clear()

    def hold(self, key, value) -> bool:
        self.kept[key] = value
        return True

    def unhold(self, key) -> None:
        self.kept.pop(key, None)


class _Segment:
    """A stand-in with what the cache reads of a segment: its generation and its lease."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.lease = _Lease()
        self.id = f"segment-{generation}"


def _prepare(cache, text: str, segs, nbytes: int = 0) -> PreparedQuery:
    key = PreparedKey(text, (), tuple(s.generation for s in segs))
    prepared = cache.prepared(key, segs, lambda: PreparedQuery(None, text, {}, segs, [object() for _ in segs]))
    if nbytes:
        prepared.keep("selection", prepared.sources[0], "rows", nbytes)
    return prepared


def test_the_cache_is_bounded_in_entries_and_bytes_and_charged_to_the_node_budget():
    memory = DecodedPartCache(1 << 20)
    memory.get(("part", 1), lambda: "decoded", 1 << 19)  # a decoded part, half the budget
    cache = PreparedCache(max_entries=3, max_bytes=64 << 10, memory=memory)
    segs = [_Segment(g) for g in range(4)]
    made = [_prepare(cache, f"q{i}", segs[:1]) for i in range(4)]
    assert len(cache) == 3 and [k.fingerprint for k, _ in cache.items()] == ["q1", "q2", "q3"]
    assert memory.stats().bytes == 1 << 19 and cache.nbytes == 3 * BASE_BYTES
    assert _prepare(cache, "q3", segs[:1]) is made[3]
    grown = _prepare(cache, "big", segs[1:2], nbytes=40 << 10)  # grows past the byte bound: the oldest go
    assert grown.nbytes == BASE_BYTES + (40 << 10) and cache.nbytes <= 64 << 10
    assert "q1" not in [k.fingerprint for k, _ in cache.items()]
    # The node's budget: a decoded part is pushed out once prepared queries and parts pass it.
    cache2 = PreparedCache(max_entries=100, max_bytes=1 << 20, memory=memory)
    _prepare(cache2, "huge", segs[2:3], nbytes=(1 << 19) - 1000)
    assert memory.stats().entries == 0  # the part went: the budget is shared
    cache2.clear()
    cache.clear()
    memory.get(("part", 2), lambda: "decoded", 1 << 19)
    assert memory.stats().entries == 1  # and charged back when they go


def test_a_retired_segment_drops_what_was_prepared_over_it():
    cache = PreparedCache(memory=None)
    a, b = _Segment(1), _Segment(2)
    over_a = _prepare(cache, "q", [a])
    over_both = _prepare(cache, "q", [a, b])
    over_b = _prepare(cache, "q", [b])
    assert len(cache) == 3 and len(a.lease.listeners) == 1  # one listener per segment, not per query
    a.lease.retire()
    assert [p for _, p in cache.items()] == [over_b]
    assert _prepare(cache, "q", [b]) is over_b and over_a is not over_both


def test_a_real_segment_retired_drops_its_prepared_queries(segments, tmp_path):
    import shutil

    path = str(tmp_path / "copy.sseg")
    shutil.copyfile(segments[0].path, path)
    copy = Segment.open(path)
    query = {**CORPUS[0], "intervals": ["2000-01-01/2100-01-01"]}
    cache = PreparedCache(memory=None)
    _run(cache, query, [copy], engine.union_schema([copy]))
    assert len(cache) == 1
    copy.close()  # retired with no lease held: closed at once, its preparation dropped
    assert len(cache) == 0 and copy.lease.closed


def test_bounded_cache_bounds_and_expiry():
    now = [0.0]
    gone = []
    cache = BoundedCache(2, max_bytes=100, ttl_s=10, on_evict=lambda k, v: gone.append(k), clock=lambda: now[0])
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    assert cache.get("a") == 1  # most recent now
    cache.put("c", 3, 10)
    assert "b" not in cache and gone == ["b"]
    assert cache.put("d", 4, 1000) is False and "d" not in cache  # alone past the byte bound
    cache.put("e", 5, 95)
    assert [k for k, _ in cache.items()] == ["e"] and cache.nbytes == 95
    now[0] = 11.0
    assert cache.get("e") is None and len(cache) == 0  # expired


def test_bounded_cache_sliding_expiry():
    now = [0.0]
    cache = BoundedCache(10, ttl_s=10, sliding=True, clock=lambda: now[0])
    cache.put("used", 1)
    cache.put("idle", 2)
    for t in (5.0, 12.0, 19.0):  # each use moves the expiry out
        now[0] = t
        assert cache.get("used") == 1
    assert cache.expire() == 1 and "idle" not in cache and cache.get("used") == 1


def _open_paths() -> list[str]:
    """What this process's descriptors open (an unlinked file reads '<path> (deleted)')."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
    return out


def test_segments_dropped_without_close_take_their_prepared_queries_and_files(segments, tmp_path):
    # In-process callers of execute often just drop their segments: the cache must not keep them
    # (nor their files) until later queries push the entries out.
    import gc
    import shutil

    paths = []
    for i, seg in enumerate(segments[:2]):
        paths.append(str(tmp_path / f"dropped{i}.sseg"))
        shutil.copyfile(seg.path, paths[-1])
    copies = [Segment.open(p) for p in paths]
    query = {**CORPUS[0], "intervals": ["2000-01-01/2100-01-01"]}
    cache = PreparedCache(memory=None)
    kept = _run(cache, query, copies, engine.union_schema(copies))[0]
    assert len(cache) == 1 and _same(_run(cache, query, copies, engine.union_schema(copies))[0], kept)
    other = _run(cache, query, segments, engine.union_schema(segments))[0]  # over live segments
    assert len(cache) == 2
    for p in paths:
        os.unlink(p)
    assert any(p + " (deleted)" in _open_paths() for p in paths)
    del copies
    gc.collect()
    assert len(cache) == 1 and cache.items()[0][1].segments == tuple(segments)
    assert not any(p in o for p in paths for o in _open_paths())  # their descriptors closed
    assert _same(_run(cache, query, segments, engine.union_schema(segments))[0], other)


def test_the_in_process_cache_drops_what_execute_prepared_over_dropped_segments(segments, tmp_path):
    import gc
    import shutil

    path = str(tmp_path / "executed.sseg")
    shutil.copyfile(segments[0].path, path)
    copy = Segment.open(path)
    query_runner.PREPARED.clear()
    query_runner.execute({**CORPUS[0], "intervals": ["2000-01-01/2100-01-01"]}, [copy])
    generation = copy.generation
    assert [k for k, _ in query_runner.PREPARED.items() if generation in k.segments]
    del copy
    gc.collect()
    assert not [k for k, _ in query_runner.PREPARED.items() if generation in k.segments]
    assert not any(path in o for o in _open_paths())
