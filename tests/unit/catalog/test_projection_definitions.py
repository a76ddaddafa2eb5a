"""Projections in the catalog: the ``projections`` property, its validation, the
addProjection/dropProjection edits and the DDL that makes them."""

from __future__ import annotations

import pytest

from common.catalog.ddl import translate_ddl
from common.catalog.operations import AddProjection, DropProjection, EditTable, apply_edits, edit_from_json
from common.catalog.table_spec import TableId, TableSpec
from common.catalog.validation import validate_table
from common.errors import ValidationError

WIKI = TableId("druid", "wiki")
HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}


def spec(projections, sealed=False, columns=(("channel", "VARCHAR"), ("added", "BIGINT"))):
    return TableSpec.from_json({"type": "datasource",
                                "properties": {"projections": projections, **({"sealed": True} if sealed else {})},
                                "columns": [{"name": n, "sqlType": t} for n, t in columns]})


def test_a_valid_projection_round_trips():
    s = spec([HOURLY])
    validate_table(WIKI, s)
    assert TableSpec.from_json(s.to_json()).projections == [HOURLY]


@pytest.mark.parametrize("projections, sealed, message", [
    ([HOURLY, HOURLY], False, "projection names must be unique; repeated: hourly"),
    ([{**HOURLY, "type": "rollup"}], False, r"\[0\]: projection type must be 'aggregate'"),
    ([{**HOURLY, "aggregators": [{"type": "longSum", "name": "x"}]}], False, "needs 'fieldName' or 'expression'"),
    ([{**HOURLY, "groupingColumns": [{"name": "chanel"}]}], True, "unknown column 'chanel'; did you mean 'channel'"),
    ([{**HOURLY, "aggregators": [{"type": "count", "name": "h"}]}], False, r"duplicate names \['h'\]"),
    ("hourly", False, "must be a list of projection definitions"),
])
def test_invalid_projections_are_refused_with_the_reason(projections, sealed, message):
    with pytest.raises(ValidationError, match=message):
        validate_table(WIKI, spec(projections, sealed))


def test_an_unsealed_table_may_name_undeclared_columns():
    validate_table(WIKI, spec([{**HOURLY, "groupingColumns": [{"name": "page"}]}]))


def test_add_and_drop_projection_edits():
    base = spec([])
    added = apply_edits(base, [AddProjection(HOURLY, "hourly")])
    assert added.projections == [HOURLY]
    with pytest.raises(ValidationError, match="projection 'hourly' already exists; drop it first"):
        apply_edits(added, [AddProjection(HOURLY, "hourly")])
    dropped = apply_edits(added, [DropProjection("hourly")])
    assert dropped.projections == [] and "projections" not in dropped.properties
    with pytest.raises(ValidationError, match="unknown projection 'hourlz'; did you mean 'hourly'"):
        apply_edits(added, [DropProjection("hourlz")])


def test_edits_travel_as_json():
    assert edit_from_json({"op": "addProjection", "projection": HOURLY}) == AddProjection(HOURLY, "hourly")
    assert edit_from_json({"op": "dropProjection", "name": "hourly"}) == DropProjection("hourly")
    with pytest.raises(ValidationError, match="needs a 'projection' object"):
        edit_from_json({"op": "addProjection"})


def test_ddl_keeps_the_select_for_the_broker_to_plan():
    op = translate_ddl("ALTER TABLE wiki ADD PROJECTION hourly AS SELECT TIME_FLOOR(__time, 'PT1H') AS h, "
                       "channel, COUNT(*) AS n FROM wiki GROUP BY 1, 2;")
    assert isinstance(op, EditTable) and op.table == WIKI
    (edit,) = op.edits
    assert edit.name == "hourly" and edit.projection is None
    assert edit.select_sql == "SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n FROM wiki GROUP BY 1, 2"
    assert translate_ddl("alter table wiki drop projection hourly").edits == (DropProjection("hourly"),)


def test_an_unplanned_projection_cannot_be_applied():
    with pytest.raises(ValidationError, match="still SQL text"):
        AddProjection(None, "p", "SELECT 1").apply(spec([]))


def test_ddl_errors_say_where():
    with pytest.raises(ValidationError, match="expected SELECT after ADD PROJECTION name AS"):
        translate_ddl("ALTER TABLE wiki ADD PROJECTION p AS (1)")


def test_json_column_storage_options_are_validated():
    def table(props, sql_type="COMPLEX<json>"):
        return TableSpec.from_json({"type": "datasource",
                                    "columns": [{"name": "doc", "sqlType": sql_type, "properties": props}]})

    validate_table(WIKI, table({"maxFields": 50, "typedPaths": {"$.a.b": "BIGINT"}, "skipPaths": ["re:^\\$\\.tmp"],
                                "keepRaw": False}))
    with pytest.raises(ValidationError, match="column 'doc': keepRaw apply to COMPLEX<json> columns only"):
        validate_table(WIKI, table({"keepRaw": False}, "VARCHAR"))
    with pytest.raises(ValidationError, match="JSON column 'doc': maxFields must be a whole number"):
        validate_table(WIKI, table({"maxFields": "many"}))
