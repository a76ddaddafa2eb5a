"""docker-compose.yml checked for real, without a Docker engine: every strata service (coordinator,
broker, historical-hot, historical-cold, the one-shot "rules") run as a local process with its
command, environment (compose's ${VAR:-default} interpolation applied) and bind-mounted config
files, in depends_on order, against real etcd, PostgreSQL and S3 servers standing for the
services etcd, postgres and minio. Each healthcheck command itself must pass (run with this
Python, its container port mapped to the local one), and the services must find each other by
their compose names."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from services.node_config import load_config
from tests.fixtures.etcd_server import etcd_server  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401
from tests.fixtures.s3_server import s3_server  # noqa: F401
from tests.harness.local_pod import HostMap, LocalPod, PathMap, Probe, port_overrides, stop_all
from tests.integration.deploy.deployed_cluster import check_cluster, prepare_externals

ROOT = Path(__file__).resolve().parents[3]
START_DEADLINE_S = 90.0
EXTERNAL = {"etcd", "postgres", "minio", "minio-init", "prometheus", "grafana"}

pytestmark = pytest.mark.timeout(170)


def _interpolate(value, env: dict[str, str]):
    """Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}; $$ is a literal $."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group(1), m.group(2), m.group(3) or ""
        got = env.get(name)
        if op == ":-":
            return got if got else default
        if op == "-":
            return got if got is not None else default
        return got or ""

    return re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|-)([^}]*))?\}", one, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    # No .env and a clean environment: the development defaults, as `docker compose up` on a laptop.
    raw = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    return _interpolate(raw, {})


def _start_order(services: dict) -> list[str]:
    order, seen = [], set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for dep in services[name].get("depends_on", {}):
            visit(dep)
        order.append(name)

    for name in services:
        visit(name)
    return [n for n in order if n not in EXTERNAL]


class _ServicePlan:
    def __init__(self, name: str, service: dict, workdir: Path) -> None:
        assert service.get("image", "").startswith("strata:"), f"{name}: not a strata service"
        self.name, self.service = name, service
        self.directory = workdir / name
        self.env = {k: str(v) for k, v in (service.get("environment") or {}).items()}
        self.args = list(service["command"])
        self.one_shot = service.get("restart") == "no"
        mapping, self.bind = {}, {}
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            local = self.directory / "fs" / target.lstrip("/")
            mapping[target] = str(local)
            if source.startswith((".", "/")):
                self.bind[target] = (ROOT / source).resolve()
                assert self.bind[target].exists(), f"{name}: bind mount source {source} does not exist"
        self.paths = PathMap(mapping)
        self.ports: dict[int, int] = {}
        self.overrides = {}
        if not self.one_shot:
            self._write(HostMap())
            config = load_config(self.args[0], self.paths.apply(self.args[2]), env=self.env)
            self.overrides = port_overrides(config, self.ports)
            self.advertise_host = config.node.advertise_host

    def _write(self, hosts: HostMap) -> None:
        for target, local in self.paths.mapping.items():
            source = self.bind.get(target)
            if source is None or source.is_dir():
                Path(local).mkdir(parents=True, exist_ok=True)
            if source is not None and source.is_file():
                Path(local).parent.mkdir(parents=True, exist_ok=True)
                Path(local).write_text(hosts.apply(self.paths.apply(source.read_text(encoding="utf-8"))))

    def healthcheck(self) -> list[Probe]:
        test = self.service.get("healthcheck", {}).get("test")
        assert test and test[0] == "CMD", f"{self.name}: healthcheck {test} is not a CMD list"
        command = [sys.executable if test[1] == "python" else test[1], *test[2:]]

        def local(m: re.Match) -> str:
            port = int(m.group(1))
            assert port in self.ports, f"{self.name}: healthcheck asks port {port}, which its config does not serve"
            return f"127.0.0.1:{self.ports[port]}"

        return [Probe("healthcheck", command=[re.sub(r"127\.0\.0\.1:(\d+)", local, c) for c in command])]

    def pod(self, hosts: HostMap) -> LocalPod:
        self._write(hosts)
        env = {k: hosts.apply(self.paths.apply(v)) for k, v in self.env.items()}
        if not self.one_shot:
            # The advertised name (from the TOML or the environment) resolves to this process.
            env["STRATA_NODE_ADVERTISE_HOST"] = hosts.host(env.get("STRATA_NODE_ADVERTISE_HOST", self.advertise_host))
            env.update(self.overrides, STRATA_NODE_HOST="127.0.0.1", STRATA_COORDINATOR_WARM_TASK_DRIVERS="0")
        args = [hosts.apply(self.paths.apply(a)) for a in self.args]
        return LocalPod(self.name, self.directory, args, env, self.ports, [] if self.one_shot else self.healthcheck())


def test_compose_services_run(compose, tmp_path, etcd_server, postgres_url, s3_server, duck):  # noqa: F811
    services = compose["services"]
    order = _start_order(services)
    plans = {name: _ServicePlan(name, services[name], tmp_path) for name in order}
    assert sorted(p.args[0] for p in plans.values() if not p.one_shot) == \
        ["broker", "coordinator", "historical", "historical", "router"]

    hosts = HostMap()
    for name, plan in plans.items():  # every container port is reachable by the service's name
        for container, local in plan.ports.items():
            hosts.add(name, container, f"127.0.0.1:{local}")
        hosts.names.add(name)
    pg_env = services["postgres"]["environment"]
    prepare_externals(hosts, etcd_server, postgres_url, s3_server, postgres_user=pg_env["POSTGRES_USER"],
                      postgres_password=pg_env["POSTGRES_PASSWORD"], postgres_db=pg_env["POSTGRES_DB"],
                      bucket="strata")

    pods: dict[str, LocalPod] = {}
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        for name in order:
            # depends_on: wait for each condition before starting (externals are up already).
            for dep, spec in services[name].get("depends_on", {}).items():
                if dep in EXTERNAL:
                    continue
                if spec["condition"] == "service_healthy":
                    pods[dep].wait_probes(deadline)
                else:
                    assert spec["condition"] == "service_started", f"{name} -> {dep}: {spec}"
            pod = pods[name] = plans[name].pod(hosts)
            if plans[name].one_shot:
                code = pod.run_to_completion(timeout_s=60)
                assert code == 0, f"{name} exited with {code}; log:\n{pod.log_tail()}"
            else:
                pod.start()
        for name, pod in pods.items():
            if not plans[name].one_shot:
                pod.wait_probes(deadline)

        historicals = {p.env["STRATA_NODE_ID"]: p.env["STRATA_HISTORICAL_TIER"] for n, p in pods.items()
                       if plans[n].args[0] == "historical"}
        coordinator, broker = pods["coordinator"], pods["broker"]
        cfg = load_config("broker", broker.args[2], env=broker.env)
        check_cluster(coordinator_grpc=f"127.0.0.1:{coordinator.env['STRATA_NODE_GRPC_PORT']}",
                      flight=f"127.0.0.1:{cfg.node.flight_port}", user=coordinator.env["STRATA_AUTH_ADMIN_USER"],
                      password=coordinator.env["STRATA_AUTH_ADMIN_PASSWORD"], historicals=historicals,
                      deep_storage_url=cfg.deep_storage.url, s3_endpoint=s3_server.endpoint, duck=duck)
        for name, pod in pods.items():
            if not plans[name].one_shot:
                pod.wait_probes(time.monotonic() + 15)
    finally:
        stop_all(list(pods.values()))
