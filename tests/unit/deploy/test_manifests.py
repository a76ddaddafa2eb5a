"""Deployment files, checked offline: Kubernetes manifests (k8s/, rendered as kustomize would and
validated against the Kubernetes JSON schemas), docker-compose.yml (validated against the Compose
Specification schema), the role configs under deploy/ and k8s/config/, Prometheus configs and the
Dockerfile. No sockets, no Docker, no cluster.

Schemas come from installed packages: kubernetes-validate bundles the Kubernetes ones;
check-jsonschema vendors the Compose Specification schema (compose-spec.json).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
import tomllib
from importlib.resources import files as package_files
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

from services.node_config import DEFAULT_PORTS, ROLES, load_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "k8s"
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = ROOT / "docker-compose.yml"
K8S_VERSION = "1.30"
HEALTH_PATH = "/status/ready"  # readiness, strata's JSON (/status/health is Druid's bare true)
LIVE_PATH = "/status/live"  # liveness must not fail just because etcd or PostgreSQL is down
METRICS_PATH = "/metrics"

# Kinds that live outside namespaces (kustomize's namespace transformer leaves them alone).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
                  "CustomResourceDefinition", "PriorityClass"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
# The strata roles on Kubernetes: role -> (workload kind, Service name).
K8S_ROLES = {"coordinator": ("Deployment", "coordinator"),
             "broker": ("Deployment", "broker"),
             "historical": ("StatefulSet", "historical"),
             "router": ("Deployment", "router")}
# Ports that docker-compose.yml publishes, by service (the defaults of node_config and Prometheus).
COMPOSE_PUBLISHED = {"coordinator": {8081}, "broker": {8815, 8082}, "router": {8888}, "prometheus": {9090},
                     "grafana": {3000}}
COMPOSE_STRATA = {"coordinator": "coordinator", "broker": "broker", "router": "router",
                  "historical-hot": "historical", "historical-cold": "historical"}
# One-shot strata containers (no server): the one that sets the _default load rules.
COMPOSE_STRATA_ONESHOT = {"rules"}
# The historical tiers ([historical] tier) both deployments run, a StatefulSet each on Kubernetes.
TIERS = {"hot", "cold"}
COMPOSE_INFRA_HEALTHCHECKED = ("etcd", "postgres", "minio", "prometheus", "grafana")


# ---------------------------------------------------------------------------------------------
# kustomize, the parts that matter here (resources, namespace, labels, generators, images)
# ---------------------------------------------------------------------------------------------

def _load_yaml_docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _kustomization() -> dict:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))


def _inside_k8s(rel: str) -> Path:
    """A generator source: relative to the kustomization and, as kustomize's load restrictor
    insists, inside its directory."""
    path = (K8S / rel).resolve()
    assert path.is_relative_to(K8S.resolve()), f"{rel} is outside k8s/ (kustomize refuses to load it)"
    return path


def _generator_sources(gen: dict) -> tuple[dict[str, str], list[Path]]:
    """(data, source files) of one configMapGenerator/secretGenerator entry."""
    data: dict[str, str] = {}
    sources: list[Path] = []
    for spec in gen.get("files", []):
        key, _, rel = spec.rpartition("=") if "=" in spec else ("", "", spec)
        path = _inside_k8s(rel)
        sources.append(path)
        data[key or path.name] = path.read_text(encoding="utf-8") if path.is_file() else None
    for rel in gen.get("envs", []):
        path = _inside_k8s(rel)
        sources.append(path)
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    key, sep, value = line.partition("=")
                    assert sep, f"{rel}: '{line}' is not KEY=VALUE"
                    data[key.strip()] = value
    for literal in gen.get("literals", []):
        key, _, value = literal.partition("=")
        data[key] = value
    return data, sources


def _pod_templates(obj: dict) -> list[dict]:
    if obj["kind"] in WORKLOAD_KINDS:
        return [obj["spec"]["template"]]
    if obj["kind"] == "CronJob":
        return [obj["spec"]["jobTemplate"]["spec"]["template"]]
    return []


def render_kustomization() -> list[dict]:
    """Render k8s/ the way `kustomize build` does for what this kustomization uses, minus the
    content hash suffix on generated names (references keep the base names)."""
    kz = _kustomization()
    objs: list[dict] = []
    for rel in kz.get("resources", []):
        objs.extend(_load_yaml_docs(K8S / rel))
    for gen in kz.get("configMapGenerator", []):
        data, _ = _generator_sources(gen)
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data})
    for gen in kz.get("secretGenerator", []):
        data, _ = _generator_sources(gen)
        meta = {"name": gen["name"]}
        options = gen.get("options", {})
        if options.get("labels"):
            meta["labels"] = dict(options["labels"])
        if options.get("annotations"):
            meta["annotations"] = dict(options["annotations"])
        objs.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": gen.get("type", "Opaque"),
                     "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})
    namespace = kz.get("namespace")
    images = {i["name"]: i for i in kz.get("images", [])}
    for obj in objs:
        meta = obj.setdefault("metadata", {})
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = namespace
        if namespace and obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in obj.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace
        for entry in kz.get("labels", []):
            meta.setdefault("labels", {}).update(entry["pairs"])
            if entry.get("includeTemplates") or entry.get("includeSelectors"):
                for template in _pod_templates(obj):
                    template.setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])
        for template in _pod_templates(obj):
            spec = template["spec"]
            for container in spec.get("initContainers", []) + spec.get("containers", []):
                name, _, tag = container["image"].partition(":")
                if name in images:
                    image = images[name]
                    container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag or 'latest')}"
    return objs


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return render_kustomization()


def _by_kind(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _object_id(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _strata_workloads(objs: list[dict], role: str) -> list[dict]:
    """The workloads of a role: one, except historicals (a StatefulSet per tier)."""
    kind, _ = K8S_ROLES[role]
    matches = [o for o in objs if o["kind"] == kind
               and o["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == role
               and o["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") == "strata"]
    expected = len(TIERS) if role == "historical" else 1
    assert len(matches) == expected, f"expected {expected} {kind} for role {role}, found {[_object_id(m) for m in matches]}"
    return matches


# ---------------------------------------------------------------------------------------------
# Kubernetes
# ---------------------------------------------------------------------------------------------

def test_kustomization_references_exist_and_parse():
    kz = _kustomization()
    assert kz["apiVersion"].startswith("kustomize.config.k8s.io/") and kz["kind"] == "Kustomization"
    assert kz["namespace"] == "strata"
    resources = kz["resources"]
    assert len(resources) == len(set(resources)), "a resource is listed twice"
    for rel in resources:
        path = K8S / rel
        assert path.is_file(), f"kustomization lists {rel}, which does not exist"
        docs = _load_yaml_docs(path)
        assert docs, f"{rel} holds no objects"
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= set(doc), f"{rel}: not a Kubernetes object: {doc}"
    # No manifest is left out by accident.
    on_disk = {p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert on_disk == set(resources), f"manifests not in kustomization resources: {on_disk - set(resources)}"
    generators = kz.get("configMapGenerator", []) + kz.get("secretGenerator", [])
    assert generators
    for gen in generators:
        _, sources = _generator_sources(gen)
        assert sources, f"generator {gen['name']} has no file sources"
        for path in sources:
            assert path.is_file(), f"generator {gen['name']}: {path} does not exist"
    for image in kz.get("images", []):
        assert image.get("newTag") or image.get("digest"), f"image {image['name']} is not pinned"


def test_every_manifest_file_validates_on_its_own():
    """Each resource file as written (before kustomize) is already valid Kubernetes."""
    for rel in _kustomization()["resources"]:
        for doc in _load_yaml_docs(K8S / rel):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_rendered_objects_validate_against_kubernetes_schemas(rendered):
    errors = []
    for obj in rendered:
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            errors.append(f"{_object_id(obj)}: {getattr(exc, 'message', exc)}")
    assert not errors, "\n".join(errors)
    names = [(o["kind"], o["metadata"]["name"]) for o in rendered]
    assert len(names) == len(set(names)), "two objects share a kind and name"


def test_kubernetes_validation_is_strict():
    """Guard against a validator that accepts anything: a misspelt field must fail."""
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
           "spec": {"selector": {"a": "b"}, "portz": [{"port": 1}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_kubectl_kustomize_renders_the_same_objects(rendered):
    """When kubectl (with its built-in kustomize) is installed, render with it too: the real
    renderer must accept the directory, produce valid objects, and agree with ours."""
    kubectl = shutil.which("kubectl")
    kustomize = shutil.which("kustomize")
    if kustomize:
        cmd = [kustomize, "build", str(K8S)]
    elif kubectl:
        cmd = [kubectl, "kustomize", str(K8S)]
    else:
        pytest.skip("neither kustomize nor kubectl is installed")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    real = [d for d in yaml.safe_load_all(out.stdout) if d]
    for obj in real:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    generated = {g["name"] for g in _kustomization().get("configMapGenerator", [])
                 + _kustomization().get("secretGenerator", [])}

    def key(obj):
        name = obj["metadata"]["name"]
        for base in generated:
            if obj["kind"] in ("ConfigMap", "Secret") and re.fullmatch(re.escape(base) + r"-[a-z0-9]{10}", name):
                name = base
        return obj["kind"], name, obj["metadata"].get("namespace")

    assert sorted(map(key, real)) == sorted(map(key, rendered))
    ours = {key(o): o for o in rendered}
    for obj in real:
        mine = ours[key(obj)]
        assert obj["metadata"].get("labels", {}) == mine["metadata"].get("labels", {}), _object_id(obj)
        for theirs_t, mine_t in zip(_pod_templates(obj), _pod_templates(mine)):
            assert theirs_t["metadata"]["labels"] == mine_t["metadata"]["labels"], _object_id(obj)
            assert ([c["image"] for c in theirs_t["spec"]["containers"]]
                    == [c["image"] for c in mine_t["spec"]["containers"]]), _object_id(obj)


def test_every_pod_runs_as_non_root_with_resources(rendered):
    pods = [(o, t) for o in rendered for t in _pod_templates(o)]
    assert len(pods) >= 8
    for obj, template in pods:
        spec = template["spec"]
        pod_sc = spec.get("securityContext", {})
        for container in spec.get("initContainers", []) + spec["containers"]:
            where = f"{_object_id(obj)} container {container['name']}"
            sc = container.get("securityContext", {})
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, f"{where} may run as root"
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 1)) != 0, f"{where} runs as uid 0"
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(part, {})), f"{where}: no {part} for cpu and memory"
            image = container["image"]
            assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), f"{where}: unpinned {image}"


@pytest.mark.parametrize("role", ROLES)
def test_strata_role_workload(rendered, role):
    for workload in _strata_workloads(rendered, role):
        _check_strata_workload(rendered, role, workload)


def _check_strata_workload(rendered, role, workload):
    template = workload["spec"]["template"]
    spec = template["spec"]
    config = load_config(role, str(K8S / "config" / f"{role}.toml"), env={})
    http = config.node.http_port

    annotations = template["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true"
    assert annotations.get("prometheus.io/port") == str(http)
    assert annotations.get("prometheus.io/path") == METRICS_PATH

    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 10001  # the uid the Dockerfile creates

    [container] = spec["containers"]
    assert container["image"] == "strata:dev"
    assert container.get("command") is None, "the image's ENTRYPOINT is strata; roles go in args"
    args = container["args"]
    assert args[:2] == [role, "--config"] and len(args) == 3
    config_path = Path(args[2])

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == http and ports.get("grpc", 0) == config.node.grpc_port  # the router has no gRPC
    if config.node.flight_port:
        assert ports["flight"] == config.node.flight_port
    for probe, path in (("readinessProbe", HEALTH_PATH), ("livenessProbe", LIVE_PATH)):
        get = container[probe]["httpGet"]
        assert get["path"] == path and get["port"] in ("http", http), f"{role} {probe}"

    # The config file the args name is the generated ConfigMap's key for this role.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert str(config_path.parent) in mounts, f"{role}: nothing mounted at {config_path.parent}"
    volume = next(v for v in spec["volumes"] if v["name"] == mounts[str(config_path.parent)])
    configmaps = _by_kind(rendered, "ConfigMap")
    assert config_path.name in configmaps[volume["configMap"]["name"]]["data"]

    env = {e["name"]: e for e in container["env"]}
    if role == ROUTER:  # only its identity: it holds no store, storage or credentials
        assert {"STRATA_NODE_ID", "STRATA_NODE_ADVERTISE_HOST"} <= set(env)
        assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in env.values())
        return
    for name in ("STRATA_NODE_ID", "STRATA_NODE_ADVERTISE_HOST", "STRATA_METADATA_URL",
                 "STRATA_AUTH_ADMIN_USER", "STRATA_AUTH_ADMIN_PASSWORD", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY"):
        assert name in env, f"{role}: env {name} missing"
    for name in ("STRATA_AUTH_ADMIN_PASSWORD", "AWS_SECRET_ACCESS_KEY"):
        assert "secretKeyRef" in env[name].get("valueFrom", {}), f"{role}: {name} is not from a Secret"
    _assert_strata_env_names_are_config_keys(env)


def _assert_strata_env_names_are_config_keys(env_names):
    """Every STRATA_<SECTION>_<KEY> variable must name a real config key (a typo is ignored silently
    by load_config, so catch it here)."""
    valid = {}
    config = load_config("coordinator", env={})
    for section in ("node", "discovery", "metadata", "deep_storage", "historical", "coordinator", "broker", "auth"):
        for key in vars(getattr(config, section)):
            valid[f"STRATA_{section.upper()}_{key.upper()}"] = (section, key)
    for name in env_names:
        if name.startswith("STRATA_"):
            assert name in valid, f"{name} is no config key; valid: {sorted(valid)}"


def test_broker_service_ports(rendered):
    service = _by_kind(rendered, "Service")["broker"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"grpc": 8082, "flight": 8815, "http": 8092}
    coordinator = {p["name"]: p["port"] for p in _by_kind(rendered, "Service")["coordinator"]["spec"]["ports"]}
    assert coordinator == {"http": 8081, "grpc": 8091}


def test_historicals_keep_their_cache_on_a_volume_claim(rendered):
    tiers = set()
    for sts in _strata_workloads(rendered, "historical"):
        tiers.add(_check_historical_statefulset(rendered, sts))
    assert tiers == TIERS


def _check_historical_statefulset(rendered, sts) -> str:
    """Checks one tier's StatefulSet; returns its tier."""
    assert sts["spec"]["replicas"] >= 1
    config = load_config("historical", str(K8S / "config" / "historical.toml"), env={})
    [container] = sts["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    claim = mounts[config.historical.cache_dir]
    templates = {t["metadata"]["name"]: t for t in sts["spec"]["volumeClaimTemplates"]}
    assert claim in templates, "the segment cache is not a volumeClaimTemplate"
    size = templates[claim]["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi") and int(size[:-2]) * 1024**3 > config.historical.max_cache_bytes
    service = _by_kind(rendered, "Service")[sts["spec"]["serviceName"]]
    assert service["spec"].get("clusterIP") == "None", "a StatefulSet's governing Service must be headless"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STRATA_NODE_ID"] == "$(POD_NAME)"
    assert env["STRATA_NODE_ADVERTISE_HOST"] == f"$(POD_NAME).{service['metadata']['name']}"
    tier = env["STRATA_HISTORICAL_TIER"]
    assert sts["metadata"]["name"] == f"historical-{tier}"
    assert sts["spec"]["template"]["metadata"]["labels"]["strata.io/tier"] == tier
    assert sts["spec"]["selector"]["matchLabels"]["strata.io/tier"] == tier, "the tiers' selectors overlap"
    return tier


def test_statefulsets_have_headless_services(rendered):
    services = _by_kind(rendered, "Service")
    for name, sts in _by_kind(rendered, "StatefulSet").items():
        service = services.get(sts["spec"]["serviceName"])
        assert service is not None, f"StatefulSet/{name}: no Service {sts['spec']['serviceName']}"
        assert service["spec"].get("clusterIP") == "None", f"StatefulSet/{name}: Service is not headless"
    for name in ("etcd", "postgres", "historical-hot", "historical-cold"):
        assert name in _by_kind(rendered, "StatefulSet"), f"{name} should be a StatefulSet"
    for name in ("coordinator", "broker", "minio", "prometheus"):
        assert name in _by_kind(rendered, "Deployment"), f"{name} should be a Deployment"
    assert _by_kind(rendered, "Job"), "no bucket-creation Job"


def test_references_resolve(rendered):
    """ConfigMaps, Secrets (and their keys), Services' selectors and target ports, service
    accounts and role bindings all point at something that exists."""
    configmaps = _by_kind(rendered, "ConfigMap")
    secrets = _by_kind(rendered, "Secret")
    accounts = _by_kind(rendered, "ServiceAccount")
    for obj in rendered:
        for template in _pod_templates(obj):
            where = _object_id(obj)
            spec = template["spec"]
            if obj["kind"] != "Job":
                selector = obj["spec"]["selector"]["matchLabels"]
                assert selector.items() <= template["metadata"]["labels"].items(), f"{where}: selector/labels"
            if spec.get("serviceAccountName"):
                assert spec["serviceAccountName"] in accounts, f"{where}: no ServiceAccount"
            for volume in spec.get("volumes", []):
                if "configMap" in volume:
                    assert volume["configMap"]["name"] in configmaps, f"{where}: no ConfigMap {volume['configMap']}"
                if "secret" in volume:
                    assert volume["secret"]["secretName"] in secrets, f"{where}: no Secret {volume['secret']}"
            claims = {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
            volumes = {v["name"] for v in spec.get("volumes", [])} | claims
            for container in spec.get("initContainers", []) + spec["containers"]:
                for mount in container.get("volumeMounts", []):
                    assert mount["name"] in volumes, f"{where}: mount of unknown volume {mount['name']}"
                for source in container.get("envFrom", []):
                    if "configMapRef" in source:
                        assert source["configMapRef"]["name"] in configmaps, where
                    if "secretRef" in source:
                        assert source["secretRef"]["name"] in secrets, where
                for var in container.get("env", []):
                    ref = var.get("valueFrom", {})
                    if "secretKeyRef" in ref:
                        secret = secrets.get(ref["secretKeyRef"]["name"])
                        assert secret is not None, f"{where}: {var['name']}: no Secret {ref['secretKeyRef']['name']}"
                        assert ref["secretKeyRef"]["key"] in secret["data"], f"{where}: {var['name']}: no such key"
                    if "configMapKeyRef" in ref:
                        cm = configmaps.get(ref["configMapKeyRef"]["name"])
                        assert cm is not None and ref["configMapKeyRef"]["key"] in cm["data"], where
                # $(VAR) in env values may only use variables defined before them; in
                # command/args, any variable of the container.
                defined: list[str] = []
                for var in container.get("env", []):
                    for used in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", var.get("value", "")):
                        assert used in defined, f"{where}: {var['name']} uses $({used}) before it is defined"
                    defined.append(var["name"])
                for arg in container.get("command", []) + container.get("args", []):
                    for used in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
                        assert used in defined, f"{where}: argument uses undefined $({used})"

    templates = [(o, t) for o in rendered for t in _pod_templates(o)]
    for name, service in _by_kind(rendered, "Service").items():
        selector = service["spec"]["selector"]
        matched = [(o, t) for o, t in templates if o["kind"] != "Job"
                   and selector.items() <= t["metadata"]["labels"].items()]
        assert len(matched) == 1, f"Service/{name} selects {[_object_id(o) for o, _ in matched]}"
        _, template = matched[0]
        container_ports = [p for c in template["spec"]["containers"] for p in c.get("ports", [])]
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if isinstance(target, str):
                assert target in {p.get("name") for p in container_ports}, f"Service/{name}: no port {target}"
            else:
                assert target in {p["containerPort"] for p in container_ports}, f"Service/{name}: no port {target}"

    roles = _by_kind(rendered, "Role") | _by_kind(rendered, "ClusterRole")
    for binding in list(_by_kind(rendered, "RoleBinding").values()) + list(_by_kind(rendered, "ClusterRoleBinding").values()):
        assert binding["roleRef"]["name"] in roles, _object_id(binding)
        for subject in binding["subjects"]:
            if subject["kind"] == "ServiceAccount":
                assert subject["name"] in accounts, _object_id(binding)


def test_dev_credentials_are_marked(rendered):
    kz = _kustomization()
    [gen] = kz["secretGenerator"]
    _, [source] = _generator_sources(gen)
    text = source.read_text(encoding="utf-8")
    assert "DEVELOPMENT" in text and "dev" in source.name
    secret = _by_kind(rendered, "Secret")[gen["name"]]
    assert secret["metadata"]["annotations"]["strata.io/credentials"] == "development-only"
    data, _ = _generator_sources(gen)
    assert len(data["minio-root-password"]) >= 8, "MinIO refuses root passwords under 8 characters"


ROUTER = "router"


def _assert_router_config(config, addresses: dict) -> None:
    """The router forwards HTTP only: it finds nodes in etcd and holds no store, storage or
    credentials (each request's own Authorization goes through)."""
    assert config.discovery.mode == "etcd" and addresses["discovery.etcd"].hostname == "etcd"
    assert config.auth.admin_password == "" and config.node.http_port == 8888


def _service_ports(objs) -> dict[str, set[int]]:
    return {name: {p["port"] for p in s["spec"]["ports"]} for name, s in _by_kind(objs, "Service").items()}


def _assert_hosts_resolve(config, hosts: dict[str, set[int]], where: str) -> None:
    """Every address in a role config names a known host (a Service / compose service) and a port
    it serves."""
    addresses = {
        "discovery.etcd": urlsplit(config.discovery.etcd),
        "discovery.coordinator": urlsplit("//" + config.discovery.coordinator),
        "metadata.url": urlsplit(config.metadata.url),
        "deep_storage.endpoint": urlsplit(config.deep_storage.endpoint),
    }
    if config.role == ROUTER:
        _assert_router_config(config, addresses)
        return
    default_ports = {"postgresql+psycopg": 5432, "http": 80, "https": 443}
    for field_name, url in addresses.items():
        port = url.port or default_ports.get(url.scheme)
        assert url.hostname in hosts, f"{where} {field_name}: host {url.hostname!r} is not one of {sorted(hosts)}"
        assert port in hosts[url.hostname], f"{where} {field_name}: {url.hostname} does not serve port {port}"
    assert config.discovery.mode == "etcd"
    assert config.metadata.url.startswith("postgresql")
    assert config.deep_storage.url.startswith("s3://")
    assert config.auth.enabled is True


@pytest.mark.parametrize("role", ROLES)
def test_k8s_role_configs_point_at_cluster_services(rendered, role):
    config = load_config(role, str(K8S / "config" / f"{role}.toml"), env={})
    _assert_hosts_resolve(config, _service_ports(rendered), f"k8s/config/{role}.toml")
    for key, default in DEFAULT_PORTS[role].items():
        assert getattr(config.node, key) == default, f"{role} {key}: the manifests assume the default port"
    assert config.node.host == "0.0.0.0"


@pytest.mark.parametrize("role", ROLES)
def test_k8s_configs_have_the_compose_settings(role):
    """k8s/config/*.toml are deploy/compose/*.toml adapted: the same sections and keys, except the
    per-node identity that Kubernetes sets by environment."""
    def keys(path):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return {(s, k) for s, values in data.items() for k in values} - {("node", "advertise_host"), ("node", "id")}
    assert keys(K8S / "config" / f"{role}.toml") == keys(DEPLOY / "compose" / f"{role}.toml")


def test_k8s_prometheus_discovers_annotated_pods(rendered):
    kz = _kustomization()
    gen = next(g for g in kz["configMapGenerator"] if g["name"] == "prometheus-config")
    data, _ = _generator_sources(gen)
    config = yaml.safe_load(data["prometheus.yml"])
    pod_jobs = [j for j in config["scrape_configs"]
                if any(sd.get("role") == "pod" for sd in j.get("kubernetes_sd_configs", []))]
    assert pod_jobs, "no pod-discovery scrape job"
    relabels = [r for j in pod_jobs for r in j.get("relabel_configs", [])]
    assert any(r.get("action") == "keep" and r.get("regex") == "true"
               and r.get("source_labels") == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
               for r in relabels)
    assert any(r.get("target_label") == "__metrics_path__"
               and "__meta_kubernetes_pod_annotation_prometheus_io_path" in r.get("source_labels", [])
               for r in relabels)
    assert any(r.get("target_label") == "__address__"
               and "__meta_kubernetes_pod_annotation_prometheus_io_port" in r.get("source_labels", [])
               for r in relabels)
    port_filter = next(r for r in relabels if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_name"])
    # Every annotated pod declares the annotated port under a name that the port filter keeps.
    for obj in rendered:
        for template in _pod_templates(obj):
            annotations = template["metadata"].get("annotations", {})
            if annotations.get("prometheus.io/scrape") != "true":
                continue
            ports = {p.get("name"): p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
            kept = {n: p for n, p in ports.items() if n and re.fullmatch(port_filter["regex"], n)}
            assert list(kept.values()) == [int(annotations["prometheus.io/port"])], _object_id(obj)

    # Prometheus mounts that ConfigMap, runs under a ServiceAccount allowed to list pods here.
    deployment = _by_kind(rendered, "Deployment")["prometheus"]
    spec = deployment["spec"]["template"]["spec"]
    assert any(v.get("configMap", {}).get("name") == "prometheus-config" for v in spec["volumes"])
    account = spec["serviceAccountName"]
    bindings = [b for b in _by_kind(rendered, "RoleBinding").values()
                if any(s["kind"] == "ServiceAccount" and s["name"] == account for s in b["subjects"])]
    rules = [r for b in bindings for r in _by_kind(rendered, b["roleRef"]["kind"])[b["roleRef"]["name"]]["rules"]]
    assert any("pods" in r["resources"] and {"list", "watch"} <= set(r["verbs"]) for r in rules)


# ---------------------------------------------------------------------------------------------
# docker compose
# ---------------------------------------------------------------------------------------------

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _interpolate(value, env: dict):
    """Compose's variable interpolation: $$, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        current = env.get(name)
        if op in (":-", "-"):
            return current if (current if op == ":-" else current is not None) else arg
        if op in (":?", "?"):
            if current is None or (op == ":?" and current == ""):
                raise AssertionError(f"compose needs ${name}: {arg}")
            return current
        if op in (":+", "+"):
            return arg if (current if op == ":+" else current is not None) else ""
        return current or ""
    return _VAR.sub(sub, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return _interpolate(raw, env={})  # as compose sees it with nothing set: the dev defaults


@pytest.fixture(scope="module")
def compose_schema() -> dict:
    text = package_files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text("utf-8")
    return json.loads(text)


def _validate_compose(doc: dict, schema: dict) -> list[str]:
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator_cls(schema).iter_errors(doc)]


def test_compose_validates_against_compose_spec(compose, compose_schema):
    assert compose_schema.get("title") == "Compose Specification"
    errors = _validate_compose(compose, compose_schema)
    assert not errors, "\n".join(errors)


def test_compose_schema_is_not_permissive(compose, compose_schema):
    bad = copy.deepcopy(compose)
    bad["services"]["broker"]["portz"] = ["8815:8815"]
    assert _validate_compose(bad, compose_schema)
    bad = copy.deepcopy(compose)
    bad["services"]["broker"]["depends_on"]["etcd"]["condition"] = "service_happy"
    assert _validate_compose(bad, compose_schema)


def _env_dict(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _bind_mounts(service: dict) -> dict[str, str]:
    """container path -> host path (relative to the compose file) of bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume.get("source", ""), volume["target"]
        if source.startswith((".", "/")):
            mounts[target] = source
    return mounts


def _named_volumes(service: dict) -> dict[str, str]:
    """container path -> named volume."""
    mounts = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        elif volume.get("type", "volume") == "volume":
            source, target = volume.get("source", ""), volume["target"]
        else:
            continue
        if source and not source.startswith((".", "/")):
            mounts[target] = source
    return mounts


def _compose_config(compose: dict, name: str):
    """The NodeConfig a compose service runs with: its mounted TOML plus its environment."""
    service = compose["services"][name]
    role, flag, path = service["command"]
    host_path = _bind_mounts(service)[path]
    return load_config(role, str((ROOT / host_path).resolve()), env=_env_dict(service))


def _published(service: dict) -> list[tuple[int, int]]:
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((int(port["published"]), int(port["target"])))
        else:
            parts = str(port).split("/")[0].split(":")
            out.append((int(parts[-2]), int(parts[-1])))
    return out


def test_compose_strata_services(compose):
    services = compose["services"]
    strata = {n for n, s in services.items() if s.get("image", "").startswith("strata:")}
    assert strata == set(COMPOSE_STRATA) | COMPOSE_STRATA_ONESHOT
    for name, role in COMPOSE_STRATA.items():
        service = services[name]
        command = service["command"]
        assert isinstance(command, list) and len(command) == 3, f"{name}: command {command}"
        assert command[0] == role and command[0] in ROLES and command[1] == "--config", f"{name}: {command}"
        host_path = _bind_mounts(service).get(command[2])
        assert host_path, f"{name}: {command[2]} is not mounted"
        assert (ROOT / host_path).resolve().is_relative_to((DEPLOY / "compose").resolve())
        assert (ROOT / host_path).is_file(), f"{name}: {host_path} does not exist"
        assert service.get("build") in (".", {"context": "."}), f"{name}: not built from the Dockerfile"

        env = _env_dict(service)
        _assert_strata_env_names_are_config_keys(env)
        if role == ROUTER:  # no store, storage or credentials: nothing to pass it
            assert not any(k.startswith(("STRATA_METADATA", "STRATA_AUTH", "AWS_")) for k in env), name
            continue
        for var in ("STRATA_METADATA_URL", "STRATA_AUTH_ADMIN_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env.get(var), f"{name}: {var} is not set"
        config = _compose_config(compose, name)
        assert config.auth.admin_password == env["STRATA_AUTH_ADMIN_PASSWORD"]
        assert urlsplit(config.metadata.url).password, f"{name}: the metadata URL has no password"

        check = service["healthcheck"]["test"]
        assert f"127.0.0.1:{config.node.http_port}{HEALTH_PATH}" in " ".join(check), f"{name}: healthcheck {check}"


def test_compose_historicals_have_their_own_identity_and_cache(compose):
    seen_volumes, seen_ids = set(), set()
    declared = set(compose.get("volumes", {}))
    for name, role in COMPOSE_STRATA.items():
        if role != "historical":
            continue
        config = _compose_config(compose, name)
        volume = _named_volumes(compose["services"][name]).get(config.historical.cache_dir)
        assert volume, f"{name}: no named volume at its cache_dir {config.historical.cache_dir}"
        assert volume in declared, f"{name}: volume {volume} is not declared"
        seen_volumes.add(volume)
        assert config.node_id == name and config.advertise_host == name
        seen_ids.add(config.node_id)
    assert len(seen_volumes) == 2 and len(seen_ids) == 2


def test_compose_configs_point_at_compose_services(compose):
    hosts: dict[str, set[int]] = {n: set() for n in compose["services"]}
    # What each infrastructure service listens on inside the compose network.
    hosts["etcd"] |= {2379, 2380}
    hosts["postgres"] |= {5432}
    hosts["minio"] |= {9000, 9001}
    for name in COMPOSE_STRATA:
        config = _compose_config(compose, name)
        hosts[name] |= {config.node.grpc_port, config.node.http_port, config.node.flight_port} - {0}
    for name in COMPOSE_STRATA:
        config = _compose_config(compose, name)
        _assert_hosts_resolve(config, hosts, f"compose service {name}")
        assert config.node.host == "0.0.0.0"
        if config.node.advertise_host:
            assert config.node.advertise_host == name


def test_compose_depends_on_and_healthchecks(compose):
    services = compose["services"]
    for name, service in services.items():
        depends = service.get("depends_on", {})
        targets = depends if isinstance(depends, (list, dict)) else []
        for target in targets:
            assert target in services, f"{name} depends on unknown service {target}"
            assert target != name
    for name in COMPOSE_INFRA_HEALTHCHECKED + tuple(COMPOSE_STRATA):
        assert services[name].get("healthcheck", {}).get("test"), f"{name}: no healthcheck"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    for name in COMPOSE_STRATA:
        depends = services[name]["depends_on"]
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        for infra in ("etcd", "postgres", "minio"):
            assert depends[infra]["condition"] == "service_healthy", f"{name} -> {infra}"
        assert depends["minio-init"]["condition"] == "service_completed_successfully"
        for target, spec in depends.items():
            if spec["condition"] == "service_healthy":
                assert services[target].get("healthcheck"), f"{name} waits for {target}, which has no healthcheck"
    init = services["minio-init"]
    assert init["image"].startswith("minio/mc:")
    assert "mb" in " ".join(init["command"]) and "local/strata" in " ".join(init["command"])
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"


def test_compose_published_ports(compose):
    published = {name: _published(s) for name, s in compose["services"].items() if s.get("ports")}
    assert {n: {p for p, _ in ports} for n, ports in published.items()} == COMPOSE_PUBLISHED
    for name, ports in published.items():
        for host_port, container_port in ports:
            assert host_port == container_port, f"{name}: {host_port} -> {container_port}"
        if name in COMPOSE_STRATA:
            config = _compose_config(compose, name)
            role = COMPOSE_STRATA[name]
            defaults = {v for v in DEFAULT_PORTS[role].values() if v}
            served = {config.node.grpc_port, config.node.http_port, config.node.flight_port}
            assert {c for _, c in ports} <= defaults & served, f"{name}: publishes a port it does not serve"


def test_compose_images_are_pinned(compose):
    for name, service in compose["services"].items():
        image = service["image"]
        repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        assert tag and tag != "latest", f"{name}: image {image} is not pinned"
    assert compose["services"]["postgres"]["image"].startswith("postgres:15")
    assert compose["services"]["etcd"]["image"].split(":")[0] in ("quay.io/coreos/etcd", "bitnami/etcd")


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.toml")) + sorted((K8S / "config").glob("*.toml")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_role_config_loads(path):
    assert path.stem in ROLES, f"{path.name}: name a role config after its role"
    config = load_config(path.stem, str(path), env={})
    assert config.role == path.stem


def test_deploy_has_a_config_per_role():
    assert {p.stem for p in (DEPLOY / "compose").glob("*.toml")} == set(ROLES)
    assert {p.stem for p in (K8S / "config").glob("*.toml")} == set(ROLES)


def test_compose_prometheus_scrapes_every_strata_service(compose):
    service = compose["services"]["prometheus"]
    mounts = _bind_mounts(service)
    host_path = mounts["/etc/prometheus/prometheus.yml"]
    assert (ROOT / host_path).resolve() == (DEPLOY / "prometheus" / "prometheus.yml").resolve()
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    targets: dict[str, str] = {}
    for job in config["scrape_configs"]:
        assert job["job_name"]
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                targets[target] = job.get("metrics_path", "/metrics")
    for name in COMPOSE_STRATA:
        http = _compose_config(compose, name).node.http_port
        assert targets.get(f"{name}:{http}") == METRICS_PATH, f"prometheus does not scrape {name}:{http}{METRICS_PATH}"
    for target in targets:
        host = target.rsplit(":", 1)[0]
        assert host == "localhost" or host in compose["services"], f"scrape target {target} is no compose service"


# ---------------------------------------------------------------------------------------------
# Dockerfile
# ---------------------------------------------------------------------------------------------

def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_builds_one_non_root_image_for_every_role():
    instructions = _dockerfile_instructions()
    froms = [rest for op, rest in instructions if op == "FROM"]
    assert froms and froms[-1].split()[0] == "python:3.11-slim"
    users = [rest for op, rest in instructions if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must run as non-root"
    assert users[-1].split(":")[0] == "10001"  # k8s securityContext runAsUser
    entry = [rest for op, rest in instructions if op == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["strata"]
    assert any(op == "RUN" and re.search(r"pip install\b.*\s\.(\s|$)", rest) for op, rest in instructions)
    exposed = {int(p) for op, rest in instructions if op == "EXPOSE" for p in rest.split()}
    assert exposed == {p for ports in DEFAULT_PORTS.values() for p in ports.values() if p}

    # Everything the distribution is built from is copied in, and .dockerignore lets it through.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    needed = {"pyproject.toml", pyproject["project"]["readme"]}
    needed |= {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    needed |= {"setup.py"} if (ROOT / "setup.py").exists() else set()  # compiled extensions
    copied = set()
    for op, rest in instructions:
        if op == "COPY" and "--from" not in rest:
            copied |= {Path(s).name for s in rest.split()[:-1]}
    assert needed <= copied, f"Dockerfile does not copy {needed - copied}"
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    if "*" in ignore:
        allowed = {line[1:] for line in ignore if line.startswith("!")}
        assert needed <= allowed, f".dockerignore keeps out {needed - allowed}"
    else:
        assert not needed & set(ignore)
    for heavy in (".git", ".venv"):
        assert "*" in ignore or heavy in ignore, f".dockerignore lets {heavy} into the build context"


def _dockerfile_stages() -> list[tuple[str, list[tuple[str, str]]]]:
    """(FROM's argument, the stage's instructions) per build stage, in order."""
    stages: list[tuple[str, list[tuple[str, str]]]] = []
    for op, rest in _dockerfile_instructions():
        if op == "FROM":
            stages.append((rest, []))
        elif stages:
            stages[-1][1].append((op, rest))
    return stages


def test_dockerfile_installs_the_console_chart_library_from_the_lock_file():
    """The image's console has its charts: uPlot comes from npm exactly as the lock file pins it
    (npm ci, the flags scripts/bootstrap.sh uses), in a stage of its own, and is copied into the
    source tree before pip install, whose package-data carries the files the router serves."""
    from fnmatch import fnmatch

    from services.router.console_files import VENDOR_FILES

    stages = _dockerfile_stages()
    npm_stages = [(head, steps) for head, steps in stages
                  if any(op == "RUN" and re.search(r"\bnpm ci\b", rest) for op, rest in steps)]
    assert len(npm_stages) == 1, "one stage runs npm ci for the console"
    head, steps = npm_stages[0]
    alias = head.split()[-1]
    assert re.fullmatch(r"\S+\s+AS\s+\S+", head, re.IGNORECASE), f"the npm stage needs a name: FROM {head}"
    copies = [i for i, (op, rest) in enumerate(steps) if op == "COPY" and "package-lock.json" in rest]
    npm_ci = next(i for i, (op, rest) in enumerate(steps) if op == "RUN" and "npm ci" in rest)
    assert copies and copies[0] < npm_ci, "npm ci needs the lock file copied first"
    sources = steps[copies[0]][1].split()[:-1]
    assert {"services/router/console/package.json", "services/router/console/package-lock.json"} <= set(sources)
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    flags = set(re.search(r"npm ci ([^)\n]*)", bootstrap).group(1).split()) - {"--silent"}
    assert flags <= set(steps[npm_ci][1].split()), "the image installs as scripts/bootstrap.sh does"

    final = stages[-1][1]
    vendor = next((i for i, (op, rest) in enumerate(final) if op == "COPY" and f"--from={alias}" in rest), None)
    assert vendor is not None, "the final stage copies the installed node_modules"
    destination = final[vendor][1].split()[-1]
    assert Path(destination).as_posix().removeprefix("./") == "services/router/console/node_modules"
    install = next(i for i, (op, rest) in enumerate(final)
                   if op == "RUN" and re.search(r"pip install\b.*\s\.(\s|$)", rest))
    assert vendor < install, "node_modules must be in the tree when pip install builds the package"

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["services.router"]
    for installed in VENDOR_FILES.values():
        path = f"console/node_modules/{installed}"
        assert any(fnmatch(path, g) for g in globs), f"package-data leaves out {path}: the image would have no charts"


# ---------------------------------------------------------------------------------------------
# Tiers: the historicals of each deployment and the _default rules that place segments on them
# ---------------------------------------------------------------------------------------------

def _rule_tiers(path: Path) -> set[str]:
    from services.coordinator.core.rules import rules_from_json

    rules = json.loads(path.read_text(encoding="utf-8"))
    rules_from_json(rules)  # valid, or the error names the rule and field
    return {t for r in rules for t in r.get("tieredReplicants", {})}


def test_compose_runs_a_historical_per_tier_and_sets_rules_for_them(compose):
    tiers = {_compose_config(compose, n).historical.tier for n, r in COMPOSE_STRATA.items() if r == "historical"}
    assert tiers == TIERS
    rules = compose["services"]["rules"]
    command = rules["command"]
    assert command[0] == "rules" and "set" in command and "_default" in command
    assert command[command.index("--coordinator-http") + 1] == "http://coordinator:8081"
    rules_file = command[command.index("--rules") + 1]
    host_path = _bind_mounts(rules)[rules_file]
    assert _rule_tiers(ROOT / host_path) == TIERS, "the _default rules must place segments on the tiers run"
    assert rules["depends_on"]["coordinator"]["condition"] == "service_healthy"
    assert rules["restart"] == "no"
    assert rules["environment"]["STRATA_PASSWORD"] == compose["services"]["coordinator"]["environment"][
        "STRATA_AUTH_ADMIN_PASSWORD"]


def test_k8s_default_rules_job_names_the_tiers_run(rendered):
    job = _by_kind(rendered, "Job")["strata-default-rules"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[0] == "rules" and args[args.index("--coordinator-http") + 1] == "http://coordinator:8081"
    rules_file = Path(args[args.index("--rules") + 1])
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == mounts[str(rules_file.parent)])
    data = _by_kind(rendered, "ConfigMap")[volume["configMap"]["name"]]["data"]
    assert json.loads(data[rules_file.name]) == json.loads((K8S / "config" / "default-rules.json").read_text())
    assert _rule_tiers(K8S / "config" / "default-rules.json") == TIERS
    # The compose and k8s rule files say the same.
    assert (K8S / "config" / "default-rules.json").read_text() == (DEPLOY / "compose" / "default-rules.json").read_text()
