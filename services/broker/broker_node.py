"""BrokerNode: keeps the broker's ServedView in step with discovery and owns the clients of the other
roles: a HistoricalClient per historical, a CoordinatorClient on the current coordinator."""

from __future__ import annotations

import json
import logging
import threading
from urllib.parse import unquote

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from services.broker.core.missing_segment import used_of
from services.broker.core.served_view import ServedView
from services.coordinator.client import CoordinatorClient
from services.discovery import Announcer
from services.discovery.keys import node_key, nodes_prefix, parse_node_key, parse_served_key, served_prefix
from services.historical.client import HistoricalClient
from services.rpc.convert import segment_id_from_proto
from services.transport_security import NO_SECURITY, TransportSecurity

log = logging.getLogger("strata.broker")


class BrokerNode:
    def __init__(self, server_id: str, server_info: dict, discovery, lease_ttl_s: int = 10, *,
                 security: TransportSecurity = NO_SECURITY) -> None:
        self.server_id = server_id
        self.security = security  # TLS and the internal credential on the historical and coordinator clients
        self.server_info = server_info
        self.discovery = discovery
        self.view = ServedView()
        self.lock = threading.Lock()
        self.historicals: dict[str, dict] = {}
        self._served_keys: dict[str, tuple[str, SegmentId]] = {}
        self._historical_clients: dict[str, HistoricalClient] = {}
        self._coordinator_client: CoordinatorClient | None = None  # rebuilt when the coordinator moves
        self._clients = []  # every client made, closed on stop
        self._announcer = Announcer(discovery, lease_ttl_s)
        self._watches = []

    def start(self) -> BrokerNode:
        self._watches.append(self.discovery.watch_prefix(nodes_prefix("historical"), self._on_node))
        self._watches.append(self.discovery.watch_prefix(served_prefix(), self._on_served))
        self._announcer.set(node_key("broker", self.server_id), json.dumps(self.server_info).encode())
        return self

    def stop(self) -> None:
        for w in self._watches:
            w.cancel()
        self._announcer.close()
        for client in self._clients:
            client.close()

    def _on_node(self, event) -> None:
        server = parse_node_key(event.key).node_id
        with self.lock:
            if event.type == "put":
                self.historicals[server] = json.loads(event.value)
                self._historical_clients.pop(server, None)
            else:
                self.historicals.pop(server, None)
                self._historical_clients.pop(server, None)
            self.view.set_tiers({s: str(info.get("tier") or "_default_tier") for s, info in self.historicals.items()})

    def _on_served(self, event) -> None:
        try:
            server = parse_served_key(event.key).server
            with self.lock:
                if event.type == "put":
                    obj = json.loads(event.value)
                    descriptor = SegmentDescriptor.from_json(obj)
                    self._served_keys[event.key] = (server, descriptor.id)
                    names = obj.get("loadProjections")
                    partial = (tuple(names), str(obj.get("loadRule") or "a partial load rule")) \
                        if isinstance(names, list) and names else None
                    self.view.served(server, descriptor, partial)
                else:
                    known = self._served_keys.pop(event.key, None)
                    if known is not None:
                        self.view.unserved(*known)
        except Exception:
            log.exception("bad served-segment announcement %s", unquote(event.key))

    def coordinator_client(self) -> CoordinatorClient | None:
        """A client of a coordinator, for sys tables and task submission (None if none is up)."""
        target = self.coordinator_target()
        if target is None:
            return None
        with self.lock:
            client = self._coordinator_client
            if client is None or client.target != target:
                client = self._coordinator_client = CoordinatorClient(target, security=self.security)
                self._clients.append(client)
            return client

    def used_states(self, datasource: str, segments, timeout_s: float) -> dict:
        """Whether each of ``segments`` is still meant to be served, as the coordinator's load
        status says (for a segment a historical no longer serves; see core/missing_segment.py)."""
        client = self.coordinator_client()
        if client is None:
            raise ConnectionError("no coordinator is announced")
        wanted = {segment_id_from_proto(s.id): s.wanted_replicas for s in client.load_status(datasource, timeout_s)}
        return used_of(wanted, segments)

    def coordinator_http(self) -> str | None:
        for value in self.discovery.get_prefix(nodes_prefix("coordinator")).values():
            info = json.loads(value)
            return f"{self.security.http_scheme}://{info['host']}:{info['http_port']}"
        return None

    def coordinator_target(self) -> str | None:
        """Where a coordinator listens (any of them: they share the metadata store)."""
        for value in self.discovery.get_prefix(nodes_prefix("coordinator")).values():
            info = json.loads(value)
            return f"{info['host']}:{info['grpc_port']}"
        return None

    def historical_client(self, server: str) -> HistoricalClient:
        with self.lock:
            client = self._historical_clients.get(server)
            if client is None:
                info = self.historicals.get(server)
                if info is None:
                    raise ConnectionError(f"historical {server} is not announced")
                client = self._historical_clients[server] = HistoricalClient(f"{info['host']}:{info['grpc_port']}",
                                                                                      self.security)
                self._clients.append(client)
            return client
