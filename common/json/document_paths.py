"""Walking a parsed JSON document to its literals: every path that leads to a literal (string,
number, boolean) or to an array of literals, with the value's type as a nested column stores it.

Arrays holding objects or arrays are walked per element (``$.a[0].b``). Booleans are LONG 1/0,
as in Druid (but "true"/"false" in an array holding strings, as Druid's ARRAY<STRING>); integers
beyond 64 bits are DOUBLE; an array of literals takes the widest element
type (any string: STRING; any fraction: DOUBLE; else LONG, also for empty or all-null arrays).
The walk is iterative, so nesting depth is bounded by the JSON parser, not the stack.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from common.json.path_steps import key_text

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _scalar(value):
    """(type, stored value) of a literal."""
    if isinstance(value, bool):
        return "LONG", int(value)
    if isinstance(value, int):
        if _INT64[0] <= value <= _INT64[1]:
            return "LONG", value
        return "DOUBLE", float(value)
    if isinstance(value, float):
        return "DOUBLE", value
    return "STRING", value


def _literal_array(values: list):
    """(ARRAY<type>, stored list) when every element is a literal or null, else None."""
    kinds = set()
    out = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        if isinstance(v, (dict, list)):
            return None
        kind, stored = _scalar(v)
        kinds.add(kind)
        out.append(v if isinstance(v, bool) else stored)
    if "STRING" in kinds:
        # Among strings a boolean keeps its text ("true"), as Druid's ARRAY<STRING> of a mixed array
        element = "STRING"
        out = [None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in out]
    elif "DOUBLE" in kinds:
        element = "DOUBLE"
        out = [None if v is None else float(v) for v in out]
    else:
        element = "LONG"  # also arrays of nulls only, or empty ones (Druid: ARRAY<LONG>)
        out = [int(v) if isinstance(v, bool) else v for v in out]
    return f"ARRAY<{element}>", out


def literal_paths(doc) -> Iterator[tuple[str, str, object]]:
    """(canonical path, type, stored value) of each literal or array of literals, in document order."""
    stack = [("$", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key in reversed(list(value)):
                stack.append((path + key_text(str(key)), value[key]))
            continue
        if isinstance(value, list):
            arr = _literal_array(value)
            if arr is None:
                for i in range(len(value) - 1, -1, -1):
                    stack.append((f"{path}[{i}]", value[i]))
                continue
            kind, stored = arr
        elif value is None:
            continue
        else:
            kind, stored = _scalar(value)
        yield path, kind, stored


__all__ = ["literal_paths"]
