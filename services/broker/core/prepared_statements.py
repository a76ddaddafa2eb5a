"""PreparedStatements: the server side of Flight SQL prepared statements.

A client prepares SQL once (a handle comes back), binds ``?`` values with DoPut, then executes by
handle. The server has to remember the statement in between; clients that vanish never close
theirs, so statements idle past a timeout are dropped and the number kept is capped (least
recently used first out). Statements also belong to a session (the caller's bearer token) so
closing the session closes them.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class PreparedStatement:
    handle: bytes
    sql: str
    user: str | None
    session: str | None
    parameter_count: int
    dataset_schema: pa.Schema | None
    # Bound parameter rows, one tuple per row; empty until a DoPut binds some.
    parameters: list[tuple] = field(default_factory=list)


class PreparedStatements:
    def __init__(self, idle_timeout_s: float = 1800.0, max_statements: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.max_statements = max_statements
        self._clock = clock
        self._statements: OrderedDict[bytes, tuple[PreparedStatement, float]] = OrderedDict()
        self._lock = threading.Lock()

    def create(self, sql: str, user: str | None, session: str | None, parameter_count: int,
               dataset_schema: pa.Schema | None) -> PreparedStatement:
        stmt = PreparedStatement(os.urandom(16), sql, user, session, parameter_count, dataset_schema)
        with self._lock:
            self._expire()
            while len(self._statements) >= self.max_statements:
                self._statements.popitem(last=False)
            self._statements[stmt.handle] = (stmt, self._clock())
        return stmt

    def get(self, handle: bytes) -> PreparedStatement | None:
        """The statement, or None when unknown, closed or idle too long; using it resets its timeout."""
        with self._lock:
            self._expire()
            hit = self._statements.get(handle)
            if hit is None:
                return None
            self._statements[handle] = (hit[0], self._clock())
            self._statements.move_to_end(handle)
            return hit[0]

    def close(self, handle: bytes) -> bool:
        with self._lock:
            return self._statements.pop(handle, None) is not None

    def close_session(self, session: str) -> int:
        with self._lock:
            doomed = [h for h, (stmt, _) in self._statements.items() if stmt.session == session]
            for h in doomed:
                del self._statements[h]
            return len(doomed)

    def __len__(self) -> int:
        return len(self._statements)

    def _expire(self) -> None:
        deadline = self._clock() - self.idle_timeout_s
        # Kept in last-used order, so the idle ones are a prefix.
        while self._statements:
            handle, (_, used) = next(iter(self._statements.items()))
            if used > deadline:
                break
            del self._statements[handle]
