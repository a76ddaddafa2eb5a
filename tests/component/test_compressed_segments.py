"""Compressed segments through a real cluster: a historical configured with
``[historical] decompressed_cache_bytes`` serves compressed segments with that process-wide
budget and answers like the in-process engine over the same files."""

from __future__ import annotations

import os

import pytest

from common.demo import table as demo_table
from common.errors import ValidationError
from common.query import execute
from common.segment import Segment
from common.segment.part_cache import PROCESS_CACHE
from common.segment.part_codec import COMPRESSED_PARTS
from services.historical.main import HistoricalProcess
from tests.harness.embedded_cluster import EmbeddedCluster

IV = ["2015-09-12/2015-09-19"]
BUDGET = 400_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    saved = PROCESS_CACHE.max_bytes
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("compressed")), historicals=0)
    try:
        config = c._config("historical", {"node": {"id": "historical-1"}, "historical": {
            "cache_dir": os.path.join(c.dir, "cache-1"), "max_cache_bytes": 1 << 30,
            "decompressed_cache_bytes": BUDGET}})
        c.historicals.append(HistoricalProcess(config).start())
        c.descriptors = c.publish(demo_table(40_000, days=2), "wiki")
        c.wait_queryable("wiki", len(c.descriptors))
        c.local_segments = [Segment.open(c.storage().uri(d.location).removeprefix("file://"))
                            for d in c.descriptors]
        yield c
    finally:
        c.stop()
        PROCESS_CACHE.set_max_bytes(saved)


def test_published_segments_are_compressed(cluster):
    for seg in cluster.local_segments:
        assert COMPRESSED_PARTS in seg.manifest.required_features
        stored = sum(e.length for e in seg.manifest.files.values())
        decoded = sum(e.raw_length or e.length for e in seg.manifest.files.values())
        assert stored * 2 < decoded


def test_queries_answer_like_the_engine_within_the_configured_budget(cluster):
    assert PROCESS_CACHE.max_bytes == BUDGET
    queries = [
        {"queryType": "timeseries", "dataSource": "wiki", "intervals": IV, "granularity": "hour",
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]},
        {"queryType": "topN", "dataSource": "wiki", "intervals": IV, "granularity": "all", "dimension": "page",
         "metric": "a", "threshold": 5, "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"}]},
        {"queryType": "groupBy", "dataSource": "wiki", "intervals": IV, "granularity": "all",
         "dimensions": ["channel"], "filter": {"type": "equals", "column": "namespace", "matchValue": "Main"},
         "aggregations": [{"type": "count", "name": "c"}]},
    ]
    for _ in range(2):
        for q in queries:
            got, _ = cluster.client.native(q)
            want = execute(q, cluster.local_segments).table
            assert got.to_pylist() == want.to_pylist()
            assert PROCESS_CACHE.stats().bytes <= BUDGET


def test_negative_budget_is_refused_naming_the_setting(cluster):
    config = cluster._config("historical", {"node": {"id": "historical-bad"}, "historical": {
        "cache_dir": os.path.join(cluster.dir, "cache-bad"), "decompressed_cache_bytes": -1}})
    with pytest.raises(ValidationError, match=r"\[historical\] decompressed_cache_bytes must be a non-negative"):
        HistoricalProcess(config)
    assert PROCESS_CACHE.max_bytes == BUDGET
