"""Retention metrics: replicas and bytes per tier (tiers without segments at 0), loads and drops
assigned per tier, unused segments and deep storage bytes per datasource from the metadata store
(SQLite, no sockets); gauges of what is gone are removed, all of them on losing leadership."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.duties import Drop, Load, MarkUnused
from services.coordinator.segment_metrics import SegmentMetrics
from services.coordinator.store import SegmentRecord, SegmentStore
from services.metrics import Metrics

DAY = 86_400_000


def _descriptor(ds: str, day: int, size: int) -> SegmentDescriptor:
    return SegmentDescriptor(SegmentId(ds, Interval(day * DAY, (day + 1) * DAY), "v1", 0), size, 10, f"{ds}-{day}", 1, "{}")


def _samples(metrics: Metrics, prefix: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode())
            for s in family.samples if s.name.startswith(prefix) and not s.name.endswith("_created")}


def test_tiers_loaded_assigned_and_dropped():
    metrics = Metrics("coordinator")
    sm = SegmentMetrics(metrics)
    a, b, c = _descriptor("wiki", 0, 100), _descriptor("wiki", 1, 30), _descriptor("logs", 0, 5)
    served = {"h1": {a.id: a, b.id: b}, "h2": {a.id: a}, "c1": {c.id: c}, "gone": {b.id: b}}
    tiers = {"h1": "hot", "h2": "hot", "c1": "cold", "w1": "warm"}
    sm.observe(served, tiers, [Load("c1", a.id), Load("w1", b.id), Drop("h2", a.id), MarkUnused(c.id),
                               Load("gone", c.id)])
    assert _samples(metrics, "strata_tier_") == {
        ("strata_tier_segments_loaded", (("tier", "hot"),)): 3.0,
        ("strata_tier_segments_loaded", (("tier", "cold"),)): 1.0,
        ("strata_tier_segments_loaded", (("tier", "warm"),)): 0.0,
        ("strata_tier_bytes_loaded", (("tier", "hot"),)): 230.0,
        ("strata_tier_bytes_loaded", (("tier", "cold"),)): 5.0,
        ("strata_tier_bytes_loaded", (("tier", "warm"),)): 0.0,
        ("strata_tier_segments_assigned_total", (("tier", "hot"),)): 0.0,
        ("strata_tier_segments_assigned_total", (("tier", "cold"),)): 1.0,
        ("strata_tier_segments_assigned_total", (("tier", "warm"),)): 1.0,
        ("strata_tier_segments_dropped_total", (("tier", "hot"),)): 1.0,
        ("strata_tier_segments_dropped_total", (("tier", "cold"),)): 0.0,
        ("strata_tier_segments_dropped_total", (("tier", "warm"),)): 0.0}
    # A tier whose last historical left loses its gauges; the counters keep their totals.
    sm.observe({"h1": {a.id: a}}, {"h1": "hot"}, [])
    loaded = {k: v for k, v in _samples(metrics, "strata_tier_segments_loaded").items()}
    assert loaded == {("strata_tier_segments_loaded", (("tier", "hot"),)): 1.0}
    sm.clear()
    assert _samples(metrics, "strata_tier_segments_loaded") == {}


def test_unused_segments_and_deep_storage_bytes_from_the_store(tmp_path):
    metrics = Metrics("coordinator")
    sm = SegmentMetrics(metrics)
    store = SegmentStore(f"sqlite:///{tmp_path / 'metadata.db'}")
    try:
        wiki = [_descriptor("wiki", d, 100 + d) for d in range(3)]
        logs = [_descriptor("logs", 0, 7)]
        store.publish([SegmentRecord.from_descriptor(d) for d in wiki + logs])
        store.mark_unused([wiki[0].id, wiki[1].id])
        assert store.usage() == {("wiki", True): (1, 102), ("wiki", False): (2, 201), ("logs", True): (1, 7)}
        sm.observe_store(store.usage())
        assert _samples(metrics, "strata_segments_unused") == {
            ("strata_segments_unused", (("datasource", "wiki"),)): 2.0,
            ("strata_segments_unused", (("datasource", "logs"),)): 0.0}
        assert _samples(metrics, "strata_deep_storage_bytes") == {
            ("strata_deep_storage_bytes", (("datasource", "wiki"),)): 303.0,
            ("strata_deep_storage_bytes", (("datasource", "logs"),)): 7.0}
        # Killed: the datasource's gauges go with its last row.
        store.mark_unused([logs[0].id])
        store.delete_unused([logs[0].id])
        sm.observe_store(store.usage())
        assert set(_samples(metrics, "strata_deep_storage_bytes")) == {
            ("strata_deep_storage_bytes", (("datasource", "wiki"),))}
    finally:
        store.close()
