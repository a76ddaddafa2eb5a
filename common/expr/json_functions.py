"""The JSON functions of the expression language (json_value, json_query, json_keys, ...): thin
registrations over ``common/json``, which holds their semantics. COMPLEX<json> values travel as
compact JSON text; the evaluator tells a function which arguments are JSON (the text cannot)."""

from __future__ import annotations

import pyarrow as pa

from common.errors import ValidationError
from common.expr.evaluator import const, is_scalar, null_of, plain, register
from common.types.column_type import JSON, JSON_ARRAY, STRING, STRING_ARRAY, ColumnType


def _json_value_type(call, types) -> ColumnType:
    from common.json.path_steps import value_type_for

    out = STRING
    if len(call.args) > 2 and getattr(call.args[2], "value", None):
        out = ColumnType.parse(str(call.args[2].value))
    path = getattr(call.args[1], "value", None) if len(call.args) > 1 else None
    return value_type_for(path, out) if isinstance(path, str) else out


@register("json_value", args=(2, 3), kinds="jkk", out=_json_value_type, strict=False,
          doc="json_value(json, path[, type]): the literal at path, or null (objects, arrays unless an ARRAY "
              "type is asked for, and missing paths)")
def _json_value(args, types, out, call):
    from common.json.path_steps import json_values

    path = const(args[1], "path")
    if path is None:
        return null_of(out)
    return json_values(plain(args[0]), str(path), out)


def _arrays(args) -> tuple[list[pa.Array], int]:
    """Arguments as arrays of one length (scalars repeated), and that length."""
    n = max((len(a) for a in args if not is_scalar(a)), default=1)
    return [pa.repeat(a, n) if is_scalar(a) else plain(a) for a in args], n


def _is_json(t) -> bool:
    return t is not None and t.complex_name == "json"


@register("json_query", args=(2, 2), kinds="jk", out=JSON, strict=False,
          doc="json_query(json, path): the value at path (object, array or literal) as COMPLEX<json>")
def _json_query(args, types, out, call):
    from common.json.json_functions import json_query

    (values,), _ = _arrays(args[:1])
    return json_query(values, str(const(args[1], "path")))


@register("json_query_array", args=(2, 2), kinds="jk", out=JSON_ARRAY, strict=False,
          doc="json_query_array(json, path): the array at path, each element as JSON text")
def _json_query_array(args, types, out, call):
    from common.json.json_functions import json_query_array

    (values,), _ = _arrays(args[:1])
    return json_query_array(values, str(const(args[1], "path")))


@register("json_keys", args=(2, 2), kinds="jk", out=STRING_ARRAY, strict=False,
          doc="json_keys(json, path): the field names of the object at path")
def _json_keys(args, types, out, call):
    from common.json.json_functions import json_keys

    (values,), _ = _arrays(args[:1])
    return json_keys(values, str(const(args[1], "path")))


@register("json_paths", args=(1, 1), kinds="j", out=STRING_ARRAY, strict=False,
          doc="json_paths(json): the paths of every literal in the document")
def _json_paths(args, types, out, call):
    from common.json.json_functions import json_paths

    (values,), _ = _arrays(args)
    return json_paths(values)


@register("json_object", args=(2, None), kinds="x", out=JSON, strict=False,
          doc="json_object(key1, value1, key2, value2, ...): an object of the pairs")
def _json_object(args, types, out, call):
    from common.json.json_functions import json_object

    if len(args) % 2:
        raise ValidationError(f"json_object() takes key/value pairs, got {len(args)} arguments in '{call.to_string()}'")
    arrays, n = _arrays(args)
    return json_object(arrays[0::2], arrays[1::2], [_is_json(t) for t in types[1::2]], n)


@register("json_merge", args=(2, None), kinds="j", out=JSON, strict=False,
          doc="json_merge(json1, json2, ...): objects merged, the rightmost value winning")
def _json_merge(args, types, out, call):
    from common.json.json_functions import json_merge

    arrays, _ = _arrays(args)
    return json_merge(arrays)


@register("parse_json", "try_parse_json", args=(1, 1), kinds="s", out=JSON, strict=False,
          doc="parse_json(text): text as COMPLEX<json> (try_parse_json: null where malformed)")
def _parse_json(args, types, out, call):
    from common.json.json_functions import parse_json

    (values,), _ = _arrays(args)
    return parse_json(values.cast(pa.string()) if not pa.types.is_string(values.type) else values,
                      strict=call.name.lower() == "parse_json")


@register("to_json_string", args=(1, 1), kinds="x", out=STRING, strict=False,
          doc="to_json_string(value): compact JSON text")
def _to_json_string(args, types, out, call):
    from common.json.json_functions import to_json_string

    (values,), _ = _arrays(args)
    return to_json_string(values, _is_json(types[0]))
