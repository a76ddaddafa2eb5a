"""VirtualColumn: a column computed from an expression at query time (Druid's expression VC)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from common.errors import ValidationError
from common.types.column_type import ColumnType


@dataclass(frozen=True)
class VirtualColumn:
    name: str
    expression: str
    declared_type: ColumnType | None = None
    _parsed: object = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        from common.expr import parse

        if not self.name:
            raise ValidationError("a virtual column needs a 'name'")
        object.__setattr__(self, "_parsed", parse(self.expression))

    @property
    def parsed(self):
        return self._parsed

    def columns(self) -> frozenset[str]:
        return frozenset(self._parsed.columns())

    def output_type_for(self, column_types) -> ColumnType:
        from common.expr import infer_type

        return self.declared_type or infer_type(self._parsed, column_types)

    def evaluate(self, source) -> pa.Array:
        from common.expr import evaluate_column

        types = source.types()
        out = evaluate_column(self._parsed, source, source.num_rows, types)
        if self.declared_type is not None and out.type != self.declared_type.to_arrow():
            out = out.cast(self.declared_type.to_arrow(), safe=False)
        return out

    def to_json(self) -> dict:
        out = {"type": "expression", "name": self.name, "expression": self.expression}
        if self.declared_type is not None:
            out["outputType"] = self.declared_type.native_name
        return out

    @staticmethod
    def from_json(obj: dict) -> VirtualColumn:
        if obj.get("type", "expression") != "expression":
            raise ValidationError(f"unknown virtual column type '{obj.get('type')}'; valid: expression")
        if "expression" not in obj:
            raise ValidationError(f"virtual column '{obj.get('name')}' needs an 'expression'")
        out_type = obj.get("outputType")
        return VirtualColumn(obj.get("name", ""), obj["expression"], ColumnType.parse(out_type) if out_type else None)
