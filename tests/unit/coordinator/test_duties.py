"""Coordinator duties: feed a snapshot, assert the exact commands."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.duties import (
    Assign,
    Balance,
    Drop,
    DropUnneeded,
    DutyParams,
    Load,
    MarkOvershadowed,
    MarkUnused,
    Noop,
    SegmentEntry,
    ServerView,
    run_duties,
)

DAY = 86_400_000


def sid(day: int, version: str = "v1", partition: int = 0, ds: str = "ds") -> SegmentId:
    return SegmentId(ds, Interval(day * DAY, (day + 1) * DAY), version, partition)


def desc(segment: SegmentId, size: int = 10, num_partitions: int = 1) -> SegmentEntry:
    return SegmentEntry(segment, size, num_partitions)


def server(max_bytes: int = 100, loaded=(), loading=()) -> ServerView:
    return ServerView(max_bytes, frozenset(loaded), frozenset(loading))


def params(used, servers, **kw) -> DutyParams:
    return DutyParams(used=tuple(used), servers=servers, **kw)


# --- whole pipeline ----------------------------------------------------------------------------

def test_nothing_to_do_is_a_single_noop():
    assert run_duties(params([], {})) == [Noop()]
    a = sid(0)
    assert run_duties(params([desc(a)], {"h1": server(loaded=[a]), "h2": server(loaded=[a])})) == [Noop()]


def test_duties_append_to_the_commands_so_far():
    a = sid(0)
    earlier = Load("h1", a)
    out = Assign().run(params([desc(a)], {"h1": server(), "h2": server()}, commands=(earlier,)))
    assert out.commands == (earlier, Load("h2", a))


def test_full_segment_descriptors_are_accepted_as_they_are():
    from common.segment.descriptor import SegmentDescriptor

    a = sid(0)
    full = SegmentDescriptor(a, size=10, num_rows=5, location="ds/a.sseg", num_partitions=1, manifest_json="{}")
    assert run_duties(params([full], {"h1": server(), "h2": server()})) == [Load("h1", a), Load("h2", a)]


def test_replication_defaults_to_two_with_two_servers_and_one_with_one():
    a = sid(0)
    assert run_duties(params([desc(a)], {"h1": server(), "h2": server()})) == [Load("h1", a), Load("h2", a)]
    assert run_duties(params([desc(a)], {"h1": server()})) == [Load("h1", a)]


def test_configured_replication_is_capped_by_the_servers_available():
    a = sid(0)
    got = run_duties(params([desc(a)], {"h1": server(), "h2": server()}, replication=3))
    assert got == [Load("h1", a), Load("h2", a)]


# --- Assign ----------------------------------------------------------------------------------

def test_assign_prefers_the_server_with_most_free_bytes():
    a, b = sid(0), sid(1)
    servers = {"h1": server(100, loaded=[a]), "h2": server(100), "h3": server(200)}
    got = Assign().run(params([desc(a, 50), desc(b, 10)], servers, replication=1)).commands
    assert got == (Load("h3", b),)


def test_assign_goes_newest_interval_first_when_space_is_short():
    old, new = sid(0), sid(5)
    got = Assign().run(params([desc(old, 60), desc(new, 60)], {"h1": server(100)})).commands
    assert got == (Load("h1", new),)


def test_assign_never_exceeds_max_bytes_and_counts_loading_segments():
    loading, fresh = sid(0), sid(1)
    servers = {"h1": server(100, loading=[loading]), "h2": server(30)}
    got = Assign().run(params([desc(loading, 60), desc(fresh, 50)], servers, replication=1)).commands
    assert got == ()  # h1 has 40 free, h2 30: neither fits 50


def test_assign_tops_up_under_replicated_segments_on_servers_without_a_copy():
    a = sid(0)
    servers = {"h1": server(loaded=[a]), "h2": server(), "h3": server(loading=[a])}
    assert Assign().run(params([desc(a)], servers, replication=3)).commands == (Load("h2", a),)
    assert Assign().run(params([desc(a)], servers, replication=2)).commands == ()


def test_assign_spreads_replicas_by_updating_free_space_as_it_goes():
    a, b = sid(0), sid(1)
    got = Assign().run(params([desc(a, 30), desc(b, 30)], {"h1": server(100), "h2": server(90)},
                              replication=1)).commands
    assert got == (Load("h1", b), Load("h2", a))


# --- MarkOvershadowed -----------------------------------------------------------------------

def test_newer_version_is_loaded_before_the_old_one_is_touched():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[old]), "h2": server(loaded=[old])}
    assert run_duties(params([desc(old), desc(new)], servers)) == [Load("h1", new), Load("h2", new)]


def test_served_newer_version_marks_old_unused_and_drops_it_everywhere():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[old, new]), "h2": server(loaded=[old], loading=[new])}
    assert run_duties(params([desc(old), desc(new)], servers)) == [
        MarkUnused(old), Drop("h1", old), Drop("h2", old)]


def test_overshadowed_segment_being_loaded_has_its_load_cancelled():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[new]), "h2": server(loaded=[new], loading=[old])}
    got = MarkOvershadowed().run(params([desc(old), desc(new)], servers)).commands
    assert got == (MarkUnused(old), Drop("h2", old))


def test_incomplete_newer_set_does_not_overshadow_the_older_one():
    old = sid(0, "v1")
    p0, p1 = sid(0, "v2", 0), sid(0, "v2", 1)
    servers = {"h1": server(loaded=[old, p0]), "h2": server(loaded=[old, p0])}
    used = [desc(old), desc(p0, num_partitions=2)]
    assert run_duties(params(used, servers)) == [Noop()]
    # Once the last partition is published it is assigned; only once served does the old go.
    used.append(desc(p1, num_partitions=2))
    assert run_duties(params(used, servers)) == [Load("h1", p1), Load("h2", p1)]
    servers = {"h1": server(loaded=[old, p0, p1]), "h2": server(loaded=[old, p0], loading=[p1])}
    assert run_duties(params(used, servers)) == [MarkUnused(old), Drop("h1", old), Drop("h2", old)]


def test_old_version_is_not_re_replicated_once_a_newer_complete_one_exists():
    old, new = sid(0, "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[old]), "h2": server(loading=[new]), "h3": server(loading=[new])}
    assert run_duties(params([desc(old), desc(new)], servers)) == [Noop()]


def test_partial_newer_interval_leaves_the_older_segment_in_use():
    old, new = SegmentId("ds", Interval(0, 2 * DAY), "v1"), sid(0, "v2")
    servers = {"h1": server(loaded=[old, new])}
    assert run_duties(params([desc(old), desc(new)], servers)) == [Noop()]


# --- DropUnneeded ----------------------------------------------------------------------------

def test_unused_and_unknown_segments_are_dropped_wherever_held():
    live, unused, unknown = sid(0), sid(1), sid(2)
    servers = {"h1": server(loaded=[live, unused], loading=[unknown]), "h2": server(loaded=[unknown])}
    got = DropUnneeded().run(params([desc(live)], servers, unused=(desc(unused),), replication=1)).commands
    assert got == (Drop("h1", unused), Drop("h1", unknown), Drop("h2", unknown))


def test_surplus_loaded_replicas_are_dropped_from_the_fullest_holders():
    a, filler = sid(0), sid(1)
    servers = {"h1": server(100, loaded=[a]), "h2": server(100, loaded=[a, filler]), "h3": server(50, loaded=[a])}
    got = DropUnneeded().run(params([desc(a), desc(filler, 20)], servers, replication=1)).commands
    # Utilisation: h1 10/100, h2 30/100, h3 10/50: keep the copy on the emptiest.
    assert got == (Drop("h2", a), Drop("h3", a))


def test_loading_replicas_do_not_make_a_segment_over_replicated():
    a = sid(0)
    servers = {"h1": server(loaded=[a]), "h2": server(loaded=[a]), "h3": server(loading=[a])}
    assert DropUnneeded().run(params([desc(a)], servers)).commands == ()


# --- Balance ---------------------------------------------------------------------------------

def test_balance_moves_from_fullest_to_emptiest_until_moving_would_not_help():
    segs = [sid(d) for d in range(4)]
    servers = {"h1": server(100, loaded=segs), "h2": server(100)}
    got = Balance().run(params([desc(s) for s in segs], servers, replication=1)).commands
    assert got == (Load("h2", segs[0]), Load("h2", segs[1]))


def test_balance_drops_the_source_copy_only_after_the_target_has_loaded_it():
    segs = [sid(d) for d in range(4)]
    used = [desc(s) for s in segs]
    loading = {"h1": server(100, loaded=segs), "h2": server(100, loading=segs[:2])}
    assert run_duties(params(used, loading, replication=1)) == [Noop()]
    loaded = {"h1": server(100, loaded=segs), "h2": server(100, loaded=segs[:2])}
    assert run_duties(params(used, loaded, replication=1)) == [Drop("h1", segs[0]), Drop("h1", segs[1])]


def test_finished_move_drops_the_source_copy_even_onto_a_smaller_target():
    a, b = sid(0), sid(1)
    used = [desc(a, 1), desc(b, 2)]
    before = {"h0": server(9), "h1": server(15, loaded=[a, b]), "h2": server(15, loaded=[a, b])}
    assert run_duties(params(used, before)) == [Load("h0", b)]
    # h0 at 2/9 is fuller than h1 at 3/15, yet dropping b from h1 is what evens the load.
    after = {"h0": server(9, loaded=[b]), "h1": server(15, loaded=[a, b]), "h2": server(15, loaded=[a, b])}
    assert run_duties(params(used, after)) == [Drop("h1", b)]


def test_balance_counts_moves_in_flight_against_max_moves():
    segs = [sid(d) for d in range(6)]
    servers = {"h1": server(100, loaded=segs), "h2": server(100, loading=segs[:1])}
    got = Balance().run(params([desc(s) for s in segs], servers, replication=1, max_moves=2)).commands
    assert got == (Load("h2", segs[1]),)


def test_balance_picks_the_largest_segment_that_still_helps():
    big, mid, small = sid(0), sid(1), sid(2)
    servers = {"h1": server(200, loaded=[big, mid, small]), "h2": server(200)}
    used = [desc(big, 100), desc(mid, 40), desc(small, 10)]
    got = Balance().run(params(used, servers, replication=1)).commands
    # 150 vs 0: moving 100 gives 50/100 (helps); then 50 vs 100 is balanced enough.
    assert got == (Load("h2", big),)


def test_balance_respects_target_capacity_including_segments_it_is_loading():
    a, b, incoming = sid(0), sid(1), sid(2)
    servers = {"h1": server(1000, loaded=[a, b]), "h2": server(100, loading=[incoming])}
    used = [desc(a, 300), desc(b, 300), desc(incoming, 90)]
    assert Balance().run(params(used, servers, replication=1)).commands == ()


def test_balance_does_not_move_a_segment_to_a_server_that_holds_it():
    a = sid(0)
    servers = {"h1": server(100, loaded=[a]), "h2": server(100, loaded=[a]), "h3": server(1000)}
    got = Balance().run(params([desc(a, 60)], servers, replication=2)).commands
    assert got == (Load("h3", a),)
    servers["h3"] = server(1000, loading=[a])
    assert Balance().run(params([desc(a, 60)], servers, replication=2)).commands == ()


def test_balance_ignores_under_replicated_and_zero_sized_segments():
    a, empty = sid(0), sid(1)
    servers = {"h1": server(100, loaded=[a, empty]), "h2": server(100)}
    got = Balance().run(params([desc(a, 50), desc(empty, 0)], servers, replication=2)).commands
    assert got == ()


# --- snapshot validation ---------------------------------------------------------------------

def test_snapshot_errors_name_the_segment():
    a = sid(0)
    with pytest.raises(ValidationError, match=str(a).replace(".", r"\.") + " is listed twice"):
        params([desc(a), desc(a)], {})
    with pytest.raises(ValidationError, match="both used and unused"):
        params([desc(a)], {}, unused=(desc(a),))
    with pytest.raises(ValidationError, match="replication must be >= 0"):
        params([], {}, replication=-1)


def test_command_for_an_unknown_server_is_rejected():
    a = sid(0)
    with pytest.raises(ValidationError, match="server 'ghost'"):
        Assign().run(params([desc(a)], {"h1": server()}, commands=(Load("ghost", a),)))
