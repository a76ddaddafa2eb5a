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

from common.types.column_properties import declared_column_type
from common.errors import ValidationError
from common.types.column_type import STRING, TIME_COLUMN, TIMESTAMP, ColumnType

# What a template lacks until a table function call supplies it.
TEMPLATE_PARAMETERS = {"local": ("files", "filePattern"), "http": ("uris",), "inline": ("data",)}


def _declared_type(column: dict) -> ColumnType | None:
    return declared_column_type(column)


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
    """(input source JSON, input format JSON, signature) of input table ``ext.name`` called with ``args``.

    A template (an input table without its files, file pattern, URIs or data) must get them as
    arguments; the mapping of catalog properties to Druid's JSON is the catalog's own (to_extern).
    """
    from common.catalog.input_table import to_extern
    from common.catalog.table_spec import TableSpec

    kind = spec.get("type")
    if kind not in TEMPLATE_PARAMETERS:
        raise ValidationError(f"ext.{name} has type '{kind}'; input tables are inline, local or http")
    props = {**(spec.get("properties") or {}), **{k: v for k, v in args.items() if v is not None}}
    needed = TEMPLATE_PARAMETERS[kind]
    if not any(props.get(k) not in (None, "", []) for k in needed):
        raise ValidationError(f"ext.{name} is a template: call it as TABLE(ext.{name}({needed[0]} => '...')); "
                              f"missing parameters: {', '.join(needed)}")
    return to_extern(TableSpec.from_json(spec), args, f"ext.{name}")
