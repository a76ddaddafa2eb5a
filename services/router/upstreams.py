"""Upstreams: which broker and which coordinator the router forwards to, read from discovery
(the same announcements every role makes under /strata/nodes/{role}/{id})."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading

from services.discovery.keys import leader_key, nodes_prefix
from services.router.core.route_table import BROKER, COORDINATOR


class NoUpstream(Exception):
    """No live node of the role the path needs is announced."""


class Upstreams:
    def __init__(self, discovery) -> None:
        self._discovery = discovery
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def address(self, role: str, key: str | None = None) -> tuple[str, int]:
        """(host, http_port) of the node serving ``role``: the leading coordinator (any announced
        one while an election is under way); for a broker, the one ``key`` (a query id, see
        core/query_affinity) hashes to, or the next in turn without a key."""
        nodes = {}
        for value in self._discovery.get_prefix(nodes_prefix(role)).values():
            info = json.loads(value)
            nodes[info["id"]] = info
        if not nodes:
            raise NoUpstream(f"no {role} is announced in discovery; start one (strata up starts every role)")
        if role == COORDINATOR:
            leader = self._discovery.get_prefix(leader_key("coordinator"))
            leader_id = next(iter(leader.values()), b"").decode()
            info = nodes.get(leader_id) or nodes[sorted(nodes)[0]]
        else:
            assert role == BROKER
            if key is not None:
                # Rendezvous hashing: a broker joining or leaving moves only the ids it wins or held.
                info = nodes[max(sorted(nodes), key=lambda node_id: _weight(key, node_id))]
                return info["host"], int(info["http_port"])
            with self._lock:
                turn = next(self._turn)
            info = nodes[sorted(nodes)[turn % len(nodes)]]
        return info["host"], int(info["http_port"])


def _weight(key: str, node_id: str) -> bytes:
    return hashlib.blake2b(f"{key}\0{node_id}".encode(), digest_size=8).digest()
