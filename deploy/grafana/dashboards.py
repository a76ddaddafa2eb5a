"""The strata Grafana dashboards, built with grafana-foundation-sdk; writes deploy/grafana/dashboards/*.json.

    python deploy/grafana/dashboards.py          # regenerate the JSON (and its k8s/config/grafana copy)
    python deploy/grafana/dashboards.py --check  # exit 1 when the committed JSON is stale

The copy under k8s/config/grafana/ exists because kustomize loads ConfigMap files only from inside
its own directory.

The committed JSON is what Grafana loads (docker-compose.yml and k8s/ provision it); a unit test
checks it equals what this script builds, an integration test runs every panel's PromQL against a
real Prometheus scraping a real cluster, and scripts/dashboard_pictures.py draws the panels for
docs/operations.md. Panels select strata's targets by the ``role`` label both scrape configs set
(coordinator, broker, historical). ``$__rate_interval`` is Grafana's; tests substitute a window.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import TimeZoneUtc
from grafana_foundation_sdk.models.dashboard import DataSourceRef, GridPos

OUT = Path(__file__).resolve().parent / "dashboards"
K8S_OUT = Path(__file__).resolve().parents[2] / "k8s" / "config" / "grafana"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
BROKER = 'role="broker"'


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    unit: str
    queries: tuple[Query, ...]
    description: str = ""
    kind: str = "timeseries"  # or "stat"
    width: int = 12


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]


def _q(expr: str, legend: str) -> Query:
    return Query(expr, legend)


def _quantile(q: float, metric: str, by: str, selector: str = "") -> str:
    sel = f"{{{selector}}}" if selector else ""
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{sel}[{RATE}])))"


def _ratio_with_zero_fill(hits: str, misses: str) -> str:
    """hits / (hits + misses) where either side may have no series yet for a label set (a
    projection that never hit, or never missed): the absent side counts as 0."""
    h = f"({hits} or 0 * {misses})"
    m = f"({misses} or 0 * {hits})"
    return f"{h} / ({h} + {m})"


_HITS = f'sum by (datasource, projection) (rate(strata_segments_queried_total{{projection!="base"}}[{RATE}]))'
_MISSES = f"sum by (datasource, projection) (rate(strata_projection_misses_total[{RATE}]))"

CLUSTER = DashboardSpec(
    "strata-cluster", "strata / Cluster overview",
    "Nodes, segments, replication and segment caches.",
    (("Nodes", (
        PanelSpec("Nodes up (scraped) by role", "short",
                  (_q('sum by (role) (up{role=~"coordinator|broker|historical"})', "{{role}}"),),
                  "Targets Prometheus reached on its last scrape."),
        PanelSpec("Nodes announced in discovery", "short",
                  (_q("max by (node_role) (strata_servers)", "{{node_role}}"),),
                  "The leading coordinator's view: nodes holding a discovery lease."),
        PanelSpec("Resident memory by node", "bytes",
                  (_q('sum by (role, instance) (process_resident_memory_bytes{role=~"coordinator|broker|historical"})',
                      "{{role}} {{instance}}"),)),
        PanelSpec("CPU by node", "percentunit",
                  (_q(f'sum by (role, instance) (rate(process_cpu_seconds_total{{role=~"coordinator|broker|historical"}}[{RATE}]))',
                      "{{role}} {{instance}}"),)),
    )),
     ("Segments and replication", (
         PanelSpec("Used segments", "short", (_q("max(strata_used_segments)", "used segments"),),
                   "Segments the metadata store marks used.", kind="stat", width=6),
         PanelSpec("Unavailable segments", "short", (_q("sum(max by (datasource) (strata_segments_unavailable))",
                                                       "unavailable"),),
                   "Used segments no historical serves.", kind="stat", width=6),
         PanelSpec("Under-replicated segments", "short",
                   (_q("sum(max by (datasource) (strata_segments_under_replicated))", "under-replicated"),),
                   "Used segments with fewer replicas than the replication factor.", kind="stat", width=6),
         PanelSpec("Segment loads per second", "ops",
                   (_q(f"sum by (result) (rate(strata_segment_loads_total[{RATE}]))", "load {{result}}"),
                    _q(f"sum(rate(strata_segment_drops_total[{RATE}]))", "drop")), kind="timeseries", width=6),
         PanelSpec("Replication by datasource", "short",
                   (_q("max by (datasource) (strata_segments_unavailable)", "unavailable {{datasource}}"),
                    _q("max by (datasource) (strata_segments_under_replicated)", "under-replicated {{datasource}}")),
                   "From the leading coordinator's duty runs."),
         PanelSpec("Segments served per historical", "short",
                   (_q('sum by (instance) (strata_segments_served{role="historical"})', "{{instance}}"),)),
     )),
     ("Retention and tiers", (
         PanelSpec("Segments loaded per tier", "short",
                   (_q("max by (tier) (strata_tier_segments_loaded)", "{{tier}}"),),
                   "Segment replicas the historicals of each tier serve (the leading coordinator's view)."),
         PanelSpec("Bytes loaded per tier", "bytes", (_q("max by (tier) (strata_tier_bytes_loaded)", "{{tier}}"),)),
         PanelSpec("Loads and drops assigned per tier", "ops",
                   (_q(f"sum by (tier) (rate(strata_tier_segments_assigned_total[{RATE}]))", "load {{tier}}"),
                    _q(f"sum by (tier) (rate(strata_tier_segments_dropped_total[{RATE}]))", "drop {{tier}}")),
                   "What the retention rules and the balancer asked of each tier's historicals."),
         PanelSpec("Segments no rule matches", "short",
                   (_q("sum(max by (datasource) (strata_segments_unmatched)) or vector(0)", "unmatched"),),
                   "Used segments no retention rule applies to: left as they are; add a rule (alert "
                   "StrataSegmentsUnmatched).", kind="stat", width=6),
         PanelSpec("Unused segments by datasource", "short",
                   (_q("max by (datasource) (strata_segments_unused)", "{{datasource}}"),),
                   "Marked unused (by a drop rule or markUnused) and not killed yet: still in deep storage.",
                   width=9),
         PanelSpec("Deep storage bytes by datasource", "bytes",
                   (_q("max by (datasource) (strata_deep_storage_bytes)", "{{datasource}}"),),
                   "Used and unused segments' bytes, as the metadata store records them.", width=9),
     )),
     ("Segment caches", (
         PanelSpec("Segment cache bytes per historical", "bytes",
                   (_q('sum by (instance) (strata_cache_bytes{role="historical"})', "used {{instance}}"),
                    _q('sum by (instance) (strata_cache_max_bytes{role="historical"})', "capacity {{instance}}"))),
         PanelSpec("Segment cache fill", "percentunit",
                   (_q('sum by (instance) (strata_cache_bytes{role="historical"}) / '
                       'sum by (instance) (strata_cache_max_bytes{role="historical"})', "{{instance}}"),),
                   "Used over capacity; near 1 the coordinator cannot place more segments there."),
     )),
     ),
)

QUERIES = DashboardSpec(
    "strata-queries", "strata / Queries",
    "Query rate, latency and errors. Broker panels are end to end: native queries by datasource and "
    "type, SQL statements as datasource=sql; historical panels are each historical's share, by the "
    "native query SQL was planned into.",
    (("Broker (end to end)", (
        PanelSpec("Queries per second by datasource and type", "reqps",
                  (_q(f"sum by (datasource, query_type) (rate(strata_queries_total{{{BROKER}}}[{RATE}]))",
                      "{{datasource}} {{query_type}}"),)),
        PanelSpec("Failed queries per second by status", "reqps",
                  (_q(f'sum by (datasource, query_type, status) (rate(strata_queries_total{{{BROKER},status!="ok"}}[{RATE}]))',
                      "{{datasource}} {{query_type}} {{status}}"),),
                  "error: rejected or failed; denied: no permission."),
        PanelSpec("Query latency p50", "s", (_q(_quantile(0.5, "strata_query_seconds", "datasource, query_type", BROKER),
                                                "{{datasource}} {{query_type}}"),)),
        PanelSpec("Query latency p99", "s", (_q(_quantile(0.99, "strata_query_seconds", "datasource, query_type", BROKER),
                                                "{{datasource}} {{query_type}}"),)),
        PanelSpec("Query error ratio", "percentunit",
                  (_q(f'sum(rate(strata_queries_total{{{BROKER},status!="ok"}}[{RATE}])) / '
                      f"sum(rate(strata_queries_total{{{BROKER}}}[{RATE}]))", "error ratio"),)),
        PanelSpec("Partial queries retried on another replica", "ops",
                  (_q(f"sum(rate(strata_broker_replica_retries_total[{RATE}]))", "retries"),)),
    )),
     ("Historicals (their share)", (
         PanelSpec("Historical queries per second by datasource and type", "reqps",
                   (_q(f'sum by (datasource, query_type) (rate(strata_queries_total{{role="historical"}}[{RATE}]))',
                       "{{datasource}} {{query_type}}"),)),
         PanelSpec("Historical latency p99", "s",
                   (_q(_quantile(0.99, "strata_query_seconds", "datasource, query_type", 'role="historical"'),
                       "{{datasource}} {{query_type}}"),)),
         PanelSpec("Bytes read per second by datasource", "Bps",
                   (_q(f"sum by (datasource) (rate(strata_query_bytes_read_total[{RATE}]))", "{{datasource}}"),)),
         PanelSpec("Rows scanned per second by datasource", "short",
                   (_q(f"sum by (datasource) (rate(strata_rows_scanned_total[{RATE}]))", "{{datasource}}"),)),
     )),
     ),
)

PROJECTIONS = DashboardSpec(
    "strata-projections", "strata / Projections",
    "Whether projections pay off: how often they serve, the rows they save, and why they miss.",
    (("Hits", (
        PanelSpec("Projection hit ratio by datasource", "percentunit",
                  (_q(f'(sum by (datasource) (rate(strata_segments_queried_total{{projection!="base"}}[{RATE}])) '
                      f"or 0 * sum by (datasource) (rate(strata_segments_queried_total[{RATE}]))) / "
                      f"sum by (datasource) (rate(strata_segments_queried_total[{RATE}]))", "{{datasource}}"),),
                  "Segment reads a projection served, over all segment reads (0 for a datasource no projection "
                  "serves)."),
        PanelSpec("Hit ratio by projection", "percentunit",
                  (_q(_ratio_with_zero_fill(_HITS, _MISSES), "{{datasource}} {{projection}}"),),
                  "Segment reads the projection served, over those where it was tried (served or missed)."),
        PanelSpec("Segment reads per second by table", "ops",
                  (_q(f"sum by (datasource, projection) (rate(strata_segments_queried_total[{RATE}]))",
                      "{{datasource}} {{projection}}"),), "projection=base: the segment's own rows."),
        PanelSpec("Projection misses per second by reason", "ops",
                  (_q(f"sum by (datasource, projection, reason) (rate(strata_projection_misses_total[{RATE}]))",
                      "{{datasource}} {{projection}} {{reason}}"),)),
    )),
     ("Rows", (
         PanelSpec("Rows scanned with vs without projections", "short",
                   (_q(f'sum by (datasource, projection) (rate(strata_rows_scanned_total{{projection!="base"}}[{RATE}]))',
                       "with {{projection}} ({{datasource}})"),
                    _q(f"sum by (datasource, projection) (rate(strata_projection_base_rows_total[{RATE}]))",
                       "without {{projection}} ({{datasource}})")),
                   "Rows per second read through each projection, and the base rows the same segments hold."),
         PanelSpec("Rows scanned per second by table", "short",
                   (_q(f"sum by (datasource, projection) (rate(strata_rows_scanned_total[{RATE}]))",
                       "{{datasource}} {{projection}}"),)),
         PanelSpec("Segment query time p99 by table", "s",
                   (_q(_quantile(0.99, "strata_segment_query_seconds", "datasource, projection"),
                       "{{datasource}} {{projection}}"),)),
     )),
     ),
)

INGESTION = DashboardSpec(
    "strata-ingestion", "strata / Ingestion",
    "Ingestion tasks (SQL INSERT/REPLACE, compaction and Kafka supervisors' tasks, each a Spark job run by the "
    "coordinator). Rows and parse exceptions are counted when a task ends; Kafka lag as the broker reports it.",
    (("Tasks", (
        PanelSpec("Tasks by state", "short", (_q("max by (state) (strata_tasks)", "{{state}}"),),
                  "From the metadata store, by the leading coordinator."),
        PanelSpec("Finished tasks in the last hour by type and state", "short",
                  (_q("sum by (type, state) (increase(strata_tasks_finished_total[1h]))", "{{type}} {{state}}"),)),
        PanelSpec("Task duration p50 and p90 (last hour)", "s",
                  (_q("histogram_quantile(0.5, sum by (le, type) (rate(strata_task_seconds_bucket[1h])))",
                      "p50 {{type}}"),
                   _q("histogram_quantile(0.9, sum by (le, type) (rate(strata_task_seconds_bucket[1h])))",
                      "p90 {{type}}"))),
    )),
     ("Rows", (
         PanelSpec("Rows ingested per second by datasource", "short",
                   (_q(f"sum by (datasource) (rate(strata_ingested_rows_total[{RATE}]))", "{{datasource}}"),)),
         PanelSpec("Parse exceptions in the last hour by datasource", "short",
                   (_q("sum by (datasource) (increase(strata_ingest_parse_exceptions_total[1h]))", "{{datasource}}"),),
                   "Input rows that could not be parsed; sys.tasks and 'strata task report' show samples."),
         PanelSpec("Segments published per second", "ops",
                   (_q(f"sum(rate(strata_published_segments_total[{RATE}]))", "published"),
                    _q(f"sum by (result) (rate(strata_publishes_total[{RATE}]))", "publish {{result}}"))),
     )),
     # `or on() vector(0)`: a cluster without Kafka supervisors shows 0, not "no data".
     ("Kafka supervisors", (
         PanelSpec("Kafka lag by supervisor", "short",
                   (_q("max by (supervisor) (strata_ingest_kafka_lag) or on() vector(0)", "{{supervisor}}"),),
                   "Messages each supervisor has still to read (latest offset minus committed, every "
                   "offsetFetchPeriod). Lag that keeps growing raises StrataKafkaLagGrowing."),
         PanelSpec("Kafka lag by partition", "short",
                   (_q("max by (supervisor, partition) (strata_ingest_kafka_partition_lag) or on() vector(0)",
                       "{{supervisor}} [{{partition}}]"),),
                   "One partition far behind the others: a skewed key, or a partition the task cannot read."),
         PanelSpec("Kafka lag in time by supervisor", "s",
                   (_q("max by (supervisor) (strata_ingest_kafka_max_lag_seconds) or on() vector(0)",
                       "{{supervisor}}"),),
                   "Age of the oldest message not read yet (its record timestamp): how stale queries on the "
                   "datasource are."),
     )),
     ),
)

DASHBOARDS = (CLUSTER, QUERIES, PROJECTIONS, INGESTION)


def _panel(spec: PanelSpec):
    panel = (Stat() if spec.kind == "stat" else Timeseries().line_width(1).fill_opacity(10))
    panel = panel.title(spec.title).unit(spec.unit).datasource(DATASOURCE).grid_pos(GridPos(h=8, w=spec.width))
    if spec.description:
        panel = panel.description(spec.description)
    for i, query in enumerate(spec.queries):
        panel = panel.with_target(Dataquery().expr(query.expr).legend_format(query.legend)
                                  .ref_id(chr(ord("A") + i)).datasource(DATASOURCE))
    return panel


def build(spec: DashboardSpec):
    dash = (Dashboard(spec.title).uid(spec.uid).description(spec.description).tags(["strata", "generated"])
            .editable().refresh("30s").time("now-6h", "now").timezone(TimeZoneUtc)
            .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus")))
    ids = iter(range(1, 1000))  # Grafana links and repeats panels by id: unique per dashboard
    for title, panels in spec.rows:
        dash = dash.with_row(Row(title).id(next(ids)))
        for p in panels:
            dash = dash.with_panel(_panel(p).id(next(ids)))
    return dash.build()


def render() -> dict[str, str]:
    """file name -> JSON text, for every dashboard."""
    encoder = JSONEncoder(sort_keys=True, indent=2)
    return {f"{spec.uid}.json": encoder.encode(build(spec)) + "\n" for spec in DASHBOARDS}


def panel_queries() -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title, PromQL) of every panel target, as written in the specs."""
    return [(d.uid, p.title, q.expr) for d in DASHBOARDS for _, panels in d.rows for p in panels for q in p.queries]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    wanted = render()
    problems, written, removed = [], 0, 0
    for out in (OUT, K8S_OUT):
        stale = sorted(name for name, text in wanted.items()
                       if not (out / name).is_file() or (out / name).read_text(encoding="utf-8") != text)
        extra = sorted(p.name for p in out.glob("*.json") if p.name not in wanted) if out.is_dir() else []
        if args.check:
            problems += [f"{out / n} is stale" for n in stale] + [f"{out / n} is not generated" for n in extra]
            continue
        out.mkdir(parents=True, exist_ok=True)
        for name in stale:
            (out / name).write_text(wanted[name], encoding="utf-8")
        for name in extra:
            (out / name).unlink()
        written, removed = written + len(stale), removed + len(extra)
    if args.check:
        for problem in problems:
            print(f"{problem}; run python deploy/grafana/dashboards.py", file=sys.stderr)
        return 1 if problems else 0
    print(f"{written} written, {removed} removed in {OUT} and {K8S_OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
