"""The JSON functions' semantics over Arrow arrays (Druid's JSON_QUERY, JSON_KEYS, JSON_PATHS,
JSON_OBJECT, JSON_MERGE, PARSE_JSON, TRY_PARSE_JSON, TO_JSON_STRING; JSON_VALUE is in
``path_steps``).

COMPLEX<json> values travel as compact JSON text (one parse per document per call); a SQL NULL is
a null slot, and a JSON ``null`` document reads as NULL too, as in Druid. Every function is
vectorized over rows and takes Arrow arrays; scalars are broadcast by the caller.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa

from common.errors import ValidationError
from common.json.document_text import depth_over, dumps_document, loads_document, lone_surrogate, surrogate_escape
from common.json.path_steps import documents, key_text, parse_path, walk

LIST_OF_STRINGS = pa.list_(pa.string())


def dumps(value) -> str:
    """Compact JSON text, non-ASCII kept, as Druid serializes (NaN and infinities as Jackson prints
    them: see document_text)."""
    return dumps_document(value)


def _docs(values: pa.Array, what: str) -> list:
    return documents(values, what)


def _texts(values: list) -> pa.Array:
    return pa.array([None if v is None else dumps(v) for v in values], pa.string())


def json_query(values: pa.Array, path: str) -> pa.Array:
    """The value at path (object, array or literal) as COMPLEX<json>; null where missing."""
    parts = parse_path(path)
    return _texts([None if d is None else walk(d, parts) for d in _docs(values, "JSON_QUERY")])


def json_query_array(values: pa.Array, path: str) -> pa.Array:
    """The array at path as an array of COMPLEX<json> elements (a non-array value becomes a
    one-element array), each element as JSON text."""
    parts = parse_path(path)
    out = []
    for d in _docs(values, "JSON_QUERY_ARRAY"):
        v = None if d is None else walk(d, parts)
        if v is None:
            out.append(None)
        else:
            out.append([dumps(e) if e is not None else None for e in (v if isinstance(v, list) else [v])])
    return pa.array(out, LIST_OF_STRINGS)


def json_keys(values: pa.Array, path: str) -> pa.Array:
    """Field names of the object at path, in document order; an array's indexes as text ("0",
    "1", ..., as Druid lists them); null for a literal or a missing path."""
    parts = parse_path(path)
    out = []
    for d in _docs(values, "JSON_KEYS"):
        v = None if d is None else walk(d, parts)
        if isinstance(v, list):
            out.append([str(i) for i in range(len(v))])
        else:
            out.append(list(v.keys()) if isinstance(v, dict) else None)
    return pa.array(out, LIST_OF_STRINGS)


def json_paths(values: pa.Array) -> pa.Array:
    """Paths of every literal (and array of literals) in each document, in document order, as
    Druid's json_paths lists them: a document that is not an object or array (a literal, or null)
    is the one path ``$``; a null field is a literal at its path; an empty array is an array of
    literals (one path); an empty object adds no path."""
    return pa.array([_paths_of(d) for d in _docs(values, "JSON_PATHS")], LIST_OF_STRINGS)


def _paths_of(doc) -> list[str]:
    out = []
    stack = [("$", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key in reversed(list(value)):
                stack.append((path + key_text(str(key)), value[key]))
        elif isinstance(value, list) and any(isinstance(e, (dict, list)) for e in value):
            for i in range(len(value) - 1, -1, -1):  # an array holding containers is walked per element
                stack.append((f"{path}[{i}]", value[i]))
        else:
            out.append(path)
    return out


def _python(value, is_json: bool):
    if value is None:
        return None
    if is_json:
        return loads_document(value) if isinstance(value, str) else value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    return value


def _druid_values(values: pa.Array) -> pa.Array:
    """Values as Druid's expressions hold them: a BOOLEAN as LONG 1/0, a TIMESTAMP as its millis."""
    if pa.types.is_boolean(values.type):
        return values.cast(pa.int64())
    if pa.types.is_timestamp(values.type):
        return values.cast(pa.timestamp("ms", values.type.tz)).cast(pa.int64())
    return values


def json_object(keys: list[pa.Array], values: list[pa.Array], json_values: list[bool], n: int) -> pa.Array:
    """An object per row from key/value pairs; a null key is an error naming the pair."""
    out = []
    key_lists = [k.to_pylist() for k in keys]
    value_lists = [_druid_values(v).to_pylist() for v in values]
    for row in range(n):
        obj = {}
        for i, (ks, vs) in enumerate(zip(key_lists, value_lists)):
            key = ks[row]
            if key is None:
                raise ValidationError(f"JSON_OBJECT: key {i + 1} is null in row {row}; keys must be strings")
            obj[str(key)] = _python(vs[row], json_values[i])
        out.append(obj)
    return _texts(out)


def json_merge(arrays: list[pa.Array]) -> pa.Array:
    """Objects merged left to right (the rightmost value wins); null if any argument is null; a
    non-object argument replaces what came before, as Druid's merge does."""
    docs = [_docs(a, "JSON_MERGE") for a in arrays]
    out = []
    for row in range(len(docs[0]) if docs else 0):
        merged = None
        nulled = False
        for d in docs:
            v = d[row]
            if v is None:
                nulled = True
                break
            merged = {**merged, **v} if isinstance(merged, dict) and isinstance(v, dict) else v
        out.append(None if nulled else merged)
    return _texts(out)


def parse_json(values: pa.Array, strict: bool = True) -> pa.Array:
    """Text to COMPLEX<json>; malformed text is an error naming the row (strict) or null."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    out = []
    for row, text in enumerate(values.to_pylist()):
        if text is None:
            out.append(None)
            continue
        try:
            if not isinstance(text, str):
                out.append(text)
                continue
            if depth_over(text):
                raise RecursionError
            doc = loads_document(text)
            char = lone_surrogate(dumps(doc)) if "\\u" in text else None
            if char is not None:
                raise ValueError(f"it holds a lone UTF-16 surrogate escape ({surrogate_escape(char)}), which is no "
                                 "character and cannot be stored as text")
            out.append(doc)
        except (ValueError, RecursionError) as exc:
            if strict:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply" if isinstance(
                    exc, RecursionError) else str(exc)
                raise ValidationError(f"PARSE_JSON: row {row} is not valid JSON ({reason}); use TRY_PARSE_JSON to "
                                      "get NULL for such rows") from None
            out.append(None)
    return _texts(out)


def to_json_string(values: pa.Array, is_json: bool) -> pa.Array:
    """Compact JSON text of each value (COMPLEX<json>, text or numbers)."""
    if is_json:
        return _texts(_docs(values, "TO_JSON_STRING"))
    if pa.types.is_date(values.type):
        values = values.cast(pa.timestamp("ms"))
    return _texts([_python(v, False) for v in _druid_values(values).to_pylist()])


__all__ = ["dumps", "json_keys", "json_merge", "json_object", "json_paths", "json_query", "json_query_array",
           "parse_json", "to_json_string"]
