"""Druid's columns of the sys tables, beside strata's own (pure): what Druid's web console and
scripts written for Druid select from sys.segments, sys.servers and sys.tasks, and the tables
strata has nothing for yet or derives
(sys.server_properties). Values strata has no notion of take Druid's "unknown" (-1 ports, null).
"""

from __future__ import annotations

import json

import pyarrow as pa
from common.types.interval import format_instant
from services.broker.core.segment_facts import dimensions_and_metrics

SEGMENT_FIELDS = [("num_replicas", pa.int64()), ("is_active", pa.int64()), ("is_realtime", pa.int64()),
                  ("is_overshadowed", pa.int64()), ("shard_spec", pa.string()), ("dimensions", pa.string()),
                  ("metrics", pa.string()), ("replication_factor", pa.int64()), ("last_compaction_state", pa.string())]
SERVER_FIELDS = [("plaintext_port", pa.int64()), ("tls_port", pa.int64()), ("tier", pa.string()),
                 ("is_leader", pa.int64()), ("version", pa.string())]
TASK_FIELDS = [("group_id", pa.string()), ("queue_insertion_time", pa.string()), ("runner_status", pa.string()),
               ("location", pa.string()), ("host", pa.string()), ("plaintext_port", pa.int64()),
               ("tls_port", pa.int64()), ("error_msg", pa.string())]
SUPERVISORS_SCHEMA = pa.schema([("supervisor_id", pa.string()), ("state", pa.string()),
                                ("detailed_state", pa.string()), ("healthy", pa.int64()), ("type", pa.string()),
                                ("source", pa.string()), ("suspended", pa.int64()), ("spec", pa.string())])
SERVER_PROPERTIES_SCHEMA = pa.schema([("server", pa.string()), ("service_name", pa.string()),
                                      ("node_roles", pa.string()), ("property", pa.string()), ("value", pa.string())])
_RUNNER = {"PENDING": "PENDING", "RUNNING": "RUNNING"}


def _overshadowed(rows: dict) -> set:
    """Published segments another published one of a newer version covers (interval within it)."""
    by_datasource: dict = {}
    for sid, row in rows.items():
        if row.get("is_published"):
            by_datasource.setdefault(sid.datasource, []).append(sid)
    out = set()
    for sids in by_datasource.values():
        for sid in sids:
            for other in sids:
                if other.version > sid.version and other.interval.start <= sid.interval.start \
                        and sid.interval.end <= other.interval.end:
                    out.add(sid)
                    break
    return out


def add_segment_columns(rows: dict, descriptors: dict, wanted: dict | None = None,
                        realtime: set | None = None) -> None:
    """``rows``: SegmentId -> sys.segments row (strata's columns), given Druid's columns in place;
    ``descriptors``: SegmentId -> SegmentDescriptor, where known; ``wanted``: SegmentId -> the
    replicas the coordinator's retention rules want for each segment (its load status; 0 for an
    unused one, which no rule loads); ``realtime``: the SegmentIds a stream task's micro-batch
    published and its handoff has not rewritten yet (the metadata store's realtime flag)."""
    realtime = realtime or set()
    wanted = wanted or {}
    hidden = _overshadowed(rows)
    for sid, row in rows.items():
        d = descriptors.get(sid)
        schema = d.schema() if d is not None else {}
        row["num_replicas"] = row.get("replication") or 0
        row["is_overshadowed"] = 1 if sid in hidden else 0
        row["is_active"] = 1 if row.get("is_published") and sid not in hidden else 0
        row["is_realtime"] = 1 if sid in realtime else 0
        partitions = d.num_partitions if d is not None else None
        row["shard_spec"] = json.dumps({"type": "numbered", "partitionNum": sid.partition, "partitions": partitions})
        if d is not None:
            # Druid's text: compact JSON arrays; a rollup segment's metrics from its manifest.
            dimensions, metrics = dimensions_and_metrics(schema, [d.metrics()])
            row["dimensions"] = json.dumps(dimensions, separators=(",", ":"))
            row["metrics"] = json.dumps(metrics, separators=(",", ":"))
        else:
            row["dimensions"] = row["metrics"] = None
        # As Druid: -1 for a segment the rules have not judged (not published, or published
        # after the load status was read).
        row["replication_factor"] = wanted.get(sid, -1)
        row["last_compaction_state"] = None


def server_columns(role: str, http_port: int, version: str, tier: str = "") -> dict:
    """``tier``: the tier a historical announces (ServerInfo.tier); other roles have none (null)."""
    return {"plaintext_port": http_port or -1, "tls_port": -1,
            "tier": (tier or "_default_tier") if role == "historical" else None, "is_leader": None, "version": version}


def task_columns(task) -> dict:
    """Druid's sys.tasks columns of a task (a Task message's fields)."""

    return {"group_id": task.id, "queue_insertion_time": format_instant(task.created_ms),
            "runner_status": _RUNNER.get(task.state, "NONE"), "location": None, "host": None,
            "plaintext_port": -1, "tls_port": -1, "error_msg": task.error or None}


def server_properties_table(servers: list[tuple[str, str, dict]]) -> pa.Table:
    """``servers``: (server host:port, role, properties) per server."""
    rows = [dict(server=server, service_name=f"strata/{role}", node_roles=json.dumps([role]), property=key,
                 value=str(value)) for server, role, props in servers for key, value in sorted(props.items())]
    return pa.Table.from_pylist(rows, schema=SERVER_PROPERTIES_SCHEMA)


__all__ = ["SEGMENT_FIELDS", "SERVER_FIELDS", "SERVER_PROPERTIES_SCHEMA", "SUPERVISORS_SCHEMA", "TASK_FIELDS",
           "add_segment_columns", "server_columns", "server_properties_table", "task_columns"]
