"""The catalog laid over segment schemas: pure rules the broker's SQL catalog applies.

- Declared columns come first, in declared order, then undeclared segment columns in their order.
  ``__time`` goes first unless the catalog places it.
- A declared sqlType wins over the segments' type (the engine casts values to it, in results and
  in filters); a declared column no segment has reads as typed NULLs; with no type and no data it
  is VARCHAR, as the proposal says.
- Hidden columns disappear entirely: they cannot be selected or referenced.
- Input tables (schema ext) become ExternalSource definitions; a template (no files/uris/data)
  needs them as table-function arguments, and a missing one is an error naming it.
"""

from __future__ import annotations

from common.errors import ValidationError
from common.types.column_type import STRING, TIME_COLUMN, TIMESTAMP, ColumnType

# Catalog property names of input tables -> the input source / format JSON the ingestion engine reads.
SOURCE_KEYS = {"inline": ("data",), "local": ("baseDir", "files", "filePattern"), "http": ("uris",)}
FORMAT_KEYS = ("listDelimiter", "skipHeaderRows", "skipRows", "delimiter", "findColumnsFromHeader", "keepNulls",
               "columns")
TEMPLATE_PARAMETERS = {"local": ("files", "filePattern"), "http": ("uris",), "inline": ("data",)}


def _declared_type(column: dict) -> ColumnType | None:
    text = column.get("sqlType")
    return ColumnType.parse(text) if text else None


def overlay_schema(spec: dict | None, physical: dict[str, ColumnType] | None) -> dict[str, ColumnType] | None:
    if spec is None:
        return physical
    physical = physical or {}
    props = spec.get("properties") or {}
    hidden = set(props.get("hiddenColumns") or [])
    out: dict[str, ColumnType] = {}
    declared = [c for c in spec.get("columns") or [] if c.get("name") not in hidden]
    if not any(c["name"] == TIME_COLUMN for c in declared):
        out[TIME_COLUMN] = TIMESTAMP
    for column in declared:
        name = column["name"]
        out[name] = _declared_type(column) or physical.get(name) or STRING
    for name, ctype in physical.items():
        if name not in out and name not in hidden:
            out[name] = ctype
    return out


def declared_order(spec: dict | None) -> bool:
    return bool(spec and spec.get("columns"))


def external_signature(spec: dict) -> dict[str, ColumnType]:
    return {c["name"]: _declared_type(c) or STRING for c in spec.get("columns") or []}


def external_definition(name: str, spec: dict, args: dict) -> tuple[dict, dict, list]:
    """(input source JSON, input format JSON, signature) of input table ``ext.name`` called with ``args``."""
    kind = spec.get("type")
    if kind not in SOURCE_KEYS:
        raise ValidationError(f"ext.{name} has type '{kind}'; input tables are inline, local or http")
    props = dict(spec.get("properties") or {})
    unknown = sorted(set(args) - set(TEMPLATE_PARAMETERS[kind]) - set(FORMAT_KEYS) - {"format"})
    if unknown:
        raise ValidationError(f"ext.{name} does not take {unknown}; its parameters are "
                              f"{', '.join(TEMPLATE_PARAMETERS[kind])}")
    props.update(args)
    source = {"type": kind}
    for key in SOURCE_KEYS[kind]:
        if props.get(key) not in (None, "", []):
            value = props[key]
            if key in ("files", "uris") and isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if key == "data" and isinstance(value, list):
                value = "\n".join(value)
            source["filter" if key == "filePattern" else key] = value
    needed = TEMPLATE_PARAMETERS[kind]
    if kind == "local" and not any(k in source for k in ("files", "filter")):
        raise ValidationError(f"ext.{name} is a template: call it as TABLE(ext.{name}(files => '...')) or with "
                              f"filePattern => '...'; missing parameters: {', '.join(needed)}")
    if kind != "local" and not any(k in source for k in needed):
        raise ValidationError(f"ext.{name} is a template: call it as TABLE(ext.{name}({needed[0]} => '...')); "
                              f"missing parameters: {', '.join(needed)}")
    fmt_type = props.get("format")
    if not fmt_type:
        raise ValidationError(f"ext.{name} has no 'format'; set one of csv, tsv, json, parquet")
    fmt = {"type": fmt_type}
    for key in FORMAT_KEYS:
        if key in props and props[key] is not None:
            if key == "delimiter" and fmt_type != "tsv":
                continue  # the catalog may record csv's implicit comma; only delimited text (tsv) takes one
            fmt["skipHeaderRows" if key == "skipRows" else key] = props[key]
    signature = [{"name": c["name"], "type": (c.get("sqlType") or "VARCHAR")} for c in spec.get("columns") or []]
    if not signature:
        raise ValidationError(f"ext.{name} declares no columns; input tables need their columns in order")
    return source, fmt, signature
