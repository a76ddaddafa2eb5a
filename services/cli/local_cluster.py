"""LocalCluster: ``strata up/down/status``: a whole cluster as background processes on one host.

Embedded defaults: SQLite metadata, deep storage and caches under DIR, embedded discovery hosted
by the coordinator (or etcd when a URL is given). Each node gets a TOML config in DIR/conf, logs
in DIR/logs, and DIR/cluster.json records pids and endpoints for ``status`` and ``down``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from common.errors import StrataError
from services.node_process import log_tail

DEFAULT_DIR = "var/cluster"


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _pick(preferred: int, taken: set[int]) -> int:
    """The preferred (documented default) port when free, else any free port."""
    if preferred not in taken and _free(preferred):
        taken.add(preferred)
        return preferred
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port


def _toml(sections: dict) -> str:
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        for k, v in values.items():
            lines.append(f"{k} = {json.dumps(v)}")
        lines.append("")
    return "\n".join(lines)


class LocalCluster:
    def __init__(self, directory: str = DEFAULT_DIR) -> None:
        self.dir = os.path.abspath(directory)
        self.state_path = os.path.join(self.dir, "cluster.json")

    def state(self) -> dict | None:
        if not os.path.exists(self.state_path):
            return None
        with open(self.state_path) as f:
            return json.load(f)

    def running(self) -> dict:
        state = self.state()
        if state is None:
            raise StrataError(f"no cluster in {self.dir}; start one with 'strata up --dir {self.dir}'")
        return state

    # ---- up ----------------------------------------------------------------------------------
    def up(self, historicals: int = 2, etcd: str | None = None, timeout_s: float = 90.0,
           max_cache_bytes: int = 10 * 1024**3, *, metadata_url: str | None = None, deep_storage: str | None = None,
           deep_storage_endpoint: str = "", lease_ttl_s: int = 10, duty_period_ms: int = 1000,
           replication: int = 0) -> dict:
        if historicals < 1:
            raise StrataError("a cluster needs at least one historical (--historicals 1)")
        state = self.state()
        if state and any(_alive(n["pid"]) for n in state["nodes"]):
            raise StrataError(f"a cluster is already running from {self.dir}; 'strata down --dir {self.dir}' first")
        for sub in ("conf", "logs", "deep-storage", "coordinator"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        taken: set[int] = set()
        coord = {"grpc_port": _pick(8091, taken), "http_port": _pick(8081, taken)}
        broker = {"grpc_port": _pick(8082, taken), "http_port": _pick(8092, taken), "flight_port": _pick(8815, taken)}
        discovery = {"mode": "etcd", "etcd": etcd} if etcd else \
            {"mode": "embedded", "coordinator": f"127.0.0.1:{coord['grpc_port']}"}
        discovery["lease_ttl_s"] = lease_ttl_s
        common = {
            "discovery": discovery,
            "metadata": {"url": metadata_url or f"sqlite:///{os.path.join(self.dir, 'metadata.db')}"},
            "deep_storage": {"url": deep_storage or os.path.join(self.dir, "deep-storage"),
                             "endpoint": deep_storage_endpoint},
        }
        nodes = [("coordinator", "coordinator", {**common, "node": {"id": "coordinator", "host": "127.0.0.1", **coord},
                                                  "coordinator": {"state_dir": os.path.join(self.dir, "coordinator"),
                                                                  "duty_period_ms": duty_period_ms,
                                                                  "replication": replication}})]
        nodes.append(("broker", "broker", {**common, "node": {"id": "broker", "host": "127.0.0.1", **broker}}))
        for i in range(1, historicals + 1):
            ports = {"grpc_port": _pick(8083 + i - 1, taken), "http_port": _pick(8093 + i - 1, taken)}
            nodes.append((f"historical-{i}", "historical", {
                **common, "node": {"id": f"historical-{i}", "host": "127.0.0.1", **ports},
                "historical": {"cache_dir": os.path.join(self.dir, f"cache-{i}"), "max_cache_bytes": max_cache_bytes}}))
        records = []
        for name, role, config in nodes:
            conf = os.path.join(self.dir, "conf", f"{name}.toml")
            with open(conf, "w") as f:
                f.write(_toml(config))
            records.append(self._spawn(name, role, conf, config["node"]))
            if role == "coordinator" and not etcd:
                # Others reach discovery through the coordinator: let it bind first.
                self._wait_healthy(records[:1], timeout_s)
        state = {"dir": self.dir, "discovery": discovery, "nodes": records}
        with open(self.state_path, "w") as f:
            json.dump(state, f, indent=2)
        try:
            self._wait_healthy(records, timeout_s)
        except StrataError:
            self.down()
            raise
        return state

    def _spawn(self, name: str, role: str, conf: str, node: dict) -> dict:
        log = open(os.path.join(self.dir, "logs", f"{name}.log"), "ab")
        proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", role, "--config", conf],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=os.getcwd())
        log.close()
        return {"name": name, "role": role, "pid": proc.pid, "config": conf, **{k: v for k, v in node.items()
                                                                                  if k.endswith("port")}}

    def _wait_healthy(self, records: list[dict], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(records)
        while pending:
            for rec in list(pending):
                if not _alive(rec["pid"]):
                    log = os.path.join(self.dir, "logs", f"{rec['name']}.log")
                    raise StrataError(f"{rec['name']} exited while starting; see {log}:\n{log_tail(log)}")
                if health(rec)[0]:
                    pending.remove(rec)
            if pending and time.monotonic() > deadline:
                names = ", ".join(r["name"] for r in pending)
                raise StrataError(f"{names} not healthy after {timeout_s:.0f}s; see {os.path.join(self.dir, 'logs')}")
            if pending:
                time.sleep(0.1)

    # ---- down --------------------------------------------------------------------------------
    def down(self, timeout_s: float = 20.0) -> list[str]:
        state = self.running()
        stopped = []
        # Brokers and historicals first, the coordinator (and its embedded discovery) last.
        order = sorted(state["nodes"], key=lambda n: n["role"] == "coordinator")
        for rec in order:
            if _alive(rec["pid"]):
                os.kill(rec["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for rec in order:
            while _alive(rec["pid"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(rec["pid"]):
                os.kill(rec["pid"], signal.SIGKILL)
            stopped.append(rec["name"])
        os.unlink(self.state_path)
        return stopped

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout_s: float = 20.0) -> None:
        rec = self.node(name)
        if _alive(rec["pid"]):
            os.kill(rec["pid"], sig)
        deadline = time.monotonic() + timeout_s
        while _alive(rec["pid"]):
            if time.monotonic() > deadline:
                raise StrataError(f"{name} (pid {rec['pid']}) did not exit within {timeout_s:.0f}s")
            time.sleep(0.05)

    def restart(self, name: str, timeout_s: float = 60.0) -> dict:
        """Start a stopped node again with its config (same ports, same cache)."""
        state = self.running()
        for i, rec in enumerate(state["nodes"]):
            if rec["name"] == name:
                if _alive(rec["pid"]):
                    raise StrataError(f"{name} is still running (pid {rec['pid']})")
                ports = {k: v for k, v in rec.items() if k.endswith("port")}
                new = self._spawn(name, rec["role"], rec["config"], ports)
                state["nodes"][i] = new
                with open(self.state_path, "w") as f:
                    json.dump(state, f, indent=2)
                self._wait_healthy([new], timeout_s)
                return new
        raise StrataError(f"no node '{name}' in {self.dir}")

    def node(self, name: str) -> dict:
        for rec in self.running()["nodes"]:
            if rec["name"] == name:
                return rec
        raise StrataError(f"no node '{name}' in {self.dir}")

    def endpoints(self) -> dict:
        state = self.running()
        out = {}
        for rec in state["nodes"]:
            if rec["role"] == "coordinator":
                out["coordinator"] = f"127.0.0.1:{rec['grpc_port']}"
                out["coordinator_http"] = f"http://127.0.0.1:{rec['http_port']}"
            if rec["role"] == "broker":
                out["broker"] = f"127.0.0.1:{rec['grpc_port']}"
                out["flight"] = f"grpc://127.0.0.1:{rec['flight_port']}"
                out["broker_http"] = f"http://127.0.0.1:{rec['http_port']}"
        return out


def health(rec: dict) -> tuple[bool, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{rec['http_port']}/status/health", timeout=2) as r:
            return r.status == 200, json.loads(r.read())
    except (OSError, ValueError):
        return False, {}


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

