"""An input table entry (schema ``ext``) as the input source JSON, input format JSON and signature
that ingestion's EXTERN takes, so a catalog table can stand wherever EXTERN(...) can.

A table may be a template: a local table without files, an http table with a uriTemplate and no
uris. Such a table is completed per statement with ``parameters`` (files, filePattern, uris),
which take precedence over what is stored. What comes out is checked again by ingestion's own
validation; this module only translates the flattened catalog names to Druid's JSON names.
"""

from __future__ import annotations

import posixpath

from common.catalog.table_spec import HTTP, INLINE, LOCAL, TableSpec
from common.catalog.validation import FORMAT_PROPERTIES, validate_sql_type
from common.errors import ValidationError

PARAMETERS = {LOCAL: ("files", "filePattern"), HTTP: ("uris",), INLINE: ()}


def _list(value) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value or [])


def to_extern(spec: TableSpec, parameters: dict | None = None, table: str = "") -> tuple[dict, dict, list[dict]]:
    """(inputSource, inputFormat, signature) for a valid input table spec."""
    if not spec.is_input:
        raise ValidationError(f"table {table or '?'} is a {spec.type}, not an input table")
    params = dict(parameters or {})
    allowed = PARAMETERS[spec.type]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValidationError(f"input table {table}: unknown parameter(s) {', '.join(unknown)}; a {spec.type} table "
                              f"takes {', '.join(allowed) or 'no parameters'}")
    props = {**spec.properties, **{k: v for k, v in params.items() if v is not None}}
    if spec.type == INLINE:
        data = props["data"]
        source = {"type": "inline", "data": data if isinstance(data, str) else "\n".join(data) + "\n"}
    elif spec.type == LOCAL:
        source = {"type": "local"}
        base, files = props.get("baseDir"), _list(props.get("files"))
        if files:
            # Files are relative to baseDir when both are given, so a template can fix the directory.
            source["files"] = [posixpath.join(base, f) if base else f for f in files]
        elif base:
            source["baseDir"] = base
            source["filter"] = props.get("filePattern") or "*"
        else:
            raise ValidationError(f"input table {table} names no files: give the 'files' parameter (or set "
                                  "'baseDir' with an optional 'filePattern' in the table)")
    else:
        uris = _list(props.get("uris"))
        template = props.get("uriTemplate")
        if template:
            uris = [template.replace("{}", u) for u in uris]
        if not uris:
            raise ValidationError(f"input table {table} names no URIs: give the 'uris' parameter")
        source = {"type": "http", "uris": uris}
        if props.get("userName"):
            source["httpAuthenticationUsername"] = props["userName"]
        if props.get("passwordEnvVar"):
            source["httpAuthenticationPassword"] = {"type": "environment", "variable": props["passwordEnvVar"]}
    fmt = props["format"]
    input_format = {"type": fmt}
    input_format.update({k: v for k, v in props.items() if k in FORMAT_PROPERTIES[fmt]})
    signature = []
    for col in spec.columns:
        ctype = validate_sql_type(col.sql_type, col.name, table)
        signature.append({"name": col.name, "type": ctype.native_name if ctype else "STRING"})
    return source, input_format, signature
