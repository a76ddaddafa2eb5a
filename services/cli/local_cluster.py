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
from services.node_process import process_group_alive

DEFAULT_DIR = "var/cluster"
_EXIT_TIMEOUT_S = 10.0
# What a node logs when it cannot bind: gRPC (services/grpc_server.py), HTTP and Flight (the OS).
_PORT_IN_USE = ("the port is in use", "Address already in use")
_RESPAWNS = 3


# The documented ports (README): coordinator gRPC/HTTP, broker gRPC/HTTP/Flight, and the first
# historical's gRPC/HTTP (the next historicals count up from there).
DOCUMENTED_PORTS = {"coordinator": {"grpc_port": 8091, "http_port": 8081},
                    "broker": {"grpc_port": 8082, "http_port": 8092, "flight_port": 8815},
                    "historical": {"grpc_port": 8083, "http_port": 8093},
                    "router": {"http_port": 8888}}
PORT_MODES = ("fixed", "auto")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now, probed the way the servers bind: with
    SO_REUSEADDR, so a port whose last connection lingers in TIME_WAIT (right after 'strata
    down') is free, while one another socket listens on is not."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def port_holder(port: int) -> str | None:
    """The process listening on TCP ``port``, as 'pid N (command line)', when /proc shows it
    (only processes of the same user can be seen); None when unknown."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(fields[9])  # state 0A is LISTEN
        except OSError:
            continue
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in targets:
                    return f"pid {pid} ({_command_line(int(pid), 120)})"
            except OSError:
                continue
    return None


def _command_line(pid: int, limit: int | None = None) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


class _Ports:
    """Hands out the documented ports; with ``auto`` a taken one is replaced by a free one,
    otherwise every taken port is collected and reported together."""

    def __init__(self, mode: str) -> None:
        if mode not in PORT_MODES:
            raise StrataError(f"--ports must be one of {', '.join(PORT_MODES)}, got '{mode}'")
        self.mode = mode
        self.taken: set[int] = set()
        self.busy: list[str] = []

    def pick(self, preferred: int, what: str) -> int:
        """``preferred`` when free (0: any free port)."""
        if preferred and preferred not in self.taken and port_free(preferred):
            self.taken.add(preferred)
            return preferred
        if self.mode == "fixed" and preferred:
            holder = port_holder(preferred)
            self.busy.append(f"port {preferred} ({what}) is in use" + (f" by {holder}" if holder else ""))
            return preferred
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in self.taken:
                self.taken.add(port)
                return port

    def check(self) -> None:
        if self.busy:
            raise StrataError("cannot start the cluster on its documented ports: " + "; ".join(self.busy)
                              + ". Stop what holds them, or run 'strata up --ports auto' to use free ports instead")


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
        self.killed_at_down: list[str] = []
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
           replication: int = 0, ports: str = "fixed", warm_task_drivers: int = 0,
           tiers: list[str] | None = None) -> dict:
        """Starts the cluster; returns its state. ``ports="fixed"`` (the default) uses the
        documented ports and refuses to start, naming each taken port and its holder, when one is
        in use; ``"auto"`` replaces a taken one by a free one. ``warm_task_drivers`` long-lived
        Spark drivers take ingestion tasks without a JVM start each (``strata up`` keeps one).
        ``tiers``: the ``[historical] tier`` of each historical in order (see ``parse_tiers``);
        unlisted ones are in ``_default_tier``."""
        if tiers:
            if len(tiers) != historicals:
                raise StrataError(f"--tiers names {len(tiers)} historicals but --historicals is {historicals}; "
                                  f"make them agree (e.g. --historicals {len(tiers)})")
        if historicals < 1:
            raise StrataError("a cluster needs at least one historical (--historicals 1)")
        state = self.state()
        if state and any(_alive(n["pid"]) for n in state["nodes"]):
            raise StrataError(f"a cluster is already running from {self.dir}; 'strata down --dir {self.dir}' first")
        for sub in ("conf", "logs", "deep-storage", "coordinator"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        picker = _Ports(ports)
        coord = {k: picker.pick(v, f"coordinator {k[:-5]}") for k, v in DOCUMENTED_PORTS["coordinator"].items()}
        broker = {k: picker.pick(v, f"broker {k[:-5]}") for k, v in DOCUMENTED_PORTS["broker"].items()}
        router = {k: picker.pick(v, f"router {k[:-5]}") for k, v in DOCUMENTED_PORTS["router"].items()}
        historical_ports = [{k: picker.pick(v + i - 1, f"historical-{i} {k[:-5]}")
                             for k, v in DOCUMENTED_PORTS["historical"].items()} for i in range(1, historicals + 1)]
        picker.check()  # before anything is started
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
                                                                  "replication": replication,
                                                                  "warm_task_drivers": warm_task_drivers}})]
        nodes.append(("broker", "broker", {**common, "node": {"id": "broker", "host": "127.0.0.1", **broker}}))
        for i in range(1, historicals + 1):
            hist_ports = historical_ports[i - 1]
            nodes.append((f"historical-{i}", "historical", {
                **common, "node": {"id": f"historical-{i}", "host": "127.0.0.1", **hist_ports},
                "historical": {"cache_dir": os.path.join(self.dir, f"cache-{i}"), "max_cache_bytes": max_cache_bytes,
                               **({"tier": tiers[i - 1]} if tiers else {})}}))
        # The router (the web console) last: it forwards to the others.
        nodes.append(("router", "router", {**common, "node": {"id": "router", "host": "127.0.0.1", **router}}))
        records = []
        configs = {name: config for name, _, config in nodes}

        def write_and_spawn(name: str, role: str) -> dict:
            conf = os.path.join(self.dir, "conf", f"{name}.toml")
            with open(conf, "w") as f:
                f.write(_toml(configs[name]))
            return self._spawn(name, role, conf, configs[name]["node"])

        def respawn(rec: dict) -> None:
            # Another process took one of its ports between the probe and the bind: with
            # --ports auto, start it again on fresh ports (the caller bounds how often).
            node = configs[rec["name"]]["node"]
            for key in [k for k in node if k.endswith("port")]:
                node[key] = picker.pick(0, key)
            if rec["role"] == "coordinator" and not etcd:
                discovery["coordinator"] = f"127.0.0.1:{node['grpc_port']}"  # shared by the others' configs
            rec.update(write_and_spawn(rec["name"], rec["role"]), respawns=rec.get("respawns", 0) + 1)

        retry = respawn if ports == "auto" else None
        for name, role, _ in nodes:
            records.append(write_and_spawn(name, role))
            if role == "coordinator" and not etcd:
                # Others reach discovery through the coordinator: let it bind first.
                self._wait_healthy(records[:1], timeout_s, retry)
        state = {"dir": self.dir, "discovery": discovery, "nodes": records}
        with open(self.state_path, "w") as f:
            json.dump(state, f, indent=2)
        try:
            self._wait_healthy(records, timeout_s, retry)
        except StrataError:
            self.down()
            raise
        with open(self.state_path, "w") as f:  # again: a respawned node has new ports
            json.dump(state, f, indent=2)
        return state

    def _spawn(self, name: str, role: str, conf: str, node: dict) -> dict:
        log = open(os.path.join(self.dir, "logs", f"{name}.log"), "ab")
        proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", role, "--config", conf],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=os.getcwd())
        log.close()
        return {"name": name, "role": role, "pid": proc.pid, "config": conf, **{k: v for k, v in node.items()
                                                                                  if k.endswith("port")}}

    def _wait_healthy(self, records: list[dict], timeout_s: float, respawn=None) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(records)
        while pending:
            for rec in list(pending):
                if not _alive(rec["pid"]):
                    log = os.path.join(self.dir, "logs", f"{rec['name']}.log")
                    tail = log_tail(log, 5)
                    if respawn is not None and any(m in tail for m in _PORT_IN_USE) and rec.get("respawns", 0) < _RESPAWNS:
                        respawn(rec)  # in place: the record now describes the new process
                        continue
                    raise StrataError(f"{rec['name']} exited while starting; see {log}:\n{log_tail(log)}")
                healthy, body = health(rec)
                if healthy and body.get("pid", rec["pid"]) == rec["pid"]:  # our node, not a squatter
                    pending.remove(rec)
            if pending and time.monotonic() > deadline:
                names = ", ".join(r["name"] for r in pending)
                raise StrataError(f"{names} not healthy after {timeout_s:.0f}s; see {os.path.join(self.dir, 'logs')}")
            if pending:
                time.sleep(0.1)

    # ---- down --------------------------------------------------------------------------------
    def down(self, timeout_s: float = 20.0) -> list[str]:
        """Stops every node (SIGTERM, then SIGKILL after ``timeout_s``) and any ingestion task
        process that outlived the coordinator, and returns only once all of them have exited,
        so their ports are free for the next 'strata up'."""
        state = self.running()
        # Brokers and historicals first, the coordinator (and its embedded discovery) last.
        order = sorted(state["nodes"], key=lambda n: n["role"] == "coordinator")
        nodes = [rec for rec in order if _is_node(rec)]
        for rec in nodes:
            _signal_group(rec["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(_alive(rec["pid"]) for rec in nodes) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Nodes that ignored SIGTERM for timeout_s (a bug: a node stops cleanly on it), for callers to report.
        self.killed_at_down = [rec["name"] for rec in nodes if _alive(rec["pid"])]
        for rec in nodes:
            if _alive(rec["pid"]):
                _signal_group(rec["pid"], signal.SIGKILL)
        # A coordinator stops its tasks as it exits; one killed before that leaves them running.
        tasks = self._task_processes()
        for pid in tasks:
            _signal_group(pid, signal.SIGKILL)
        pids = [rec["pid"] for rec in nodes] + tasks
        deadline = time.monotonic() + _EXIT_TIMEOUT_S
        while (left := [p for p in pids if _alive(p) or process_group_alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left:
            raise StrataError(f"processes {', '.join(map(str, left))} of the cluster in {self.dir} did not exit "
                              f"within {_EXIT_TIMEOUT_S:.0f}s of SIGKILL; check them with ps")
        os.unlink(self.state_path)
        return [rec["name"] for rec in order]

    def _task_processes(self) -> list[int]:
        """Live ingestion task processes the coordinator recorded (``coordinator/tasks/*.pid``)."""
        folder = os.path.join(self.dir, "coordinator", "tasks")
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".pid")]
        except OSError:
            return []
        pids = []
        for name in names:
            try:
                with open(os.path.join(folder, name)) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            command = _command_line(pid)  # a task process, or a warm task driver (driver-N)
            if _alive(pid) and name[:-4] in command and ("task_main" in command or "task_driver" in command):
                pids.append(pid)
        return pids

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
            if rec["role"] == "router":
                out["console"] = f"http://127.0.0.1:{rec['http_port']}/"
        return out


def health(rec: dict) -> tuple[bool, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{rec['http_port']}/status/ready", timeout=2) as r:
            return r.status == 200, json.loads(r.read())
    except (OSError, ValueError):
        return False, {}


def _is_node(rec: dict) -> bool:
    """Whether the recorded pid is still that node (pids are reused after a reboot or a crash)."""
    return _alive(rec["pid"]) and rec["config"] in _command_line(rec["pid"])


def _signal_group(pid: int, sig: int) -> None:
    # Every node and task leads its own process group (start_new_session): children go with it.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


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


def parse_tiers(text: str) -> list[str]:
    """``hot=1,cold=2`` -> ["hot", "cold", "cold"]: the tier of each historical, in order."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        name, sep, count = part.partition("=")
        name = name.strip()
        if not sep or not name or not count.strip().isdigit() or int(count) < 1:
            raise StrataError(f"--tiers takes tier=count pairs such as hot=1,cold=1; '{part}' is not one "
                              "(a count is a whole number of historicals, at least 1)")
        if name in out:
            raise StrataError(f"--tiers names tier '{name}' twice; give each tier once with its count")
        out.extend([name] * int(count))
    return out
