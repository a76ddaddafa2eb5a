"""ADD PROJECTION's SELECT planned into a projection definition, and refused when a projection
cannot hold it."""

from __future__ import annotations

import pytest

from common.catalog.ddl import translate_ddl
from common.errors import ValidationError
from common.query.projection import ProjectionSpec
from common.sql.projection_select import projection_from_select, resolve_projection_edits
from common.types.column_type import ColumnType
from tests.unit.sql.fake_catalog import FakeCatalog

SCHEMA = {"__time": ColumnType.parse("TIMESTAMP"), "channel": ColumnType.parse("VARCHAR"),
          "page": ColumnType.parse("VARCHAR"), "user": ColumnType.parse("VARCHAR"),
          "added": ColumnType.parse("BIGINT")}
CATALOG = FakeCatalog({"wiki": SCHEMA, "other": SCHEMA})


def test_the_issue_example_becomes_an_hourly_projection():
    out = projection_from_select(
        "p", "SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS added, "
             "APPROX_COUNT_DISTINCT_DS_HLL(\"user\") AS users FROM wiki GROUP BY 1, 2", CATALOG, "wiki")
    spec = ProjectionSpec.from_json(out)
    assert spec.grouping_columns == ("h", "channel")
    assert [a.name for a in spec.aggregators] == ["n", "added", "users"]
    assert spec.time_column == "h" and spec.granularity.to_json() == "hour"


def test_where_becomes_the_projection_filter_and_expressions_virtual_columns():
    out = projection_from_select("p", "SELECT channel, LOWER(page) AS lp, COUNT(*) AS n FROM wiki "
                                      "WHERE channel IN ('#en', '#fr') GROUP BY 1, 2", CATALOG, "wiki")
    assert out["filter"] == {"type": "in", "dimension": "channel", "values": ["#en", "#fr"]}
    assert out["virtualColumns"] == [{"type": "expression", "name": "lp", "expression": "lower(page)",
                                      "outputType": "STRING"}]
    assert [g["name"] for g in out["groupingColumns"]] == ["channel", "lp"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT channel, AVG(added) AS a FROM wiki GROUP BY 1", "such as AVG"),
    ("SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 HAVING COUNT(*) > 1", "HAVING"),
    ("SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 3", "topN query"),
    ("SELECT channel, page, COUNT(*) AS n FROM wiki GROUP BY 1, 2 LIMIT 3", "LIMIT"),
    ("SELECT channel, COUNT(*) AS n FROM other GROUP BY 1", "must read table wiki"),
    ("SELECT channel, page FROM wiki", "must aggregate"),
    ("SELECT chanel, COUNT(*) FROM wiki GROUP BY 1", "chanel"),
])
def test_what_a_projection_cannot_hold_is_refused(sql, message):
    with pytest.raises(ValidationError, match=message):
        projection_from_select("p", sql, CATALOG, "wiki")


def test_ddl_edits_are_resolved_against_the_catalog():
    op = translate_ddl("ALTER TABLE wiki ADD PROJECTION by_channel AS SELECT channel, COUNT(*) AS n FROM wiki "
                       "GROUP BY channel")
    resolved = resolve_projection_edits(op, CATALOG)
    (edit,) = resolved.edits
    assert edit.projection["name"] == "by_channel" and edit.projection["aggregators"] == [{"type": "count",
                                                                                         "name": "n"}]
