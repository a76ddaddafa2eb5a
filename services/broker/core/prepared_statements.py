"""PreparedStatements: the server side of Flight SQL prepared statements.

A client prepares SQL once (a handle comes back), binds ``?`` values with DoPut, then executes by
handle. The server has to remember the statement in between; clients that vanish never close
theirs, so statements idle past a timeout are dropped and the number kept is capped (least
recently used first out). Statements also belong to a session (the caller's bearer token) so
closing the session closes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from common.bounded_cache import BoundedCache


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
        # Least recently used first out; a use moves the idle timeout out again.
        self._statements = BoundedCache(max_statements, ttl_s=idle_timeout_s, sliding=True, clock=clock)

    def create(self, sql: str, user: str | None, session: str | None, parameter_count: int,
               dataset_schema: pa.Schema | None) -> PreparedStatement:
        stmt = PreparedStatement(os.urandom(16), sql, user, session, parameter_count, dataset_schema)
        self._statements.put(stmt.handle, stmt)
        return stmt

    def get(self, handle: bytes) -> PreparedStatement | None:
        """The statement, or None when unknown, closed or idle too long; using it resets its timeout."""
        self._statements.expire()
        return self._statements.get(handle)

    def close(self, handle: bytes) -> bool:
        return self._statements.pop(handle) is not None

    def close_session(self, session: str) -> int:
        return len(self._statements.pop_where(lambda handle, stmt: stmt.session != session))

    def __len__(self) -> int:
        return len(self._statements)

