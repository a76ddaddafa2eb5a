"""What the Flight server remembers between calls, on a fake clock: result tickets (TTL and byte
budget), prepared statements (idle timeout, cap, sessions) and bearer tokens (sliding expiry)."""

from __future__ import annotations

import pyarrow as pa

from services.broker.core.prepared_statements import PreparedStatements
from services.broker.core.result_cache import ResultCache
from services.broker.flight_auth import BearerTokens


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rows(n: int) -> pa.Table:
    return pa.table({"x": pa.array(range(n), pa.int64())})  # 8 bytes a row


def test_results_expire_after_their_ttl():
    clock = Clock()
    cache = ResultCache(max_bytes=1 << 20, ttl_s=10, clock=clock)
    handle = cache.put(rows(3))
    clock.now = 9.9
    assert cache.get(handle).table.num_rows == 3
    clock.now = 10.0
    assert cache.get(handle) is None and len(cache) == 0


def test_the_byte_budget_evicts_oldest_first_and_oversized_results_keep_only_a_recipe():
    cache = ResultCache(max_bytes=200, ttl_s=60, clock=Clock())
    first, second = cache.put(rows(10)), cache.put(rows(10))  # 80 bytes each
    third = cache.put(rows(10))
    assert cache.get(first) is None and cache.get(second) and cache.get(third)
    assert cache.nbytes == 160
    big = cache.put(rows(100), rerun=lambda: rows(100))
    entry = cache.get(big)
    assert entry.table is None and entry.rerun().num_rows == 100 and entry.schema == rows(0).schema
    assert cache.nbytes == 160
    cache.discard(second)
    assert cache.nbytes == 80


def test_prepared_statements_idle_out_and_close_with_their_session():
    clock = Clock()
    statements = PreparedStatements(idle_timeout_s=30, max_statements=2, clock=clock)
    a = statements.create("SELECT 1", "alice", "s1", 0, None)
    clock.now = 20
    assert statements.get(a.handle) is a  # use resets the idle timer
    b = statements.create("SELECT ?", "alice", "s2", 1, None)
    clock.now = 45
    assert statements.get(a.handle) is a and statements.get(b.handle) is b
    c = statements.create("SELECT 3", "bob", "s1", 0, None)  # over the cap: least recently used goes
    assert statements.get(a.handle) is None and len(statements) == 2
    assert statements.close_session("s1") == 1 and statements.get(c.handle) is None
    clock.now = 45 + 30
    assert statements.get(b.handle) is None


def test_bearer_tokens_slide_and_can_be_revoked():
    clock = Clock()
    tokens = BearerTokens(ttl_s=100, clock=clock)
    token = tokens.issue("alice")
    clock.now = 90
    assert tokens.user_of(token) == (True, "alice")
    clock.now = 180  # 90 s after its last use
    assert tokens.user_of(token) == (True, "alice")
    tokens.revoke(token)
    assert tokens.user_of(token) == (False, None)
    stale = tokens.issue("bob")
    clock.now = 281
    assert tokens.user_of(stale) == (False, None)
