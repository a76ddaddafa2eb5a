"""MemoryBudget: how many bytes one query may hold on one node, and the error when it needs more.

Each node has a default (``[historical] max_query_bytes``, ``[broker] max_query_bytes``); a query
may lower its own limit with the context key ``maxBytesInMemory``, never raise it past the node's:
the node's figure is what keeps the process alive for everyone else. The engines charge what
grows with the data before they allocate it where they can (a groupBy's groups, from the number
of distinct keys, before the aggregators run) and what they produced otherwise (scanned rows,
partials read from historicals). Going over is the user's error: it names the limit, the bytes
needed, what needed them and the query id, and is never retried on another replica (it would
fail there too).
"""

from __future__ import annotations

import threading

import pyarrow as pa

from common.errors import ValidationError

CONTEXT_KEY = "maxBytesInMemory"
DEFAULT_MAX_QUERY_BYTES = 2 << 30


class MemoryLimitError(ValidationError):
    """A query needed more memory than its limit on a node."""

    def __init__(self, query_id: str, where: str, what: str, needed: int, limit: int, node_limit: int | None) -> None:
        raise_hint = (f"raise {CONTEXT_KEY} (up to the node's max_query_bytes, {node_limit:,})"
                      if node_limit is not None and node_limit > limit
                      else "raise max_query_bytes in the node's config")
        super().__init__(
            f"query {query_id} needs {needed:,} bytes in memory on the {where} for {what}, over its limit "
            f"{CONTEXT_KEY} = {limit:,} bytes; narrow the query (a filter, fewer dimensions, a coarser "
            f"granularity, a LIMIT) or {raise_hint}")
        self.query_id = query_id
        self.needed = needed
        self.limit = limit


def limit_for(context, node_limit: int | None) -> int | None:
    """The limit a query runs under: its ``maxBytesInMemory`` when set, capped by the node's."""
    value = (context or {}).get(CONTEXT_KEY)
    if value is None:
        return node_limit
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError(f"context key {CONTEXT_KEY} must be a positive number of bytes, not {value!r}")
    return value if node_limit is None else min(value, node_limit)


class MemoryBudget:
    """The bytes one query holds on one node; thread-safe (segments run on a pool)."""

    def __init__(self, limit: int | None, query_id: str = "", where: str = "node", node_limit: int | None = None):
        self.limit = limit
        self.query_id = query_id or "(no id)"
        self.where = where
        self.node_limit = node_limit
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    @classmethod
    def for_query(cls, context, node_limit: int | None, query_id: str, where: str) -> MemoryBudget:
        return cls(limit_for(context, node_limit), query_id, where, node_limit)

    def check(self, nbytes: int, what: str) -> None:
        """Refuse (before allocating) when ``nbytes`` more would pass the limit; holds nothing."""
        if self.limit is not None and self.used + nbytes > self.limit:
            raise MemoryLimitError(self.query_id, self.where, what, self.used + nbytes, self.limit, self.node_limit)

    def charge(self, nbytes: int, what: str) -> None:
        """Hold ``nbytes`` more for the rest of the query, or refuse when that passes the limit."""
        with self._lock:
            self.check(nbytes, what)
            self.used += nbytes
            self.peak = max(self.peak, self.used)

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.used = max(0, self.used - nbytes)


UNLIMITED = MemoryBudget(None)


def table_bytes(table: pa.Table) -> int:
    """Bytes an Arrow table's buffers hold (slices count what they reference)."""
    try:
        return table.get_total_buffer_size()
    except (AttributeError, pa.ArrowException):
        return table.nbytes


def group_bytes(count: int, keys: list[pa.Array], aggregators) -> int:
    """What ``count`` groups of a grouped partial hold: their key values, a group id each, and each
    aggregator's intermediate (16 bytes with its validity, a sketch or a list more)."""
    per = 8
    for agg in aggregators:
        per += 1024 if type(agg).__name__ in ("HllSketch", "ArrayConcat") else 16
    return count * per + sum(k.nbytes for k in keys)


__all__ = ["CONTEXT_KEY", "DEFAULT_MAX_QUERY_BYTES", "MemoryBudget", "MemoryLimitError", "UNLIMITED", "group_bytes",
           "limit_for", "table_bytes"]
