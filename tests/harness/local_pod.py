"""LocalPod: one deployed strata container (a Kubernetes pod's container or a compose service) run
as a local process, for tests that check the deployment files for real without a cluster or a
Docker engine.

What a container would get from its runtime is mapped onto this machine:
- the image's ENTRYPOINT (``strata``) is this repository's CLI under the test's Python;
- mounted files (ConfigMaps, bind mounts) are written into a directory of the pod, and every
  container path (mounts, emptyDirs, volume claims, named volumes) becomes a local directory;
  ``PathMap`` rewrites those paths wherever they appear (args, env values, config files);
- service DNS names (``coordinator:8091``, ``postgres:5432``, a pod's own DNS name) become
  127.0.0.1 and the local port that serves them (``HostMap``);
- every container port the role's config serves gets a free local port (two historicals both
  listen on 8083 in their own network namespaces; here they share one), set by the
  ``STRATA_NODE_*_PORT`` environment overrides, and probes are sent to the local port that
  stands for the container port they name.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.fixtures.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
PORT_KEYS = ("grpc_port", "http_port", "flight_port")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PathMap:
    """Container paths -> local paths, longest first, whole path components only."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = dict(mapping)
        keys = sorted(self.mapping, key=len, reverse=True)
        self._re = re.compile("|".join(re.escape(k) + r"(?=$|/|[\"'\s,:])" for k in keys)) if keys else None

    def apply(self, text: str) -> str:
        return self._re.sub(lambda m: self.mapping[m.group(0)], text) if self._re else text


class HostMap:
    """``name:port`` of a service -> ``127.0.0.1:local``; bare names (a pod's advertised DNS name)
    -> 127.0.0.1."""

    def __init__(self) -> None:
        self.endpoints: dict[tuple[str, int], str] = {}
        self.names: set[str] = set()

    def add(self, name: str, port: int, target: str) -> None:
        self.endpoints[(name, port)] = target

    def apply(self, text: str) -> str:
        def endpoint(m: re.Match) -> str:
            return self.endpoints.get((m.group(1), int(m.group(2))), m.group(0))

        # A host name after "//", "@", a quote or the start: never inside a longer name.
        return re.sub(r"(?<![\w.-])([a-z][a-z0-9.-]*):(\d+)\b", endpoint, text)

    def host(self, value: str) -> str:
        return "127.0.0.1" if value in self.names else value


@dataclass
class Probe:
    kind: str  # readiness, liveness, startup, or healthcheck (compose)
    path: str = ""  # HTTP GET path, for Kubernetes probes
    container_port: int = 0
    command: list[str] = field(default_factory=list)  # compose: the healthcheck's CMD, localized


@dataclass
class LocalPod(ServerProcess):
    """One strata container: ``args`` after the image's entrypoint, ``env`` as the container sees
    it (already localized), ``ports``: container port -> local port."""

    name: str
    directory: Path
    args: list[str]
    env: dict[str, str]
    ports: dict[int, int]
    probes: list[Probe] = field(default_factory=list)
    stop_grace_s: float = 20.0

    def __post_init__(self) -> None:
        self.log_path = str(self.directory / "pod.log")
        self._proc = None

    def argv(self) -> list[str]:
        return [sys.executable, "-c", "import sys; from services.cli.main import main; sys.exit(main())", *self.args]

    def process_env(self) -> dict[str, str]:
        base = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "JAVA_HOME", "TMPDIR") if k in os.environ}
        # The image installs strata; here this tree is the package, first on the path.
        return {**base, "HOME": str(self.directory / "home"), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
                "AWS_EC2_METADATA_DISABLED": "true", **self.env}

    def start(self) -> None:
        (self.directory / "home").mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.process_env(), cwd=str(self.directory), start_new_session=True)

    def run_to_completion(self, timeout_s: float) -> int:
        """A one-shot container (a Job, a compose service that exits): its exit code."""
        self.start()
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(f"{self.name} did not finish within {timeout_s}s; log:\n{self.log_tail()}") from None

    def stop(self) -> None:
        """Terminate the process group (a role's own children too: Spark drivers, tasks), then kill
        what is left after the grace period."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for sig, wait_s in ((signal.SIGTERM, self.stop_grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait_s)
                if sig == signal.SIGTERM:
                    os.killpg(proc.pid, signal.SIGKILL)  # any child the leader left behind
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break

    def exited(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def probe_once(self, probe: Probe) -> str | None:
        """None when the probe passes, else why not."""
        if probe.command:
            try:
                out = subprocess.run(probe.command, capture_output=True, text=True, timeout=10,
                                     env={"PATH": os.environ.get("PATH", "")})
            except subprocess.TimeoutExpired:
                return "healthcheck timed out"
            return None if out.returncode == 0 else f"exit {out.returncode}: {out.stderr.strip()[-300:]}"
        local = self.ports.get(probe.container_port)
        if local is None:
            return f"the {probe.kind} probe's port {probe.container_port} is served by no config port {self.ports}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{local}{probe.path}", timeout=5) as response:
                return None if 200 <= response.status < 400 else f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}"
        except OSError as exc:
            return str(exc)

    def wait_probes(self, deadline: float) -> None:
        """Until every probe passes; fails at the deadline, or at once if the process exits."""
        assert self.probes, f"{self.name}: no probes declared"
        pending = list(self.probes)
        while pending:
            code = self.exited()
            if code is not None:
                raise AssertionError(f"{self.name} exited with {code}; log:\n{self.log_tail(60)}")
            pending = [(p) for p in pending if self.probe_once(p) is not None]
            if not pending:
                return
            if time.monotonic() > deadline:
                reasons = {p.kind: self.probe_once(p) for p in pending}
                raise AssertionError(f"{self.name}: probes not passing by the deadline: {reasons}; "
                                     f"log:\n{self.log_tail(60)}")
            time.sleep(0.5)  # between probe rounds, inside the deadline


def port_overrides(config, ports: dict[int, int]) -> dict[str, str]:
    """Free local ports for every port the role's config serves: the env overrides, and fills
    ``ports`` (container port -> local port)."""
    env = {}
    for key in PORT_KEYS:
        container = getattr(config.node, key)
        if container:
            local = ports.setdefault(container, free_port())
            env[f"STRATA_NODE_{key.upper()}"] = str(local)
    return env


def create_postgres_role(admin_url: str, user: str, password: str, database: str) -> None:
    """What the postgres image does with POSTGRES_USER/PASSWORD/DB: a role and its database."""
    import psycopg
    from psycopg import sql

    conninfo = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(user), sql.Literal(password)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(user)))


def stop_all(pods: list[LocalPod]) -> None:
    for pod in reversed(pods):
        try:
            pod.stop()
        except Exception as exc:  # keep stopping the rest
            print(f"warning: stopping {pod.name} failed: {exc}")
