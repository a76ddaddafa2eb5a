"""Historical process wiring: deep storage, the segment cache, discovery, gRPC and HTTP."""

from __future__ import annotations

import logging
import os

from common.errors import ValidationError
from common.segment.part_cache import configure as configure_decoded_part_cache
from services.deep_storage import deep_storage_from_config
from services.discovery import discovery_from_config
from services.grpc_server import GrpcServer
from services.historical.historical_node import HistoricalNode
from services.historical.segment_cache import SegmentCache
from services.historical.server import HistoricalServicer, add_to_server
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.node_process import NodeProcess

log = logging.getLogger("strata.historical")


class HistoricalProcess(NodeProcess):
    role = "historical"

    def __init__(self, config) -> None:
        super().__init__(config)
        section = config.historical
        try:
            configure_decoded_part_cache(section.decompressed_cache_bytes)
        except ValueError as exc:
            raise ValidationError(f"[historical] {exc}") from None
        self.metrics = Metrics(self.role)
        self.storage = deep_storage_from_config(config.deep_storage)
        self.cache = SegmentCache(section.cache_dir, section.max_cache_bytes, self.storage)
        self.discovery = discovery_from_config(config)
        self.grpc = GrpcServer(config.node.host, config.node.grpc_port, security=self.security, role="historical")
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health,
                                 tls_context=self.security.http_server_context() if self.security.serves_tls else None)
        self.id = self.node_id(self.grpc.port)
        if not section.tier.strip():
            raise ValidationError("[historical] tier is empty; name the tier (e.g. hot, cold) or leave it unset "
                                  "for _default_tier")
        info = self.server_info(self.id, self.grpc.port, self.http.port, max_cache_bytes=section.max_cache_bytes,
                                tier=section.tier)
        self.node = HistoricalNode(self.id, info, self.discovery, self.cache, self.metrics,
                                   config.discovery.lease_ttl_s)
        threads = section.query_threads or max(2, os.cpu_count() or 2)
        self.servicer = HistoricalServicer(self.node, self.metrics, threads, max_query_bytes=section.max_query_bytes)
        add_to_server(self.grpc, self.servicer)

    def health(self) -> dict:
        status = self.node.status()
        return {"healthy": True, "role": self.role, "id": self.id, "served": len(status["served"]),
                "loading": len(status["loading"]), "failed": len(status["failed"])}

    def endpoints(self) -> dict:
        return {"grpc": f"{self.config.advertise_host}:{self.grpc.port}",
                "http": f"{self.security.http_scheme}://{self.config.advertise_host}:{self.http.port}"}

    def start(self) -> HistoricalProcess:
        volume = self.cache.volume_bytes()
        if volume is not None and volume < self.cache.max_bytes:
            # The coordinator places segments by max_cache_bytes; the cache refuses what the
            # volume cannot hold, so loads fail here and move elsewhere, but only after retries.
            log.warning("[historical] max_cache_bytes is %d but the volume holding cache_dir %s is only %d bytes: "
                        "loads beyond what it holds are refused and reported; lower max_cache_bytes to at most "
                        "the volume's size", self.cache.max_bytes, self.cache.cache_dir, volume)
        self.grpc.start()
        self.http.start()
        self.node.start()
        return self

    def stop(self) -> None:
        super().stop()
        self.node.stop()
        self.http.stop()
        self.grpc.stop()
        self.cache.close()
        self.discovery.close()
