"""Stages: the executable form of a SQL plan, a tree whose leaves are native queries pushed to the
cluster and whose inner nodes run on the broker over Arrow.

Every stage returns a table whose columns are its ``columns`` (distinct names, one per logical
field) typed as its ``fields`` say, so a parent never has to know how a child computed its rows.
A ``NativeStage`` with an ``input`` runs its query on the broker over the input's table with
``execute_on_table`` (the same engine historicals use, over Arrow instead of segments).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from common.errors import UnsupportedError
from common.query.engine import execute_on_table
from common.query.model import Query
from common.sql import broker_ops
from common.sql.logical_plan import Field, TableRef

BROKER_INPUT = "__input"
DEFAULT_MAX_JOIN_ROWS = 100_000


@dataclass
class ExecContext:
    run_native: Callable[[Query], pa.Table]
    catalog: object
    max_join_rows: int = DEFAULT_MAX_JOIN_ROWS
    fetched: dict = field(default_factory=dict)  # sys tables already read while planning


class Stage:
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def children(self) -> tuple[Stage, ...]:
        return ()

    def execute(self, ctx: ExecContext) -> pa.Table:
        raise NotImplementedError

    def pushed_queries(self) -> list[Query]:
        out: list[Query] = []
        for child in self.children():
            out.extend(child.pushed_queries())
        return out

    def explain(self) -> list[dict]:
        """Druid-style EXPLAIN entries, children first (the order things run in)."""
        out: list[dict] = []
        for child in self.children():
            out.extend(child.explain())
        entry = self._explain_entry()
        if entry is not None:
            out.append(entry)
        return out

    def _explain_entry(self) -> dict | None:
        return None

    def resources(self) -> list[dict]:
        out: list[dict] = []
        for child in self.children():
            for r in child.resources():
                if r not in out:
                    out.append(r)
        return out


def _signature(fields, columns) -> list[dict]:
    return [{"name": c, "type": f.type.native_output_name if f.type.column_type is not None else "STRING"}
            for c, f in zip(columns, fields)]


@dataclass
class NativeStage(Stage):
    query: Query
    sources: tuple[str, ...]  # result column of the query for each field
    fields: tuple[Field, ...]
    columns: tuple[str, ...]
    input: Stage | None = None  # None: pushed to the cluster

    def children(self):
        return () if self.input is None else (self.input,)

    def pushed_queries(self):
        return super().pushed_queries() + ([self.query] if self.input is None else [])

    def execute(self, ctx: ExecContext) -> pa.Table:
        if self.input is None:
            table = ctx.run_native(self.query)
        else:
            table = execute_on_table(self.query, self.input.execute(ctx)).table
        return broker_ops.shape(table, self.sources, self.fields, self.columns)

    def _explain_entry(self):
        entry = {"query": self.query.to_json(), "signature": _signature(self.fields, self.sources),
                 "columnMappings": [{"queryColumn": s, "outputColumn": f.name}
                                    for s, f in zip(self.sources, self.fields)]}
        if self.input is not None:
            entry["runsOn"] = "broker"
        return entry

    def resources(self):
        out = super().resources()
        if self.input is None:
            r = {"name": self.query.datasource_name, "type": "DATASOURCE"}
            if r not in out:
                out.append(r)
        return out


@dataclass
class SelectStage(Stage):
    """Columns of the input, by position, renamed (no native query needed)."""

    input: Stage
    positions: tuple[int, ...]
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def children(self):
        return (self.input,)

    def execute(self, ctx):
        table = self.input.execute(ctx)
        sources = [self.input.columns[p] for p in self.positions]
        return broker_ops.shape(table, sources, self.fields, self.columns)


@dataclass
class SortStage(Stage):
    input: Stage
    keys: tuple[tuple[str, bool, bool | None], ...]  # (column, descending, nulls_first)
    limit: int | None
    offset: int
    fields: tuple[Field, ...] = field(default=())
    columns: tuple[str, ...] = field(default=())

    def __post_init__(self):
        self.fields = self.input.fields
        self.columns = self.input.columns

    def children(self):
        return (self.input,)

    def execute(self, ctx):
        return broker_ops.sort(self.input.execute(ctx), self.keys, self.limit, self.offset)

    def _explain_entry(self):
        return {"brokerOperation": "sort", "orderBy": [
            {"column": c, "direction": "descending" if d else "ascending"} for c, d, _ in self.keys],
            "limit": self.limit, "offset": self.offset}


@dataclass
class TableStage(Stage):
    """A sys or INFORMATION_SCHEMA table, materialized from the catalog when the plan runs."""

    table: TableRef
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def execute(self, ctx):
        from common.sql.catalog import table_data

        data = table_data(ctx.catalog, self.table, ctx.fetched)
        return broker_ops.shape(data, [f.name for f in self.fields], self.fields, self.columns)

    def _explain_entry(self):
        return {"brokerOperation": "systemTable", "table": f"{self.table.schema}.{self.table.name}"}

    def resources(self):
        return [{"name": f"{self.table.schema}.{self.table.name}", "type": "SYSTEM_TABLE"}]


@dataclass
class ValuesStage(Stage):
    rows: tuple[tuple, ...]
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def execute(self, ctx):
        return broker_ops.constant_rows(self.rows, self.fields, self.columns)


@dataclass
class JoinStage(Stage):
    left: Stage
    right: Stage
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    description: str
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def children(self):
        return (self.left, self.right)

    def execute(self, ctx):
        left = self.left.execute(ctx)
        right = self.right.execute(ctx)
        limit = ctx.max_join_rows
        if min(left.num_rows, right.num_rows) > limit:
            raise UnsupportedError(
                f"{self.description}: both inputs are larger than maxJoinRows={limit} ({left.num_rows} and "
                f"{right.num_rows} rows); the broker joins only when one side is small. Filter one side, or raise "
                f"the context parameter maxJoinRows")
        return broker_ops.hash_join(left, right, self.kind, self.left_keys, self.right_keys, self.columns)

    def _explain_entry(self):
        keys = [f"{self.left.columns[a]} = {self.right.columns[b]}" for a, b in zip(self.left_keys, self.right_keys)]
        return {"brokerOperation": "hashJoin", "joinType": self.kind, "condition": " AND ".join(keys)}


@dataclass
class UnnestStage(Stage):
    """UNNEST on the broker: the input's rows repeated once per element of its array column at
    ``position`` (which is dropped), the element appended; null and empty arrays give no rows."""

    input: Stage
    position: int
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def children(self):
        return (self.input,)

    def execute(self, ctx):
        import pyarrow.compute as pc

        table = self.input.execute(ctx)
        arrays = table.column(self.position).combine_chunks()
        if len(pc.list_flatten(arrays)) != len(pc.list_parent_indices(arrays)):
            arrays = pa.array(arrays.to_pylist(), arrays.type)  # null rows spanning values: rebuild them empty
        parents = pc.list_parent_indices(arrays)
        # Repeat only the other columns: taking the array column too copied every array once per element.
        others = table.remove_column(self.position)
        kept = list(others.take(parents).columns) if others.num_columns else []
        element = pc.list_flatten(arrays).cast(self.fields[-1].type.to_arrow())
        return pa.Table.from_arrays(kept + [element], names=list(self.columns))

    def _explain_entry(self):
        return {"brokerOperation": "unnest", "column": self.columns[-1]}


@dataclass
class UnionStage(Stage):
    inputs: tuple[Stage, ...]
    fields: tuple[Field, ...]
    columns: tuple[str, ...]

    def children(self):
        return self.inputs

    def execute(self, ctx):
        return broker_ops.concat([s.execute(ctx) for s in self.inputs], self.fields, self.columns)

    def _explain_entry(self):
        return {"brokerOperation": "unionAll", "inputs": len(self.inputs)}
