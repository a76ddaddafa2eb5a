"""Upstreams: which broker and which coordinator the router forwards to, read from discovery
(the same announcements every role makes under /strata/nodes/{role}/{id})."""

from __future__ import annotations

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

    def address(self, role: str) -> tuple[str, int]:
        """(host, http_port) of the node serving ``role``: the leading coordinator (any announced
        one while an election is under way), or the next broker in turn."""
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
            with self._lock:
                turn = next(self._turn)
            info = nodes[sorted(nodes)[turn % len(nodes)]]
        return info["host"], int(info["http_port"])
