"""What the load-failure component tests read of a running EmbeddedCluster: the failure records
historicals keep in discovery for a segment, and which historicals serve it."""

from __future__ import annotations

from services.discovery.keys import load_failures_prefix, parse_load_failure_key
from services.discovery.load_failure import LoadFailureReport


def failures(cluster, segment) -> dict[str, LoadFailureReport]:
    """Server id -> the failure record it keeps for ``segment``."""
    out = {}
    for key, value in cluster.coordinator.discovery.get_prefix(load_failures_prefix()).items():
        report = LoadFailureReport.from_bytes(value)
        if report.segment == segment:
            out[parse_load_failure_key(key).server] = report
    return out


def serving(cluster, segment) -> list[str]:
    return [h.node.server_id for h in cluster.historicals if h.node.segment(segment) is not None]
