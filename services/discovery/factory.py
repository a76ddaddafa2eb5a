"""discovery_from_config: the Discovery a process should use, from its [discovery] config."""

from __future__ import annotations

from common.errors import ValidationError
from services.discovery.discovery import Discovery
from services.discovery.memory_store import MemoryStore
from services.node_config import NodeConfig


def discovery_from_config(config: NodeConfig, *, local_store: MemoryStore | None = None) -> Discovery:
    """embedded -> EmbeddedDiscovery(config.discovery.coordinator); etcd -> EtcdDiscovery(config.discovery.etcd).

    The coordinator in embedded mode hosts the store itself: it passes ``local_store`` (the store
    its DiscoveryServicer serves) and gets a LocalDiscovery on it instead of calling itself over gRPC.
    """
    section = config.discovery
    if section.mode == "embedded":
        if local_store is not None:
            from services.discovery.local_discovery import LocalDiscovery

            # The servicer already reaps this store's leases.
            return LocalDiscovery(local_store, reap_interval_s=None)
        from services.discovery.embedded_client import EmbeddedDiscovery

        from services.transport_security import transport_security_from_config

        return EmbeddedDiscovery(section.coordinator, security=transport_security_from_config(config))
    if section.mode == "etcd":
        if not section.etcd:
            raise ValidationError("config [discovery]: mode 'etcd' needs etcd = \"http://host:2379\"")
        from services.discovery.etcd_discovery import EtcdDiscovery

        return EtcdDiscovery(section.etcd)
    raise ValidationError(f"config [discovery] mode: '{section.mode}' is not embedded or etcd")
