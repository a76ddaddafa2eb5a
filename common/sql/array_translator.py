"""SQL array syntax to array calls: the ``ARRAY[..]`` constructor, the array functions sqlglot
parses into classes of their own (ARRAY_LENGTH is ``ArraySize``, ARRAY_CONTAINS ``ArrayContains``,
...) or leaves anonymous, and CAST to ``ARRAY<..>`` / ``.. ARRAY``. Types and arity are checked by
``functions.SIGNATURES``; each call runs as the native function of the same name, lower-cased."""

from __future__ import annotations

from sqlglot import exp

from common.errors import UnsupportedError, ValidationError
from common.json.path_steps import parse_path
from common.sql.scalar import Call, Literal, Scalar
from common.sql.sql_text import sql_text
from common.sql.sql_types import BIGINT, CAST_TARGETS, NULL, TIMESTAMP, SqlType, from_column_type
from common.types.column_type import STRING_ARRAY, ColumnType, TypeKind

# Druid's multi-value string functions over the array functions: a VARCHAR argument is read as a
# one-element array (as Druid reads a single-valued string), results are arrays.
MV_FUNCTIONS = {"MV_LENGTH": "ARRAY_LENGTH", "MV_OFFSET": "ARRAY_OFFSET", "MV_ORDINAL": "ARRAY_ORDINAL",
                "MV_CONTAINS": "ARRAY_CONTAINS", "MV_OVERLAP": "ARRAY_OVERLAP", "MV_OFFSET_OF": "ARRAY_OFFSET_OF",
                "MV_ORDINAL_OF": "ARRAY_ORDINAL_OF", "MV_APPEND": "ARRAY_APPEND", "MV_PREPEND": "ARRAY_PREPEND",
                "MV_CONCAT": "ARRAY_CONCAT", "MV_SLICE": "ARRAY_SLICE", "MV_TO_STRING": "ARRAY_TO_STRING",
                "STRING_TO_MV": "STRING_TO_ARRAY", "MV_FILTER_ONLY": "MV_FILTER_ONLY",
                "MV_FILTER_NONE": "MV_FILTER_NONE",
                "MV_TO_ARRAY": None, "ARRAY_TO_MV": None}
# the arguments that are arrays, by function (ARRAY_PREPEND takes the element first)
_ARRAY_POSITIONS = {"ARRAY_PREPEND": (1,), "ARRAY_CONCAT": (0, 1), "ARRAY_OVERLAP": (0, 1), "STRING_TO_ARRAY": (),
                    "MV_FILTER_ONLY": (0, 1), "MV_FILTER_NONE": (0, 1)}

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
    if element is None or element.name not in ("BIGINT", "DOUBLE", "FLOAT", "VARCHAR", "BOOLEAN"):
        raise UnsupportedError(f"CAST to an array of {name or 'unknown type'} is not supported in '{text}'; "
                               "valid: ARRAY<BIGINT>, ARRAY<DOUBLE>, ARRAY<VARCHAR>, ARRAY<BOOLEAN>")
    # Druid's BOOLEAN ARRAY is ARRAY<LONG> of 1/0, as booleans are stored: strata has no boolean
    # element type, so it is BIGINT ARRAY here (its elements read as 1/0, not true/false).
    native = {"FLOAT": ColumnType.parse("DOUBLE"), "BOOLEAN": ColumnType.parse("LONG")}.get(element.name,
                                                                                           element.native)
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
    if picked.type == TIMESTAMP:
        picked = Call("CAST", (picked,), BIGINT)  # Druid's __time is a LONG of millis: JSON_VALUE reads that
    if picked.type == target:
        return picked
    if target.column_type is not None and target.column_type.is_array:
        return cast_to_array(picked, target, node)
    if picked.type.column_type is not None and picked.type.column_type.is_array:
        return Literal(None, target)  # an array is not a single value: null, as for JSON arrays
    return tr.cast_to(picked, target)


def as_array(value: Scalar, node: exp.Expression) -> Scalar:
    """``value`` as an array: arrays and NULL as they are, a single value as a one-element array."""
    ctype = value.type.column_type
    if ctype is not None and ctype.multi_value:  # a multi-value string's values are an ARRAY<VARCHAR>
        return cast_to_array(value, from_column_type(STRING_ARRAY), node)
    if value.type == NULL or (ctype is not None and ctype.is_array):
        return value
    if not value.type.is_scalar:
        raise ValidationError(f"{value.type} is not a multi-value string or an array in '{sql_text(node)}'")
    return cast_to_array(value, from_column_type(ColumnType(TypeKind.ARRAY, ColumnType.parse("STRING"))), node)


def mv_call(tr, node: exp.Expression) -> Scalar | None:
    """An MV_* call (or STRING_TO_MV / MV_TO_ARRAY) as the array function it stands for."""
    if not isinstance(node, exp.Anonymous) or str(node.this).upper() not in MV_FUNCTIONS:
        return None
    name = str(node.this).upper()
    nodes = list(node.expressions)
    args = [tr.translate(n) for n in nodes]
    target = MV_FUNCTIONS[name]
    if target is None:  # MV_TO_ARRAY, ARRAY_TO_MV
        if len(args) != 1:
            raise ValidationError(f"{name} takes 1 argument, got {len(args)} in '{sql_text(node)}'")
        if name == "MV_TO_ARRAY":
            return as_array(args[0], node)
        # Outside GROUP BY (which mv_grouping unnests) a multi-value string reads as its values,
        # as text: Druid shows ARRAY_TO_MV(doubles) as ["1.1", "999.0", null].
        ctype = args[0].type.column_type
        if args[0].type != NULL and not (ctype is not None and ctype.is_array):
            raise ValidationError(f"ARRAY_TO_MV needs an array, but '{sql_text(nodes[0])}' is {args[0].type} "
                                  f"in '{sql_text(node)}'")
        return cast_to_array(args[0], from_column_type(ColumnType(TypeKind.ARRAY, ColumnType.parse("STRING"))), node)
    for i in _ARRAY_POSITIONS.get(target, (0,)):
        if i < len(args):
            args[i] = as_array(args[i], node)
    return tr.call(target, args, node, nodes)
