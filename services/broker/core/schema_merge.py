"""Query-time schema of a datasource whose segments disagree on a column's type.

``columnTypeMergePolicy`` (a broker setting; ``SET columnTypeMergePolicy = ...`` per query):

- ``leastRestrictive`` (default, Druid's default): the type every segment's values fit in, by the
  widening rules of ingestion (docs/schemaless.md): LONG+DOUBLE -> DOUBLE, number+string ->
  STRING, scalar+array -> ARRAY, anything+COMPLEX<json> -> COMPLEX<json>;
- ``latestInterval``: the type in the segment with the latest interval (then newest version);
- ``fail``: a query of a column whose types disagree fails, naming the column, the types and a
  segment of each.

A type the catalog declares overrides all of them (the catalog overlay applies it; ``fail`` does
not fire for a declared column). Every column whose segments disagreed is a decision, listed in
``sys.schema_decisions`` with the rule that settled it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.types.column_type import ColumnType
from common.types.type_discovery import finish, observed_of, widen

POLICIES = ("leastRestrictive", "latestInterval", "fail")
DEFAULT_POLICY = "leastRestrictive"


def check_policy(policy) -> str:
    if policy not in POLICIES:
        raise ValidationError(f"columnTypeMergePolicy must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy


@dataclass
class MergedSchema:
    schema: dict[str, ColumnType]
    # column -> [(type, a segment id holding it)], for columns whose segments disagree
    conflicts: dict[str, list[tuple[ColumnType, str]]] = field(default_factory=dict)
    decisions: list[dict] = field(default_factory=list)


def _latest_key(pair):
    sid = pair[0]
    return (sid.interval.end, sid.interval.start, sid.version, sid.partition)


def merge_schemas(pairs: Iterable[tuple], policy: str = DEFAULT_POLICY,
                  declared: Mapping[str, ColumnType] | None = None) -> MergedSchema:
    """(SegmentId, {column: ColumnType}) pairs -> the datasource's schema under ``policy``."""
    check_policy(policy)
    declared = dict(declared or {})
    ordered = sorted(pairs, key=_latest_key)
    seen: dict[str, dict[ColumnType, str]] = {}
    latest: dict[str, ColumnType] = {}
    for sid, schema in ordered:
        for name, ctype in schema.items():
            seen.setdefault(name, {}).setdefault(ctype, str(sid))
            latest[name] = ctype
    out = MergedSchema({})
    for name, types in seen.items():
        if len(types) == 1:
            out.schema[name] = next(iter(types))
            continue
        out.conflicts[name] = [(t, sid) for t, sid in types.items()]
        if policy == "latestInterval":
            chosen, rule = latest[name], "latestInterval: the latest segment's type"
        else:
            acc, rules = (), set()
            for t in types:
                acc, r = widen(acc, observed_of(t))
                rules.add(r)
            chosen = finish(acc)[0]
            rule = "leastRestrictive: " + "; ".join(sorted(r for r in rules if r != "same type") or ["same type"])
        if name in declared:
            chosen, rule = declared[name], "declared type (catalog)"
        elif policy == "fail":
            rule = "fail"
        out.schema[name] = chosen
        out.decisions.append({"column": name, "typesSeen": [t.native_name for t in types],
                              "segments": list(types.values()), "chosen": chosen.native_name, "rule": rule})
    return out


def conflict_error(datasource: str, column: str, conflicts: list[tuple[ColumnType, str]]) -> ValidationError:
    parts = ", ".join(f"{t.native_name} in segment {sid}" for t, sid in conflicts)
    return ValidationError(
        f"column '{column}' of datasource {datasource} has different types in different segments ({parts}) and "
        f"columnTypeMergePolicy is 'fail'; declare its type in the catalog (ALTER TABLE {datasource} ADD COLUMN "
        f"\"{column}\" <type>), re-ingest the older segments, or use columnTypeMergePolicy 'leastRestrictive' or "
        "'latestInterval'")


__all__ = ["DEFAULT_POLICY", "POLICIES", "MergedSchema", "check_policy", "conflict_error", "merge_schemas"]
