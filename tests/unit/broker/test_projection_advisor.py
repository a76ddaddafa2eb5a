"""The projection advisor's pure core: candidates from the shapes of planned SQL, which logged
queries a candidate serves, row estimates from cardinalities and from HLL counts, ranking by rows
saved per byte, and statements that the DDL path plans back into the projection proposed."""

from __future__ import annotations

import pytest

from common.catalog import translate_ddl
from common.query.projection import ProjectionSpec
from common.sql import plan_sql
from common.sql.projection_select import resolve_projection_edits
from common.types.column_type import ColumnType
from services.broker.core.projection_advisor import (Existing, SegmentFacts, advise, aggregator_key, candidates, covers,
                                                     evaluate, serves)
from services.broker.core.query_log import query_shape
from tests.unit.sql.fake_catalog import FakeCatalog

SCHEMA = {"__time": ColumnType.parse("TIMESTAMP"), "channel": ColumnType.parse("STRING"),
          "page": ColumnType.parse("STRING"), "user": ColumnType.parse("STRING"),
          "added": ColumnType.parse("LONG"), "delta": ColumnType.parse("DOUBLE")}
CATALOG = FakeCatalog({"wiki": SCHEMA})
DAY = 86_400_000
# Two daily segments of 10,000 rows: 50 channels, 5,000 pages, 2,000 users each.
SEGMENTS = [SegmentFacts(10_000, i * DAY, (i + 1) * DAY, {"channel": 50, "page": 5_000, "user": 2_000, "__time": 10_000},
                         {"channel": "STRING", "page": "STRING", "user": "STRING", "added": "LONG"}) for i in range(2)]


def shape(sql: str, rows_scanned: int = 20_000) -> dict:
    [native] = plan_sql(sql, CATALOG).native_queries()
    return dict(query_shape(native), rows_scanned=rows_scanned, segments=2, base_segments=2)


BY_CHANNEL = "SELECT channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1"
HOURLY = "SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS n FROM wiki GROUP BY 1"
DAILY = "SELECT FLOOR(__time TO DAY) AS d, COUNT(*) AS n FROM wiki GROUP BY 1"


def test_one_candidate_per_columns_and_granularity_with_the_union_of_aggregators():
    shapes = [shape(BY_CHANNEL), shape("SELECT channel, MAX(delta) AS m FROM wiki GROUP BY 1"), shape(HOURLY),
              shape("SELECT page, COUNT(*) AS n FROM wiki WHERE channel = '#en' GROUP BY 1")]
    found, skipped = candidates(shapes)
    by_key = {(c.columns, c.granularity): c for c in found}
    assert set(by_key) == {(("channel",), "all"), ((), "PT1H"), (("channel", "page"), "all")}
    assert sorted(a["type"] for a in by_key[(("channel",), "all")].aggregators.values()) == \
        ["count", "doubleMax", "longSum"]
    assert skipped == []


def test_shapes_a_projection_cannot_hold_are_left_out_with_the_reason():
    found, skipped = candidates([shape("SELECT UPPER(channel) AS c, COUNT(*) AS n FROM wiki GROUP BY 1"),
                                 shape("SELECT channel, COUNT(*) FILTER (WHERE page = 'x') AS n FROM wiki GROUP BY 1")])
    assert found == []
    assert "upper" in skipped[0].lower() and "cannot write in SQL" in skipped[1]


def test_what_a_candidate_serves():
    [cand] = [c for c in candidates([shape(HOURLY)])[0]]
    assert serves(cand, shape(DAILY))  # hourly buckets roll up into days
    assert serves(cand, shape("SELECT COUNT(*) AS n FROM wiki"))
    assert not serves(cand, shape(BY_CHANNEL))  # no channel column
    [daily] = candidates([shape(DAILY)])[0]
    assert not serves(daily, shape(HOURLY))  # days cannot answer hours
    [by_channel] = candidates([shape("SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1")])[0]
    assert not serves(by_channel, shape(BY_CHANNEL))  # SUM(added) is not stored
    assert covers("P1D", "PT1H") and covers("all", "PT1H") and not covers("PT1H", "all")


def test_hll_rounding_and_names_do_not_make_aggregators_differ():
    a = {"type": "HLLSketchBuild", "name": "a1", "fieldName": "page", "lgK": 12, "round": True}
    assert aggregator_key(a) == aggregator_key(dict(a, name="x", round=False))
    assert aggregator_key(a) != aggregator_key(dict(a, fieldName="user"))


def test_estimates_from_cardinalities_and_from_sketches():
    shapes = [shape(BY_CHANNEL, 20_000), shape(BY_CHANNEL, 20_000)]
    [cand] = candidates(shapes)[0]
    evaluate(cand, shapes, SEGMENTS)
    assert (cand.estimated_rows, cand.base_rows, cand.method) == (100, 20_000, "cardinalities")
    assert (cand.queries, cand.rows_without, cand.rows_with) == (2, 40_000, 200)
    [pair] = candidates([shape("SELECT channel, page, COUNT(*) AS n FROM wiki GROUP BY 1, 2")])[0]
    evaluate(pair, [], SEGMENTS)
    assert pair.estimated_rows == 20_000  # 50 x 5,000 exceeds the rows: capped by them
    evaluate(pair, [], SEGMENTS, combos=lambda cols, gran: {0: 6_000, DAY: 7_000})
    assert (pair.estimated_rows, pair.method) == (13_000, "hll")


def test_queries_that_already_read_a_projection_save_nothing_more():
    read_projection = dict(shape(BY_CHANNEL, 100), base_segments=0)
    [cand] = candidates([read_projection])[0]
    evaluate(cand, [read_projection], SEGMENTS)
    assert cand.rows_with == cand.rows_without == 100


def test_advice_is_ranked_by_rows_saved_per_byte_and_skips_what_does_not_pay():
    shapes = [shape(BY_CHANNEL)] * 3 + [shape(HOURLY)] * 3 + \
        [shape("SELECT page, user, COUNT(*) AS n FROM wiki GROUP BY 1, 2")] * 5
    rows = advise("wiki", shapes, SEGMENTS)
    assert [r["projection"] for r in rows] == ["totals_pt1h", "by_channel"]  # page x user would not halve rows
    assert [r["rank"] for r in rows] == [1, 2]
    assert rows[0]["rows_saved_per_byte"] > rows[1]["rows_saved_per_byte"] > 0
    assert rows[0]["estimated_rows"] == 48 and rows[0]["factor"] == pytest.approx(20_000 / 48, rel=1e-3)
    stored = Existing("by_channel", ("channel",), "all", frozenset(aggregator_key(a) for a in shape(BY_CHANNEL)["aggregators"]))
    again = advise("wiki", shapes, SEGMENTS, existing=[stored])
    assert [r["grouping_columns"] for r in again] == [""]  # by channel is stored already
    fewer = Existing("by_channel", ("channel",), "all", frozenset({aggregator_key({"type": "count"})}))
    renamed = advise("wiki", shapes, SEGMENTS, existing=[fewer])  # it lacks SUM(added): propose, another name
    assert [r["projection"] for r in renamed] == ["totals_pt1h", "by_channel_2"]
    assert advise("other", shapes, SEGMENTS) == []


@pytest.mark.parametrize("sql", [BY_CHANNEL, HOURLY, DAILY,
                                 "SELECT channel, APPROX_COUNT_DISTINCT(page) AS u, MIN(delta) AS m FROM wiki "
                                 "WHERE page = 'x' GROUP BY 1"])
def test_statements_plan_back_into_the_projection_proposed(sql):
    [row] = advise("wiki", [shape(sql)], [SegmentFacts(1_000_000, 0, DAY, {"channel": 5, "page": 5})])
    op = resolve_projection_edits(translate_ddl(row["statement"]), CATALOG)
    spec = ProjectionSpec.from_json(op.edits[0].projection)
    time_col = spec.time_column
    assert tuple(sorted(c for c in spec.grouping_columns if c != time_col)) == tuple(row["grouping_columns"].split(",")
                                                                                    if row["grouping_columns"] else ())
    assert sorted(aggregator_key(a.to_json()) for a in spec.aggregators) == \
        sorted(aggregator_key(a) for a in shape(sql)["aggregators"])
    if row["granularity"] != "all":
        assert str(spec.granularity.period) == row["granularity"]


# An hourly query whose interval starts mid-hour inside the first segment: an hourly projection
# would be refused for it (the edge is not on a PT1H bucket edge), so none may be proposed.
HALF_HOUR_START = ("SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS n FROM wiki "
                   "WHERE __time >= TIMESTAMP '1970-01-01 00:30:00' GROUP BY 1")
ON_THE_HOUR = ("SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS n FROM wiki "
               "WHERE __time >= TIMESTAMP '1970-01-01 03:00:00' GROUP BY 1")
RAW_TIME_FILTER = "SELECT channel, COUNT(*) AS n FROM wiki WHERE __time = TIMESTAMP '1970-01-01 00:30:00' OR channel = 'x' GROUP BY 1"
RAW_TIME_GROUPS = "SELECT __time, COUNT(*) AS n FROM wiki GROUP BY 1"


@pytest.mark.parametrize("sql", [HALF_HOUR_START, RAW_TIME_FILTER, RAW_TIME_GROUPS])
def test_shapes_reading_raw_time_get_no_floor_projection(sql):
    from services.broker.core.projection_advisor import time_need

    s = shape(sql)
    assert time_need(s, SEGMENTS) == "none"
    found, _ = candidates([s], SEGMENTS)
    assert [c.granularity for c in found] == ["none"] and all("__time" not in c.columns for c in found)
    for row in advise("wiki", [s] * 5, SEGMENTS):  # a raw-time projection saves nothing here
        assert "TIME_FLOOR" not in row["statement"] and row["granularity"] == "none"


def test_a_floor_projection_serves_only_shapes_whose_edges_are_on_its_buckets():
    from services.broker.core.projection_advisor import time_need

    hourly = shape(ON_THE_HOUR)
    assert time_need(hourly, SEGMENTS) == "PT1H"  # an edge on the hour, inside the first segment
    [cand] = candidates([hourly], SEGMENTS)[0]
    assert cand.granularity == "PT1H" and serves(cand, hourly, SEGMENTS)
    assert not serves(cand, shape(HALF_HOUR_START), SEGMENTS)
    assert not serves(cand, shape(RAW_TIME_FILTER.replace("channel, ", "").replace(" GROUP BY 1", "")), SEGMENTS)
    # An edge that cuts no segment (the data starts later) does not need raw time.
    later = [SegmentFacts(s.rows, s.start + 10 * DAY, s.end + 10 * DAY, s.cardinality, s.types) for s in SEGMENTS]
    assert time_need(shape(HALF_HOUR_START), later) == "PT1H"
    # The aligned workload still gets its hourly projection.
    rows = advise("wiki", [hourly] * 5, SEGMENTS)
    assert rows and rows[0]["granularity"] == "PT1H" and "TIME_FLOOR(__time, 'PT1H')" in rows[0]["statement"]
