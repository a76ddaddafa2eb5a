"""What system tables say about segments' insides, read from their manifests (pure).

- per segment: the projections it holds, and per nested JSON column its number of fields and
  whether the path guard left paths in the raw values only;
- per datasource: which columns are dimensions and which rolled-up metrics (Druid's
  ``/druid/v2/datasources/{ds}``), from the metrics the segments' manifests record;
- per datasource and projection (``sys.projections``): the definition (the catalog's, else the
  newest segment's), how many segments hold it, and its rows against those segments' base rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import pyarrow as pa

PROJECTIONS_SCHEMA = pa.schema([
    ("datasource", pa.string()), ("name", pa.string()), ("spec", pa.string()), ("defined_in_catalog", pa.int64()),
    ("segments_with", pa.int64()), ("segments_total", pa.int64()), ("projection_rows", pa.int64()),
    ("base_rows", pa.int64())])


def manifest_facts(manifest_json: str) -> dict:
    """{"projections": [...names], "json_columns": {column: {"fields": n, "guardTriggered": bool}}}."""
    try:
        m = json.loads(manifest_json or "{}")
    except ValueError:
        return {"projections": [], "json_columns": {}}
    projections = [p.get("name") for p in m.get("projections", [])]
    nested = {c["name"]: {"fields": int(c.get("stats", {}).get("fields", 0)),
                          "guardTriggered": bool(c.get("stats", {}).get("guardTriggered", False))}
              for c in m.get("columns", []) if c.get("encoding") == "nested"}
    return {"projections": projections, "json_columns": nested}


def dimensions_and_metrics(columns: Iterable[str], segment_metrics: Iterable[Mapping[str, str | None]]
                           ) -> tuple[list[str], list[str]]:
    """(dimensions, metrics) of a datasource with ``columns`` (its schema, in order) whose visible
    segments record ``segment_metrics``: the metrics are the union of every segment's, the
    dimensions every other column but ``__time``. A column that is a metric in one segment and
    not in another (a rollup appended to plain rows) counts as a metric, as its values there
    are aggregated."""
    columns = list(columns)
    metrics: dict[str, None] = {}
    for m in segment_metrics:
        metrics.update(dict.fromkeys(m))
    ordered = [c for c in columns if c in metrics] + sorted(c for c in metrics if c not in columns)
    return [c for c in columns if c != "__time" and c not in metrics], ordered


def projections_table(segments: Iterable[tuple[str, str, int, str]],
                      catalog_projections: Mapping[str, list[dict]]) -> pa.Table:
    """``segments``: (datasource, segment id, base rows, manifest JSON) of the segments in use;
    ``catalog_projections``: datasource -> the catalog's projection definitions."""
    stats: dict[tuple[str, str], dict] = {}
    totals: dict[str, int] = {}
    for datasource, _sid, base_rows, manifest_json in sorted(segments, key=lambda s: s[1]):
        totals[datasource] = totals.get(datasource, 0) + 1
        try:
            m = json.loads(manifest_json or "{}")
        except ValueError:
            continue
        for p in m.get("projections", []):
            entry = stats.setdefault((datasource, p["name"]), {"spec": p.get("spec"), "segments": 0, "rows": 0,
                                                               "base": 0})
            entry["spec"] = p.get("spec")  # the newest segment's definition
            entry["segments"] += 1
            entry["rows"] += int(p.get("numRows", 0))
            entry["base"] += int(base_rows)
    rows = []
    for datasource, defs in catalog_projections.items():
        for d in defs:
            key = (datasource, d.get("name"))
            entry = stats.pop(key, {"segments": 0, "rows": 0, "base": 0})
            rows.append(_row(datasource, d.get("name"), d, True, entry, totals.get(datasource, 0)))
    for (datasource, name), entry in sorted(stats.items()):
        rows.append(_row(datasource, name, entry.get("spec"), False, entry, totals.get(datasource, 0)))
    return pa.Table.from_pylist(rows, schema=PROJECTIONS_SCHEMA)


def _row(datasource, name, spec, defined: bool, entry: dict, total: int) -> dict:
    return {"datasource": datasource, "name": name, "spec": json.dumps(spec, sort_keys=True) if spec else None,
            "defined_in_catalog": 1 if defined else 0, "segments_with": entry["segments"], "segments_total": total,
            "projection_rows": entry["rows"], "base_rows": entry["base"]}


__all__ = ["PROJECTIONS_SCHEMA", "dimensions_and_metrics", "manifest_facts", "projections_table"]
