"""The JSON calls of SQL, translated to typed ``Scalar`` calls: JSON_VALUE (with RETURNING, and
read as the stored number where it is used as one), JSON_QUERY, JSON_QUERY_ARRAY, JSON_KEYS,
JSON_PATHS, JSON_OBJECT, JSON_MERGE, PARSE_JSON, TRY_PARSE_JSON and TO_JSON_STRING.

Arguments and paths are checked here; the semantics live in common/json and common/expr. Each
function takes the ``ScalarTranslator`` (``tr``) that translates its arguments.
"""

from __future__ import annotations

from sqlglot import exp

from common.errors import ValidationError
from common.json.path_steps import has_wildcard, parse_path, path_text, value_type_for
from common.sql.array_translator import array_type_of, json_value_of_plain
from common.sql.json_field_types import numeric_type
from common.sql.scalar import Call, Literal, Scalar
from common.sql.sql_text import sql_text
from common.sql.sql_types import BOOLEAN, CAST_TARGETS, INTERVAL, NULL, TIMESTAMP, VARCHAR, from_column_type
from common.types.column_type import JSON as JSON_TYPE
from common.types.column_type import STRING_ARRAY as STRING_ARRAY_TYPE
from common.types.column_type import JSON_ARRAY


def _number_literal(node: exp.Expression) -> bool:
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string


def numeric_context(node: exp.Expression) -> bool:
    """Whether ``node``'s value is used as a number: compared with (or IN, BETWEEN) number
    literals, an operand of arithmetic, or the argument of SUM, AVG, MIN or MAX."""
    child, parent = node, node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    if isinstance(parent, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Sum, exp.Avg, exp.Min, exp.Max)):
        return True
    if isinstance(parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        other = parent.expression if parent.this is child else parent.this
        return _number_literal(other)
    if isinstance(parent, exp.In) and parent.this is child:
        return bool(parent.expressions) and all(_number_literal(e) for e in parent.expressions)
    if isinstance(parent, exp.Between) and parent.this is child:
        return _number_literal(parent.args["low"]) and _number_literal(parent.args["high"])
    return False


def json_node(tr, node: exp.Expression) -> Scalar | None:
    """The call of a JSON node sqlglot parses as its own class; None for any other node."""
    if isinstance(node, exp.JSONValue):
        return json_value(tr, node, None)
    if isinstance(node, exp.JSONKeys):
        return json_call(tr, "JSON_KEYS", node, [node.this], node.args.get("expression"))
    if isinstance(node, exp.ParseJSON):
        return json_call(tr, "PARSE_JSON", node, [node.this], None)
    if isinstance(node, exp.JSONObject):
        return json_object(tr, node)
    return None


def json_function(tr, name: str, nodes: list, node: exp.Expression) -> Scalar | None:
    """The JSON call sqlglot leaves anonymous (``name`` upper case); None for any other name."""
    if name in ("JSON_QUERY", "JSON_QUERY_ARRAY"):
        if len(nodes) != 2:
            raise ValidationError(f"{name} takes 2 arguments (json, path) in '{sql_text(node)}'")
        return json_call(tr, name, node, nodes[:1], nodes[1])
    if name in ("JSON_PATHS", "TRY_PARSE_JSON", "TO_JSON_STRING"):
        if len(nodes) != 1:
            raise ValidationError(f"{name} takes 1 argument in '{sql_text(node)}'")
        return json_call(tr, name, node, nodes, None)
    if name == "JSON_MERGE":
        if len(nodes) < 2:
            raise ValidationError(f"JSON_MERGE takes 2 or more arguments in '{sql_text(node)}'")
        return json_call(tr, name, node, nodes, None)
    return None


def json_value(tr, node: exp.JSONValue, returning: exp.DataType | None) -> Scalar:
    """JSON_VALUE(json, path [RETURNING type]); a CAST around it plans as RETURNING."""
    returning = returning or node.args.get("returning") or None
    target = VARCHAR
    if returning is not None:
        this = returning.this
        type_name = this.name if isinstance(this, exp.DataType.Type) else str(this).upper()
        target = array_type_of(returning, sql_text(node)) or CAST_TARGETS.get(type_name)
        if target is None or target == TIMESTAMP:
            raise ValidationError(f"JSON_VALUE cannot return {sql_text(returning)} in '{sql_text(node)}'; "
                                  "valid: BIGINT, DOUBLE, FLOAT, VARCHAR, BOOLEAN, ARRAY<BIGINT|DOUBLE|VARCHAR>")
    value = tr.translate(node.this)
    if value.type.column_type is None or value.type.column_type.complex_name != "json":
        if value.type == INTERVAL or value.type.column_type is None and value.type != NULL:
            raise ValidationError(f"JSON_VALUE needs a COMPLEX<json> value, but '{sql_text(node.this)}' is "
                                  f"{value.type}; declare the column as COMPLEX<json> or wrap text in PARSE_JSON()")
        return json_value_of_plain(tr, value, node, target)
    path = node.args["path"]
    text = path.sql(dialect="druid") if isinstance(path, exp.Expression) else str(path)
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    parts = parse_path(text)
    canonical = path_text(parts)
    if returning is None and not has_wildcard(parts) and numeric_context(node):
        # No RETURNING, used as a number (compared with one, in arithmetic, summed): read the
        # path as the number its field stores, as Druid infers JSON_VALUE's type from context.
        lookup = getattr(tr.scope, "json_field_types", None)
        stored = lookup(node.this, canonical) if lookup is not None and isinstance(node.this, exp.Column) else None
        target = numeric_type(stored)
    if has_wildcard(parts):  # [*] and ..name reach many values: an array of them
        target = from_column_type(value_type_for(parts, target.native))
    native_target = "LONG" if target == BOOLEAN else target.native.native_name
    return Call("JSON_VALUE", (value, Literal(canonical, VARCHAR), Literal(native_target, VARCHAR)), target)


def json_path_text(tr, path: exp.Expression | None, node: exp.Expression) -> str:
    if path is None:
        raise ValidationError(f"a JSON path is required in '{sql_text(node)}', e.g. '$.a.b'")
    text = path.sql(dialect="druid") if isinstance(path, exp.JSONPath) else tr.literal_string(path, "JSON path")
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    return path_text(parse_path(text))


def json_call(tr, op: str, node: exp.Expression, value_nodes: list, path: exp.Expression | None) -> Scalar:
    """JSON_QUERY, JSON_QUERY_ARRAY, JSON_KEYS, JSON_PATHS, JSON_MERGE, PARSE_JSON, TRY_PARSE_JSON,
    TO_JSON_STRING: arguments checked here, semantics in common/json."""
    values = [tr.translate(v) for v in value_nodes]
    json_type = from_column_type(JSON_TYPE)
    if op == "JSON_PATHS" and not (values[0].type.column_type is not None
                                   and values[0].type.column_type.complex_name == "json"):
        # Druid reads anything that is not JSON (text, a number, an array, NULL) as one literal: ['$']
        return tr.call("ARRAY", [Literal("$", VARCHAR)], node)
    if op in ("JSON_QUERY", "JSON_QUERY_ARRAY", "JSON_KEYS"):
        values[0] = _as_json(values[0], value_nodes[0])
    for v, n in zip(values, value_nodes):
        is_json = v.type.column_type is not None and v.type.column_type.complex_name == "json"
        if op in ("PARSE_JSON", "TRY_PARSE_JSON"):
            if v.type not in (VARCHAR, NULL):
                raise ValidationError(f"{op} needs VARCHAR text, but '{sql_text(n)}' is {v.type}")
        elif op != "TO_JSON_STRING" and not is_json and v.type != NULL:
            raise ValidationError(f"{op} needs a COMPLEX<json> value, but '{sql_text(n)}' is {v.type}; "
                                  "declare the column as COMPLEX<json> or wrap text in PARSE_JSON()")
    args = list(values)
    if op in ("JSON_QUERY", "JSON_QUERY_ARRAY", "JSON_KEYS"):
        args.append(Literal(json_path_text(tr, path, node), VARCHAR))
    out = {"JSON_QUERY": json_type, "JSON_MERGE": json_type, "PARSE_JSON": json_type, "TRY_PARSE_JSON": json_type,
           "TO_JSON_STRING": VARCHAR,
           # Druid types it ARRAY<COMPLEX<json>>: its elements are documents (held as their text)
           "JSON_QUERY_ARRAY": from_column_type(JSON_ARRAY)}.get(op, from_column_type(STRING_ARRAY_TYPE))
    return Call(op, tuple(args), out)


def _as_json(value: Scalar, node: exp.Expression) -> Scalar:
    """A value that is not COMPLEX<json> (text, a number, a timestamp, an array) read as the JSON
    literal it is, as Druid's JSON_QUERY and JSON_KEYS read one: JSON_QUERY(s, '$') of the text 'A'
    is the JSON string "A", any deeper path of a literal is NULL, and the text is never parsed."""
    column_type = value.type.column_type
    if value.type == NULL or (column_type is not None and column_type.complex_name == "json"):
        return value
    if value.type == INTERVAL or column_type is None:
        return value  # the caller's check names what cannot be read as JSON
    text = Call("TO_JSON_STRING", (value,), VARCHAR)
    return Call("PARSE_JSON", (text,), from_column_type(JSON_TYPE))


def json_object(tr, node: exp.JSONObject) -> Scalar:
    args = []
    for pair in node.expressions:
        if not isinstance(pair, exp.JSONKeyValue):
            raise ValidationError(f"JSON_OBJECT takes KEY k VALUE v pairs (or k: v) in '{sql_text(node)}'")
        key = tr.translate(pair.this)
        if key.type not in (VARCHAR, NULL):
            raise ValidationError(f"JSON_OBJECT keys must be VARCHAR, '{sql_text(pair.this)}' is {key.type}")
        args.extend([key, tr.translate(pair.expression)])
    if not args:
        raise ValidationError(f"JSON_OBJECT needs at least one KEY .. VALUE pair in '{sql_text(node)}'")
    return Call("JSON_OBJECT", tuple(args), from_column_type(JSON_TYPE))


__all__ = ["json_call", "json_function", "json_node", "json_object", "json_path_text", "json_value", "numeric_context"]
