"""SQL array syntax to array calls: the ``ARRAY[..]`` constructor, the array functions sqlglot
parses into classes of their own (ARRAY_LENGTH is ``ArraySize``, ARRAY_CONTAINS ``ArrayContains``,
...) or leaves anonymous, and CAST to ``ARRAY<..>`` / ``.. ARRAY``. Types and arity are checked by
``functions.SIGNATURES``; each call runs as the native function of the same name, lower-cased."""

from __future__ import annotations

from sqlglot import exp

from common.errors import UnsupportedError, ValidationError
from common.sql.scalar import Call, Literal, Scalar
from common.sql.sql_text import sql_text
from common.sql.sql_types import CAST_TARGETS, NULL, SqlType, from_column_type
from common.types.column_type import ColumnType, TypeKind

ARRAY_FUNCTIONS = ("ARRAY_LENGTH", "ARRAY_OFFSET", "ARRAY_ORDINAL", "ARRAY_CONTAINS", "ARRAY_OVERLAP",
                   "ARRAY_OFFSET_OF", "ARRAY_ORDINAL_OF", "ARRAY_APPEND", "ARRAY_PREPEND", "ARRAY_CONCAT",
                   "ARRAY_SLICE", "ARRAY_TO_STRING", "STRING_TO_ARRAY")

# sqlglot classes for some array functions, with the argument keys in SQL order
_CLASSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ArraySize": ("ARRAY_LENGTH", ("this",)),
    "ArrayContains": ("ARRAY_CONTAINS", ("this", "expression")),
    "ArrayOverlaps": ("ARRAY_OVERLAP", ("this", "expression")),
    "ArrayToString": ("ARRAY_TO_STRING", ("this", "expression")),
    "StringToArray": ("STRING_TO_ARRAY", ("this", "expression")),
    "ArraySlice": ("ARRAY_SLICE", ("this", "start", "end")),
    "ArrayAppend": ("ARRAY_APPEND", ("this", "expression")),
    "ArrayPrepend": ("ARRAY_PREPEND", ("this", "expression")),
}


def array_call_nodes(node: exp.Expression) -> tuple[str, list[exp.Expression]] | None:
    """(function name, argument nodes) when ``node`` is an array function or constructor."""
    if isinstance(node, exp.Array):
        return "ARRAY", list(node.expressions)
    if isinstance(node, exp.ArrayConcat):
        return "ARRAY_CONCAT", [node.this] + list(node.expressions)
    known = _CLASSES.get(type(node).__name__)
    if known is not None:
        name, keys = known
        return name, [node.args[k] for k in keys if node.args.get(k) is not None]
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in ARRAY_FUNCTIONS:
        return str(node.this).upper(), list(node.expressions)
    return None


def array_type_of(to: exp.DataType, text: str) -> SqlType | None:
    """The SQL type of a CAST target that is an array (``ARRAY<BIGINT>``, ``BIGINT ARRAY``), else None."""
    if not isinstance(to, exp.DataType) or to.this != exp.DataType.Type.ARRAY:
        return None
    inner = to.expressions[0] if to.expressions else None
    name = inner.this.name if isinstance(inner, exp.DataType) and isinstance(inner.this, exp.DataType.Type) \
        else str(getattr(inner, "this", "")).upper()
    element = CAST_TARGETS.get(name)
    if element is None or element.name not in ("BIGINT", "DOUBLE", "FLOAT", "VARCHAR"):
        raise UnsupportedError(f"CAST to an array of {name or 'unknown type'} is not supported in '{text}'; "
                               "valid: ARRAY<BIGINT>, ARRAY<DOUBLE>, ARRAY<VARCHAR>")
    native = element.native if element.name != "FLOAT" else ColumnType.parse("DOUBLE")
    return from_column_type(ColumnType(TypeKind.ARRAY, native))


def cast_to_array(value: Scalar, target: SqlType, node: exp.Expression) -> Scalar:
    if value.type == target:
        return value
    if isinstance(value, Literal) and value.value is None:
        return Literal(None, target)
    if value.type == NULL:
        return Literal(None, target)
    if not (value.type.is_scalar or (value.type.column_type is not None and value.type.column_type.is_array)):
        raise ValidationError(f"cannot CAST {value.type} to {target} in '{sql_text(node)}'")
    return Call("CAST", (value,), target)


def json_value_of_plain(tr, value: Scalar, node: exp.Expression, target: SqlType) -> Scalar:
    """JSON_VALUE over a column that is not JSON answers as Druid's does: path ``$`` is the value
    itself, ``$[n]`` of an array its element n (from the end when negative), any other path null;
    the result converts to the RETURNING type as CAST would."""
    from common.json.path_steps import parse_path

    path = node.args["path"]
    text = path.sql(dialect="druid") if isinstance(path, exp.Expression) else str(path)
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    parts = parse_path(text)
    ctype = value.type.column_type
    is_array = ctype is not None and ctype.is_array
    if not parts:
        picked = value
    elif len(parts) == 1 and isinstance(parts[0], int) and is_array:
        index = parts[0]
        if index < 0:
            length = Call("ARRAY_LENGTH", (value,), from_column_type(ColumnType.parse("LONG")))
            offset: Scalar = Call("+", (length, Literal(index, from_column_type(ColumnType.parse("LONG")))),
                                  from_column_type(ColumnType.parse("LONG")))
        else:
            offset = Literal(index, from_column_type(ColumnType.parse("LONG")))
        picked = Call("ARRAY_OFFSET", (value, offset), from_column_type(ctype.element))
    else:
        return Literal(None, target)
    if picked.type == target:
        return picked
    if target.column_type is not None and target.column_type.is_array:
        return cast_to_array(picked, target, node)
    if picked.type.column_type is not None and picked.type.column_type.is_array:
        return Literal(None, target)  # an array is not a single value: null, as for JSON arrays
    return tr.cast_to(picked, target)
