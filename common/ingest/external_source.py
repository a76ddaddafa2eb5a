"""ExternalSource: the input of an ingestion, as named in the FROM clause of an INSERT or REPLACE.

Two spellings reach the same frozen value (input source JSON, input format JSON, signature):

- ``TABLE(EXTERN(inputSource, inputFormat, signature))``, positional or with ``name => value``
  arguments, each a JSON string as in Druid's native ingestion specs;
- the per-source table functions ``inline(...)``, ``localfiles(...)`` and ``http(...)``, whose
  named arguments are flattened input source and format properties and whose columns come from an
  ``EXTEND (col TYPE, ...)`` list.

Without a signature (EXTERN with two arguments, a table function without EXTEND, or
``inferSchema => TRUE``) the source *discovers* its columns when the task reads it
(schema_discovery.py); ``PARTIAL (col TYPE, ...)`` declares some of them (the provided schema) and
``exclude => ARRAY['a', ...]`` leaves input columns out.

Everything is validated here, on the driver, before Spark starts, so a typo in a property name or
a format that is not supported fails with the property and its valid values instead of surfacing
as an executor stack trace.
"""

from __future__ import annotations

import re

import json
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.druid import Druid
from sqlglot.errors import ParseError

from common.errors import ValidationError
from common.types.column_type import ColumnType

INPUT_SOURCE_TYPES = ("inline", "local", "http")
INPUT_FORMAT_TYPES = ("csv", "tsv", "json", "parquet")
TABLE_FUNCTIONS = ("extern", "inline", "localfiles", "http")

# Properties each input source / format accepts (Druid's JSON names). Anything else is refused:
# a misspelt property silently ignored would read the wrong files or split the wrong way.
_SOURCE_PROPERTIES = {
    "inline": {"type", "data"},
    "local": {"type", "baseDir", "filter", "files"},
    "http": {"type", "uris", "httpAuthenticationUsername", "httpAuthenticationPassword"},
}
_FORMAT_PROPERTIES = {
    "csv": {"type", "columns", "listDelimiter", "findColumnsFromHeader", "skipHeaderRows", "hasHeaderRow"},
    "tsv": {"type", "columns", "listDelimiter", "findColumnsFromHeader", "skipHeaderRows", "delimiter",
            "hasHeaderRow"},
    "json": {"type", "keepNullColumns", "flattenSpec", "featureSpec", "assumeNewlineDelimited",
             "useJsonNodeReader"},
    "parquet": {"type", "binaryAsString", "flattenSpec"},
}
# Druid's default list delimiter is CTRL-A, so plain text is never split by accident.
DEFAULT_LIST_DELIMITER = "\u0001"

# Named arguments of the table functions: input source properties per function, then format ones.
_FUNCTION_SOURCE_ARGS = {
    "inline": ("data",),
    "localfiles": ("baseDir", "filter", "files"),
    "http": ("uris", "userName", "password", "passwordEnvVar"),
}
_FUNCTION_FORMAT_ARGS = {
    "csv": ("listDelimiter", "skipHeaderRows", "findColumnsFromHeader"),
    "tsv": ("delimiter", "listDelimiter", "skipHeaderRows", "findColumnsFromHeader"),
    "json": ("keepNullColumns",),
    "parquet": ("binaryAsString",),
}
_DISCOVERY_ARGS = ("inferSchema", "exclude")
# The one column of a CSV/TSV file read without header and without declared columns.
COLUMNS_ARRAY = "columns"


@dataclass(frozen=True)
class ExternalSource:
    """One external input. ``signature`` lists the columns the SELECT sees, in order."""

    input_source: dict
    input_format: dict
    signature: tuple[tuple[str, ColumnType], ...]
    where: str = field(default="", compare=False)  # "FROM at line 3, column 6", for messages
    # Schema discovery: the signature is found when the task reads the input; ``partial`` are the
    # declared columns (their types win), ``exclude`` input columns to leave out.
    discover: bool = False
    partial: tuple[tuple[str, ColumnType], ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def source_type(self) -> str:
        return self.input_source["type"]

    @property
    def format_type(self) -> str:
        return self.input_format["type"]

    @property
    def column_names(self) -> list[str]:
        return [name for name, _ in self.signature]

    def describe(self) -> str:
        src = self.input_source
        if src["type"] == "local":
            what = ", ".join(src.get("files") or []) or f"{src.get('baseDir')}/{src.get('filter') or '*'}"
        elif src["type"] == "http":
            what = ", ".join(src["uris"])
        else:
            what = f"{len(src.get('data', ''))} characters of inline data"
        return f"{src['type']} {self.format_type} input ({what})"

    @staticmethod
    def of(input_source: dict, input_format: dict, signature, where: str = "") -> ExternalSource:
        """Validate and normalize Druid's JSON forms; ``signature`` is a list of {"name", "type"}
        objects or of (name, ColumnType) pairs."""
        sig = _signature(signature, where)
        source = _input_source(input_source, where)
        fmt = _input_format(input_format, sig, where)
        return ExternalSource(source, fmt, sig, where)

    @staticmethod
    def discovering(input_source: dict, input_format: dict, partial=(), exclude=(), where: str = "") -> ExternalSource:
        """A source whose columns are discovered from the data; ``partial`` declares some of them."""
        part = _signature(partial, where) if partial else ()
        exclude = tuple(_str_list(list(exclude), "exclude", where)) if exclude else ()
        both = sorted(set(exclude) & {n for n, _ in part})
        if both:
            raise ValidationError(f"{_at(where)}column(s) {', '.join(both)} are both declared in PARTIAL and "
                                  "excluded; keep one")
        source = _input_source(input_source, where)
        fmt = _input_format(input_format, (), where, discover=True)
        return ExternalSource(source, fmt, (), where, True, part, exclude)


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _signature(signature, where: str) -> tuple[tuple[str, ColumnType], ...]:
    if not isinstance(signature, (list, tuple)) or not signature:
        raise ValidationError(f"{_at(where)}the signature must be a non-empty list of columns, e.g. "
                              '[{"name": "timestamp", "type": "string"}, {"name": "added", "type": "long"}]')
    out: list[tuple[str, ColumnType]] = []
    for i, col in enumerate(signature):
        if isinstance(col, dict):
            name, type_name = col.get("name"), col.get("type", "string")
            if not isinstance(name, str) or not name:
                raise ValidationError(f"{_at(where)}signature column {i + 1} has no \"name\"; "
                                      'give each column as {"name": ..., "type": ...}')
            try:
                ctype = ColumnType.parse(str(type_name))
            except ValidationError as exc:
                raise ValidationError(f"{_at(where)}signature column '{name}': {exc}") from None
        elif isinstance(col, (list, tuple)) and len(col) == 2 and isinstance(col[1], ColumnType):
            name, ctype = col
        else:
            raise ValidationError(f"{_at(where)}signature entry {i + 1} ({col!r}) must be "
                                  '{"name": ..., "type": ...}')
        out.append((name, ctype))
    names = [n for n, _ in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"{_at(where)}the signature names column(s) {', '.join(dupes)} more than once")
    return tuple(out)


def _require_str(value, prop: str, where: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ValidationError(f"{_at(where)}property '{prop}' must be a non-empty string, got {value!r}")
    return value


def _str_list(value, prop: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError(f"{_at(where)}property '{prop}' must be a list of strings, got {value!r}")
    return list(value)


def _check_known(obj: dict, allowed: set[str], what: str, where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValidationError(f"{_at(where)}unknown {what} propert{'y' if len(unknown) == 1 else 'ies'} "
                              f"{', '.join(unknown)}; valid: {', '.join(sorted(allowed))}")


def _typed(obj, what: str, types, properties: dict, where: str) -> str:
    """The ``type`` of an inputSource or inputFormat object, once its shape, type and property
    names are checked."""
    if not isinstance(obj, dict):
        raise ValidationError(f"{_at(where)}{what} must be a JSON object, got {obj!r}")
    kind = obj.get("type")
    if kind not in types:
        raise ValidationError(f"{_at(where)}{what} type {kind!r} is not supported; valid: {', '.join(types)}")
    _check_known(obj, properties[kind], f"{kind} {what}", where)
    return kind


def _input_source(obj, where: str) -> dict:
    kind = _typed(obj, "inputSource", INPUT_SOURCE_TYPES, _SOURCE_PROPERTIES, where)
    out: dict = {"type": kind}
    if kind == "inline":
        data = obj.get("data")
        if isinstance(data, list):
            data = "\n".join(str(x) for x in data) + "\n"
        out["data"] = _require_str(data, "data", where, allow_empty=True)
    elif kind == "local":
        base, files = obj.get("baseDir"), obj.get("files")
        if not base and not files:
            raise ValidationError(f"{_at(where)}a local inputSource needs 'baseDir' (with an optional "
                                  "'filter' glob) or 'files' (a list of paths)")
        if base:
            out["baseDir"] = _require_str(base, "baseDir", where)
            out["filter"] = _require_str(obj.get("filter") or "*", "filter", where)
        elif obj.get("filter"):
            raise ValidationError(f"{_at(where)}property 'filter' needs 'baseDir'; give the directory to match in")
        if files:
            out["files"] = _str_list(files, "files", where)
    else:
        uris = _str_list(obj.get("uris"), "uris", where)
        for uri in uris:
            if not uri.lower().startswith(("http://", "https://")):
                raise ValidationError(f"{_at(where)}property 'uris': '{uri}' is not an http:// or https:// URI")
        out["uris"] = uris
        user = obj.get("httpAuthenticationUsername")
        password = obj.get("httpAuthenticationPassword")
        if user is not None:
            out["httpAuthenticationUsername"] = _require_str(user, "httpAuthenticationUsername", where)
        if password is not None:
            if isinstance(password, str):
                password = {"type": "default", "password": password}
            if not isinstance(password, dict) or password.get("type", "default") not in ("default", "environment"):
                raise ValidationError(f"{_at(where)}property 'httpAuthenticationPassword' must be a string, "
                                      '{"type": "default", "password": ...} or {"type": "environment", '
                                      '"variable": ...}')
            out["httpAuthenticationPassword"] = password
    return out


def _bool(value, prop: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValidationError(f"{_at(where)}property '{prop}' must be true or false, got {value!r}")


def _input_format(obj, signature, where: str, discover: bool = False) -> dict:
    kind = _typed(obj, "inputFormat", INPUT_FORMAT_TYPES, _FORMAT_PROPERTIES, where)
    out: dict = {"type": kind}
    if kind in ("csv", "tsv"):
        skip = obj.get("skipHeaderRows", 0) or 0
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValidationError(f"{_at(where)}property 'skipHeaderRows' must be a whole number >= 0, got {skip!r}")
        header = obj.get("findColumnsFromHeader")
        if header is None:
            header = obj.get("hasHeaderRow", False)  # Druid's older name for the same switch
        header = _bool(header, "findColumnsFromHeader", where)
        columns = obj.get("columns")
        if columns:
            columns = _str_list(columns, "columns", where)
        if header and columns:
            raise ValidationError(f"{_at(where)}give either 'columns' or findColumnsFromHeader=true, not both")
        if not header and not discover:
            columns = columns or [name for name, _ in signature]
        delimiter = obj.get("delimiter", "\t" if kind == "tsv" else ",")
        delimiter = _require_str(delimiter, "delimiter", where)
        if len(delimiter) != 1:
            raise ValidationError(f"{_at(where)}property 'delimiter' must be one character, got {delimiter!r}")
        list_delimiter = obj.get("listDelimiter") or DEFAULT_LIST_DELIMITER
        list_delimiter = _require_str(list_delimiter, "listDelimiter", where)
        if list_delimiter == delimiter:
            raise ValidationError(f"{_at(where)}property 'listDelimiter' must differ from the column delimiter "
                                  f"{delimiter!r}")
        out.update(findColumnsFromHeader=header, skipHeaderRows=skip, delimiter=delimiter,
                   listDelimiter=list_delimiter)
        if columns:
            dupes = sorted({c for c in columns if columns.count(c) > 1})
            if dupes:
                raise ValidationError(f"{_at(where)}property 'columns' names {', '.join(dupes)} more than once")
            missing = [n for n, _ in signature if n not in columns]
            if missing:
                raise ValidationError(f"{_at(where)}signature column(s) {', '.join(missing)} are not in the "
                                      f"format's 'columns' ({', '.join(columns)}); add them or drop them from "
                                      "the signature")
            out["columns"] = columns
    elif kind == "json":
        if obj.get("flattenSpec") or obj.get("featureSpec"):
            raise ValidationError(f"{_at(where)}json properties 'flattenSpec' and 'featureSpec' are not supported; "
                                  "read nested fields with JSON_VALUE in the SELECT")
    elif kind == "parquet":
        if obj.get("flattenSpec"):
            raise ValidationError(f"{_at(where)}parquet property 'flattenSpec' is not supported")
    return out


# ---- SQL table functions ------------------------------------------------------------------------------


class _TableFunctionDialect(Druid):
    """Druid's dialect, except that ``inline`` is the table function, not the array INLINE."""

    class Parser(Druid.Parser):
        FUNCTIONS = {k: v for k, v in Druid.Parser.FUNCTIONS.items() if k != "INLINE"}


def _position(sql: str, offset: int) -> tuple[int, int]:
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1


def _node_where(node: exp.Expression, fallback: str) -> str:
    meta = node.meta if hasattr(node, "meta") else {}
    if "line" in meta:
        # sqlglot records the column of a token's last character; report where it starts instead.
        return f"line {meta['line']}, column {max(1, meta['col'] - (meta['end'] - meta['start']))}"
    return fallback


def _literal(node: exp.Expression, arg: str, where: str):
    """A SQL literal argument as a Python value (string, number, boolean, null or list)."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -_literal(node.this, arg, where)
    if isinstance(node, exp.Array):
        return [_literal(e, arg, where) for e in node.expressions]
    raise ValidationError(f"{where}: argument '{arg}' at {_node_where(node, where)} must be a literal "
                          f"(a string, number, boolean or ARRAY[...]), got {node.sql('druid')}")


def parse_table_function(text: str, where: str, extend: tuple[tuple[str, ColumnType], ...] | None,
                         partial: tuple[tuple[str, ColumnType], ...] | None = None) -> ExternalSource:
    """Parse ``fn(args)`` (the inside of ``TABLE(...)``). ``text`` is the whole statement with
    everything but the call blanked, so sqlglot's positions are the statement's. ``extend`` is the
    full schema (EXTEND), ``partial`` some columns of a discovered one (PARTIAL)."""
    try:
        call = sqlglot.parse_one(text, read=_TableFunctionDialect)
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        raise ValidationError(f"{where}: cannot parse the table function at line {err.get('line', '?')}, "
                              f"column {err.get('col', '?')}: {err.get('description', exc)}") from None
    if not isinstance(call, exp.Func):
        raise ValidationError(f"{where}: TABLE(...) must call one of {', '.join(TABLE_FUNCTIONS)}")
    name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
    if name not in TABLE_FUNCTIONS:
        raise ValidationError(f"{where}: unknown table function '{name}'; valid: {', '.join(TABLE_FUNCTIONS)}")
    args = call.expressions if isinstance(call, exp.Anonymous) else list(call.args.values())
    positional, named = [], {}
    for a in args:
        if isinstance(a, exp.Kwarg):
            key = a.this.name
            if key in named:
                raise ValidationError(f"{where}: argument '{key}' of {name}() is given twice")
            named[key] = (_literal(a.expression, key, where), a)
        elif named:
            raise ValidationError(f"{where}: positional arguments of {name}() must come before named ones")
        else:
            positional.append(a)
    if name == "extern":
        return _extern(positional, named, where, extend, partial)
    if positional:
        raise ValidationError(f"{where}: {name}() takes only named arguments (name => value), e.g. "
                              f"{name}({_FUNCTION_SOURCE_ARGS[name][0]} => ..., format => 'csv')")
    return _source_function(name, {k: v for k, (v, _) in named.items()}, where, extend, partial)


def _json_arg(value, arg: str, where: str):
    if not isinstance(value, str):
        raise ValidationError(f"{where}: EXTERN argument '{arg}' must be a JSON string")
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{where}: EXTERN argument '{arg}' is not valid JSON: {exc.msg} at line "
                              f"{exc.lineno}, column {exc.colno} of the JSON text") from None


def _extern(positional, named, where: str, extend, partial=None) -> ExternalSource:
    order = ("inputSource", "inputFormat", "signature")
    unknown = sorted(set(named) - set(order))
    if unknown:
        raise ValidationError(f"{where}: unknown EXTERN argument(s) {', '.join(unknown)}; valid: {', '.join(order)}")
    if len(positional) > 3:
        raise ValidationError(f"{where}: EXTERN takes at most 3 arguments (inputSource, inputFormat, signature)")
    values = {}
    for key, node in zip(order, positional):
        values[key] = _literal(node, key, where)
    for key, (value, _) in named.items():
        if key in values:
            raise ValidationError(f"{where}: EXTERN argument '{key}' is given both by position and by name")
        values[key] = value
    for key in ("inputSource", "inputFormat"):
        if key not in values:
            raise ValidationError(f"{where}: EXTERN needs '{key}'")
    if "signature" in values and extend:
        raise ValidationError(f"{where}: give the columns either as EXTERN's signature or with EXTEND, not both")
    if "signature" not in values and not extend:
        return ExternalSource.discovering(_json_arg(values["inputSource"], "inputSource", where),
                                          _json_arg(values["inputFormat"], "inputFormat", where), partial or (),
                                          (), where)
    if partial:
        raise ValidationError(f"{where}: PARTIAL declares some columns of a source whose schema is discovered; "
                              "EXTERN with a signature (or EXTEND) already declares all of them: drop one")
    signature = _json_arg(values["signature"], "signature", where) if "signature" in values else list(extend)
    return ExternalSource.of(_json_arg(values["inputSource"], "inputSource", where),
                             _json_arg(values["inputFormat"], "inputFormat", where), signature, where)


def _source_function(name: str, named: dict, where: str, extend, partial=None) -> ExternalSource:
    fmt = named.get("format")
    if not isinstance(fmt, str) or fmt not in INPUT_FORMAT_TYPES:
        raise ValidationError(f"{where}: {name}() needs format => one of {', '.join(repr(f) for f in INPUT_FORMAT_TYPES)}"
                              + ("" if fmt is None else f", got {fmt!r}"))
    allowed = set(_FUNCTION_SOURCE_ARGS[name]) | set(_FUNCTION_FORMAT_ARGS[fmt]) | {"format"} | set(_DISCOVERY_ARGS)
    unknown = sorted(set(named) - allowed)
    if unknown:
        raise ValidationError(f"{where}: unknown argument(s) {', '.join(unknown)} for {name}() with format "
                              f"'{fmt}'; valid: {', '.join(sorted(allowed))}")
    infer = _bool(named.get("inferSchema", False), "inferSchema", where)
    exclude = named.get("exclude") or ()
    if isinstance(exclude, str):
        exclude = [exclude]
    discover = infer or not extend or partial is not None
    if extend and partial is not None:
        raise ValidationError(f"{where}: give either EXTEND (the full schema) or PARTIAL (some columns, the rest "
                              "discovered), not both")
    if extend and infer:
        raise ValidationError(f"{where}: inferSchema => TRUE discovers the columns, EXTEND declares all of them: "
                              "drop one, or write PARTIAL (col TYPE, ...) to declare some")
    if exclude and not discover:
        raise ValidationError(f"{where}: exclude => ... drops discovered columns; with EXTEND, just leave the "
                              "columns out of the list")
    if name == "inline":
        if "data" not in named:
            raise ValidationError(f"{where}: inline() needs data => 'text' or ARRAY['line 1', 'line 2']")
        source = {"type": "inline", "data": named["data"]}
    elif name == "localfiles":
        source = {"type": "local"}
        for key in ("baseDir", "filter", "files"):
            if named.get(key) is not None:
                source[key] = named[key]
    else:
        if "uris" not in named:
            raise ValidationError(f"{where}: http() needs uris => ARRAY['http://...'] or a comma-separated string")
        source = {"type": "http", "uris": named["uris"]}
        if named.get("userName") is not None:
            source["httpAuthenticationUsername"] = named["userName"]
        if named.get("password") is not None and named.get("passwordEnvVar") is not None:
            raise ValidationError(f"{where}: give http() either 'password' or 'passwordEnvVar', not both")
        if named.get("password") is not None:
            source["httpAuthenticationPassword"] = {"type": "default", "password": named["password"]}
        elif named.get("passwordEnvVar") is not None:
            source["httpAuthenticationPassword"] = {"type": "environment", "variable": named["passwordEnvVar"]}
    fmt_obj = {"type": fmt}
    for key in _FUNCTION_FORMAT_ARGS[fmt]:
        if named.get(key) is not None:
            fmt_obj[key] = named[key]
    if discover:
        return ExternalSource.discovering(source, fmt_obj, list(partial or ()), exclude, where)
    return ExternalSource.of(source, fmt_obj, list(extend), where)


def extend_column_type(type_text: str, column: str, where: str) -> ColumnType:
    """A type of an EXTEND list: SQL names, ``VARCHAR ARRAY`` (Druid's array spelling),
    ``ARRAY<VARCHAR>``, Druid's ``TYPE('COMPLEX<json>')`` and ``JSON``; ``NOT NULL`` is accepted and
    ignored."""
    text = " ".join(type_text.split())
    upper = text.upper()
    if upper.endswith(" NOT NULL"):
        text, upper = text[:-9].strip(), upper[:-9].strip()
    quoted = re.fullmatch(r"TYPE\s*\(\s*'([^']*)'\s*\)", text, flags=re.IGNORECASE)
    if quoted:
        text = upper = quoted.group(1)
    if upper == "JSON":
        text = "COMPLEX<json>"
    if upper.endswith(" ARRAY"):
        text = f"ARRAY<{text[:-6].strip()}>"
    try:
        ctype = ColumnType.parse(text)
    except ValidationError as exc:
        raise ValidationError(f"{where}: EXTEND column '{column}': {exc}") from None
    return ctype


__all__ = ["COLUMNS_ARRAY", "DEFAULT_LIST_DELIMITER", "INPUT_FORMAT_TYPES", "INPUT_SOURCE_TYPES", "TABLE_FUNCTIONS",
           "ExternalSource", "extend_column_type", "parse_table_function"]
