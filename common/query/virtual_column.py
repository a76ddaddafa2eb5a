"""VirtualColumn: a column computed from an expression at query time (Druid's expression VC)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import ValidationError
from common.segment.column_reader import Ids, IdRun, id_array
from common.types.column_type import TIME_COLUMN, ColumnType


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

    def index(self, selector) -> MappedIndex | None:
        """An index derived from the one indexed column this expression reads, when its output is a
        string: the expression runs once per dictionary value, and a value's rows are the input
        value's bitmap (Druid's expression virtual column over a single dictionary column)."""
        inputs = self.columns()
        if len(inputs) != 1:
            return None
        (column,) = inputs
        if column == TIME_COLUMN or selector.is_virtual(column):
            return None
        base = selector.index_for(column)
        if base is None:
            return None
        types = selector.types()
        if not self.output_type_for(types).is_string or not types.get(column, ColumnType.parse("STRING")).is_string:
            return None
        from common.expr import evaluate_column

        # Values by id, then the null rows' value at id = cardinality.
        values = pa.concat_arrays([base.dictionary.cast(pa.string()), pa.nulls(1, pa.string())])
        mapped = evaluate_column(self._parsed, {column: values}, len(values), types)
        if self.declared_type is not None and mapped.type != self.declared_type.to_arrow():
            mapped = mapped.cast(self.declared_type.to_arrow(), safe=False)
        return MappedIndex(base, mapped.cast(pa.string()))

    def to_json(self) -> dict:
        out = {"type": "expression", "name": self.name, "expression": self.expression}
        if self.declared_type is not None:
            out["outputType"] = self.declared_type.native_name
        return out

    @staticmethod
    def from_json(obj: dict) -> VirtualColumn:
        if obj.get("type") == "nested-field":
            from common.query.nested_field import NestedFieldColumn

            return NestedFieldColumn.from_json(obj)
        if obj.get("type", "expression") != "expression":
            raise ValidationError(f"unknown virtual column type '{obj.get('type')}'; valid: expression, nested-field")
        if "expression" not in obj:
            raise ValidationError(f"virtual column '{obj.get('name')}' needs an 'expression'")
        out_type = obj.get("outputType")
        return VirtualColumn(obj.get("name", ""), obj["expression"], ColumnType.parse(out_type) if out_type else None)


class MappedIndex:
    """A ColumnIndex over another index's ids whose values went through an expression.

    The mapped dictionary is unsorted and may repeat or hold nulls, so lookups scan it (one
    entry per distinct input value, not per row). Its last entry is the value of the input's
    null rows, which is how ``COALESCE(x, 'a') = 'a'`` finds them.
    """

    def __init__(self, base, mapped: pa.Array) -> None:
        self._base = base
        self.num_rows = base.num_rows
        self.cardinality = base.cardinality
        self.dictionary = mapped

    def _where(self, mask: pa.Array) -> np.ndarray:
        return np.flatnonzero(mask.fill_null(False).to_numpy(zero_copy_only=False))

    def lookup(self, value: str) -> Ids:
        return self._where(pc.equal(self.dictionary, value))

    def range(self, lower, upper, lower_strict: bool, upper_strict: bool) -> Ids:
        mask = pc.invert(self.dictionary.is_null())
        if lower is not None:
            mask = pc.and_(mask, pc.greater(self.dictionary, lower) if lower_strict
                           else pc.greater_equal(self.dictionary, lower))
        if upper is not None:
            mask = pc.and_(mask, pc.less(self.dictionary, upper) if upper_strict
                           else pc.less_equal(self.dictionary, upper))
        return self._where(mask)

    def prefix(self, prefix: str) -> Ids:
        return self._where(pc.starts_with(self.dictionary, prefix))

    def bitmap(self, ids: Ids) -> BitMap:
        if isinstance(ids, IdRun):
            ids = ids.ids()
        return self._base.bitmap(id_array(ids))

    def null_bitmap(self) -> BitMap:
        return self._base.bitmap(self._where(self.dictionary.is_null()))
