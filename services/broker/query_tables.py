"""sys.queries and sys.projection_advice on the broker: the query registry's records, and the
advisor (``core/projection_advisor``) fed with the log's shapes, the served segments' manifests and
HLL sketches of column combinations computed by the cluster.

The sketches come from one native timeseries query per candidate (``HLLSketchBuild`` over the
candidate's columns concatenated, bucketed by the segments' time chunks): it reads the columns once
and builds no projection. Its context marks it as the advisor's own, so it is not workload, and
asks for base rows. Answers are cached per served-segment generation.
"""

from __future__ import annotations

import json

import pyarrow as pa

from common.bounded_cache import BoundedCache
from common.query.projection import ProjectionSpec
from common.types.interval import ETERNITY, format_instant
from services.broker.core.projection_advisor import ADVICE_SCHEMA, Existing, SegmentFacts, advise, aggregator_key
from services.broker.core.query_log import OK, QUERIES_SCHEMA, canonical_period, queries_table
from services.broker.query_registry import ADVISOR_PROBE

_UNKNOWN = object()
_EMPTY = {"queries": QUERIES_SCHEMA, "projection_advice": ADVICE_SCHEMA}
_CHUNKS = {3_600_000: "hour", 21_600_000: "six_hour", 86_400_000: "day", 604_800_000: "week"}


def provided_table(providers: dict, name: str) -> pa.Table:
    make = providers.get(name)
    return make() if make is not None else _EMPTY[name].empty_table()


class QueryTables:
    """The providers of sys.queries and sys.projection_advice for one broker."""

    def __init__(self, registry, node, executor, timeout_s: float = 60.0, catalog_projections=None) -> None:
        self.registry = registry
        # datasource -> the catalog's projection definitions (JSON), so advice never repeats them
        self.catalog_projections = catalog_projections or (lambda datasource: [])
        self.node = node  # BrokerNode: view and lock
        self.executor = executor  # the scatter/gather executor, for the sketches
        self.timeout_s = timeout_s
        self._sketches = BoundedCache(256)  # (datasource, columns, granularity, generation) -> answer

    def providers(self) -> dict:
        return {"queries": self.queries, "projection_advice": self.advice}

    def queries(self) -> pa.Table:
        return queries_table(self.registry.records(), self.registry.clock_ms(), format_instant)

    # ---- the advisor ----------------------------------------------------------------------------------
    def advice(self) -> pa.Table:
        shapes: dict[str, list[dict]] = {}
        for record in self.registry.records():
            if record.status != OK:
                continue
            for shape in record.shapes:
                shapes.setdefault(shape["datasource"], []).append(shape)
        rows = []
        for datasource in sorted(shapes):
            segments, existing, generation = self._segments(datasource)
            if not segments:
                continue
            combos = self._combos_for(datasource, segments, generation)
            rows.extend(advise(datasource, shapes[datasource], segments, combos, existing=existing))
        return pa.Table.from_pylist(rows, schema=ADVICE_SCHEMA)

    def _segments(self, datasource: str):
        with self.node.lock:
            view = self.node.view
            if datasource not in view.datasources():
                return [], [], view.generation
            visible = [sid for chunk in view.timeline(datasource).lookup([ETERNITY]) for sid in chunk.segments]
            descriptors = [view.descriptors[sid] for sid in visible if sid in view.descriptors]
            generation = view.generation
        segments, specs = [], {}
        for d in descriptors:
            manifest = json.loads(d.manifest_json or "{}")
            columns = manifest.get("columns", [])
            segments.append(SegmentFacts(
                rows=int(d.num_rows), start=d.id.interval.start, end=d.id.interval.end,
                cardinality={c["name"]: int(c.get("stats", {}).get("cardinality") or d.num_rows or 1) for c in columns},
                types={c["name"]: str(c.get("type", "STRING")) for c in columns}))
            for p in manifest.get("projections", []):
                specs.setdefault(p.get("name"), p.get("spec") or {})
        for spec in self.catalog_projections(datasource):
            specs[spec.get("name")] = spec  # the catalog's definition wins: segments will follow it
        return segments, [e for e in map(_existing, specs.values()) if e is not None], generation

    def _combos_for(self, datasource: str, segments: list[SegmentFacts], generation: int):
        lengths = {s.end - s.start for s in segments}
        chunk = _CHUNKS.get(next(iter(lengths))) if len(lengths) == 1 else None
        if chunk is None:
            return None  # chunks of mixed or unusual sizes: cardinalities alone

        def combos(columns: tuple[str, ...], granularity: str):
            key = (datasource, columns, granularity, generation)
            known = self._sketches.get(key, _UNKNOWN)
            if known is not _UNKNOWN:
                return known
            try:
                answer = self._sketch(datasource, columns, granularity, chunk)
            except Exception:  # noqa: BLE001 - no sketch: the advisor falls back to cardinalities
                answer = None
            self._sketches.put(key, answer)
            return answer

        return combos

    def _sketch(self, datasource: str, columns: tuple[str, ...], granularity: str, chunk: str) -> dict[int, int]:
        parts = []
        if granularity == "none":
            parts.append("__time")
        elif granularity != "all":
            parts.append(f"timestamp_floor(__time, '{granularity}')")
        parts += [f"nvl(cast(\"{c}\", 'STRING'), '')" for c in columns]
        if not parts:
            return {}
        expression = parts[0] if len(parts) == 1 else "concat(" + ", '|', ".join(parts) + ")"
        query = {"queryType": "timeseries", "dataSource": datasource, "intervals": [str(ETERNITY)],
                 "granularity": chunk, "aggregations": [{"type": "HLLSketchBuild", "name": "n", "lgK": 14,
                                                         "expression": expression}],
                 "context": {ADVISOR_PROBE: True, "noProjections": True, "skipEmptyBuckets": True}}
        table = self.executor.execute(query, self.timeout_s).table
        times = table.column("__time").cast(pa.int64()).to_pylist()
        return {t: int(round(n)) for t, n in zip(times, table.column("n").to_pylist())}


def _existing(spec_json: dict) -> Existing | None:
    try:
        spec = ProjectionSpec.from_json(spec_json)
    except Exception:  # noqa: BLE001 - a definition we cannot read constrains nothing
        return None
    time_col, gran = spec.time_column, spec.granularity
    period = "all" if gran is None else "none" if time_col == "__time" else str(gran.period)
    return Existing(spec.name, tuple(sorted(c for c in spec.grouping_columns if c != time_col)),
                    canonical_period(period), frozenset(aggregator_key(a.to_json()) for a in spec.aggregators))


__all__ = ["QueryTables", "provided_table"]
