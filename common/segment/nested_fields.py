"""Splitting JSON documents into the fields of a nested column.

Every path that leads to a literal (string, number, boolean) or to an array of literals is a
field; arrays holding objects or arrays are walked per element (``$.a[0].b``). A path whose
values change type keeps every type it saw. Booleans are stored as LONG 1/0, as Druid does;
integers beyond 64 bits as DOUBLE. The guard keeps at most ``max_fields`` fields (the most
often present, ties by first appearance); the rest stay only in the raw documents and are
reported. Walks are iterative, so nesting depth is bounded by the JSON parser, not the stack.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.json.document_paths import literal_paths

DEFAULT_MAX_FIELDS = 1000


@dataclass(frozen=True)
class NestedOptions:
    max_fields: int = DEFAULT_MAX_FIELDS
    skip_paths: tuple[str, ...] = ()  # exact paths, as canonical JSONPath text
    skip_patterns: tuple[str, ...] = ()  # regular expressions matched against the path text
    keep_raw: bool = True


@dataclass
class SplitField:
    path: str
    types: list[str]
    values: list  # one per row: None where missing or null


@dataclass
class Split:
    fields: list[SplitField]
    canonical: list  # each row's document as compact JSON text (None for a null row)
    dropped_paths: list[str] = field(default_factory=list)


def parse_document(text: str | None, row: int):
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValidationError(f"row {row}: the JSON document nests too deeply to parse (over about 900 levels); "
                              "flatten it or store it as VARCHAR") from None
    except ValueError as exc:
        raise ValidationError(f"row {row}: malformed JSON: {exc}") from None


def split_documents(texts: list, options: NestedOptions | None = None) -> Split:
    options = options or NestedOptions()
    skip = set(options.skip_paths)
    patterns = [re.compile(p) for p in options.skip_patterns]
    n = len(texts)
    found: dict[str, SplitField] = {}
    present: dict[str, int] = {}
    canonical: list = []
    for row, text in enumerate(texts):
        doc = parse_document(text, row) if isinstance(text, str) or text is None else text
        canonical.append(None if doc is None else json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
        if doc is None:
            continue
        for path, kind, stored in literal_paths(doc):
            if path in skip or any(p.search(path) for p in patterns):
                continue
            f = found.get(path)
            if f is None:
                f = found[path] = SplitField(path, [], [None] * n)
                present[path] = 0
            if kind not in f.types:
                f.types.append(kind)
            if f.values[row] is None:
                present[path] += 1
            f.values[row] = stored
    fields = list(found.values())
    dropped: list[str] = []
    if len(fields) > options.max_fields:
        order = {f.path: i for i, f in enumerate(fields)}
        ranked = sorted(fields, key=lambda f: (-present[f.path], order[f.path]))
        kept = {f.path for f in ranked[:options.max_fields]}
        dropped = [f.path for f in fields if f.path not in kept]
        fields = [f for f in fields if f.path in kept]
    return Split(fields, canonical, dropped)


__all__ = ["DEFAULT_MAX_FIELDS", "NestedOptions", "Split", "SplitField", "parse_document",
           "split_documents"]
