"""add_coordinator: a second coordinator process for a ``strata up`` cluster on etcd, so a test can
take the leader away and watch the other take over.

It copies the first coordinator's config (the same etcd, metadata store and deep storage) with its
own node id, free ports and its own state directory, as a second machine would have, starts it
with the cluster's other nodes (so ``LocalCluster.down`` stops it too) and waits until it is
healthy. Both campaign for ``/strata/leader/coordinator``; only the leader runs duties and tasks.
"""

from __future__ import annotations

import json
import os
import socket
import tomllib
import urllib.request

from services.cli.local_cluster import LocalCluster, _toml


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def add_coordinator(cluster: LocalCluster, name: str = "coordinator-2", timeout_s: float = 60.0) -> dict:
    """Start coordinator ``name`` next to the cluster's first; returns its node record."""
    state = cluster.running()
    if state["discovery"].get("mode") != "etcd":
        raise ValueError("a second coordinator needs etcd discovery (embedded discovery lives in the first one)")
    first = next(rec for rec in state["nodes"] if rec["role"] == "coordinator")
    with open(first["config"], "rb") as f:
        config = tomllib.load(f)
    config["node"].update(id=name, grpc_port=_free_port(), http_port=_free_port())
    config["coordinator"]["state_dir"] = os.path.join(cluster.dir, name)
    conf = os.path.join(cluster.dir, "conf", f"{name}.toml")
    with open(conf, "w") as f:
        f.write(_toml(config))
    record = cluster._spawn(name, "coordinator", conf, config["node"])
    state["nodes"].append(record)
    with open(cluster.state_path, "w") as f:
        json.dump(state, f, indent=2)
    cluster._wait_healthy([record], timeout_s)
    return record


def coordinator_health(record: dict) -> dict | None:
    """The coordinator's /status/ready body (``leader`` says whether it leads), or None if down."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{record['http_port']}/status/ready", timeout=2) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def grpc_target(record: dict) -> str:
    return f"127.0.0.1:{record['grpc_port']}"
