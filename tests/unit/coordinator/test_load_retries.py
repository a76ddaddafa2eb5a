"""Failed loads in the coordinator's duties: the exact commands for retry-after-backoff, giving up
on a server and placing the segment elsewhere, not placing it back there until the give-up expires,
and what happens when it does (the record forgotten, the count starting over)."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from services.coordinator.core.duties import (
    DEFAULT_GIVE_UP_EXPIRY_MS,
    Assign,
    Balance,
    Drop,
    DutyParams,
    ForgetLoadFailure,
    Load,
    LoadFailure,
    Noop,
    RetryFailedLoads,
    RetryLoad,
    RetrySent,
    run_duties,
)
from tests.unit.coordinator.test_duties import desc, params, server, sid

A = sid(0)
T0 = 1_000_000
EXPIRY = DEFAULT_GIVE_UP_EXPIRY_MS


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


def test_a_report_is_answered_by_one_retry_while_its_load_runs():
    servers = {"h1": server(loading=[A])}
    failures = {("h1", A): failed(1)}
    assert run_duties(params([desc(A)], servers, now_ms=T0 + 1_000, load_failures=failures)) == [RetryLoad("h1", A)]
    # The edge sent it; the historical is loading again, and its report is unchanged meanwhile.
    sent = {("h1", A): RetrySent(T0, T0 + 1_000)}
    for now in (T0 + 1_001, T0 + 30_000, T0 + 1_000 + 60_000 - 1):
        assert run_duties(params([desc(A)], servers, now_ms=now, load_failures=failures, retries_sent=sent)) == [
            Noop()]
    # No new report for the longest backoff: the put may have been lost, so it is sent again.
    assert run_duties(params([desc(A)], servers, now_ms=T0 + 61_000, load_failures=failures,
                             retries_sent=sent)) == [RetryLoad("h1", A)]
    # A new report (that retry failed too) is answered after its own backoff, once more.
    again = {("h1", A): failed(2, at=T0 + 1_500)}
    assert run_duties(params([desc(A)], servers, now_ms=T0 + 3_499, load_failures=again, retries_sent=sent)) == [
        Noop()]
    assert run_duties(params([desc(A)], servers, now_ms=T0 + 3_500, load_failures=again, retries_sent=sent)) == [
        RetryLoad("h1", A)]


def test_after_max_attempts_the_segment_moves_to_another_server():
    servers = {"h1": server(loading=[A]), "h2": server()}
    snapshot = params([desc(A)], servers, replication=1, now_ms=T0, load_failures={("h1", A): failed(3)})
    assert run_duties(snapshot) == [Drop("h1", A), Load("h2", A)]


def test_before_max_attempts_it_stays_put_even_if_another_server_is_free():
    servers = {"h1": server(loading=[A]), "h2": server()}
    snapshot = params([desc(A)], servers, replication=1, now_ms=T0 + 2_000, load_failures={("h1", A): failed(2)})
    assert run_duties(snapshot) == [RetryLoad("h1", A)]


def test_a_server_that_gave_up_is_not_chosen_again_for_that_segment_before_the_expiry():
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


def test_balance_does_not_move_a_segment_onto_a_server_that_gave_up_on_it():
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


def test_stale_reports_are_ignored_until_they_expire():
    b = sid(1, "v1")
    servers = {"h1": server(loaded=[A]), "h2": server(loaded=[A])}
    failures = {("h1", A): failed(1), ("h2", b): failed(1)}  # A loaded after all; b not assigned to h2
    snapshot = params([desc(A)], servers, now_ms=T0 + EXPIRY - 1, load_failures=failures)
    assert RetryFailedLoads().run(snapshot).commands == ()
    # Expired, the record of b (not held by h2, and not even used) is forgotten; h1's record of A
    # (which h1 holds) is the historical's to clear, not the coordinator's.
    snapshot = params([desc(A)], servers, now_ms=T0 + EXPIRY, load_failures=failures)
    assert RetryFailedLoads().run(snapshot).commands == (ForgetLoadFailure("h2", b),)


def test_the_failure_of_an_overshadowed_or_unused_segment_is_not_retried():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[new], loading=[old])}
    snapshot = params([desc(old), desc(new)], servers, now_ms=T0 * 2, load_failures={("h1", old): failed(1)})
    assert RetryFailedLoads().run(snapshot).commands == ()


# ---- the give-up expires --------------------------------------------------------------------------
def test_a_give_up_expires_at_its_boundary_and_the_server_gets_the_segment_again():
    # h1 gave up on A and A moved to h2; h2 died since. Until the expiry A waits unassigned (the
    # only server left gave up on it); from the expiry exactly, the record is forgotten and A goes
    # back to h1, in the same run.
    alone = {"h1": server()}
    gave_up = {("h1", A): failed(3)}
    assert run_duties(params([desc(A)], alone, now_ms=T0 + EXPIRY - 1, load_failures=gave_up)) == [Noop()]
    assert run_duties(params([desc(A)], alone, now_ms=T0 + EXPIRY, load_failures=gave_up)) == [
        ForgetLoadFailure("h1", A), Load("h1", A)]


def test_the_expiry_is_a_setting():
    alone, gave_up = {"h1": server()}, {("h1", A): failed(3)}
    kw = dict(load_failures=gave_up, give_up_expiry_ms=5_000)
    assert run_duties(params([desc(A)], alone, now_ms=T0 + 4_999, **kw)) == [Noop()]
    assert run_duties(params([desc(A)], alone, now_ms=T0 + 5_000, **kw)) == [ForgetLoadFailure("h1", A),
                                                                            Load("h1", A)]


def test_an_expired_give_up_of_a_segment_served_elsewhere_is_only_forgotten():
    # Replication is met by h2: nothing moves, but h1 is a candidate again (here for Balance).
    servers = {"h1": server(), "h2": server(loaded=[A])}
    gave_up = {("h1", A): failed(3)}
    assert run_duties(params([desc(A)], servers, replication=1, now_ms=T0 + EXPIRY - 1, load_failures=gave_up)) == [
        Noop()]
    assert run_duties(params([desc(A)], servers, replication=1, now_ms=T0 + EXPIRY, load_failures=gave_up)) == [
        ForgetLoadFailure("h1", A)]
    a, b = sid(0), sid(1)
    busy = {"h1": server(), "h2": server(loaded=[a, b])}
    assert Balance().run(params([desc(a, 30), desc(b, 20)], busy, replication=1, now_ms=T0 + EXPIRY - 1,
                                load_failures={("h1", a): failed(3)})).commands == (Load("h1", b),)
    assert Balance().run(params([desc(a, 30), desc(b, 20)], busy, replication=1, now_ms=T0 + EXPIRY,
                                load_failures={("h1", a): failed(3)})).commands == (Load("h1", a),)


def test_after_the_expiry_the_count_starts_over_and_a_server_that_still_fails_gives_up_again():
    """The whole cycle, each step a snapshot as the edge would take it: the historical forgot
    its count with the record, so its next failure is attempt 1, retried after the first
    backoff; at the third it gives up again, the segment moves, and h1 is passed over anew."""
    used = [desc(A)]
    # h2, which served A, died; the expired give-up of h1 is forgotten and A assigned to h1.
    t = T0 + EXPIRY
    assert run_duties(params(used, {"h1": server()}, now_ms=t, load_failures={("h1", A): failed(3)})) == [
        ForgetLoadFailure("h1", A), Load("h1", A)]
    # A new h2 joins meanwhile; h1 still cannot load A: attempts 1 and 2 are retried where they are,
    # one backoff apart (1 s, then 2 s), with h2 free all along.
    servers = {"h1": server(loading=[A]), "h2": server()}
    for attempts, backoff in ((1, 1_000), (2, 2_000)):
        failures = {("h1", A): failed(attempts, at=t)}
        assert run_duties(params(used, servers, replication=1, now_ms=t + backoff - 1, load_failures=failures)) == [
            Noop()]
        assert run_duties(params(used, servers, replication=1, now_ms=t + backoff, load_failures=failures)) == [
            RetryLoad("h1", A)]
        t += backoff
    # The third failure: h1 gives up again, and A moves to h2 at once.
    failures = {("h1", A): failed(3, at=t)}
    assert run_duties(params(used, servers, replication=1, now_ms=t, load_failures=failures)) == [
        Drop("h1", A), Load("h2", A)]
    # h2 cannot hold it either and is gone again: h1 waits out a whole new expiry.
    alone = {"h1": server()}
    assert run_duties(params(used, alone, now_ms=t + EXPIRY - 1, load_failures=failures)) == [Noop()]
    assert run_duties(params(used, alone, now_ms=t + EXPIRY, load_failures=failures)) == [
        ForgetLoadFailure("h1", A), Load("h1", A)]


def test_a_server_that_died_meanwhile_is_sent_nothing():
    # h1 gave up on A and died before its record (under its lease) was deleted: no command names
    # it, before or after the expiry; A stays on h2.
    servers = {"h2": server(loaded=[A])}
    failures = {("h1", A): failed(3)}
    for now in (T0 + EXPIRY - 1, T0 + EXPIRY, T0 + 10 * EXPIRY):
        assert run_duties(params([desc(A)], servers, now_ms=now, load_failures=failures)) == [Noop()]
    # The holder died instead, and the one that gave up is all that is left: A comes back to it
    # once its give-up expires (the case a permanent give-up left unservable).
    assert run_duties(params([desc(A)], {"h1": server()}, now_ms=T0 + EXPIRY - 1, load_failures=failures)) == [
        Noop()]
    assert run_duties(params([desc(A)], {"h1": server()}, now_ms=T0 + EXPIRY, load_failures=failures)) == [
        ForgetLoadFailure("h1", A), Load("h1", A)]


def test_a_record_of_a_segment_still_assigned_is_never_forgotten_by_the_coordinator():
    # h1 holds A and gave up long ago (the leader was away): its record is the historical's, and
    # the stale give-up earns one more try there instead of a move. h2's expired record of A
    # (not held there) is forgotten, so h2 is a candidate when h1 gives up again.
    servers = {"h1": server(loading=[A]), "h2": server()}
    failures = {("h1", A): failed(3), ("h2", A): failed(3)}
    assert run_duties(params([desc(A)], servers, replication=1, now_ms=T0 + EXPIRY, load_failures=failures)) == [
        RetryLoad("h1", A), ForgetLoadFailure("h2", A)]
    fresh = {("h1", A): failed(4, at=T0 + EXPIRY + 10)}
    assert run_duties(params([desc(A)], servers, replication=1, now_ms=T0 + EXPIRY + 10, load_failures=fresh)) == [
        Drop("h1", A), Load("h2", A)]


def test_the_record_of_a_segment_no_longer_used_is_forgotten_when_it_expires():
    gone = sid(5)
    servers = {"h1": server(loaded=[A])}
    failures = {("h1", gone): failed(1)}
    assert run_duties(params([desc(A)], servers, now_ms=T0 + EXPIRY - 1, load_failures=failures)) == [Noop()]
    assert run_duties(params([desc(A)], servers, now_ms=T0 + EXPIRY, load_failures=failures)) == [
        ForgetLoadFailure("h1", gone)]


def test_retry_settings_are_checked():
    with pytest.raises(ValidationError, match="max_load_attempts must be >= 1"):
        DutyParams(used=(), servers={}, max_load_attempts=0)
    with pytest.raises(ValidationError, match="load backoff"):
        DutyParams(used=(), servers={}, load_backoff_ms=10, max_load_backoff_ms=5)
    with pytest.raises(ValidationError, match="give_up_expiry_ms must be >= 1"):
        DutyParams(used=(), servers={}, give_up_expiry_ms=0)


def test_the_expiry_is_a_coordinator_setting_that_defaults_to_the_duties_default():
    from services.node_config import load_config

    assert load_config("coordinator", None, env={}).coordinator.give_up_expiry_ms == DEFAULT_GIVE_UP_EXPIRY_MS
    env = {"STRATA_COORDINATOR_GIVE_UP_EXPIRY_MS": "4000"}
    assert load_config("coordinator", None, env=env).coordinator.give_up_expiry_ms == 4_000
