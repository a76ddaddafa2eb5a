"""The coordinator's gRPC edge: publishing and listing segments, servers and load status.

Handlers raise typed errors (common/errors.py); GrpcServer's ErrorStatusInterceptor answers each
with its kind's status, so a bad request is INVALID_ARGUMENT, an unknown task NOT_FOUND, a
missing grant PERMISSION_DENIED, and only a real failure INTERNAL."""

from __future__ import annotations

import json
import threading

from common.errors import StrataError, UnsupportedError, ValidationError, status_of
from common.json.json_text import loads_json
from common.segment.time_partitioner import new_version
from common.segment.timeline import TimelineSegment
from services.coordinator.core.allocation import PartitionLedger
from services.coordinator.core.kill_plan import parse_kill_spec
from services.coordinator.core.rules import DEFAULT_DATASOURCE, default_rules, rules_to_json
from services.coordinator.duty_runner import ClusterState
from services.coordinator.store import SegmentRecord
from services.coordinator.supervisor_http import state_of as supervisor_state
from services.coordinator.supervisor_store import SupervisorStore
from services.discovery.keys import leader_key, nodes_prefix
from services.rpc.convert import (descriptor_from_proto, descriptor_to_proto, interval_from_proto, interval_to_proto,
                                  segment_id_from_proto, segment_id_to_proto, server_info_to_proto, task_to_proto)
from services.rpc.gen.strata.v1 import coordinator_pb2, coordinator_pb2_grpc


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServiceServicer):
    def __init__(self, store, discovery, metrics, runner, tasks=None, task_runner=None, *,
                 caller=None, authorizer=None) -> None:
        # ``caller(context)``: None for a trusted caller (a node with the internal credential, the
        # admin, or anyone while auth is off), else the authenticated user, who reaches only the
        # task calls (see services/transport_security.py) and is authorized here.
        self.caller = caller or (lambda _context: None)
        self.authorizer = authorizer  # given with ``caller``: checks a user's grants on task calls
        self.store = store
        self.discovery = discovery
        self.metrics = metrics
        self.runner = runner
        self.tasks = tasks
        self.task_runner = task_runner
        # supervisor id -> the lag monitor's LagSnapshot (its broker contact feeds health), or None
        self.supervisor_lag = lambda _supervisor_id: None
        self._allocation_lock = threading.Lock()
        self._ledger = PartitionLedger()  # partitions handed out to running appends

    def PublishSegments(self, request, context):
        try:
            records = [SegmentRecord.from_descriptor(descriptor_from_proto(m)) for m in request.segments]
            replace = None
            if request.replace_datasource:
                replace = (request.replace_datasource, [interval_from_proto(i) for i in request.replace_intervals])
            if request.HasField("stream"):
                if replace is not None:
                    raise ValidationError("a stream publish cannot replace intervals; it only appends")
                stream = request.stream
                published = SupervisorStore(self.store).publish_with_offsets(
                    records, stream.datasource, stream.topic, dict(stream.start), dict(stream.end),
                    task_id=request.task_id or None)
            else:
                expected = [segment_id_from_proto(s) for s in request.replace_expected] \
                    if request.check_replace_expected else None
                published = self.store.publish(records, replace=replace, task_id=request.task_id or None,
                                               expected=expected)
        except StrataError as exc:  # leaves with its kind's status (services/grpc_server.ErrorStatusInterceptor)
            self.metrics.publishes.labels("rejected" if status_of(exc.kind).user_error else "failed").inc()
            raise
        self.metrics.publishes.labels("ok").inc()
        self.metrics.published_segments.inc(published)
        if published:
            self.runner.wake()  # assign the new segments now, not at the next duty pass
        return coordinator_pb2.PublishSegmentsResponse(published=published)

    def ListSegments(self, request, context):
        records = self.store.list(request.datasource or None, request.include_unused)
        return coordinator_pb2.ListSegmentsResponse(segments=[
            coordinator_pb2.SegmentRecord(descriptor=descriptor_to_proto(r.descriptor()), used=r.used,
                                          created_ms=r.created_ms, realtime=r.realtime) for r in records])

    def MarkUnused(self, request, context):
        if request.ids:
            marked = self.store.mark_unused([segment_id_from_proto(s) for s in request.ids])
        elif request.datasource and request.HasField("interval"):
            marked = self.store.mark_unused_in_interval(request.datasource, interval_from_proto(request.interval))
        else:
            raise ValidationError("MarkUnused needs segment ids, or a datasource and interval")
        return coordinator_pb2.MarkUnusedResponse(marked=marked)

    def ListRules(self, request, context):
        stored = self.runner.rules.all() if self.runner.rules is not None else {
            DEFAULT_DATASOURCE: default_rules(self.runner.replication)}
        return coordinator_pb2.ListRulesResponse(
            rules_json=json.dumps({ds: rules_to_json(r) for ds, r in sorted(stored.items())}))

    def ListSupervisors(self, request, context):
        rows = []
        for r in SupervisorStore(self.store).list():
            mine = [t for t in self.tasks.list(r.id) if t.type == "kafka"] if self.tasks else []
            state, detailed, healthy = supervisor_state(r, mine, self.supervisor_lag(r.id))
            rows.append({"supervisor_id": r.id, "state": state, "detailed_state": detailed, "healthy": int(healthy),
                         "type": "kafka", "source": r.spec.topic, "suspended": int(r.suspended),
                         "spec": json.dumps(r.spec.redacted_json())})
        return coordinator_pb2.ListSupervisorsResponse(supervisors_json=json.dumps(rows))

    def ListServers(self, request, context):
        state = ClusterState(self.discovery)
        out = []
        for key, value in sorted(self.discovery.get_prefix(nodes_prefix()).items()):
            info = json.loads(value)
            served = state.served.get(info.get("id", ""), {})
            out.append(coordinator_pb2.ServerStatus(info=server_info_to_proto(info),
                                                    served=[segment_id_to_proto(s) for s in sorted(served)],
                                                    served_bytes=sum(d.size for d in served.values())))
        leader = self.discovery.get_prefix(leader_key("coordinator"))
        return coordinator_pb2.ListServersResponse(servers=out, leader=next(iter(leader.values()), b"").decode())

    def GetLoadStatus(self, request, context):
        state = ClusterState(self.discovery)
        where: dict = {}
        for server, served in state.served.items():
            for sid in served:
                where.setdefault(sid, []).append(server)
        records = self.store.list(request.datasource or None)
        # What each segment's retention rule wants, capped by the servers of each tier.
        params = self.runner.snapshot({r.id: r.descriptor() for r in records}, state)
        out = []
        for r in records:
            out.append(coordinator_pb2.SegmentLoad(id=segment_id_to_proto(r.id), servers=sorted(where.get(r.id, [])),
                                                   wanted_replicas=params.achievable(r.id)))
        return coordinator_pb2.LoadStatusResponse(segments=out)


    # ---- ingestion tasks --------------------------------------------------------------------
    def AllocateSegments(self, request, context):
        existing = [TimelineSegment(r.id, r.num_partitions) for r in self.store.list(request.datasource)]
        intervals = [interval_from_proto(i) for i in request.intervals]
        if request.partitions and len(request.partitions) != len(intervals):
            raise ValidationError(f"AllocateSegments got {len(request.partitions)} partition counts for "
                                  f"{len(intervals)} intervals; send one per interval, or none")
        counts = dict(zip(intervals, request.partitions)) if request.partitions else None
        with self._allocation_lock:
            allocations = self._ledger.allocate(existing, intervals, request.mode, new_version(), counts)
        return coordinator_pb2.AllocateSegmentsResponse(allocations=[
            coordinator_pb2.Allocation(interval=interval_to_proto(a.interval), version=a.version,
                                       first_partition=a.first_partition, core_partitions=a.core_partitions)
            for a in allocations])

    def _need_tasks(self, context):
        if self.tasks is None:
            raise UnsupportedError("this coordinator does not run tasks")

    def _authorize_task(self, context, datasource: str, action: str) -> None:
        user = self.caller(context)
        if user is not None and not self._may(user, action, datasource):
            wanted = "READ or WRITE" if action == "READ" else action
            raise PermissionError(f"user '{user}' may not {wanted} datasource '{datasource}'")

    def _may(self, user: str, action: str, datasource: str) -> bool:
        # Following a task (READ) is open to whoever may read or write its datasource: a writer
        # waits on the compaction they submitted.
        actions = ("READ", "WRITE") if action == "READ" else (action,)
        return any(self.authorizer.can(user, a, "DATASOURCE", datasource) for a in actions)

    def SubmitTask(self, request, context):
        self._need_tasks(context)
        user = self.caller(context)
        if user is not None and request.type not in ("compact", "kill"):
            # An INSERT reads input tables the broker authorizes: users submit it through SQL.
            raise PermissionError(f"user '{user}' may submit only compact and kill tasks here; run "
                                  f"{request.type or 'ingestion'} statements through the broker (SQL)")
        self._authorize_task(context, request.datasource, "WRITE")
        spec = loads_json(request.spec_json or "{}", "task spec_json")
        if not isinstance(spec, dict):
            raise ValidationError(f"task spec_json must be a JSON object, got a {type(spec).__name__}")
        if not request.datasource:
            raise ValidationError("SubmitTask needs a datasource")
        if request.type == "kill":
            # Validated before a task exists, so a bad payload is the submitter's error, not a FAILED task.
            kill = parse_kill_spec({**spec, "dataSource": spec.get("dataSource", request.datasource)})
            if kill.datasource != request.datasource:
                raise ValidationError(f"kill task: 'dataSource' {kill.datasource!r} differs from the task's "
                                      f"datasource {request.datasource!r}")
            spec = kill.to_json()
        task = self.tasks.create(request.datasource, request.type, request.statement, spec)
        if self.task_runner is not None:
            self.task_runner.wake()  # start it now, not at the next pass
        return task_to_proto(task)

    def GetTask(self, request, context):
        self._need_tasks(context)
        task = self.tasks.get(request.id)  # TaskNotFoundError -> NOT_FOUND
        self._authorize_task(context, task.datasource, "READ")
        return task_to_proto(task)

    def ListTasks(self, request, context):
        self._need_tasks(context)
        tasks = self.tasks.list(request.datasource or None, request.state or None)
        user = self.caller(context)
        if user is not None:  # a user lists the tasks of datasources they may read or write
            tasks = [t for t in tasks if self._may(user, "READ", t.datasource)]
        return coordinator_pb2.ListTasksResponse(tasks=[task_to_proto(t) for t in tasks])

    def CancelTask(self, request, context):
        self._need_tasks(context)
        if self.caller(context) is not None:
            self._authorize_task(context, self.tasks.get(request.id).datasource, "WRITE")
        if self.task_runner is not None:
            return task_to_proto(self.task_runner.cancel(request.id))
        return task_to_proto(self.tasks.transition(request.id, "CANCELED", error="canceled"))

    def UpdateTask(self, request, context):
        self._need_tasks(context)
        report = loads_json(request.report_json, "task report_json") if request.report_json else None
        return task_to_proto(self.tasks.transition(request.id, request.state, report, request.error or None))


def add_to_server(grpc_server, servicer: CoordinatorServicer) -> None:
    grpc_server.add(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer,
                    coordinator_pb2.DESCRIPTOR.services_by_name["CoordinatorService"].full_name)
