"""Router process wiring: Druid's router on port 8888. It serves the web console's files at ``/``
and forwards the Druid HTTP API (services/router/core/route_table.py) to a broker or the leading
coordinator found in discovery. It authenticates nobody itself: the upstream does, with the
Authorization the client sent, so users and grants are the cluster's."""

from __future__ import annotations

from services.discovery import discovery_from_config
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.node_process import NodeProcess
from services.router.console_files import ConsoleFiles
from services.router.http_proxy import HttpProxy
from services.router.upstreams import Upstreams


class RouterProcess(NodeProcess):
    role = "router"

    def __init__(self, config) -> None:
        super().__init__(config)
        security = self.security
        self.metrics = Metrics(self.role)
        self.discovery = discovery_from_config(config)
        self.upstreams = Upstreams(self.discovery)
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health, None,
                                 security.http_server_context() if security.serves_tls else None)
        self.proxy = HttpProxy(self.upstreams, security.http_client_context() if security.serves_tls else None)
        self.files = ConsoleFiles()
        # One prefix each for the proxied families (longest first in HttpEndpoint), the files at "/".
        for prefix in ("/druid/", "/proxy/"):
            self.http.route(prefix, self.proxy.handle)
        self.http.route("/", self.files.handle)
        self.id = config.node.id or f"router-{config.advertise_host}-{self.http.port}"

    def health(self) -> dict:
        return {"healthy": True, "role": self.role, "id": self.id}

    def console_url(self) -> str:
        return f"{self.security.http_scheme}://{self.config.advertise_host}:{self.http.port}/"

    def endpoints(self) -> dict:
        return {"console": self.console_url()}

    def start(self) -> RouterProcess:
        self.http.start()
        return self

    def stop(self) -> None:
        super().stop()
        self.http.stop()
        self.discovery.close()
