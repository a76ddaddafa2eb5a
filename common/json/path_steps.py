"""JSON paths as steps: parse ``$.a['b.c'][0]`` into ("a", "b.c", 0), print the canonical text the
nested encoding names fields by, walk parsed documents, and JSON_VALUE over many documents.

A path that does not parse is a user error naming the position, with a caret under it.
"""

from __future__ import annotations

import functools
import json
import math
import re

import pyarrow as pa

from common.errors import ValidationError
from common.json.document_text import MAX_DOCUMENT_DEPTH, depth_over, dumps_document, loads_document, lone_surrogate
from common.types.column_type import ColumnType
from common.types.number_parsing import strings_to_double, to_long_values

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A dot-notation key runs to the next '.', '[' or quote, as in Druid's path parser (``$.a-b``, ``$.é``).
_NAME = re.compile(r"[^.\[\]'\"\s*][^.\[\]'\"\s]*")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_STAR = re.compile(r"\[\s*\*\s*\]|\.\*")
_QUOTED = re.compile(r"""\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]""")
_JQ_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


class Wildcard:
    """``[*]`` (or ``.*``): every element of an array, every value of an object."""

    def __repr__(self) -> str:
        return "[*]"


WILDCARD = Wildcard()


class Descend(str):
    """``..name``: the key ``name`` at any depth below this point."""

    def __repr__(self) -> str:
        return f"..{str(self)}"


def _error(text: str, i: int, why: str) -> ValidationError:
    shown = repr(text[i]) if i < len(text) else "the end"
    return ValidationError(f"invalid JSON path '{text}' at position {i + 1}: {why} (found {shown})\n"
                           f"  {text}\n  {' ' * i}^\n"
                           "valid forms: $, $.name, $['name'], $[0], $[-1], $[*], $..name, or jq-style .a.b")


def parse_path(text: str) -> tuple:
    """Steps of a JSONPath (``$.a['b.c'][0]``, ``$.a[*].b``, ``$..b``) or a jq-style path
    (``.a.b``, ``."b.c"[0]``); ``$.`` and ``.`` are the root, as in Druid."""
    if not isinstance(text, str) or not text or text[0] not in "$.":
        where = 0
        raise _error(text if isinstance(text, str) else str(text), where,
                     "a path must start with '$' (JSONPath) or '.' (jq)")
    if text[0] == ".":
        return _parse_jq(text)
    parts: list = []
    i = 1
    if text == "$.":
        return ()
    while i < len(text):
        c = text[i]
        if text.startswith("..", i):
            m = _NAME.match(text, i + 2)
            q = _QUOTED.match(text, i + 1) if m is None else None
            if m is None and q is None:
                raise _error(text, i + 2, "'..' needs a key name after it")
            if m is not None:
                parts.append(Descend(m.group(0)))
                i = m.end()
            else:
                parts.append(Descend(_unescape(q.group(1) if q.group(1) is not None else q.group(2))))
                i = q.end()
            continue
        m = _STAR.match(text, i)
        if m is not None:
            parts.append(WILDCARD)
            i = m.end()
            continue
        if c == ".":
            m = _NAME.match(text, i + 1)
            if m is None:
                raise _error(text, i + 1, "a key name must follow '.' (quote other keys: ['my key'])")
            parts.append(m.group(0))
            i = m.end()
            continue
        if c == "[":
            step = _bracket_step(text, i)
            if step is not None:
                parts.append(step[0])
                i = step[1]
                continue
            raise _error(text, i + 1, "'[' takes an index, * or a quoted key, closed by ']'")
        raise _error(text, i, "expected '.', '..' or '['")
    return tuple(parts)


def _parse_jq(text: str) -> tuple:
    """jq-style: ``.a.b``, ``."key with dots"``, ``.a[0]`` / ``.a.[0]``, ``.a[]`` (every element)."""
    parts: list = []
    i = 0
    if text == ".":
        return ()
    while i < len(text):
        c = text[i]
        if c == ".":
            i += 1
            if i < len(text) and text[i] == "[":
                continue
            m = _NAME.match(text, i)
            if m is not None and not m.group(0).startswith("$"):
                parts.append(m.group(0))
                i = m.end()
                continue
            q = _JQ_QUOTED.match(text, i)
            if q is not None:
                parts.append(_unescape(q.group(1)))
                i = q.end()
                continue
            raise _error(text, i, "a key name (or a \"quoted key\") must follow '.'")
        if c == "[":
            if text.startswith("[]", i):
                parts.append(WILDCARD)
                i += 2
                continue
            step = _bracket_step(text, i)
            if step is not None:
                parts.append(step[0])
                i = step[1]
                continue
            raise _error(text, i + 1, "'[' takes an index, nothing ([] for every element) or a quoted key")
        raise _error(text, i, "expected '.' or '['")
    return tuple(parts)


def _bracket_step(text: str, i: int) -> tuple | None:
    """``[n]`` or ``['key']`` at ``i``, as (step, end), in both path forms; None for anything else."""
    m = _INDEX.match(text, i)
    if m is not None:
        return int(m.group(1)), m.end()
    m = _QUOTED.match(text, i)
    if m is not None:
        return _unescape(m.group(1) if m.group(1) is not None else m.group(2)), m.end()
    return None


def _unescape(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw)


def has_wildcard(parts: tuple) -> bool:
    """True when the path can reach many values (``[*]``, ``..name``): it then yields an array."""
    return any(p is WILDCARD or isinstance(p, Descend) for p in parts)


@functools.lru_cache(maxsize=1 << 16)  # documents repeat their keys: the text is made once per key
def key_text(key: str) -> str:
    if _PLAIN_KEY.match(key):
        return "." + key
    return "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def path_text(parts: tuple) -> str:
    out = "$"
    for p in parts:
        if p is WILDCARD:
            out += "[*]"
        elif isinstance(p, Descend):
            out += ".." + (str(p) if _PLAIN_KEY.match(p) else key_text(str(p)))
        elif isinstance(p, int):
            out += f"[{p}]"
        else:
            out += key_text(p)
    return out


def walk(doc, parts: tuple):
    """The value at ``parts`` in a parsed document; None when missing (or null). A path with a
    wildcard gives the list of every value it reaches (None when it reaches none)."""
    if has_wildcard(parts):
        found = _walk_many(doc, parts)
        return found or None
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


def _walk_many(doc, parts: tuple) -> list:
    current = [doc]
    for p in parts:
        nxt: list = []
        for d in current:
            if p is WILDCARD:
                if isinstance(d, list):
                    nxt.extend(d)
                elif isinstance(d, dict):
                    nxt.extend(d.values())
            elif isinstance(p, Descend):
                nxt.extend(_descend(d, str(p)))
            elif isinstance(p, int):
                if isinstance(d, list):
                    j = p + len(d) if p < 0 else p
                    if 0 <= j < len(d):
                        nxt.append(d[j])
            elif isinstance(d, dict) and p in d:
                nxt.append(d[p])
        current = nxt
    return [v for v in current if v is not None]


def _descend(doc, key: str) -> list:
    """Values under ``key`` at any depth, in document order (iterative: no recursion limit)."""
    out = []
    stack = [doc]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            if key in d:
                out.append(d[key])
            stack.extend(reversed(list(d.values())))
        elif isinstance(d, list):
            stack.extend(reversed(d))
    return out


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
            if depth_over(text):
                raise RecursionError
            doc = loads_document(text)
        except (ValueError, RecursionError):
            raise ValidationError(f"{where}: row {row} holds text that is not JSON (or nests deeper than "
                                  f"{MAX_DOCUMENT_DEPTH} levels); parse it with TRY_PARSE_JSON (null when malformed) "
                                  "or PARSE_JSON") from None
        if "\\u" in text and lone_surrogate(dumps_document(doc)) is not None:
            raise ValidationError(f"{where}: row {row} holds a lone UTF-16 surrogate escape, which is no character "
                                  "and cannot be text; remove it or pair it with its other half")
        out.append(doc)
    return out


def json_values(values: pa.Array, path: str, out_type: ColumnType, column: str = "") -> pa.Array:
    """JSON_VALUE(values, path RETURNING out_type) over JSON text (or parsed values): the literal
    at path, null for objects, for arrays unless an ARRAY type is asked for, and for missing paths.
    A wildcard path gives the array of the literals it reaches (``out_type`` is then an ARRAY)."""
    parts = parse_path(path)
    many = has_wildcard(parts)
    out_type = value_type_for(parts, out_type)
    want_array = out_type.is_array
    out = []
    where = f"column '{column}'" if column else "JSON_VALUE"
    for doc in documents(values, where):
        value = None if doc is None else walk(doc, parts)
        if many and value is not None:
            value = [v for v in value if not isinstance(v, (dict, list))] or None
        if isinstance(value, dict) or (isinstance(value, list) and not want_array):
            value = None
        if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            value = None
        out.append(value)
    return literal_array(out, out_type)


def value_type_for(parts, out_type: ColumnType) -> ColumnType:
    """What JSON_VALUE returns for ``parts`` when asked for ``out_type``: a wildcard path reaches
    many values, so a scalar type becomes the array of it."""
    if isinstance(parts, str):
        parts = parse_path(parts)
    if has_wildcard(parts) and not out_type.is_array:
        return ColumnType.parse(f"ARRAY<{out_type.native_name}>")
    return out_type


def literal_array(values: list, out_type: ColumnType) -> pa.Array:
    """Python literals as an Arrow array of ``out_type``, coerced as JSON_VALUE coerces."""
    from common.types.column_type import TypeKind

    target = out_type.to_arrow()
    if out_type.is_array:
        element = out_type.element
        conv = []
        for v in values:
            if not isinstance(v, list):  # null, or a literal where an array was asked for: null, as in Druid
                conv.append(None)
            elif element.is_string:
                conv.append([e if e is None or isinstance(e, str) else json.dumps(e) for e in v])
            else:  # each element as RETURNING BIGINT / DOUBLE converts a literal (texts that are numbers parse)
                conv.append(literal_array(v, element).to_pylist())
        return pa.array(conv, target)
    if out_type.is_string:
        return pa.array([None if v is None else _text(v) for v in values], pa.string())
    if out_type.kind is TypeKind.LONG:
        return _longs(values)
    texts = pa.array([None if v is None else (v if isinstance(v, str) else repr(float(v))) for v in values],
                     pa.string())
    nums = strings_to_double(texts)
    return nums.cast(target, safe=False)


def _longs(values: list) -> pa.Array:
    """RETURNING BIGINT: integers exactly (not through a double, which rounds past 2**53), the rest
    as CAST(.. AS BIGINT) converts them (number_parsing.to_long_values: doubles and integers
    beyond 64 bits saturate, texts parse, NaN is 0)."""
    import pyarrow.compute as pc

    exact, rest = [], []
    for v in values:
        if v is None:
            exact.append(None)
            rest.append(None)
        elif type(v) is int and -_INT64 <= v < _INT64 or type(v) is bool:
            exact.append(int(v))
            rest.append(None)
        else:
            exact.append(None)
            # Integers beyond 64 bits go as their text: it saturates as CAST saturates such a literal.
            rest.append(v if isinstance(v, str) else repr(v) if isinstance(v, int) else _java_double(float(v)))
    out = pa.array(exact, pa.int64())
    if any(r is not None for r in rest):
        out = pc.coalesce(out, to_long_values(pa.array(rest, pa.string())))
    return out


_INT64 = 1 << 63


def _java_double(v: float) -> str:
    return "NaN" if v != v else "Infinity" if v == float("inf") else "-Infinity" if v == float("-inf") else repr(v)


def _text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"  # booleans are LONG 1/0 in nested columns, as in Druid
    if isinstance(v, float):
        if not math.isfinite(v):
            return _java_double(v)
        if v.is_integer() and abs(v) < 1e7:
            return f"{v:.1f}"
        return repr(v)
    return str(v)


__all__ = ["WILDCARD", "Descend", "documents", "has_wildcard", "json_values", "value_type_for", "key_text", "literal_array", "parse_path",
           "path_text", "walk"]
