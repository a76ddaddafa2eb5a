"""The discovery key layout: every family round-trips through its builder and parser, segment ids
with '/' and '%' stay one path element, and malformed keys or elements are refused by name."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.discovery.keys import (
    CATALOG_VERSION_KEY,
    NodeKey,
    SegmentKey,
    assignment_key,
    assignments_prefix,
    leader_key,
    load_failure_key,
    load_failures_prefix,
    node_key,
    nodes_prefix,
    parse_assignment_key,
    parse_load_failure_key,
    parse_node_key,
    parse_served_key,
    served_key,
    served_prefix,
)

ODD = SegmentId("a/b%20c_d", Interval.parse("2020-01-01/2020-01-02"), "v/1", 10)


def test_node_keys_round_trip_and_sit_under_their_role_prefix():
    key = node_key("historical", "h-1")
    assert key == "/strata/nodes/historical/h-1"
    assert key.startswith(nodes_prefix("historical")) and key.startswith(nodes_prefix())
    assert parse_node_key(key) == NodeKey("historical", "h-1")


@pytest.mark.parametrize("build,prefix,parse", [(assignment_key, assignments_prefix, parse_assignment_key),
                                                (served_key, served_prefix, parse_served_key),
                                                (load_failure_key, load_failures_prefix, parse_load_failure_key)])
def test_segment_keys_hold_the_id_as_one_element(build, prefix, parse):
    key = build("h1", ODD)
    assert key.startswith(prefix("h1")) and key.startswith(prefix())
    assert key.count("/") == prefix("h1").count("/")  # the id's own '/' are quoted
    assert parse(key) == SegmentKey("h1", str(ODD))
    assert not build("h1", ODD).startswith(prefix("h"))  # h1's keys are not under h's prefix


def test_each_family_has_its_own_root():
    assert assignment_key("h1", ODD).startswith("/strata/assignments/h1/")
    assert served_key("h1", ODD).startswith("/strata/served/h1/")
    assert load_failure_key("h1", ODD).startswith("/strata/load_failures/h1/")
    assert leader_key("coordinator") == "/strata/leader/coordinator"
    assert CATALOG_VERSION_KEY == "/strata/catalog/version"


@pytest.mark.parametrize("key", ["/strata/served/h1", "/strata/served//x", "/strata/nodes/h1/x",
                                 "/strata/served/h1/x/y", "served/h1/x"])
def test_malformed_keys_are_refused_naming_the_key(key):
    with pytest.raises(ValidationError, match="is not a served-segment key"):
        parse_served_key(key)


@pytest.mark.parametrize("bad", ["", "a/b"])
def test_elements_with_a_slash_or_empty_are_refused(bad):
    with pytest.raises(ValidationError, match="discovery key element"):
        node_key("historical", bad)
    with pytest.raises(ValidationError, match="server id"):
        served_key(bad, ODD)


def test_a_load_failure_report_round_trips_with_its_typed_segment():
    from services.discovery.load_failure import LoadFailureReport

    report = LoadFailureReport(ODD, "deep storage object ... does not exist\n\u00e9", 3, 1_700_000_000_000)
    assert LoadFailureReport.from_bytes(report.to_bytes()) == report
