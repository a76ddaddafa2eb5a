"""The stored types of a nested JSON column's fields, read from segment manifests: what JSON_VALUE
without RETURNING plans with in a numeric context (a comparison with a number, arithmetic, SUM,
AVG, MIN, MAX), as Druid infers the type of JSON_VALUE from its context and the column's fields.

A path's types are the union over the datasource's segments. A path the field guard left in the
raw documents (or one no segment has) has no known type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from common.sql.sql_types import BIGINT, DOUBLE, SqlType


def field_types(manifests: Iterable[str], columns: Iterable[str]) -> dict[str, dict[str, frozenset[str]]]:
    """column -> canonical path -> stored types (STRING, LONG, DOUBLE, ARRAY<..>), for ``columns``."""
    wanted = set(columns)
    out: dict[str, dict[str, set[str]]] = {c: {} for c in wanted}
    for text in manifests:
        try:
            manifest = json.loads(text)
        except (TypeError, ValueError):
            continue
        for column in manifest.get("columns", []):
            if column.get("name") not in wanted or column.get("encoding") != "nested":
                continue
            paths = out[column["name"]]
            for f in (column.get("spec") or {}).get("fields", []):
                paths.setdefault(f.get("path"), set()).update(f.get("types", []))
    return {c: {p: frozenset(t) for p, t in paths.items()} for c, paths in out.items()}


def numeric_type(types: frozenset[str] | None) -> SqlType:
    """The numeric type a path reads as in a numeric context: BIGINT for a path that only ever held
    whole numbers, else DOUBLE (fractions, mixed numbers, text holding numbers, unknown paths)."""
    if types and types <= {"LONG"}:
        return BIGINT
    return DOUBLE


__all__ = ["field_types", "numeric_type"]
