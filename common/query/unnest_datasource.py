"""UnnestDataSource: Druid's ``unnest`` data source, a table's rows exploded by an array.

    {"type": "unnest", "base": "t" | {"type": "table", ...} | {"type": "unnest", ...},
     "virtualColumn": {"type": "expression", "name": "j0.unnest", "expression": "\\"tags\\""},
     "unnestFilter": {...}}

Each base row gives one row per element of the virtual column's array (a single value counts as a
one-element array; a null or empty array gives no rows), the base columns repeated beside the
element, which is named after the virtual column. ``unnestFilter`` keeps the elements it matches
before the query filters and aggregates. The explosion runs per segment on the historicals
(``unnest_row_source``), so a query over an unnest data source scatters as one over its table.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import ValidationError, unknown_name_message
from common.query.filters import Filter, filter_from_json, filter_to_json
from common.query.virtual_column import VirtualColumn
from common.types.column_type import TIME_COLUMN, ColumnType

STRING = ColumnType.parse("STRING")


@dataclass(frozen=True)
class UnnestDataSource:
    base: str | UnnestDataSource  # a table, or another unnest (nested UNNESTs)
    virtual_column: VirtualColumn
    unnest_filter: Filter | None = None

    @property
    def datasource_name(self) -> str:
        return self.base if isinstance(self.base, str) else self.base.datasource_name

    @property
    def output(self) -> str:
        return self.virtual_column.name

    def element_type(self, schema: dict[str, ColumnType]) -> ColumnType:
        """The type of the unnested column: the array's element type (a declared scalar output
        type, as Druid writes ``"outputType": "STRING"`` for a multi-value string, is the element's)."""
        vc = self.virtual_column
        declared = vc.declared_type
        if declared is not None and not declared.is_array:
            return declared
        out = vc.output_type_for(schema)
        if out.is_array:
            return out.element
        return out if (out.is_numeric or out.is_string) else STRING

    def schema_over(self, schema: dict[str, ColumnType]) -> dict[str, ColumnType]:
        """What a query over this data source sees: the base's columns and the unnested one."""
        base = schema if isinstance(self.base, str) else self.base.schema_over(schema)
        out = dict(base)
        out[self.output] = self.element_type(base)
        return out

    def validate(self, schema: dict[str, ColumnType]) -> None:
        """Fail naming the unknown column or the clash, before any segment is read."""
        base = schema if isinstance(self.base, str) else self.base.schema_over(schema)
        if not isinstance(self.base, str):
            self.base.validate(schema)
        available = dict(base)
        available.setdefault(TIME_COLUMN, ColumnType.parse("TIMESTAMP"))
        for col in self.virtual_column.columns():
            if col not in available:
                raise ValidationError(f"unnest virtual column '{self.output}': "
                                      + unknown_name_message("column", col, available))
        if self.output in available:
            raise ValidationError(f"unnest virtual column '{self.output}' has the name of a column of "
                                  f"'{self.datasource_name}'; name it differently (Druid's planner uses 'j0.unnest')")
        if self.unnest_filter is not None:
            for col in self.unnest_filter.columns():
                if col != self.output:
                    raise ValidationError(f"unnestFilter may read only the unnested column '{self.output}', not "
                                          f"'{col}'; put filters on other columns in the query's 'filter'")

    def to_json(self) -> dict:
        base = {"type": "table", "name": self.base} if isinstance(self.base, str) else self.base.to_json()
        out = {"type": "unnest", "base": base, "virtualColumn": self.virtual_column.to_json()}
        if self.unnest_filter is not None:
            out["unnestFilter"] = filter_to_json(self.unnest_filter)
        return out

    @staticmethod
    def from_json(obj: dict) -> UnnestDataSource:
        base = obj.get("base")
        if isinstance(base, dict):
            kind = base.get("type")
            if kind == "table":
                base = base.get("name")
            elif kind == "unnest":
                base = UnnestDataSource.from_json(base)
            else:
                raise ValidationError(f"an unnest data source's 'base' must be a table or another unnest, got type "
                                      f"'{kind}'; unnest a query's rows with SQL (CROSS JOIN UNNEST over a subquery)")
        if not base or not isinstance(base, (str, UnnestDataSource)):
            raise ValidationError(f"an unnest data source needs a 'base' table, got {obj.get('base')!r:.80}")
        vc = obj.get("virtualColumn")
        if not isinstance(vc, dict):
            raise ValidationError("an unnest data source needs a 'virtualColumn' (e.g. {\"type\": \"expression\", "
                                  "\"name\": \"j0.unnest\", \"expression\": \"\\\"tags\\\"\"})")
        virtual_column = VirtualColumn.from_json(vc)
        if type(virtual_column) is not VirtualColumn:
            raise ValidationError("an unnest data source's 'virtualColumn' must be an expression virtual column")
        return UnnestDataSource(base, virtual_column, filter_from_json(obj.get("unnestFilter")))


def table_of(datasource) -> str | None:
    """The table a query's data source reads segments of (a table, or an unnest of one); None for
    a query data source, which runs on the broker over its inner query's result."""
    if isinstance(datasource, str):
        return datasource
    if isinstance(datasource, UnnestDataSource):
        return datasource.datasource_name
    return None


__all__ = ["UnnestDataSource", "table_of"]
