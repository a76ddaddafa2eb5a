"""Post-aggregators: values computed from finalized aggregates (arithmetic, constants, expressions).

They run on the merged, finalized result table, so ``fieldAccess`` and ``finalizingFieldAccess``
both read finalized values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError, unknown_name_message
from common.expr import evaluate_column, parse
from common.types.column_type import ColumnType

_ARITH = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}


@dataclass(frozen=True)
class PostAggregator:
    name: str

    def compute(self, table: pa.Table) -> pa.Array:
        raise NotImplementedError

    def to_json(self) -> dict:
        raise NotImplementedError


@dataclass(frozen=True)
class FieldAccess(PostAggregator):
    field_name: str = ""

    def compute(self, table):
        if self.field_name not in table.column_names:
            raise ValidationError(unknown_name_message("field in fieldAccess", self.field_name, table.column_names))
        return table.column(self.field_name).combine_chunks()

    def to_json(self):
        return {"type": "fieldAccess", "name": self.name, "fieldName": self.field_name}


@dataclass(frozen=True)
class Constant(PostAggregator):
    value: float | int = 0

    def compute(self, table):
        return pa.array([self.value] * table.num_rows)

    def to_json(self):
        return {"type": "constant", "name": self.name, "value": self.value}


@dataclass(frozen=True)
class Arithmetic(PostAggregator):
    fn: str = "+"
    fields: tuple[PostAggregator, ...] = ()

    def compute(self, table):
        values = [f.compute(table) for f in self.fields]
        out = values[0]
        for v in values[1:]:
            if self.fn in _ARITH:
                out = _ARITH[self.fn](out, v)
            elif self.fn in ("/", "quotient"):
                num, den = out.cast(pa.float64(), safe=False), v.cast(pa.float64(), safe=False)
                # Division by zero is null, not an error and not Druid's legacy 0.
                out = pc.if_else(pc.equal(den, 0.0), pa.scalar(None, pa.float64()), pc.divide(num, den))
            elif self.fn == "pow":
                out = pc.power(out.cast(pa.float64(), safe=False), v.cast(pa.float64(), safe=False))
            else:
                raise ValidationError(f"post-aggregator '{self.name}': unknown fn '{self.fn}'; valid: + - * / quotient pow")
        return out

    def to_json(self):
        return {"type": "arithmetic", "name": self.name, "fn": self.fn, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True)
class ExpressionPost(PostAggregator):
    expression: str = ""
    # The parsed expression and the columns it names, kept with the query (a cached plan
    # computes its post-aggregators on every run; Q30 of ClickBench has 89).
    _parsed: tuple | None = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        expr = parse(self.expression)
        object.__setattr__(self, "_parsed", (expr, expr.columns()))

    def compute(self, table):
        expr, names = self._parsed
        # Only the columns the expression names: a query with many post-aggregators appends each
        # one's column to the table the next one reads.
        used = [f for f in table.schema if f.name in names]
        types = {f.name: ColumnType.from_arrow(f.type, f.name) for f in used}
        cols = {f.name: table.column(f.name).combine_chunks() for f in used}
        return evaluate_column(expr, cols, table.num_rows, types)

    def to_json(self):
        return {"type": "expression", "name": self.name, "expression": self.expression}


def post_aggregator_from_json(obj: dict) -> PostAggregator:
    if not isinstance(obj, dict) or "type" not in obj:
        raise ValidationError(f"a post-aggregator must be an object with a 'type', got {obj!r}")
    kind = obj["type"]
    name = obj.get("name", "")
    if kind in ("fieldAccess", "finalizingFieldAccess"):
        return FieldAccess(name or obj["fieldName"], obj["fieldName"])
    if kind == "constant":
        return Constant(name, obj["value"])
    if kind == "arithmetic":
        fields = tuple(post_aggregator_from_json(f) for f in obj.get("fields", []))
        if len(fields) < 2:
            raise ValidationError(f"arithmetic post-aggregator '{name}' needs at least two fields")
        return Arithmetic(name, obj.get("fn", "+"), fields)
    if kind == "expression":
        return ExpressionPost(name, obj["expression"])
    raise ValidationError(
        f"unknown post-aggregator type '{kind}'; valid: arithmetic, fieldAccess, finalizingFieldAccess, constant, expression"
    )
