"""Failed loads in the coordinator's duties: the exact commands for retry-after-backoff, giving up
on a server and placing the segment elsewhere, and never placing it back there."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.coordinator.core.duties import (
    Assign,
    Balance,
    Drop,
    DutyParams,
    Load,
    LoadFailure,
    Noop,
    RetryFailedLoads,
    RetryLoad,
    run_duties,
)
from tests.unit.coordinator.test_duties import desc, params, server, sid

A = sid(0)
T0 = 1_000_000


def failed(attempts: int, at: int = T0) -> LoadFailure:
    return LoadFailure(attempts, at, "not found")


@pytest.mark.parametrize("attempts,wait_ms", [(1, 1_000), (2, 2_000), (3, 4_000), (7, 60_000), (40, 60_000)])
def test_a_retry_waits_a_backoff_that_doubles_per_attempt_up_to_the_cap(attempts, wait_ms):
    # One server only: even after max_load_attempts there is nowhere else, so it keeps retrying.
    servers = {"h1": server(loading=[A])}
    kw = dict(load_failures={("h1", A): failed(attempts)}, max_load_attempts=100)
    early = params([desc(A)], servers, now_ms=T0 + wait_ms - 1, **kw)
    assert run_duties(early) == [Noop()]
    due = params([desc(A)], servers, now_ms=T0 + wait_ms, **kw)
    assert run_duties(due) == [RetryLoad("h1", A)]


def test_after_max_attempts_the_segment_moves_to_another_server():
    servers = {"h1": server(loading=[A]), "h2": server()}
    snapshot = params([desc(A)], servers, replication=1, now_ms=T0, load_failures={("h1", A): failed(3)})
    assert run_duties(snapshot) == [Drop("h1", A), Load("h2", A)]


def test_before_max_attempts_it_stays_put_even_if_another_server_is_free():
    servers = {"h1": server(loading=[A]), "h2": server()}
    snapshot = params([desc(A)], servers, replication=1, now_ms=T0 + 2_000, load_failures={("h1", A): failed(2)})
    assert run_duties(snapshot) == [RetryLoad("h1", A)]


def test_a_server_that_gave_up_is_never_chosen_again_for_that_segment():
    b = sid(1)
    gave_up = {("h1", A): failed(3)}
    # Unassigned from h1 (the record outlives it); Assign (newest first) puts b on the emptier h1
    # and A on h2, although h1 still has more room.
    servers = {"h1": server(200), "h2": server(100)}
    assert Assign().run(params([desc(A), desc(b)], servers, replication=1, load_failures=gave_up)).commands == (
        Load("h1", b), Load("h2", A))
    # With nowhere else to go, the segment waits unassigned rather than going back.
    alone = {"h1": server(200)}
    assert Assign().run(params([desc(A)], alone, load_failures=gave_up)).commands == ()


def test_balance_never_moves_a_segment_onto_a_server_that_gave_up_on_it():
    a, b = sid(0), sid(1)
    servers = {"h1": server(100, loaded=[a, b]), "h2": server(100)}
    moved = Balance().run(params([desc(a, 30), desc(b, 20)], servers, replication=1)).commands
    assert moved == (Load("h2", a),)
    blocked = Balance().run(params([desc(a, 30), desc(b, 20)], servers, replication=1,
                                   load_failures={("h2", a): failed(3)})).commands
    assert blocked == (Load("h2", b),)


def test_when_every_other_server_gave_up_too_it_retries_where_it_is():
    servers = {"h1": server(loading=[A]), "h2": server()}
    snapshot = params([desc(A)], servers, replication=1, now_ms=T0 + 4_000,
                      load_failures={("h1", A): failed(3), ("h2", A): failed(3)})
    assert run_duties(snapshot) == [RetryLoad("h1", A)]


def test_stale_reports_are_ignored():
    b = sid(1, "v1")
    servers = {"h1": server(loaded=[A]), "h2": server(loaded=[A])}
    failures = {("h1", A): failed(1), ("h2", b): failed(1)}  # A loaded after all; b not assigned to h2
    assert RetryFailedLoads().run(params([desc(A)], servers, now_ms=T0 * 2, load_failures=failures)).commands == ()


def test_the_failure_of_an_overshadowed_or_unused_segment_is_not_retried():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[new], loading=[old])}
    snapshot = params([desc(old), desc(new)], servers, now_ms=T0 * 2, load_failures={("h1", old): failed(1)})
    assert RetryFailedLoads().run(snapshot).commands == ()


def test_retry_settings_are_checked():
    with pytest.raises(ValidationError, match="max_load_attempts must be >= 1"):
        DutyParams(used=(), servers={}, max_load_attempts=0)
    with pytest.raises(ValidationError, match="load backoff"):
        DutyParams(used=(), servers={}, load_backoff_ms=10, max_load_backoff_ms=5)
