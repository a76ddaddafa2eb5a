"""Coordinator process wiring: metadata store, discovery (hosting the embedded store when there is
no etcd), leader election, the duty loop, gRPC and HTTP."""

from __future__ import annotations

import json
import os

from services.coordinator.assignment_journal import AssignmentJournal
from services.coordinator.catalog_server import install_catalog
from services.coordinator.duty_runner import ClusterState, DutyRunner
from services.coordinator.kafka_lag_monitor import KafkaLagMonitor
from services.coordinator import rules_http, segment_lifecycle_http, supervisor_http, task_log_http
from services.coordinator.core.kill_plan import parse_kill_spec
from services.coordinator.segment_lifecycle import AutoKill, SegmentLifecycle
from services.coordinator.core.rules import DEFAULT_TIER
from services.coordinator.rule_store import RuleStore
from services.coordinator.server import CoordinatorServicer, add_to_server
from services.coordinator.store import SegmentStore
from services.coordinator.task_metrics import TaskMetrics
from services.coordinator.task_runner import TaskRunner
from services.coordinator.task_store import TaskStore
from services.discovery import Announcer, LeaderElection, MemoryStore, discovery_from_config, node_key
from services.discovery.keys import nodes_prefix
from services.discovery import embedded_service
from services.grpc_server import GrpcServer
from services.coordinator.supervisor_manager import SupervisorManager
from services.coordinator.supervisor_store import SupervisorStore
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.node_process import NodeProcess
from services.rpc.gen.strata.v1 import discovery_pb2
from services.transport_security import task_env
from services.security.authorizer import Unauthenticated, authorizer_from_config, is_admin
from services.coordinator.druid_datasources import DruidDatasourcesApi


class CoordinatorProcess(NodeProcess):
    role = "coordinator"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.metrics = Metrics(self.role)
        self.store = SegmentStore(config.metadata.url)
        self.authorizer = authorizer_from_config(config)  # ALLOW_ALL unless [auth] enabled
        # Internal services need the cluster's credential; the admin's own credentials do too
        # (the command line publishes and follows tasks as the admin).
        self.grpc = GrpcServer(config.node.host, config.node.grpc_port, security=self.security,
                               also_accept=self._admit, role="coordinator")
        self.memory_store = None
        self._discovery_servicer = None
        self.journal = None
        if config.discovery.mode == "embedded":
            self.memory_store = MemoryStore()
            self._discovery_servicer = embedded_service.add_to_server(self.grpc.server, self.memory_store)
            self.grpc._services.append(discovery_pb2.DESCRIPTOR.services_by_name["DiscoveryService"].full_name)
        self.discovery = discovery_from_config(config, local_store=self.memory_store)
        if self.memory_store is not None:
            self.journal = AssignmentJournal(config.coordinator.state_dir, self.memory_store, self.discovery)
        self.rules = RuleStore(self.store, config.coordinator.replication)
        self.runner = DutyRunner(self.store, self.discovery, self.metrics, config.coordinator.replication,
                                 config.coordinator.duty_period_ms, config.coordinator.give_up_expiry_ms, self.rules,
                                 config.coordinator.replication_throttle_limit)
        self.task_metrics = TaskMetrics(self.metrics)
        self.tasks = TaskStore(self.store, on_final=self.task_metrics.on_final)
        self.task_metrics.tasks = self.tasks
        self.runner.extra_duties.append(self.task_metrics.refresh)
        self.task_runner = TaskRunner(self.tasks, lambda: f"127.0.0.1:{self.grpc.port}",
                                      os.path.join(config.coordinator.state_dir, "tasks"),
                                      {**_task_env(config), **task_env(self.security)},
                                      config.coordinator.max_running_tasks,
                                      storage_factory=lambda: _deep_storage(config),
                                      warm_drivers=config.coordinator.warm_task_drivers,
                                      leadership_fresh=lambda: self.election is not None and self.election.is_leader_now(),
                                      local_tasks={"kill": self._run_kill_task})
        servicer = CoordinatorServicer(self.store, self.discovery, self.metrics, self.runner, self.tasks,
                                       self.task_runner, caller=self._task_caller, authorizer=self.authorizer)
        add_to_server(self.grpc, servicer)
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health, self.authorizer,
                                 self.security.http_server_context() if self.security.serves_tls else None)
        self.id = self.node_id(self.grpc.port)
        install_catalog(self)  # the table catalog: gRPC CatalogService and the REST API on the HTTP port
        DruidDatasourcesApi(self.store, self.authorizer, self._replica_tiers).install(self.http)  # Druid's datasource listings
        rules_http.register(self.http, self.rules, self.authorizer, self._tiers)
        self.lifecycle = SegmentLifecycle(self.store, lambda: _deep_storage(config))
        segment_lifecycle_http.register(self.http, self.lifecycle, self.authorizer)
        self.supervisors = SupervisorStore(self.store)
        self.lag_monitor = KafkaLagMonitor(self.supervisors, self.metrics,
                                           lambda: self.runner.is_leader and self.runner.leadership_fresh())
        servicer.supervisor_lag = self.lag_monitor.snapshot
        task_log_http.register(self.http, self.tasks, self.task_runner.log_path, self.authorizer)  # Druid's task log
        supervisor_http.register(self.http, self.supervisors, self.authorizer,
                                 lambda sid: [t for t in self.tasks.list(sid) if t.type == "kafka"],
                                 lag=self.lag_monitor.snapshot)
        self.runner.extra_duties.append(SupervisorManager(self.supervisors, self.tasks, self.task_runner,
                                                          partitions=self.lag_monitor.partitions).run_once)
        if config.coordinator.kill_unused_after_ms > 0:
            self.runner.extra_duties.append(AutoKill(self.lifecycle, config.coordinator.kill_unused_after_ms,
                                                     config.coordinator.max_kill_per_run,
                                                     config.coordinator.kill_period_ms))
        if config.coordinator.auto_compaction:
            from services.coordinator.compaction_scheduler import CompactionScheduler

            scheduler = CompactionScheduler(self.store, self.tasks, self.catalog, config.coordinator.max_compaction_tasks)
            self.runner.extra_duties.append(scheduler.run_once)
        self.election = None
        self.runner.leadership_fresh = lambda: self.election is not None and self.election.is_leader_now()
        self.announcer = Announcer(self.discovery, config.discovery.lease_ttl_s)

    def _run_kill_task(self, task, should_stop):
        return self.lifecycle.run_kill_task(parse_kill_spec(task.spec), should_stop)

    # ---- who may call: nodes (the internal credential), the admin, users on the task calls ----
    def _user(self, metadata: dict) -> str | None:
        if "authorization" not in metadata:
            raise Unauthenticated("no credentials")
        return self.authorizer.user_from_headers({"Authorization": metadata["authorization"]})

    def _admit(self, method: str, metadata: dict) -> bool:
        user = self._user(metadata)  # raises (not admitted) on wrong credentials
        return is_admin(self.authorizer, user) or method.rsplit("/", 1)[-1] in USER_TASK_CALLS

    def _task_caller(self, context) -> str | None:
        """None for a trusted caller; else the user, whose grants the task calls check."""
        if not self.authorizer.enabled:
            return None
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        if self.grpc.credential is not None and self.grpc.credential.internal_call(context):
            return None
        user = self._user(metadata)
        return None if is_admin(self.authorizer, user) else user

    def _leadership(self, is_leader: bool, _leader) -> None:
        self.runner.set_leader(is_leader)
        self.task_runner.set_leader(is_leader)
        if not is_leader:
            self.task_metrics.clear()

    def _replica_tiers(self) -> dict:
        """SegmentId -> the tier of each historical serving it, from what discovery says now."""
        state = ClusterState(self.discovery)
        out: dict = {}
        for server, served in state.served.items():
            tier = str(state.historicals.get(server, {}).get("tier") or DEFAULT_TIER)
            for sid in served:
                out.setdefault(sid, []).append(tier)
        return out

    def _tiers(self) -> set[str]:
        """The tiers historicals announce right now."""
        return {str(json.loads(v).get("tier") or DEFAULT_TIER)
                for v in self.discovery.get_prefix(nodes_prefix("historical")).values()}

    def health(self) -> dict:
        leader = self.runner.is_leader and self.runner.leadership_fresh()  # not a stale lease after a pause
        return {"healthy": True, "role": self.role, "id": self.id, "leader": leader,
                "last_duty_run_ms": self.runner.last_run_ms}

    def endpoints(self) -> dict:
        return {"grpc": f"{self.config.advertise_host}:{self.grpc.port}",
                "http": f"{self.security.http_scheme}://{self.config.advertise_host}:{self.http.port}"}

    def start(self) -> CoordinatorProcess:
        if self.journal is not None:
            self.journal.restore()
        self.grpc.start()
        self.http.start()
        if self.journal is not None:
            self.journal.start()
        info = self.server_info(self.id, self.grpc.port, self.http.port)
        self.announcer.set(node_key("coordinator", self.id), json.dumps(info).encode())
        self.runner.start()
        self.task_runner.start()
        self.lag_monitor.start()
        # Campaigning starts on construction; only the leader runs duties and tasks.
        self.election = LeaderElection(self.discovery, "coordinator", self.id, self._leadership,
                                       ttl_s=self.config.discovery.lease_ttl_s)
        return self

    def stop(self) -> None:
        super().stop()
        self.runner.stop()
        self.task_runner.stop()
        self.lag_monitor.stop()
        if self.election is not None:
            self.election.close()
        self.announcer.close()
        if self.journal is not None:
            self.journal.stop()
        self.http.stop()
        self.grpc.stop()
        if self._discovery_servicer is not None:
            self._discovery_servicer.close()
        self.discovery.close()
        self.store.close()


# Calls a user (not only the admin) may make on the coordinator; the servicer checks their grants
# (a compact task needs WRITE on its datasource; tasks are seen with READ, canceled with WRITE).
USER_TASK_CALLS = ("SubmitTask", "GetTask", "ListTasks", "CancelTask")


def _deep_storage(config):
    """Deep storage, for deleting what dead tasks uploaded (made on first use: an S3 endpoint
    down at startup must not stop the coordinator)."""
    from services.deep_storage import deep_storage_from_config

    return deep_storage_from_config(config.deep_storage)


def _task_env(config) -> dict[str, str]:
    """What a task process needs to reach deep storage (credentials come from the environment)."""
    return {"STRATA_DEEP_STORAGE_URL": config.deep_storage.url,
            "STRATA_DEEP_STORAGE_ENDPOINT": config.deep_storage.endpoint,
            "STRATA_DEEP_STORAGE_REGION": config.deep_storage.region}
