"""NestedFieldColumn: Druid's ``nested-field`` virtual column, one JSON path of a COMPLEX<json> column.

    {"type": "nested-field", "columnName": "shipTo", "path": "$.address.city",
     "expectedType": "STRING", "outputName": "city"}

On a segment whose column is stored nested, the path's field column is read directly: its
values, its dictionary codes for grouping, its index for filters; the raw documents are not
touched. Elsewhere (an in-memory table, JSON stored as text, a path the field guard left out)
the documents are parsed and the path evaluated, with the same results. Like JSON_VALUE, a path
that leads to an object, or to an array when no array type is expected, gives null.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from common.errors import ValidationError
from common.expr import Call, Identifier, Literal
from common.json.path_steps import has_wildcard, json_values, parse_path, path_text, value_type_for
from common.types.column_type import STRING, ColumnType, TypeKind
from common.types.number_parsing import strings_to_double, to_long_values

@dataclass(frozen=True)
class NestedFieldColumn:
    name: str
    column: str
    path: str
    expected_type: ColumnType | None = None
    _parts: tuple = field(default=(), compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("a nested-field virtual column needs an 'outputName'")
        if not self.column:
            raise ValidationError(f"nested-field virtual column '{self.name}' needs a 'columnName'")
        parts = parse_path(self.path)
        object.__setattr__(self, "_parts", parts)
        object.__setattr__(self, "path", path_text(parts))

    # ---- what a virtual column offers ---------------------------------------------------------
    @property
    def declared_type(self) -> ColumnType | None:
        return self.expected_type

    @property
    def parsed(self):
        """An expression tree standing for this column, so equivalent definitions compare equal."""
        kind = self.expected_type.native_name if self.expected_type else None
        return Call("json_value", (Identifier(self.column), Literal(self.path), Literal(kind)))

    @property
    def expression(self) -> str:
        kind = f", '{self.expected_type.native_name}'" if self.expected_type else ""
        return f"json_value(\"{self.column}\", '{self.path}'{kind})"

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])

    def output_type_for(self, column_types) -> ColumnType:
        return value_type_for(self._parts, self.expected_type or STRING)

    def evaluate(self, cols) -> pa.Array:
        reader = self._field(cols.source)
        out_type = self.output_type_for({})
        if has_wildcard(self._parts):
            values = self._from_documents(cols[self.column])  # many fields at once: the documents answer
        elif reader is not None:
            values = reader.take(cols.rows)
            cols.touch_bytes(f"{self.column}{self.path}", reader.part_bytes(("codes", "local", "values")))
        elif self._stored_nested_without(cols.source):
            values = pa.nulls(cols.num_rows, out_type.to_arrow())
        else:
            values = self._from_documents(cols[self.column])
        return _as_type(values, out_type)

    def index(self, selector):
        """The field's own index, when the field holds strings and strings are asked for."""
        if self.expected_type is not None and not self.expected_type.is_string:
            return None
        reader = self._field(selector.source)
        if reader is None or not reader.type.is_string:
            return None
        return reader.index()

    def element_index(self, selector):
        """The per-element index of the path's field, when the segment stores one and the arrays
        asked for are the field's own (same element type): an ``arrayContainsElement`` on this
        column then reads rows from the index instead of every row's array."""
        if self.expected_type is None or not self.expected_type.is_array or has_wildcard(self._parts):
            return None
        reader = self._field(selector.source)
        if reader is None or reader.type != self.expected_type:
            return None
        find = getattr(reader, "element_index", None)
        return find() if find is not None else None

    def _field(self, source):
        if has_wildcard(self._parts):
            return None
        reader = source.nested_field(self.column, self.path)
        wants_array = bool(self.expected_type and self.expected_type.is_array)
        # A field of arrays and literals together reads as text with its arrays as null: when an
        # array is asked for, the documents answer (they have the arrays; a literal there is null).
        if reader is None or reader.type.is_array != wants_array:
            return None
        return reader

    def _stored_nested_without(self, source) -> bool:
        """True when the segment stores this column nested, with every literal path split out,
        and this path is not among them: then no row has a literal there."""
        covers = source.nested_paths_complete(self.column)
        return bool(covers) and source.nested_field(self.column, self.path) is None and not self._element_of_array(source)

    def _element_of_array(self, source) -> bool:
        return bool(self._parts) and isinstance(self._parts[-1], int) and \
            source.nested_field(self.column, path_text(self._parts[:-1])) is not None

    def _from_documents(self, texts: pa.Array) -> pa.Array:
        return json_values(texts, self.path, self.output_type_for({}), self.column)

    def to_json(self) -> dict:
        out = {"type": "nested-field", "columnName": self.column, "path": self.path, "outputName": self.name}
        if self.expected_type is not None:
            out["expectedType"] = self.expected_type.native_name
        return out

    @staticmethod
    def from_json(obj: dict) -> NestedFieldColumn:
        expected = obj.get("expectedType")
        return NestedFieldColumn(obj.get("outputName") or obj.get("name") or "", obj.get("columnName", ""),
                                 obj.get("path") or "$", ColumnType.parse(expected) if expected else None)


def _as_type(values: pa.Array, out_type: ColumnType) -> pa.Array:
    """Coerce as JSON_VALUE .. RETURNING does: numbers from text where they parse, else null."""
    target = out_type.to_arrow()
    if values.type == target:
        return values
    if pa.types.is_dictionary(values.type):
        if out_type.is_string and values.type.value_type == pa.string():
            return values
        values = values.cast(values.type.value_type)
    if out_type.is_string:
        from common.expr.evaluator import to_string

        return to_string(values)
    if out_type.kind is TypeKind.LONG:
        return to_long_values(values)  # CAST(.. AS BIGINT)'s rule: exact integers, saturating doubles
    if out_type.kind in (TypeKind.DOUBLE, TypeKind.FLOAT):
        if pa.types.is_string(values.type):
            values = strings_to_double(values)
        return values.cast(target, safe=False)
    if out_type.is_array and (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        if out_type.element.is_string or values.type.value_type == out_type.element.to_arrow():
            return values.cast(target, safe=False)
        # Each element as RETURNING <element> converts a literal: doubles saturate into BIGINT,
        # texts (a field holding any string stores its arrays as text) parse or are null.
        elements = _as_type(values.values, out_type.element)
        return pa.ListArray.from_arrays(values.offsets, elements, mask=values.is_null()).cast(target)
    return pa.nulls(len(values), target)


__all__ = ["NestedFieldColumn", "parse_path", "path_text"]
