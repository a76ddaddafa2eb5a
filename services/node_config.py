"""NodeConfig: one TOML file configures any strata role; ``STRATA_<SECTION>_<KEY>`` env vars override.

    [node]            host, advertise_host, grpc_port, http_port, flight_port, id
    [discovery]       mode = "embedded" | "etcd"; etcd = "http://host:2379"; coordinator = "host:port"
    [metadata]        url = "sqlite:///path.db" | "postgresql+psycopg://user:pw@host/db"
    [deep_storage]    url = "file:///dir" | "s3://bucket/prefix"; endpoint; region
    [historical]      cache_dir; max_cache_bytes; query_threads; decompressed_cache_bytes; max_query_bytes;
                      tier (default "_default_tier"; retention rules place replicas per tier)
    [coordinator]     replication (0 = 2 when two or more historicals, else 1); duty_period_ms; state_dir; max_running_tasks;
                      warm_task_drivers; give_up_expiry_ms; kill_unused_after_ms (0 = no automatic kill);
                      max_kill_per_run; kill_period_ms; replication_throttle_limit;
                      auto_compaction; max_compaction_tasks
    [broker]          tier_preference ("hot,cold": read from replicas on these tiers first); query_timeout_ms; query_log_entries; query_log_max_age_s; query_log_file;
                      query_log_file_bytes; query_log_file_backups; max_query_bytes; prefetch_results
    [auth]            enabled; admin_user; admin_password; users_file; token_ttl_s; internal_secret
    [tls]             cert; key; ca (PEM text; as cert_file/key_file/ca_file: read from those files); mtls

S3 credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, never from the file.

Secrets need not sit in the file or in a plain variable: any key can instead be read from a file
named by ``<key>_file`` in the TOML or by ``STRATA_<SECTION>_<KEY>_FILE`` (a mounted Kubernetes
Secret or Docker secret), e.g. STRATA_AUTH_ADMIN_PASSWORD_FILE=/run/secrets/admin-password or
STRATA_METADATA_URL_FILE. The file's content, without its final newline, is the value. Order:
STRATA_<SECTION>_<KEY>, then STRATA_<SECTION>_<KEY>_FILE, then ``key``, then ``key_file``.

[auth] is off unless ``enabled = true`` (the embedded quickstart leaves it off; compose and k8s turn
it on). On, every REST route but /status/ready, /status/health, /status/live and /metrics and every Flight SQL
call needs Basic credentials or a bearer token. ``admin_user``/``admin_password`` (give the
password by env: STRATA_AUTH_ADMIN_PASSWORD) name the admin, who holds every permission;
``users_file`` is an optional TOML file of further users and their READ/WRITE grants on datasources
and input tables (format: deploy/users.toml.example, services/security/basic_authorizer.py);
``token_ttl_s`` is how long an issued bearer token stays valid. ``internal_secret`` is the
credential nodes send each other (historical RunQuery, coordinator publish and tasks, discovery);
unset, it is derived from the admin password (services/transport_security.py).

[tls] turns on TLS for gRPC, Flight (grpc+tls://) and HTTP (https) when cert and key are set;
``ca`` is what this node's clients verify other nodes with (the system roots when empty).
``mtls = true`` makes each node's certificate its internal credential (services/transport_security.py).
"""

from __future__ import annotations

import os
import socket
import tomllib
from dataclasses import dataclass, field, fields, replace

from common.errors import ValidationError

ROLES = ("coordinator", "broker", "historical", "router")

# Druid's HTTP ports where Druid has them; gRPC and Flight next to them.
DEFAULT_PORTS = {
    "coordinator": {"grpc_port": 8091, "http_port": 8081, "flight_port": 0},
    "broker": {"grpc_port": 8082, "http_port": 8092, "flight_port": 8815},
    "historical": {"grpc_port": 8083, "http_port": 8093, "flight_port": 0},
    "router": {"grpc_port": 0, "http_port": 8888, "flight_port": 0},  # HTTP only: the console and proxy
}


@dataclass(frozen=True)
class NodeSection:
    id: str = ""
    host: str = "127.0.0.1"
    advertise_host: str = ""
    grpc_port: int = 0
    http_port: int = 0
    flight_port: int = 0


@dataclass(frozen=True)
class DiscoverySection:
    mode: str = "embedded"
    etcd: str = ""
    coordinator: str = "127.0.0.1:8091"
    lease_ttl_s: int = 10


@dataclass(frozen=True)
class MetadataSection:
    url: str = "sqlite:///var/strata/metadata.db"


@dataclass(frozen=True)
class DeepStorageSection:
    url: str = "var/strata/deep-storage"
    endpoint: str = ""
    region: str = ""


@dataclass(frozen=True)
class HistoricalSection:
    cache_dir: str = "var/strata/segment-cache"
    max_cache_bytes: int = 10 * 1024**3
    query_threads: int = 0  # 0: one per core
    # Memory for decoded compressed segment parts, shared by every served segment (LRU by bytes).
    decompressed_cache_bytes: int = 1024**3
    # What one query may hold here (groups, scanned rows, partials); a query's maxBytesInMemory
    # context key may lower it, never raise it (common/query/memory_budget.py).
    max_query_bytes: int = 2 << 30
    # The tier this historical belongs to: load rules say how many replicas each tier holds.
    tier: str = "_default_tier"


@dataclass(frozen=True)
class CoordinatorSection:
    replication: int = 0
    duty_period_ms: int = 1000
    state_dir: str = "var/strata/coordinator"  # embedded discovery keeps its assignments here; task logs
    max_running_tasks: int = 2
    # Warm task drivers kept ready (one JVM and SparkSession each): a small INSERT then runs in
    # about a second instead of paying a JVM start. 0: every task starts its own process (and JVM).
    warm_task_drivers: int = 0
    # Compact time chunks whose projections differ from the catalog's, at most this many at once.
    auto_compaction: bool = False
    max_compaction_tasks: int = 1
    # A historical that failed a segment 3 times in a row (the segment then moved elsewhere) is
    # passed over for it this long after its last failure; then it may be given it again.
    give_up_expiry_ms: int = 300_000
    # Automatic kill (0 = off, as Druid's default): delete segments unused for this long from deep
    # storage and the metadata store, at most max_kill_per_run each kill_period_ms.
    kill_unused_after_ms: int = 0
    max_kill_per_run: int = 100
    kill_period_ms: int = 3_600_000
    # Druid's replicationThrottleLimit: per tier, copies of segments already served elsewhere
    # (replicas after a rule change, reloads in another shape) loading at once at most.
    replication_throttle_limit: int = 500


@dataclass(frozen=True)
class BrokerSection:
    query_timeout_ms: int = 300_000
    # What one query may hold on the broker (historicals' partials and their merge); a query's
    # maxBytesInMemory context key may lower it, never raise it.
    max_query_bytes: int = 2 << 30
    # The query log (sys.queries): finished queries kept in memory, by count and by age, and a
    # rotating JSON-lines file for log shippers ("" = no file).
    query_log_entries: int = 10_000
    query_log_max_age_s: int = 3600
    query_log_file: str = ""
    query_log_file_bytes: int = 64 << 20
    query_log_file_backups: int = 5
    column_type_merge_policy: str = "leastRestrictive"  # or latestInterval, fail (segments that disagree on a type)
    # Tiers queries prefer, most preferred first ("hot,cold"): a segment is read from a replica on
    # the first listed tier holding it; "" reads from any replica.
    tier_preference: str = ""
    schema_conflicts: str = "widen"  # ingestion default of schemaConflicts: widen, or fail on ambiguous input types
    # Flight SQL: start a read query at GetFlightInfo (at most 8 at once), not at DoGet, so the
    # client's round trip overlaps the historicals' work. Off by default: on an idle machine the
    # thread hand-off cost a one-segment query more broker CPU than the overlap saved
    # (docs/benchmarks.md); it pays for multi-historical queries under load.
    prefetch_results: bool = False


@dataclass(frozen=True)
class AuthSection:
    enabled: bool = False
    admin_user: str = "admin"
    admin_password: str = field(default="", repr=False)  # never in a printed or logged config
    users_file: str = ""  # TOML [[users]] with grants; see services/security/basic_authorizer.py
    token_ttl_s: int = 3600
    internal_secret: str = field(default="", repr=False)  # "" = derived from admin_password


@dataclass(frozen=True)
class TlsSection:
    # PEM text; ``cert_file = "/path/server.pem"`` (or STRATA_TLS_CERT_FILE) reads it from a file.
    cert: str = field(default="", repr=False)
    key: str = field(default="", repr=False)
    ca: str = field(default="", repr=False)
    mtls: bool = False  # nodes present their cert as a client certificate: the internal credential


@dataclass(frozen=True)
class NodeConfig:
    role: str
    node: NodeSection = field(default_factory=NodeSection)
    discovery: DiscoverySection = field(default_factory=DiscoverySection)
    metadata: MetadataSection = field(default_factory=MetadataSection)
    deep_storage: DeepStorageSection = field(default_factory=DeepStorageSection)
    historical: HistoricalSection = field(default_factory=HistoricalSection)
    coordinator: CoordinatorSection = field(default_factory=CoordinatorSection)
    broker: BrokerSection = field(default_factory=BrokerSection)
    auth: AuthSection = field(default_factory=AuthSection)
    tls: TlsSection = field(default_factory=TlsSection)

    @property
    def node_id(self) -> str:
        return self.node.id or f"{self.role}-{self.advertise_host}-{self.node.grpc_port}"

    @property
    def advertise_host(self) -> str:
        if self.node.advertise_host:
            return self.node.advertise_host
        return self.node.host if self.node.host not in ("0.0.0.0", "::") else socket.gethostname()


_SECTIONS = {f.name: f.type for f in fields(NodeConfig) if f.name != "role"}


def _coerce(section: str, key: str, raw, default):
    try:
        if isinstance(default, bool):
            return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"config [{section}] {key}: expected {type(default).__name__}, got {raw!r}") from None


def _value(env, section: str, key: str, given: dict):
    """A key's raw value: its variable, its variable's file, the TOML key, the TOML key's file."""
    name = f"STRATA_{section.upper()}_{key.upper()}"
    if name in env:
        return env[name]
    if f"{name}_FILE" in env:
        return _secret_file(env[f"{name}_FILE"], f"{name}_FILE")
    if key in given:
        return given[key]
    if f"{key}_file" in given:
        return _secret_file(given[f"{key}_file"], f"config [{section}] {key}_file")
    return None


def _secret_file(path, where: str) -> str:
    # The error names the setting and the path, never the content.
    if not isinstance(path, str) or not path:
        raise ValidationError(f"{where} must be the path of a file holding the value")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ValidationError(f"{where}: cannot read '{path}' ({exc.strerror or exc}); the file must exist and be "
                              "readable by this process") from None
    return text.removesuffix("\n").removesuffix("\r")


def load_config(role: str, path: str | None = None, env: dict | None = None) -> NodeConfig:
    """Defaults, then the TOML file, then STRATA_<SECTION>_<KEY> environment variables."""
    if role not in ROLES:
        raise ValidationError(f"unknown role '{role}'; valid roles: {', '.join(ROLES)}")
    env = os.environ if env is None else env
    data: dict = {}
    if path:
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ValidationError(f"config file '{path}' does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValidationError(f"config file '{path}' is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise ValidationError(f"config file '{path}': unknown sections {unknown}; valid: {', '.join(_SECTIONS)}")
    config = NodeConfig(role=role)
    for section in _SECTIONS:
        current = getattr(config, section)
        values = {}
        valid = {f.name: getattr(current, f.name) for f in fields(current)}
        given = data.get(section, {})
        bad = sorted(set(given) - set(valid) - {f"{k}_file" for k in valid})
        if bad:
            raise ValidationError(f"config [{section}]: unknown keys {bad}; valid: {', '.join(valid)} "
                                  "(each also as <key>_file: a file holding the value)")
        for key, default in valid.items():
            raw = _value(env, section, key, given)
            if raw is not None:
                values[key] = _coerce(section, key, raw, default)
        config = replace(config, **{section: replace(current, **values)})
    ports = {k: v for k, v in DEFAULT_PORTS[role].items()
             if getattr(config.node, k) == 0 and f"STRATA_NODE_{k.upper()}" not in env
             and k not in data.get("node", {})}
    if ports:
        config = replace(config, node=replace(config.node, **ports))
    if config.discovery.mode not in ("embedded", "etcd"):
        raise ValidationError(f"config [discovery] mode: '{config.discovery.mode}' is not embedded or etcd")
    if config.discovery.mode == "etcd" and not config.discovery.etcd:
        raise ValidationError("config [discovery]: mode 'etcd' needs etcd = \"http://host:2379\"")
    return config
