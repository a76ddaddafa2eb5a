"""What a catalog entry may say, per table type: its schema, name, properties and column types.

Every check names the table, the property or column, and the values that would be valid, since
the catalog is edited by hand (REST, DDL, CLI) and a bare "invalid spec" helps nobody. A spec
that passes here is safe for the planner and ingestion to read without further checks.

Column types are limited to the storage types a segment can hold, spelled the SQL way (the
proposal's rule: one name per storage type, so a future narrower type never aliases an old
name). TIMESTAMP belongs to ``__time`` alone, which may also be left untyped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.catalog.table_spec import (
    DATASOURCE,
    HTTP,
    INLINE,
    LOCAL,
    SCHEMAS,
    TABLE_TYPES,
    ColumnSpec,
    TableId,
    TableSpec,
)
from common.errors import ValidationError
from common.types.column_properties import (JSON_COLUMN_PROPERTIES, MULTI_VALUE_HANDLING, MULTI_VALUE_PROPERTY,
                                            STORAGE_PROPERTIES, declared_column_type)
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.granularity import SIMPLE_GRANULARITIES

SQL_TYPES = ("VARCHAR", "BIGINT", "DOUBLE", "FLOAT", "TIMESTAMP", "COMPLEX<json>", "ARRAY<VARCHAR>",
             "ARRAY<BIGINT>", "ARRAY<DOUBLE>")
_SQL_TYPES_UPPER = {t.upper(): t for t in SQL_TYPES}

# Druid's standard segment granularities only: an arbitrary period (P2D) would make time chunks
# that INSERT's PARTITIONED BY cannot name. Names and their ISO periods are both accepted.
_GRANULARITY_PERIODS = {period: period for period in SIMPLE_GRANULARITIES.values()}
_GRANULARITY_NAMES = {name.upper(): period for name, period in SIMPLE_GRANULARITIES.items()}
SEGMENT_GRANULARITIES = (*SIMPLE_GRANULARITIES.values(), "ALL")

INPUT_FORMATS = ("csv", "tsv", "json", "parquet")
_NAME_MAX = 255
COLUMN_PROPERTIES = ("description", *STORAGE_PROPERTIES)


def _at(table) -> str:
    return f"table {table}: " if table else ""


# ---- value checkers: each returns None or raises with the property named ------------------------


def _string(prop: str, value, table) -> None:
    if not isinstance(value, str):
        raise ValidationError(f"{_at(table)}property '{prop}' must be a string, got {value!r}")


def _non_empty_string(prop: str, value, table) -> None:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{_at(table)}property '{prop}' must be a non-empty string, got {value!r}")


def _single_char(prop: str, value, table) -> None:
    if not isinstance(value, str) or len(value) != 1:
        raise ValidationError(f"{_at(table)}property '{prop}' must be one character, got {value!r}")


def _boolean(prop: str, value, table) -> None:
    if not isinstance(value, bool):
        raise ValidationError(f"{_at(table)}property '{prop}' must be true or false, got {value!r}")


def _positive_int(prop: str, value, table) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError(f"{_at(table)}property '{prop}' must be a positive integer, got {value!r}")


def _non_negative_int(prop: str, value, table) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{_at(table)}property '{prop}' must be an integer >= 0, got {value!r}")


def _string_list(prop: str, value, table) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError(f"{_at(table)}property '{prop}' must be a list of non-empty strings, got {value!r}")
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise ValidationError(f"{_at(table)}property '{prop}' lists {', '.join(dupes)} more than once")


def canonical_granularity(value) -> str:
    """A segmentGranularity value as ``Granularity.parse`` takes it: the ISO period, or 'all'."""
    if isinstance(value, str):
        text = value.strip()
        upper = text.upper()
        if upper in ("ALL", "ALL TIME"):
            return "all"
        if upper in _GRANULARITY_PERIODS:
            return upper
        if upper in _GRANULARITY_NAMES:
            return _GRANULARITY_NAMES[upper]
    names = ", ".join(n.upper() for n in SIMPLE_GRANULARITIES)
    raise ValidationError(f"property 'segmentGranularity' is {value!r}, not a standard Druid granularity; valid "
                          f"values: {', '.join(SEGMENT_GRANULARITIES)} (or the names {names})")


def _granularity(prop: str, value, table) -> None:
    try:
        canonical_granularity(value)
    except ValidationError as exc:
        raise ValidationError(f"{_at(table)}{exc}") from None


def _cluster_keys(prop: str, value, table) -> None:
    example = '[{"column": "a"}, {"column": "b", "desc": true}]'
    if not isinstance(value, list) or not value:
        raise ValidationError(f"{_at(table)}property '{prop}' must be a non-empty list such as {example}, "
                              f"got {value!r}")
    seen = set()
    for key in value:
        if not isinstance(key, Mapping) or not isinstance(key.get("column"), str) or not key["column"]:
            raise ValidationError(f"{_at(table)}property '{prop}': each key must be an object such as "
                                  f'{{"column": "a", "desc": false}}, got {key!r}')
        unknown = sorted(set(key) - {"column", "desc"})
        if unknown:
            raise ValidationError(f"{_at(table)}property '{prop}': key {key['column']!r} has unknown field(s) "
                                  f"{', '.join(unknown)}; valid fields: column, desc")
        if "desc" in key and not isinstance(key["desc"], bool):
            raise ValidationError(f"{_at(table)}property '{prop}': 'desc' of {key['column']!r} must be true or "
                                  f"false, got {key['desc']!r}")
        if key["column"] in seen:
            raise ValidationError(f"{_at(table)}property '{prop}' names column {key['column']!r} twice")
        seen.add(key["column"])


def _hidden_columns(prop: str, value, table) -> None:
    _string_list(prop, value, table)
    if TIME_COLUMN in value:
        raise ValidationError(f"{_at(table)}property '{prop}': {TIME_COLUMN} cannot be hidden; every datasource "
                              "has it")


def _format(prop: str, value, table) -> None:
    if value not in INPUT_FORMATS:
        raise ValidationError(f"{_at(table)}property 'format' is {value!r}; valid formats: {', '.join(INPUT_FORMATS)}")


def _inline_data(prop: str, value, table) -> None:
    # One string (rows separated by newlines) or a list of row strings, as the proposal shows.
    if isinstance(value, str) and value:
        return
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return
    raise ValidationError(f"{_at(table)}property 'data' must be the rows as one non-empty string or a list of "
                          f"strings, got {value!r}")


def _uris(prop: str, value, table) -> None:
    _string_list(prop, value, table)
    for uri in value:
        if not uri.lower().startswith(("http://", "https://")):
            raise ValidationError(f"{_at(table)}property '{prop}': {uri!r} is not an http:// or https:// URI")


def _uri_template(prop: str, value, table) -> None:
    _non_empty_string(prop, value, table)
    if not value.lower().startswith(("http://", "https://")) or "{}" not in value:
        raise ValidationError(f"{_at(table)}property '{prop}' must be an http(s) URI with a {{}} where each "
                              f"entry of 'uris' goes, such as 'https://example.com/data/{{}}', got {value!r}")


@dataclass(frozen=True)
class PropertyDefn:
    name: str
    check: Callable[[str, object, object], None]


def _defns(*defns: PropertyDefn) -> dict[str, PropertyDefn]:
    return {d.name: d for d in defns}


def _projections(prop: str, value, table) -> None:
    if not isinstance(value, list):
        raise ValidationError(f"{_at(table)}property '{prop}' must be a list of projection definitions, got {value!r}")
    from common.query.projection import ProjectionSpec

    names = []
    for i, obj in enumerate(value):
        try:
            names.append(ProjectionSpec.from_json(obj).name)
        except ValidationError as exc:
            raise ValidationError(f"{_at(table)}property '{prop}' [{i}]: {exc}") from None
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"{_at(table)}property '{prop}': projection names must be unique; repeated: "
                              f"{', '.join(dupes)}")


class _OpenSchema(dict):
    """Declared column types, and VARCHAR for any other name: an unsealed table may hold columns
    it does not declare, so a projection naming one is not an error."""

    def __contains__(self, name) -> bool:
        return True

    def __missing__(self, name) -> ColumnType:
        return ColumnType.parse("VARCHAR")


def validate_projections_against(spec: TableSpec, table=None) -> None:
    """Check every projection: duplicate output names, aggregators that cannot be pre-aggregated,
    and, for a sealed table (which holds only its declared columns), unknown columns."""
    if not spec.projections:
        return
    from common.query.projection import ProjectionSpec

    declared: dict[str, ColumnType] = {}
    for col in spec.columns:
        declared[col.name] = declared_column_type(col.to_json()) or ColumnType.parse("VARCHAR")
    schema = declared if spec.sealed else _OpenSchema(declared)
    for obj in spec.projections:
        try:
            ProjectionSpec.from_json(obj).validate(schema)
        except ValidationError as exc:
            raise ValidationError(f"{_at(table)}{exc}") from None


DATASOURCE_PROPERTIES = _defns(
    PropertyDefn("description", _string),
    PropertyDefn("projections", _projections),
    PropertyDefn("segmentGranularity", _granularity),
    PropertyDefn("targetSegmentRows", _positive_int),
    PropertyDefn("clusterKeys", _cluster_keys),
    PropertyDefn("hiddenColumns", _hidden_columns),
    PropertyDefn("sealed", _boolean),
)
_INPUT_COMMON = (PropertyDefn("description", _string), PropertyDefn("format", _format))
# Properties of the input source, per table type (the flattened names the table functions use).
INPUT_SOURCE_PROPERTIES = {
    INLINE: _defns(PropertyDefn("data", _inline_data)),
    LOCAL: _defns(PropertyDefn("baseDir", _non_empty_string), PropertyDefn("filePattern", _non_empty_string),
                  PropertyDefn("files", _string_list)),
    # Only an environment variable may carry the password: catalog entries are readable by every
    # user with READ on the table, so a literal secret would leak.
    HTTP: _defns(PropertyDefn("uris", _uris), PropertyDefn("uriTemplate", _uri_template),
                 PropertyDefn("userName", _non_empty_string), PropertyDefn("passwordEnvVar", _non_empty_string)),
}
# Properties of each input format (the ingestion table functions' argument names).
FORMAT_PROPERTIES = {
    "csv": _defns(PropertyDefn("listDelimiter", _non_empty_string), PropertyDefn("skipHeaderRows", _non_negative_int),
                  PropertyDefn("findColumnsFromHeader", _boolean)),
    "tsv": _defns(PropertyDefn("delimiter", _single_char), PropertyDefn("listDelimiter", _non_empty_string),
                  PropertyDefn("skipHeaderRows", _non_negative_int), PropertyDefn("findColumnsFromHeader", _boolean)),
    "json": _defns(PropertyDefn("keepNullColumns", _boolean)),
    "parquet": _defns(PropertyDefn("binaryAsString", _boolean)),
}


def valid_properties(table_type: str, fmt: str | None = None) -> dict[str, PropertyDefn]:
    """Every property a table of this type (and input format) may have."""
    if table_type == DATASOURCE:
        return dict(DATASOURCE_PROPERTIES)
    out = _defns(*_INPUT_COMMON)
    out.update(INPUT_SOURCE_PROPERTIES[table_type])
    out.update(FORMAT_PROPERTIES.get(fmt or "", {}))
    return out


# ---- names -------------------------------------------------------------------------------------


def validate_table_id(table: TableId) -> None:
    if table.schema not in SCHEMAS:
        raise ValidationError(f"schema '{table.schema}' does not hold catalog entries; valid schemas: "
                              f"{', '.join(SCHEMAS)} (druid for datasources, ext for input tables)")
    name = table.name
    problem = None
    if not name:
        problem = "is empty"
    elif len(name) > _NAME_MAX:
        problem = f"is longer than {_NAME_MAX} characters"
    elif name != name.strip():
        problem = "starts or ends with whitespace"
    elif "/" in name:
        problem = "contains '/'"  # it would split the REST path
    elif name.startswith("."):
        problem = "starts with '.'"
    elif any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        problem = "contains a control character"
    if problem:
        raise ValidationError(f"table name {name!r} in schema '{table.schema}' {problem}; use letters, digits, "
                              "'_', '-' and the like")


# ---- column types ------------------------------------------------------------------------------


def validate_sql_type(sql_type: str | None, column: str, table=None) -> ColumnType | None:
    """The ColumnType a column's sqlType names, or None when it is untyped."""
    where = f"{_at(table)}column '{column}'"
    if sql_type is None:
        return None
    canonical = _SQL_TYPES_UPPER.get(re.sub(r"\s+", "", sql_type).upper())
    if canonical is None:
        hint = ""
        try:
            parsed = ColumnType.parse(sql_type)
            if parsed.sql_name.upper() in _SQL_TYPES_UPPER:
                hint = f" (write {_SQL_TYPES_UPPER[parsed.sql_name.upper()]})"
        except ValidationError:
            pass
        raise ValidationError(f"{where}: sqlType {sql_type!r} is not supported{hint}; valid types: "
                              f"{', '.join(SQL_TYPES)}")
    ctype = ColumnType.parse(canonical)
    if canonical == "TIMESTAMP" and column != TIME_COLUMN:
        raise ValidationError(f"{where}: only {TIME_COLUMN} may be TIMESTAMP; other time values are BIGINT "
                              "(milliseconds) or VARCHAR")
    if column == TIME_COLUMN and canonical != "TIMESTAMP":
        raise ValidationError(f"{where}: {TIME_COLUMN} is always TIMESTAMP; leave its sqlType out or write "
                              "TIMESTAMP")
    return ctype


def _validate_columns(table, columns: tuple[ColumnSpec, ...]) -> None:
    seen: set[str] = set()
    for col in columns:
        if col.name in seen:
            raise ValidationError(f"{_at(table)}column '{col.name}' is declared more than once")
        seen.add(col.name)
        validate_sql_type(col.sql_type, col.name, table)
        unknown = sorted(set(col.properties) - set(COLUMN_PROPERTIES))
        if unknown:
            raise ValidationError(f"{_at(table)}column '{col.name}' has unknown propert"
                                  f"{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; valid: "
                                  f"{', '.join(COLUMN_PROPERTIES)}")
        desc = col.properties.get("description")
        if desc is not None and not isinstance(desc, str):
            raise ValidationError(f"{_at(table)}column '{col.name}': property 'description' must be a string")
        handling = col.properties.get(MULTI_VALUE_PROPERTY)
        if handling is not None:
            ctype = validate_sql_type(col.sql_type, col.name, table)
            if ctype is not None and not ctype.is_string:
                raise ValidationError(f"{_at(table)}column '{col.name}': {MULTI_VALUE_PROPERTY} makes a multi-value "
                                      f"string, so its sqlType must be VARCHAR (or left out), not {col.sql_type}")
            if not isinstance(handling, str) or handling.upper() not in MULTI_VALUE_HANDLING:
                raise ValidationError(f"{_at(table)}column '{col.name}': {MULTI_VALUE_PROPERTY} must be one of "
                                      f"{', '.join(MULTI_VALUE_HANDLING)}, got {handling!r}")
        nested = {k: v for k, v in col.properties.items() if k in JSON_COLUMN_PROPERTIES}
        if nested:
            ctype = validate_sql_type(col.sql_type, col.name, table)
            if ctype is None or ctype.complex_name != "json":
                raise ValidationError(f"{_at(table)}column '{col.name}': {', '.join(sorted(nested))} apply to "
                                      "COMPLEX<json> columns only; declare its sqlType COMPLEX<json>")
            from common.segment.nested_fields import NestedOptions

            try:
                NestedOptions.from_properties(nested, col.name)
            except ValidationError as exc:
                raise ValidationError(f"{_at(table)}{exc}") from None


# ---- whole specs -------------------------------------------------------------------------------


def _check_properties(table, props: Mapping, valid: Mapping[str, PropertyDefn], kind: str) -> None:
    unknown = sorted(set(props) - set(valid))
    if unknown:
        raise ValidationError(f"{_at(table)}unknown {kind} propert{'y' if len(unknown) == 1 else 'ies'} "
                              f"{', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
    for name, value in props.items():
        if value is None:
            raise ValidationError(f"{_at(table)}property '{name}' is null; leave it out instead")
        valid[name].check(name, value, table)


def _format_owner(prop: str) -> list[str]:
    return [fmt for fmt, defns in FORMAT_PROPERTIES.items() if prop in defns]


def validate_spec(spec: TableSpec, table: TableId | None = None) -> None:
    """Raises ValidationError naming the first problem in ``spec`` (for ``table``, if given)."""
    if spec.type not in TABLE_TYPES:
        raise ValidationError(f"{_at(table)}table type {spec.type!r} is not supported; valid types: "
                              f"{', '.join(TABLE_TYPES)}")
    if table is not None and TABLE_TYPES[spec.type] != table.schema:
        raise ValidationError(f"{_at(table)}a {spec.type} table belongs in schema '{TABLE_TYPES[spec.type]}', "
                              f"not '{table.schema}'")
    props = spec.properties
    if spec.type == DATASOURCE:
        _check_properties(table, props, DATASOURCE_PROPERTIES, "datasource")
        declared = set(spec.column_names)
        both = [c for c in props.get("hiddenColumns") or [] if c in declared]
        if both:
            raise ValidationError(f"{_at(table)}column(s) {', '.join(both)} are both declared and hidden; drop "
                                  "them from the columns first, or unhide them")
        validate_projections_against(spec, table)
    else:
        fmt = props.get("format")
        if fmt is None:
            raise ValidationError(f"{_at(table)}an {spec.type} input table needs property 'format'; valid formats: "
                                  f"{', '.join(INPUT_FORMATS)}")
        _format(spec.type, fmt, table)
        valid = valid_properties(spec.type, fmt)
        for name in props:
            owners = _format_owner(name)
            if name not in valid and owners:
                raise ValidationError(f"{_at(table)}property '{name}' belongs to format {' / '.join(owners)}, but "
                                      f"'format' is {fmt!r}; valid for {fmt}: "
                                      f"{', '.join(sorted(FORMAT_PROPERTIES[fmt])) or 'none'}")
        _check_properties(table, props, valid, f"{spec.type} input table")
        if spec.type == LOCAL and "filePattern" in props and "baseDir" not in props:
            raise ValidationError(f"{_at(table)}property 'filePattern' needs 'baseDir': the pattern matches files "
                                  "inside that directory")
        if spec.type == INLINE and "data" not in props:
            raise ValidationError(f"{_at(table)}an inline input table needs property 'data' (its rows)")
    _validate_columns(table, spec.columns)


def validate_table(table: TableId, spec: TableSpec) -> None:
    validate_table_id(table)
    validate_spec(spec, table)
