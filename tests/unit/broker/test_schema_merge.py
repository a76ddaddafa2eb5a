"""columnTypeMergePolicy: segments that disagree on a column's type."""

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from common.types.interval import Interval
from services.broker.core.schema_merge import conflict_error, merge_schemas

T = ColumnType.parse


def sid(day: int, version: str = "v1") -> SegmentId:
    start = 86_400_000 * day
    return SegmentId("ds", Interval(start, start + 86_400_000), version, 0)


PAIRS = [(sid(2), {"x": T("STRING"), "n": T("LONG"), "a": T("LONG")}),
         (sid(1), {"x": T("LONG"), "n": T("DOUBLE"), "a": T("ARRAY<LONG>")}),
         (sid(3), {"x": T("LONG"), "n": T("LONG"), "j": T("COMPLEX<json>")})]


def test_least_restrictive_widens_by_the_ingestion_rules():
    m = merge_schemas(PAIRS)
    assert m.schema == {"x": T("STRING"), "n": T("DOUBLE"), "a": T("ARRAY<LONG>"), "j": T("COMPLEX<json>")}
    rules = {d["column"]: d["rule"] for d in m.decisions}
    assert rules == {"x": "leastRestrictive: number+string -> STRING",
                     "n": "leastRestrictive: LONG+DOUBLE -> DOUBLE",
                     "a": "leastRestrictive: scalar+array -> ARRAY of the widened element"}


def test_latest_interval_takes_the_latest_segments_type():
    m = merge_schemas(PAIRS, "latestInterval")
    assert m.schema["x"] == T("LONG") and m.schema["n"] == T("LONG") and m.schema["a"] == T("LONG")


def test_fail_names_column_types_and_a_segment_of_each():
    m = merge_schemas(PAIRS, "fail")
    err = conflict_error("ds", "x", m.conflicts["x"])
    text = str(err)
    assert isinstance(err, ValidationError)
    assert "column 'x'" in text and f"LONG in segment {sid(1)}" in text and f"STRING in segment {sid(2)}" in text


def test_declared_catalog_type_overrides_every_policy():
    for policy in ("leastRestrictive", "latestInterval", "fail"):
        m = merge_schemas(PAIRS, policy, {"x": T("DOUBLE")})
        assert m.schema["x"] == T("DOUBLE")


def test_unknown_policy_is_refused():
    with pytest.raises(ValidationError, match="columnTypeMergePolicy"):
        merge_schemas(PAIRS, "newest")
