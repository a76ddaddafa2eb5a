"""QueryRegistry: the broker's running queries by id, and the query log they go to when they end.

A front door runs each statement inside ``track(...)``: the query gets an id (the one its client
chose, the one its front door announced, or a new one), is registered while it runs with the
call's ``CallOrigin`` (protocol, remote address, user; passed in, never read from ambient state),
and when it ends is logged (``core/query_log``: in memory, bounded, and in the JSON-lines file). Native queries
a statement runs report to its ``RunningQuery``, handed to the service and the scatter/gather
executor explicitly (``tracked``; nothing per query is ambient, issue 24), which call
``native_started`` / ``native_finished`` with it: their segments, rows scanned, bytes
read and, per group of segments, the projection that served them or ``base`` with each miss
reason. That choice is recomputed on the broker from the segments' manifests (``TableChoice``),
since partials come back merged.

``kill(id, user)`` sets the query's cancel flag; the executor sees it through ``is_active`` within
its poll period and cancels the outstanding historical calls, and a statement still planning stops
at the planner's next check (``track`` registers a statement before it is planned, ``planning``
one that Flight SQL plans when preparing it or in GetFlightInfo, to run it in a later call). A
user kills and sees only their own queries unless they are the admin (or authentication is off).

Query ids are the clients' to choose (``SET sqlQueryId``), so running queries are kept per user
and id: another user's id answers exactly as an id nobody runs, whether killed (``no running
query``) or chosen again (the statement runs). Nothing tells a user which ids others run.
"""

from __future__ import annotations

import threading
import time
import uuid

from common.bounded_cache import BoundedCache
from common.errors import QueryTimeoutError, ValidationError
from services.broker.core.query_log import (CANCELLED, DENIED, ERROR, OK, TIMEOUT, QueryLog, QueryRecord, TableUse,
                                            query_shape)
from services.broker.core.call_origin import CallOrigin
from services.broker.query_executor import Cancelled
from services.broker.table_choice import TableChoice
from services.security.authorizer import ALLOW_ALL, is_admin

MAX_SHAPES = 1024  # query shapes kept, by query text
MAX_PENDING = 4096  # statements planned, not yet run, that KILL QUERY can still stop
PENDING_TTL_S = 1800.0  # as long as a Flight SQL prepared statement lives idle
ADVISOR_PROBE = "strataAdvisorProbe"  # context key of the advisor's own sketch queries: not workload


def _now_ms() -> int:
    return int(time.time() * 1000)


def _always() -> bool:
    return True


class RunningQuery:
    def __init__(self, record: QueryRecord, outer_is_active, started: float) -> None:
        self.record = record
        self.killed_by: str | None = None
        # A plain flag, not an Event: nothing waits on it, it is only read (one store is atomic).
        self._cancelled = False
        self._outer = outer_is_active or _always
        self._started = started  # perf_counter
        self.first_native: float | None = None
        self.lock = threading.Lock()

    @property
    def query_id(self) -> str:
        return self.record.query_id

    def is_active(self) -> bool:
        return not self._cancelled and self._outer()

    def cancel(self, by: str | None) -> None:
        self.killed_by = by
        self._cancelled = True

    def stop_if_killed(self) -> None:
        """The planner's stop check (``PlanningDeadline.stop``): a killed statement stops planning."""
        if self._cancelled:
            raise Cancelled(f"query {self.record.query_id} was killed while it was being planned")

    def stop_if_killed_pending(self) -> None:
        """A run whose statement was killed after it was planned and before it ran (Flight SQL:
        between GetFlightInfo and DoGet) does not start."""
        if self._cancelled:
            raise Cancelled(f"query {self.record.query_id} was killed (KILL QUERY) before it ran")

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class _Tracked:
    """``QueryRegistry.track``'s context manager (a class: a generator-based one costs a query
    more than its bookkeeping does)."""

    __slots__ = ("registry", "kind", "sql", "user", "query_id", "is_active", "origin", "running", "log_success",
                 "registered")

    def __init__(self, registry: QueryRegistry, kind: str, sql, user, query_id, is_active,
                 origin: CallOrigin | None, log_success: bool = True) -> None:
        self.registry, self.kind, self.sql, self.user = registry, kind, sql, user
        self.query_id, self.is_active, self.origin = query_id, is_active, origin
        self.log_success = log_success
        self.running: RunningQuery | None = None
        self.registered = False

    def __enter__(self) -> RunningQuery:
        registry = self.registry
        origin = self.origin
        user = self.user
        if origin is not None and user is None:
            user = origin.user
        qid = self.query_id or uuid.uuid4().hex
        record = QueryRecord(qid, user, origin.remote_address if origin else None, origin.protocol if origin else "",
                             self.kind, self.sql, registry.clock_ms())
        running = RunningQuery(record, self.is_active, time.perf_counter())
        key = (user, qid)
        pending = None
        with registry._lock:
            if key not in registry._running:
                registry._running[key] = running
                self.registered = True
                if self.log_success:
                    # Moved from pending to running in one step under the lock, so a KILL QUERY
                    # always finds the statement in one of the two.
                    pending = registry._pending.pop(key)
        # The user's own query runs under the id (another user's id is free to use). A statement
        # only planned now runs later, when that one may be over: it plans unregistered.
        if not self.registered and self.log_success:
            raise ValidationError(f"query id '{qid}' is already running; choose another id (or none)")
        # The run of a statement planned earlier under this id: a KILL QUERY that came between
        # (it found the statement pending) stops the run before it starts.
        if pending is not None and pending.cancelled:
            running.cancel(pending.killed_by)
        if origin is not None and origin.reply is not None and self.log_success:  # planning only: the run answers
            origin.reply.query_id = qid
        self.running = running
        return running

    def __exit__(self, exc_type, exc, tb) -> bool:
        running = self.running
        registry = self.registry
        status, error = OK, None
        if exc is not None:
            status, error = registry._status_of(running, exc), exc
        record = running.record
        planned_only = exc is None and not self.log_success
        if self.registered:
            with registry._lock:
                registry._running.pop((record.user, record.query_id), None)
                if planned_only:
                    # Planned, to be run (and logged) by a later call under the same id: pending
                    # until then, moved in the same step, so KILL QUERY finds it between the calls.
                    registry._pending.put((record.user, record.query_id), running)
        if planned_only:
            return False
        planning = None
        if running.first_native is not None:
            planning = int((running.first_native - running._started) * 1000)
        elif self.kind == "sql":
            planning = int((time.perf_counter() - running._started) * 1000)  # nothing ran on historicals
        record.finish(registry.clock_ms(), status, record.result_rows, error, planning)
        if status == CANCELLED and running.cancelled:
            record.error_message = f"killed by {running.killed_by or 'an anonymous user'} (KILL QUERY)"
        registry._log(record)
        return False


class QueryRegistry:
    def __init__(self, log: QueryLog | None = None, log_file=None, authorizer=ALLOW_ALL, manifest_of=None,
                 clock_ms=_now_ms) -> None:
        self.log = log if log is not None else QueryLog()
        self.log_file = log_file  # QueryLogFile or None
        self.authorizer = authorizer
        # Which table each segment read, from the manifests (SegmentId -> manifest JSON, or None).
        self.tables = TableChoice(manifest_of) if manifest_of is not None else None
        self.clock_ms = clock_ms
        # Each native query's shape (the projection advisor's input), by the query's text: a
        # cached SQL plan runs the same query again and again.
        self._shapes = BoundedCache(MAX_SHAPES)
        self._running: dict[tuple[str | None, str], RunningQuery] = {}  # by (user, query id)
        # Statements planned and not yet run (Flight SQL: GetFlightInfo done, DoGet to come), by
        # (user, query id); a run takes its entry, one never run leaves with the tickets' time.
        self._pending = BoundedCache(MAX_PENDING, ttl_s=PENDING_TTL_S)
        self._lock = threading.Lock()

    # ---- the query's lifetime ---------------------------------------------------------------------------
    def track(self, kind: str, sql: str | None = None, user: str | None = None, query_id: str | None = None,
              is_active=None, origin: CallOrigin | None = None) -> _Tracked:
        """Run a statement as a tracked query: ``with registry.track(...) as running`` (its
        RunningQuery, which the caller hands to what runs the statement: ``native_started`` /
        ``native_finished`` are told which query a native query belongs to). ``origin``: the call
        that sent it (recorded; its ``reply`` is told the id), or None; ``user`` None is the origin's."""
        return _Tracked(self, kind, sql, user, query_id, is_active, origin)

    def planning(self, kind: str, sql: str | None, user: str | None, query_id: str | None = None,
                 origin: CallOrigin | None = None) -> _Tracked:
        """A statement planned now and run by a later call (Flight SQL: prepared, or planned by
        GetFlightInfo, then run by DoGet): registered while it plans, so KILL QUERY finds and
        stops it; logged only when planning fails (the run logs it otherwise)."""
        return _Tracked(self, kind, sql, user, query_id, None, origin, log_success=False)

    def log_failed(self, kind: str, sql: str | None, user: str | None, error: BaseException,
                   origin: CallOrigin | None = None) -> None:
        """A statement that failed before it could run (while being prepared)."""
        if origin is not None and user is None:
            user = origin.user
        record = QueryRecord(uuid.uuid4().hex, user, origin.remote_address if origin else None,
                             origin.protocol if origin else "", kind, sql, self.clock_ms())
        record.finish(self.clock_ms(), self._status_of(None, error), None, error, None)
        self._log(record)

    @staticmethod
    def _status_of(running: RunningQuery | None, exc: BaseException) -> str:
        if (running is not None and running.cancelled) or isinstance(exc, Cancelled):
            return CANCELLED
        if isinstance(exc, QueryTimeoutError):
            return TIMEOUT
        if isinstance(exc, PermissionError):
            return DENIED
        return ERROR

    def _log(self, record: QueryRecord) -> None:
        with self._lock:
            self.log.add(record, self.clock_ms())
        if self.log_file is not None:
            self.log_file.write(record)

    # ---- what the executor reports of a tracked query's native queries ----------------------------------
    def native_started(self, running: RunningQuery) -> None:
        if running.first_native is None:
            running.first_native = time.perf_counter()

    def native_finished(self, running: RunningQuery, query, stats, segment_ids) -> None:
        datasource = query.table
        shape = None
        if not (query.context or {}).get(ADVISOR_PROBE):
            text = query.json_text()
            kept = self._shapes.get(text)
            if kept is None:
                kept = (query_shape(query.to_json()),)  # in a tuple: None (no shape) is kept too
                self._shapes.put(text, kept)
            shape = kept[0]
        tables = self._tables(query, datasource, segment_ids) if datasource else []
        if shape is not None:
            on_base = sum(t.segments for t in tables if t.projection == "base") if tables else stats.segments
            shape = dict(shape, segments=stats.segments, base_segments=on_base)
        with running.lock:
            running.record.note_native(query.query_type, datasource, stats.segments, stats.rows_scanned,
                                       stats.bytes_read, tables, shape)

    def _tables(self, query, datasource: str, segment_ids) -> list[TableUse]:
        if self.tables is None:
            return []
        return list(self.tables.of(query, datasource, segment_ids).tables)

    # ---- kill, and what sys.queries shows ---------------------------------------------------------------
    def kill(self, query_id: str, user: str | None) -> str:
        """Kill the user's running query ``query_id`` (the admin's: every user's under that id).
        Another user's query is answered exactly as an id nobody runs."""
        admin = is_admin(self.authorizer, user)
        with self._lock:  # running and pending read together: a run starting meanwhile moves under this lock
            if admin:
                targets = [r for (_, qid), r in self._running.items() if qid == query_id]
            else:
                mine = self._running.get((user, query_id))
                targets = [mine] if mine is not None else []
            # Planned and not yet running (between GetFlightInfo and DoGet): its run will not start.
            if admin:
                targets += [r for (_, qid), r in self._pending.items() if qid == query_id]
            else:
                pending = self._pending.get((user, query_id))
                targets += [pending] if pending is not None else []
        if not targets:
            raise ValidationError(f"no running query '{query_id}'; sys.queries lists queries with status 'running'")
        for running in targets:
            running.cancel(user)
        return f"query {query_id} is being killed"

    def running(self) -> list[QueryRecord]:
        with self._lock:
            return [r.record for r in self._running.values()]

    def records(self) -> list[QueryRecord]:
        """Running queries and the log (finished ones), as sys.queries shows them."""
        now = self.clock_ms()
        with self._lock:
            finished = self.log.records(now)
            running = [r.record for r in self._running.values()]
        return running + finished


def query_registry_from_config(broker, authorizer, node) -> QueryRegistry:
    """The registry of a broker's ``[broker]`` section; manifests come from the broker's view."""
    from services.broker.query_log_file import QueryLogFile

    log = QueryLog(broker.query_log_entries, broker.query_log_max_age_s * 1000)
    log_file = QueryLogFile(broker.query_log_file, broker.query_log_file_bytes, broker.query_log_file_backups) \
        if broker.query_log_file else None

    def manifest_of(sid):
        with node.lock:
            d = node.view.descriptors.get(sid)
        return d.manifest_json if d is not None else None

    return QueryRegistry(log, log_file, authorizer, manifest_of)


__all__ = ["ADVISOR_PROBE", "QueryRegistry", "RunningQuery", "query_registry_from_config"]
