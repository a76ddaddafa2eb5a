"""The discovery key layout: every key strata writes or watches is built and parsed here.

    /strata/nodes/{role}/{node_id}               one per live process, under its lease
    /strata/assignments/{historical}/{segment}   the coordinator's plan: what a historical should load
    /strata/served/{historical}/{segment}        what a historical serves, under its lease
    /strata/load_failures/{historical}/{segment} a load that failed there, under the historical's lease
    /strata/leader/{name}                        the node id of the current leader
    /strata/catalog/version                      the table catalog's version, bumped on each change

A segment travels as one path element: its id's text, percent-quoted (an id may hold '/').
Values are small JSON documents owned by the writer of each family.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from common.errors import ValidationError
from common.segment.segment_id import SegmentId

ROOT = "/strata/"
NODES = ROOT + "nodes/"
ASSIGNMENTS = ROOT + "assignments/"
SERVED = ROOT + "served/"
LOAD_FAILURES = ROOT + "load_failures/"
LEADER = ROOT + "leader/"
CATALOG_VERSION_KEY = ROOT + "catalog/version"


@dataclass(frozen=True)
class NodeKey:
    role: str
    node_id: str


@dataclass(frozen=True)
class SegmentKey:
    """A key naming a segment on one historical (assignment, served, failed load)."""

    server: str
    segment: str  # the segment id's text; the value under the key carries the typed descriptor


def _element(what: str, value: str) -> str:
    if not value or "/" in value:
        raise ValidationError(f"{what} {value!r} cannot be a discovery key element: it must be non-empty "
                              "and hold no '/'")
    return value


def segment_element(segment: SegmentId) -> str:
    """The segment id made safe as one path element of a key."""
    return quote(str(segment), safe="")


# ---- nodes --------------------------------------------------------------------------------------
def node_key(role: str, node_id: str) -> str:
    return f"{NODES}{_element('role', role)}/{_element('node id', node_id)}"


def nodes_prefix(role: str | None = None) -> str:
    return NODES if role is None else f"{NODES}{_element('role', role)}/"


def parse_node_key(key: str) -> NodeKey:
    role, node_id = _split(key, NODES, "node")
    return NodeKey(role, node_id)


# ---- segments per historical ---------------------------------------------------------------------
def assignment_key(server: str, segment: SegmentId) -> str:
    return f"{ASSIGNMENTS}{_element('server id', server)}/{segment_element(segment)}"


def assignments_prefix(server: str | None = None) -> str:
    return ASSIGNMENTS if server is None else f"{ASSIGNMENTS}{_element('server id', server)}/"


def parse_assignment_key(key: str) -> SegmentKey:
    return _segment_key(key, ASSIGNMENTS, "assignment")


def served_key(server: str, segment: SegmentId) -> str:
    return f"{SERVED}{_element('server id', server)}/{segment_element(segment)}"


def served_prefix(server: str | None = None) -> str:
    return SERVED if server is None else f"{SERVED}{_element('server id', server)}/"


def parse_served_key(key: str) -> SegmentKey:
    return _segment_key(key, SERVED, "served-segment")


def load_failure_key(server: str, segment: SegmentId) -> str:
    return f"{LOAD_FAILURES}{_element('server id', server)}/{segment_element(segment)}"


def load_failures_prefix(server: str | None = None) -> str:
    return LOAD_FAILURES if server is None else f"{LOAD_FAILURES}{_element('server id', server)}/"


def parse_load_failure_key(key: str) -> SegmentKey:
    return _segment_key(key, LOAD_FAILURES, "load-failure")


# ---- leaders ------------------------------------------------------------------------------------
def leader_key(name: str) -> str:
    return f"{LEADER}{_element('leader name', name)}"


def _split(key: str, prefix: str, family: str) -> tuple[str, str]:
    rest = key[len(prefix):] if key.startswith(prefix) else None
    parts = rest.split("/") if rest is not None else []
    if len(parts) != 2 or not all(parts):
        raise ValidationError(f"{key!r} is not a {family} key: expected {prefix}<a>/<b>")
    return parts[0], parts[1]


def _segment_key(key: str, prefix: str, family: str) -> SegmentKey:
    server, element = _split(key, prefix, family)
    return SegmentKey(server, unquote(element))
