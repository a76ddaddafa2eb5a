"""The logical plan: immutable relational nodes the translator builds and the rules rewrite.

Every node knows its output ``fields``; scalar expressions refer to the fields of a node's input
by position. The node set is deliberately small (scan, values, filter, project, aggregate, sort,
join, union): DISTINCT is an Aggregate without calls, HAVING a Filter above an Aggregate, LIMIT and
OFFSET live on Sort. ``describe()`` prints a tree for tests and error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from common.sql.scalar import Call, Literal, Ref, Scalar
from common.sql.sql_types import SqlType
from common.types.column_type import JSON as JSON_TYPE


@dataclass(frozen=True)
class Field:
    name: str
    type: SqlType


@dataclass(frozen=True)
class TableRef:
    schema: str  # druid, sys, INFORMATION_SCHEMA, ext
    name: str
    kind: str  # datasource | system | information_schema | external
    fields: tuple[Field, ...]
    args: tuple[tuple[str, object], ...] = ()  # table-function arguments of an external table


class RelNode:
    @property
    def fields(self) -> tuple[Field, ...]:
        raise NotImplementedError

    def inputs(self) -> tuple[RelNode, ...]:
        return ()

    def with_inputs(self, inputs: tuple[RelNode, ...]) -> RelNode:
        return self

    def map_scalars(self, fn: Callable[[Scalar], Scalar]) -> RelNode:
        return self

    def describe(self, indent: int = 0) -> str:
        pad = "  " * indent
        lines = [pad + self._label()]
        for child in self.inputs():
            lines.append(child.describe(indent + 1))
        return "\n".join(lines)

    def _label(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class TableScan(RelNode):
    table: TableRef

    @property
    def fields(self):
        return self.table.fields

    def _label(self):
        return f"TableScan({self.table.schema}.{self.table.name})"


@dataclass(frozen=True)
class Values(RelNode):
    """Constant rows; SELECT without FROM reads one row with no columns."""

    rows: tuple[tuple[Literal, ...], ...]
    value_fields: tuple[Field, ...] = ()

    @property
    def fields(self):
        return self.value_fields

    def _label(self):
        return f"Values({len(self.rows)} rows)"


@dataclass(frozen=True)
class Filter(RelNode):
    input: RelNode
    condition: Scalar

    @property
    def fields(self):
        return self.input.fields

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def map_scalars(self, fn):
        return replace(self, condition=fn(self.condition))

    def _label(self):
        return f"Filter({show(self.condition)})"


@dataclass(frozen=True)
class Project(RelNode):
    input: RelNode
    exprs: tuple[Scalar, ...]
    names: tuple[str, ...]

    @property
    def fields(self):
        return tuple(Field(n, e.type) for n, e in zip(self.names, self.exprs))

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def map_scalars(self, fn):
        return replace(self, exprs=tuple(fn(e) for e in self.exprs))

    def is_identity(self) -> bool:
        return len(self.exprs) == len(self.input.fields) and all(
            isinstance(e, Ref) and e.index == i for i, e in enumerate(self.exprs)) and \
            self.names == tuple(f.name for f in self.input.fields)

    def _label(self):
        return "Project(" + ", ".join(f"{n}={show(e)}" for n, e in zip(self.names, self.exprs)) + ")"


AGGREGATE_FUNCTIONS = ("COUNT", "SUM", "MIN", "MAX", "AVG", "APPROX_COUNT_DISTINCT", "ANY_VALUE", "EARLIEST", "LATEST",
                       "ARRAY_CONCAT_AGG", "ARRAY_CONCAT_AGG_DISTINCT", "ARRAY_AGG", "ARRAY_AGG_DISTINCT")


@dataclass(frozen=True)
class AggCall:
    func: str  # one of AGGREGATE_FUNCTIONS; COUNT without args is COUNT(*)
    args: tuple[Scalar, ...]
    type: SqlType
    distinct: bool = False
    filter: Scalar | None = None

    def map_scalars(self, fn) -> AggCall:
        return replace(self, args=tuple(fn(a) for a in self.args),
                       filter=None if self.filter is None else fn(self.filter))

    def label(self) -> str:
        inner = ", ".join(show(a) for a in self.args) or "*"
        text = f"{self.func}({'DISTINCT ' if self.distinct else ''}{inner})"
        return text + (f" FILTER({show(self.filter)})" if self.filter is not None else "")


@dataclass(frozen=True)
class Aggregate(RelNode):
    """Groups by ``group`` expressions over the input; outputs the group keys, then the calls."""

    input: RelNode
    group: tuple[Scalar, ...]
    calls: tuple[AggCall, ...]
    names: tuple[str, ...]

    @property
    def fields(self):
        types = [g.type for g in self.group] + [c.type for c in self.calls]
        return tuple(Field(n, t) for n, t in zip(self.names, types))

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def map_scalars(self, fn):
        return replace(self, group=tuple(fn(g) for g in self.group), calls=tuple(c.map_scalars(fn) for c in self.calls))

    def _label(self):
        return ("Aggregate(group=[" + ", ".join(show(g) for g in self.group) + "], calls=["
                + ", ".join(c.label() for c in self.calls) + "])")


@dataclass(frozen=True)
class SortKey:
    index: int
    descending: bool = False
    nulls_first: bool | None = None  # None: SQL's default (first ascending, last descending)

    @property
    def default_nulls(self) -> bool:
        return self.nulls_first is None or self.nulls_first == (not self.descending)


@dataclass(frozen=True)
class Sort(RelNode):
    input: RelNode
    keys: tuple[SortKey, ...] = ()
    limit: int | None = None
    offset: int = 0

    @property
    def fields(self):
        return self.input.fields

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def _label(self):
        keys = ", ".join(f"${k.index}{' DESC' if k.descending else ''}" for k in self.keys)
        return f"Sort([{keys}], limit={self.limit}, offset={self.offset})"


def _unnested_fields(input: RelNode, expr: Scalar, name: str) -> tuple:
    """The fields of ``input`` and the element of ``expr`` as ``name``: Unnest's and UnnestScan's."""
    from common.sql.sql_types import from_column_type  # a cycle: sql_types is imported by the scalars

    element = from_column_type(expr.type.column_type.element)
    if isinstance(expr, Call) and expr.op == "JSON_QUERY_ARRAY":
        # its elements are JSON documents (held as text in an ARRAY<VARCHAR>): typed as
        # COMPLEX<json> once unnested, so JSON_VALUE and JSON_QUERY read into them, as in Druid
        element = from_column_type(JSON_TYPE)
    return input.fields + (Field(name, element),)


@dataclass(frozen=True)
class Unnest(RelNode):
    """UNNEST: one row per element of the array ``expr`` (over the input's fields) in each input
    row, the input's columns repeated beside it as ``name``; a null or empty array gives no rows,
    as Druid's UNNEST."""

    input: RelNode
    expr: Scalar
    name: str

    @property
    def fields(self):
        return _unnested_fields(self.input, self.expr, self.name)

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def map_scalars(self, fn):
        return replace(self, expr=fn(self.expr))

    def _label(self):
        return f"Unnest({show(self.expr)} AS {self.name})"


@dataclass(frozen=True)
class UnnestScan(RelNode):
    """UNNEST of a datasource's rows (``input``: its TableScan, or another UnnestScan), which the
    native planner sends to the historicals as an ``unnest`` data source. Same rows as ``Unnest``;
    a node of its own so that no rule moves filters or projections below it again (they run on
    the exploded rows, or as the data source's filters)."""

    input: RelNode
    expr: Scalar
    name: str

    @property
    def fields(self):
        return _unnested_fields(self.input, self.expr, self.name)

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])

    def map_scalars(self, fn):
        return replace(self, expr=fn(self.expr))

    def _label(self):
        return f"UnnestScan({show(self.expr)} AS {self.name})"


@dataclass(frozen=True)
class Join(RelNode):
    """Output: the left fields, then the right fields. ``condition`` refers to both, right
    fields shifted by the number of left fields; the equi_join rule turns it into key pairs."""

    left: RelNode
    right: RelNode
    kind: str  # INNER | LEFT
    condition: Scalar | None = None
    left_keys: tuple[int, ...] = ()
    right_keys: tuple[int, ...] = ()
    description: str = ""  # how the query spelled the join, for errors

    @property
    def fields(self):
        return self.left.fields + self.right.fields

    def inputs(self):
        return (self.left, self.right)

    def with_inputs(self, inputs):
        return replace(self, left=inputs[0], right=inputs[1])

    def map_scalars(self, fn):
        return self if self.condition is None else replace(self, condition=fn(self.condition))

    def _label(self):
        keys = ", ".join(f"${a}=${b}" for a, b in zip(self.left_keys, self.right_keys))
        cond = "" if self.condition is None else f", {show(self.condition)}"
        return f"Join({self.kind}, keys=[{keys}]{cond})"


@dataclass(frozen=True)
class Union(RelNode):
    """UNION ALL; the output takes the first input's names and the unified types."""

    union_inputs: tuple[RelNode, ...]
    union_fields: tuple[Field, ...]

    @property
    def fields(self):
        return self.union_fields

    def inputs(self):
        return self.union_inputs

    def with_inputs(self, inputs):
        return replace(self, union_inputs=tuple(inputs))

    def _label(self):
        return f"Union({len(self.union_inputs)} inputs)"


def show(e: Scalar | None) -> str:
    if e is None:
        return "-"
    if isinstance(e, Ref):
        return f"${e.index}"
    if isinstance(e, Literal):
        return repr(e.value)
    if isinstance(e, Call):
        return f"{e.op}(" + ", ".join(show(a) for a in e.args) + ")"
    return str(e)


def transform_plan(node: RelNode, fn: Callable[[RelNode], RelNode]) -> RelNode:
    """Rebuild bottom-up, applying ``fn`` to every node after its inputs."""
    inputs = node.inputs()
    if inputs:
        new_inputs = tuple(transform_plan(i, fn) for i in inputs)
        if any(a is not b for a, b in zip(new_inputs, inputs)):
            node = node.with_inputs(new_inputs)
    return fn(node)


def walk(node: RelNode):
    yield node
    for child in node.inputs():
        yield from walk(child)
