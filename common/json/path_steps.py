"""JSON paths as steps: parse ``$.a['b.c'][0]`` into ("a", "b.c", 0), print the canonical text the
nested encoding names fields by, walk parsed documents, and JSON_VALUE over many documents.

A path that does not parse is a user error naming the position, with a caret under it.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from common.errors import ValidationError
from common.types.column_type import ColumnType
from common.types.number_parsing import strings_to_double

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_path(text: str) -> tuple:
    if not isinstance(text, str) or not text.startswith("$"):
        raise ValidationError(f"invalid JSON path '{text}': it must start with '$'")
    parts: list = []
    i = 1
    while i < len(text):
        m = _STEP.match(text, i)
        if m is None:
            raise ValidationError(f"invalid JSON path '{text}' at position {i + 1}: unexpected '{text[i]}'\n"
                                  f"  {text}\n  {' ' * i}^")
        name, index, quoted1, quoted2 = m.groups()
        if name is not None:
            parts.append(name)
        elif index is not None:
            parts.append(int(index))
        else:
            raw = quoted1 if quoted1 is not None else quoted2
            parts.append(re.sub(r"\\(.)", r"\1", raw))
        i = m.end()
    return tuple(parts)


def key_text(key: str) -> str:
    if _PLAIN_KEY.match(key):
        return "." + key
    return "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def path_text(parts: tuple) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else key_text(p)
    return out


def walk(doc, parts: tuple):
    """The value at ``parts`` in a parsed document; None when missing (or null)."""
    for p in parts:
        if isinstance(p, int):
            if not isinstance(doc, list):
                return None
            if p < 0:
                p += len(doc)
            if not 0 <= p < len(doc):
                return None
            doc = doc[p]
        else:
            if not isinstance(doc, dict) or p not in doc:
                return None
            doc = doc[p]
    return doc


def documents(values: pa.Array, where: str) -> list:
    """Parsed documents of JSON text (or already parsed values); None for null rows. Text that is
    not JSON is an error naming ``where`` and the row."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    out = []
    for row, text in enumerate(values.to_pylist()):
        if text is None or not isinstance(text, str):
            out.append(text)
            continue
        try:
            out.append(json.loads(text))
        except ValueError:
            raise ValidationError(f"{where}: row {row} holds text that is not JSON; parse it with "
                                  "TRY_PARSE_JSON (null when malformed) or PARSE_JSON") from None
    return out


def json_values(values: pa.Array, path: str, out_type: ColumnType, column: str = "") -> pa.Array:
    """JSON_VALUE(values, path RETURNING out_type) over JSON text (or parsed values): the literal
    at path, null for objects, for arrays unless an ARRAY type is asked for, and for missing paths."""
    parts = parse_path(path)
    want_array = out_type.is_array
    out = []
    where = f"column '{column}'" if column else "JSON_VALUE"
    for doc in documents(values, where):
        value = None if doc is None else walk(doc, parts)
        if isinstance(value, dict) or (isinstance(value, list) and not want_array):
            value = None
        if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            value = None
        out.append(value)
    return literal_array(out, out_type)


def literal_array(values: list, out_type: ColumnType) -> pa.Array:
    """Python literals as an Arrow array of ``out_type``, coerced as JSON_VALUE coerces."""
    from common.types.column_type import TypeKind

    target = out_type.to_arrow()
    if out_type.is_array:
        element = out_type.element
        conv = []
        for v in values:
            if v is None:
                conv.append(None)
            elif element.is_string:
                conv.append([e if e is None or isinstance(e, str) else json.dumps(e) for e in v])
            else:
                conv.append([None if e is None or isinstance(e, str) else
                             (float(e) if element.kind is TypeKind.DOUBLE else int(e)) for e in v])
        return pa.array(conv, target)
    if out_type.is_string:
        return pa.array([None if v is None else _text(v) for v in values], pa.string())
    texts = pa.array([None if v is None else (v if isinstance(v, str) else repr(float(v))) for v in values],
                     pa.string())
    nums = strings_to_double(texts)
    if out_type.kind is TypeKind.LONG:
        import pyarrow.compute as pc

        finite = pc.is_finite(nums).fill_null(False)
        nums = pc.if_else(finite, pc.trunc(nums), pa.scalar(None, pa.float64()))
    return nums.cast(target, safe=False)


def _text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"  # booleans are LONG 1/0 in nested columns, as in Druid
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e7:
            return f"{v:.1f}"
        return repr(v)
    return str(v)


__all__ = ["documents", "json_values", "key_text", "literal_array", "parse_path", "path_text", "walk"]
