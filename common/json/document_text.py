"""JSON documents (COMPLEX<json> values) to and from their compact text, the one way every reader
and printer of documents does it, so nothing is stored that cannot be printed again as JSON.

Numbers beyond a double (``1e400``) and the non-standard ``NaN`` / ``Infinity`` tokens: Druid reads
documents with Jackson's defaults, which read ``1e400`` as a double infinity (no parse error), and
prints an infinite or NaN double, with Jackson's default ``WRITE_NAN_AS_STRINGS``, as the JSON
*strings* ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``. strata reads them straight into those
strings, so a document's text is valid JSON, its fields hold what that text says, JSON_VALUE ..
RETURNING DOUBLE reads the strings back as the infinities Druid holds, and TO_JSON_STRING prints
what Druid prints. (Keeping ``1e400``'s own text would need every reader and the nested split to
carry number texts instead of doubles; a parse exception would reject rows Druid ingests.)

A lone UTF-16 surrogate escape (``"\\ud800"``) is valid JSON but no character, so it cannot be
Arrow (UTF-8) text: ``lone_surrogate`` finds one, and each caller says what that means there (a
parse exception at ingestion, an error naming the row in PARSE_JSON).

Nesting: documents may nest ``MAX_DOCUMENT_DEPTH`` levels; ``depth_over`` tells a deeper text
before Python's recursive parser runs into the interpreter's recursion limit on it.
"""

from __future__ import annotations

import json
import math
import re
import sys

MAX_DOCUMENT_DEPTH = 900
# json.loads and json.dumps take an interpreter frame per level; a document at the limit must parse
# however deep the caller's stack is (a Spark worker starts at 1,000), so a deep text raises the
# limit to this first (only ever raised, as common.expr.nesting raises it for expressions).
_RECURSION_FOR_DOCUMENTS = 4 * MAX_DOCUMENT_DEPTH
_SURROGATE = re.compile("[\ud800-\udfff]")
_JACKSON = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


def _number(text: str):
    value = float(text)
    if math.isfinite(value):
        return value
    return "Infinity" if value > 0 else "-Infinity"


def _constant(token: str) -> str:
    return _JACKSON[token]


def loads_document(text: str | bytes):
    """``text`` parsed as json.loads parses it, but numbers beyond a double and NaN / Infinity read
    as the strings Jackson prints for them. Raises what json.loads raises (ValueError,
    RecursionError for text nested beyond the interpreter's limit: check ``depth_over`` first)."""
    if len(text) > 200:
        allow_deep_documents()
    return json.loads(text, parse_float=_number, parse_constant=_constant)


def allow_deep_documents() -> None:
    """Lets json.loads / json.dumps take documents as deep as MAX_DOCUMENT_DEPTH."""
    if sys.getrecursionlimit() < _RECURSION_FOR_DOCUMENTS:
        sys.setrecursionlimit(_RECURSION_FOR_DOCUMENTS)


def jackson_value(value: float) -> float | str:
    """A double as a document holds it: infinities and NaN as Jackson prints them (strings)."""
    if math.isfinite(value):
        return value
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _finite(value):
    """``value`` with every non-finite double replaced as jackson_value does (iterative)."""
    if isinstance(value, float):
        return jackson_value(value)
    if not isinstance(value, (dict, list)):
        return value
    root = [value]
    stack = [(root, 0, value)]
    while stack:
        parent, key, node = stack.pop()
        copy = dict(node) if isinstance(node, dict) else list(node)
        parent[key] = copy
        for k, v in (copy.items() if isinstance(copy, dict) else enumerate(copy)):
            if isinstance(v, float) and not math.isfinite(v):
                copy[k] = jackson_value(v)
            elif isinstance(v, (dict, list)):
                stack.append((copy, k, v))
    return root[0]


def dumps_document(value, default=None) -> str:
    """Compact JSON text of a document, non-ASCII kept, as Druid serializes; non-finite doubles
    print as Jackson prints them (see the module doc). ``default``: as json.dumps takes it."""
    if isinstance(value, (dict, list)):
        allow_deep_documents()
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default)
    except ValueError:  # a NaN or infinite double somewhere (JSON has neither)
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=default)


def lone_surrogate(text: str) -> str | None:
    """The first lone UTF-16 surrogate in ``text`` (which a ``\\udXXX`` escape left there), or None."""
    if text.isascii():
        return None
    m = _SURROGATE.search(text)
    return None if m is None else m.group(0)


def surrogate_escape(char: str) -> str:
    """How a lone surrogate is written in JSON text, for messages: ``\\ud800``."""
    return f"\\u{ord(char):04x}"


def depth_over(text: str | bytes, limit: int = MAX_DOCUMENT_DEPTH) -> bool:
    """Whether arrays/objects in ``text`` nest deeper than ``limit`` (brackets inside strings do
    not count). A linear scan, run only when the text has more brackets than ``limit`` at all."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", "surrogateescape")
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "[" or ch == "{":
            depth += 1
            if depth > limit:
                return True
        elif ch == "]" or ch == "}":
            depth -= 1
    return False


__all__ = ["MAX_DOCUMENT_DEPTH", "allow_deep_documents", "depth_over", "dumps_document", "jackson_value", "loads_document",
           "lone_surrogate", "surrogate_escape"]
