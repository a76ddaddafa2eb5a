"""The query log as a rotating JSON-lines file: one finished query per line, for log shippers.

The file rolls over at ``max_bytes`` and keeps ``backups`` older files (``queries.jsonl.1`` ...),
with the standard library's rotating handler, so shippers that follow renames (Vector, Fluent Bit,
Filebeat) read every line once. A line is written whole or not at all; a write that fails (disk
full) is counted and never fails the query that was logged.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import threading

from services.broker.core.query_log import QueryRecord


class QueryLogFile:
    def __init__(self, path: str, max_bytes: int = 64 << 20, backups: int = 5) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self.failed_writes = 0
        self._handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups,
                                                             encoding="utf-8", delay=True)
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._handler.handleError = self._count_failure  # never print a traceback for a log line
        self._lock = threading.Lock()

    def _count_failure(self, _record) -> None:
        self.failed_writes += 1

    def write(self, record: QueryRecord) -> None:
        line = json.dumps(record.to_json(), sort_keys=True, default=str)
        with self._lock:
            self._handler.emit(logging.LogRecord("strata.query_log", logging.INFO, self.path, 0, line, None, None))

    def close(self) -> None:
        with self._lock:
            self._handler.close()


def read_lines(path: str) -> list[QueryRecord]:
    """The records of one log file (for tools and tests), oldest first."""
    with open(path, encoding="utf-8") as f:
        return [QueryRecord.from_json(json.loads(line)) for line in f if line.strip()]


__all__ = ["QueryLogFile", "read_lines"]
