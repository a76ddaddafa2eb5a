"""Service discovery: the key-value store with leases and watches (etcd, or the coordinator's
embedded store) through which strata nodes announce themselves and the segments they serve,
receive assignments, and elect leaders.

    keys.py              the key layout: every key built and parsed in one place
    load_failure.py      LoadFailureReport, the value of a load-failure key
    discovery.py         Discovery interface, Lease, Watch, WatchEvent, errors, Announcer,
                         LeaderElection
    memory_store.py      MemoryStore (pure, thread-safe) and LeaseReaper
    resumable_watch.py   ResumableWatch: snapshot + follow + resync, shared by the implementations
    local_discovery.py   LocalDiscovery: the interface directly on a MemoryStore
    embedded_service.py  DiscoveryServicer: gRPC edge of a MemoryStore (hosted by the coordinator)
    embedded_client.py   EmbeddedDiscovery: the interface over gRPC to a DiscoveryServicer
    etcd_discovery.py    EtcdDiscovery: the interface on etcd v3
    factory.py           discovery_from_config
"""

from services.discovery.discovery import (
    Announcer,
    Backoff,
    CompactedError,
    Discovery,
    DiscoveryError,
    KeyValue,
    LeaderElection,
    Lease,
    LeaseLostError,
    Watch,
    WatchEvent,
)
from services.discovery.keys import ASSIGNMENTS, LEADER, NODES, SERVED, assignment_key, leader_key, node_key, served_key
from services.discovery.factory import discovery_from_config
from services.discovery.local_discovery import LocalDiscovery
from services.discovery.memory_store import LeaseReaper, MemoryStore

# The gRPC- and etcd-backed classes load on first use, so that code needing only the key layout
# or LocalDiscovery (e.g. a role's pure core/) does not import grpc or etcd3.
_LAZY = {
    "EmbeddedDiscovery": "services.discovery.embedded_client",
    "DiscoveryServicer": "services.discovery.embedded_service",
    "add_to_server": "services.discovery.embedded_service",
    "EtcdDiscovery": "services.discovery.etcd_discovery",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'services.discovery' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ASSIGNMENTS",
    "LEADER",
    "NODES",
    "SERVED",
    "Announcer",
    "Backoff",
    "CompactedError",
    "Discovery",
    "DiscoveryError",
    "DiscoveryServicer",
    "EmbeddedDiscovery",
    "EtcdDiscovery",
    "KeyValue",
    "LeaderElection",
    "Lease",
    "LeaseLostError",
    "LeaseReaper",
    "LocalDiscovery",
    "MemoryStore",
    "Watch",
    "WatchEvent",
    "add_to_server",
    "assignment_key",
    "discovery_from_config",
    "leader_key",
    "node_key",
    "served_key",
]
