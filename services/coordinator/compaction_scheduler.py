"""CompactionScheduler: the I/O shell of automatic compaction, run after each duty cycle by the
leader when ``[coordinator] auto_compaction`` is on. It reads used segments' projections, the
catalog's definitions and the compaction tasks under way, and submits what the pure planner asks
for (at most ``max_compaction_tasks`` at once)."""

from __future__ import annotations

import json
import logging

from common.types.interval import Interval
from services.coordinator.core.compaction_plan import Compaction, plan_compactions

log = logging.getLogger("strata.coordinator")


class CompactionScheduler:
    def __init__(self, store, tasks, catalog, max_tasks: int = 1) -> None:
        self.store = store
        self.tasks = tasks
        self.catalog = catalog  # CatalogManager: datasource definitions
        self.max_tasks = max_tasks

    def run_once(self) -> list[Compaction]:
        segments = []
        for record in self.store.used_segments():
            manifest = json.loads(record.payload or "{}")
            segments.append((record.id, [p.get("spec", {}) for p in manifest.get("projections", [])]))
        catalog = {}
        for meta in self.catalog.list(None, "druid"):
            catalog[meta.id.name] = list(meta.spec.projections)
        under_way = [Compaction(t.datasource, Interval.parse(t.spec["interval"]))
                     for t in self.tasks.list() if t.type == "compact" and not t.is_final and t.spec.get("interval")]
        wanted = plan_compactions(segments, catalog, under_way, self.max_tasks)
        for c in wanted:
            log.info("auto-compaction of %s %s: its projections differ from the catalog's", c.datasource, c.interval)
            self.tasks.create(c.datasource, "compact", f"COMPACT {c.datasource} {c.interval}",
                              {"interval": str(c.interval)})
        return wanted
