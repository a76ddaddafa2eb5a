"""Druid's asynchronous SQL API, ``/druid/v2/sql/statements``: submit a statement, poll its state,
fetch its results a page at a time, delete it.

- ``POST /druid/v2/sql/statements``: a SELECT starts on a thread of its own through the front door
  (query registry, grants, timeout: the id it answers with is its query id, so KILL QUERY and
  sys.queries see it) and the answer is ``{"queryId", "state": "RUNNING", "createdAt", "schema",
  "durationMs": -1}``; an INSERT/REPLACE submits its task and the statement is that task.
- ``GET .../{id}``: the state (RUNNING, SUCCESS, FAILED, CANCELED), and once it succeeded
  ``result`` with the row count, size and ``pages``; a failure's ``errorDetails`` is Druid's error.
- ``GET .../{id}/results?page=N&resultFormat=F``: one page (all pages without ``page``) in any
  result format. A page holds ``rowsPerPage`` rows (Druid's context key, SET or in the context;
  PAGE_ROWS without it): the web console asks for pages of a screenful, so a large result
  reaches the browser one page at a time.
- ``DELETE .../{id}``: cancels a running statement (202), forgets a finished one (200).

Results are kept in the broker's memory (what a query returns is already bounded by
``max_query_bytes``), for at most KEEP_S after they finish and for at most MAX_STATEMENTS
statements (the oldest finished one goes first). A statement is seen only by its user (or the
admin); for anyone else it does not exist (404).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

import orjson
import pyarrow as pa

from common.errors import ValidationError
from common.sql.statement_kind import classify
from common.types.interval import format_instant
from services import query_errors as qe
from services.broker.druid_http.druid_errors import druid_error
from services.broker.druid_http.result_format import ResultWriter, check_format, column_types
from services.broker.druid_http.sql_resource import chunks, time_zone
from services.broker.druid_http.task_resource import is_ingestion
from services.broker.core.call_origin import CallOrigin
from services.broker.front_door import QueryRequest
from services.broker.query_origin import sql_query_id
from services.http_endpoint import REMOTE_HEADER, USER_HEADER
from services.security.authorizer import is_admin

JSON = "application/json"
PAGE_ROWS = 100_000
ROWS_PER_PAGE = "rowsPerPage"  # Druid's context key (its MSQ default is 100,000 too)
MAX_STATEMENTS = 100
KEEP_S = 3600.0
CAPACITY = getattr(qe, "LIMIT", "capacity")  # the error taxonomy's limit kind where it exists
_TASK_STATES = {"PENDING": "ACCEPTED", "RUNNING": "RUNNING", "SUCCESS": "SUCCESS", "FAILED": "FAILED",
                "CANCELED": "CANCELED"}


@dataclass
class Statement:
    query_id: str
    user: str | None
    created_ms: int
    schema: pa.Schema | None = None
    time_zone: str = "UTC"
    state: str = "RUNNING"
    table: pa.Table | None = None
    error: qe.ClientError | None = None
    finished: float | None = None  # monotonic
    duration_ms: int = -1
    task_id: str | None = None
    page_rows: int = PAGE_ROWS
    done: threading.Event = field(default_factory=threading.Event)


class DruidStatementsResource:
    def __init__(self, front_door, queries, authorizer, tasks, host: str | None = None,
                 page_rows: int = PAGE_ROWS, clock=time.monotonic) -> None:
        self.front_door = front_door
        self.queries = queries
        self.authorizer = authorizer
        self.tasks = tasks  # DruidTaskResource: ingestion statements are tasks
        self.host = host
        self.page_rows = page_rows
        self._clock = clock
        self._statements: dict[str, Statement] = {}
        self._lock = threading.Lock()

    def _error(self, error: qe.ClientError):
        status, body = druid_error(error, self.host)
        return status, JSON, body

    def _not_found(self, query_id: str):
        return self._error(qe.ClientError(qe.NOT_FOUND, f"no statement '{query_id}' of yours; it may have expired "
                                                        f"(results are kept {int(KEEP_S)} s)"))

    # ---- submit ----------------------------------------------------------------------------------------
    def submit(self, query, headers: dict):
        """``query``: a parsed SqlQuery (sql_resource)."""
        try:
            return self._submit(query, headers)
        except qe.QueryFailed as exc:
            return self._error(exc.error)

    def _submit(self, query, headers: dict):
        user = headers.get(USER_HEADER)
        if is_ingestion(query.query):
            status, ctype, body = self.tasks.submit(query, headers)
            if status != 200:
                return status, ctype, body
            task_id = orjson.loads(body)["taskId"]
            statement = Statement(task_id, user, int(time.time() * 1000), pa.schema([]), task_id=task_id,
                                  state="ACCEPTED")
            self._keep(statement)
            return 200, JSON, orjson.dumps(self._status(statement))
        context = dict(query.context or {})
        try:
            page_rows = rows_per_page(query.query, context, self.page_rows)
        except ValidationError as exc:
            return self._error(qe.ClientError(qe.INVALID, str(exc)))
        query_id = sql_query_id(query.query, context) or f"query-{uuid.uuid4()}"
        request = QueryRequest(user, sql=query.query, parameter_rows=(query.parameters,) if query.parameters else (),
                               context=context, query_id=query_id,
                               origin=CallOrigin("http", headers.get(REMOTE_HEADER), user))
        try:
            schema, request = self.front_door.planned(request)  # a statement that cannot run is refused now
        except qe.QueryFailed as exc:
            return self._error(exc.error)
        statement = Statement(query_id, user, int(time.time() * 1000), schema, time_zone(query),
                              page_rows=page_rows)
        with self._lock:
            if query_id in self._statements:
                return self._error(qe.ClientError(qe.ALREADY_EXISTS, f"statement '{query_id}' exists; choose "
                                                                     f"another sqlQueryId"))
        self._keep(statement)
        answer = orjson.dumps(self._status(statement))  # RUNNING: described before it can finish
        # The request carries the call's origin and the id: the thread needs nothing else of this call.
        threading.Thread(target=self._run, args=(statement, request), name="strata-sql-statement",
                         daemon=True).start()
        return 200, JSON, answer

    def _run(self, statement: Statement, request: QueryRequest) -> None:
        started = time.monotonic()
        try:
            table = self.front_door.run(request, expected_schema=statement.schema).table
            statement.table, statement.schema, statement.state = table, table.schema, "SUCCESS"
        except qe.QueryFailed as exc:
            statement.error = exc.error
            statement.state = "CANCELED" if exc.error.kind == qe.CANCELLED else "FAILED"
        except Exception as exc:  # noqa: BLE001 - every failure is reported on the statement
            statement.error, statement.state = qe.client_error(exc), "FAILED"
        finally:
            statement.duration_ms = int((time.monotonic() - started) * 1000)
            statement.finished = self._clock()
            statement.done.set()

    def _keep(self, statement: Statement) -> None:
        now = self._clock()
        with self._lock:
            for key, kept in list(self._statements.items()):
                if kept.finished is not None and now - kept.finished > KEEP_S:
                    del self._statements[key]
            if len(self._statements) >= MAX_STATEMENTS:
                done = sorted((s for s in self._statements.values() if s.finished is not None or s.task_id),
                              key=lambda s: s.created_ms)
                for old in done[:len(self._statements) - MAX_STATEMENTS + 1]:
                    del self._statements[old.query_id]
            if len(self._statements) >= MAX_STATEMENTS:
                raise qe.QueryFailed(qe.ClientError(CAPACITY, f"{MAX_STATEMENTS} statements are running; "
                                                              f"wait for one to finish or DELETE one"))
            self._statements[statement.query_id] = statement

    # ---- read ------------------------------------------------------------------------------------------
    def _find(self, query_id: str, user) -> Statement | None:
        with self._lock:
            statement = self._statements.get(query_id)
        if statement is None or (statement.user != user and not is_admin(self.authorizer, user)):
            return None
        if statement.task_id is not None:
            self._follow_task(statement, user)
        return statement

    def _follow_task(self, statement: Statement, user) -> None:
        try:
            task = self.tasks.find_task(statement.task_id, user)
        except qe.QueryFailed as exc:
            statement.error, statement.state = exc.error, "FAILED"
            return
        statement.state = _TASK_STATES.get(task.state, task.state)
        if task.error:
            statement.error = qe.ClientError(qe.INVALID, task.error)
        if task.finished_ms and task.started_ms:
            statement.duration_ms = task.finished_ms - task.started_ms

    def _status(self, statement: Statement) -> dict:
        out = {"queryId": statement.query_id, "state": statement.state,
               "createdAt": format_instant(statement.created_ms),
               "schema": [{"name": f.name, "type": column_types(f)[1], "nativeType": column_types(f)[0]}
                          for f in (statement.schema or pa.schema([]))],
               "durationMs": statement.duration_ms}
        if statement.state == "SUCCESS" and statement.table is not None:
            table = statement.table
            pages = []
            for page, start in enumerate(range(0, table.num_rows, statement.page_rows)):
                piece = table.slice(start, statement.page_rows)
                pages.append({"id": page, "numRows": piece.num_rows, "sizeInBytes": piece.nbytes})
            out["result"] = {"numTotalRows": table.num_rows, "totalSizeInBytes": table.nbytes,
                             "dataSource": "__query_select", "sampleRecords": [], "pages": pages}
        if statement.error is not None and statement.state in ("FAILED", "CANCELED"):
            out["errorDetails"] = orjson.loads(druid_error(statement.error, self.host)[1])
        return out

    def handle(self, method: str, rest: list[str], query: dict, headers: dict):
        """``rest``: the path after /druid/v2/sql/statements."""
        user = headers.get(USER_HEADER)
        if not rest or len(rest) > 2 or (len(rest) == 2 and rest[1] != "results"):
            return self._error(qe.ClientError(qe.NOT_FOUND, "no such statements API path; use "
                                                            "/druid/v2/sql/statements/{id}[/results]"))
        statement = self._find(rest[0], user)
        if statement is None:
            return self._not_found(rest[0])
        if method == "GET" and len(rest) == 1:
            return 200, JSON, orjson.dumps(self._status(statement))
        if method == "GET":
            return self._results(statement, query)
        if method == "DELETE" and len(rest) == 1:
            if statement.task_id is not None and statement.state in ("ACCEPTED", "RUNNING"):
                return self._error(qe.ClientError(qe.UNSUPPORTED, "an ingestion statement runs as a task; cancel "
                                                                  "the task on the coordinator"))
            if not statement.done.is_set() and statement.task_id is None:
                try:
                    self.queries.kill(statement.query_id, user)
                except Exception:  # noqa: BLE001 - it finished meanwhile: deleting it is what remains
                    pass
                else:
                    return 202, JSON, b""
            with self._lock:
                self._statements.pop(statement.query_id, None)
            return 200, JSON, b""
        return self._error(qe.ClientError(qe.NOT_FOUND, f"{method} is not answered on a statement"))

    def _results(self, statement: Statement, query: dict):
        if statement.state != "SUCCESS" or statement.table is None:
            if statement.state in ("FAILED", "CANCELED"):
                return self._error(statement.error or qe.ClientError(qe.INVALID, "the statement failed"))
            return self._error(qe.ClientError(qe.INVALID, f"statement '{statement.query_id}' is {statement.state}; "
                                                          f"poll GET /druid/v2/sql/statements/{statement.query_id} "
                                                          f"until it is SUCCESS"))
        try:
            fmt = check_format((query.get("resultFormat") or ["object"])[0])
            page = query.get("page")
            table = statement.table
            if page is not None:
                number = int(page[0])
                pages = max(1, -(-table.num_rows // statement.page_rows))
                if number < 0 or number >= pages:
                    raise ValueError(f"page {number} does not exist; the pages are 0 to {pages - 1}")
                table = table.slice(number * statement.page_rows, statement.page_rows)
        except ValueError as exc:
            return self._error(qe.ClientError(qe.INVALID, str(exc)))
        writer = ResultWriter(fmt, statement.schema, time_zone=statement.time_zone)
        return 200, writer.content_type, chunks(writer.write_all(table.to_batches(max_chunksize=8192)))


def rows_per_page(sql: str, context: dict, default: int) -> int:
    """The statement's page size: ``SET rowsPerPage`` in the SQL wins over the context's."""
    value = context.get(ROWS_PER_PAGE)
    try:
        value = classify(sql).settings.get(ROWS_PER_PAGE, value)
    except Exception:  # noqa: BLE001 - a statement that does not parse fails in planning, with its message
        pass
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit() \
            or int(value) < 1:
        raise ValidationError(f"context {ROWS_PER_PAGE} must be a whole number of rows >= 1 (the rows in each page "
                              f"of /results?page=N), got {value!r}; e.g. {{\"{ROWS_PER_PAGE}\": 100}}")
    return int(value)


__all__ = ["DruidStatementsResource", "ROWS_PER_PAGE", "Statement", "rows_per_page"]
