"""What the Flight server remembers between calls, on a fake clock: tickets of planned statements
(TTL and cap), prepared statements (idle timeout, cap, sessions) and bearer tokens (sliding expiry)."""

from __future__ import annotations

import pyarrow as pa

from services.broker.core.prepared_statements import PreparedStatements
from services.broker.core.flight_tickets import FlightTickets
from services.broker.flight_auth import BearerTokens


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


SCHEMA = pa.schema([("x", pa.int64())])


def test_tickets_expire_after_their_ttl():
    clock = Clock()
    tickets = FlightTickets(ttl_s=10, clock=clock)
    handle = tickets.put("SELECT 1", SCHEMA, "alice")
    clock.now = 9.9
    entry = tickets.get(handle)
    assert (entry.request, entry.schema, entry.user) == ("SELECT 1", SCHEMA, "alice")
    assert tickets.get(handle) is not None  # looking does not spend it
    clock.now = 10.0
    assert tickets.get(handle) is None and len(tickets) == 0


def test_a_ticket_is_taken_once():
    tickets = FlightTickets(ttl_s=10, clock=Clock())
    handle = tickets.put("SELECT 1", SCHEMA, None)
    assert tickets.take(handle).request == "SELECT 1"
    assert tickets.take(handle) is None and tickets.get(handle) is None


def test_a_ticket_is_spent_only_by_its_own_user():
    tickets = FlightTickets(ttl_s=10, clock=Clock())
    handle = tickets.put("SELECT 1", SCHEMA, "alice")
    assert tickets.take_for(handle, "bob").user == "alice"  # shown (the caller refuses it), not spent
    assert tickets.take_for(handle, "alice").request == "SELECT 1"
    assert tickets.take_for(handle, "alice") is None and len(tickets) == 0


def test_the_ticket_cap_drops_oldest_first():
    tickets = FlightTickets(ttl_s=60, max_entries=2, clock=Clock())
    first, second, third = (tickets.put(f"q{i}", SCHEMA, None) for i in range(3))
    assert tickets.get(first) is None and tickets.get(second).request == "q1" and tickets.get(third).request == "q2"
    assert len(tickets) == 2


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
