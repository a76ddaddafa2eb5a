"""Preparing an INSERT/REPLACE on the broker: catalog input tables and catalog defaults.

- ``ext.name``, ``TABLE(ext.name(arg => ...))`` and the flattened ``TABLE(staged(source => ...,
  format => ..., ...)) (cols)`` become the equivalent ``TABLE(EXTERN(...))``, so the task's
  ingestion engine sees an ordinary external source.
- Without PARTITIONED BY, the datasource's catalog segmentGranularity applies (an error naming
  both when neither exists); without CLUSTERED BY, its clusterKeys; targetSegmentRows becomes the
  default row target. Anything in the statement wins.
- A ``sealed`` datasource refuses columns the catalog does not declare (for a discovered input,
  the task checks once it knows what ``*`` stands for); declared catalog types are the provided
  schema of discovered columns (``declaredTypes``).
"""

from __future__ import annotations

import json

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Tokenizer, TokenType

from common.types.column_properties import storage_options
from common.errors import ValidationError
from common.sql.translator import _input_table_call


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _extern(catalog, name: str, args: dict) -> str:
    source = catalog.external_source(name, args)
    if source.discover:  # no declared columns: the task discovers them
        return (f"TABLE(EXTERN({_sql_string(json.dumps(source.input_source))}, "
                f"{_sql_string(json.dumps(source.input_format))}))")
    signature = [{"name": n, "type": t.native_name} for n, t in source.signature]
    return (f"TABLE(EXTERN({_sql_string(json.dumps(source.input_source))}, "
            f"{_sql_string(json.dumps(source.input_format))}, {_sql_string(json.dumps(signature))}))")


def _closing(tokens, i: int) -> int:
    """Index of the parenthesis closing the one at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    raise ValidationError("unbalanced parentheses in the statement")


def _staged(sql: str, tokens, i: int) -> tuple[int, str] | None:
    """``TABLE(staged(source => ..., format => ..., ...)) [EXTEND] (col TYPE [NOT NULL], ...)``, the
    proposal's flattened form of EXTERN: returns (index of the last token, EXTERN text)."""
    from common.catalog.input_table import to_extern
    from common.catalog.table_spec import TableSpec

    if not (tokens[i].text.upper() == "TABLE" and i + 3 < len(tokens)
            and tokens[i + 1].token_type == TokenType.L_PAREN and tokens[i + 2].text.lower() == "staged"):
        return None
    end = _closing(tokens, i + 1)
    select = sqlglot.parse_one(f"SELECT * FROM {sql[tokens[i].start:tokens[end].end + 1].replace('staged', 'ext.staged', 1)}",
                               read="druid")
    _, args = _input_table_call(select.find(exp.Table))
    props = dict(args)
    kind = props.pop("source", None)
    if kind not in ("inline", "local", "http"):
        raise ValidationError(f"staged() needs source => 'inline', 'local' or 'http', got {kind!r}")
    j = end + 1
    if j < len(tokens) and tokens[j].text.upper() == "EXTEND":
        j += 1
    if j >= len(tokens) or tokens[j].token_type != TokenType.L_PAREN:
        raise ValidationError("staged() needs its columns after it: TABLE(staged(...)) (name TYPE, ...)")
    close = _closing(tokens, j)
    columns = []
    for part in sql[tokens[j].end + 1:tokens[close].start].split(","):
        words = part.split()
        if len(words) < 2:
            raise ValidationError(f"staged() column '{part.strip()}' needs a name and a type")
        columns.append({"name": words[0].strip('"'), "sqlType": words[1]})
    spec = TableSpec.from_json({"type": kind, "properties": props, "columns": columns})
    source, fmt, signature = to_extern(spec, {}, "staged()")
    text = (f"TABLE(EXTERN({_sql_string(json.dumps(source))}, {_sql_string(json.dumps(fmt))}, "
            f"{_sql_string(json.dumps(signature))}))")
    return close, text


def rewrite_input_tables(sql: str, catalog) -> str:
    tokens = Tokenizer().tokenize(sql)
    edits = []  # (start offset, end offset, replacement)
    i = 0
    while i < len(tokens):
        t = tokens[i]
        staged = _staged(sql, tokens, i)
        if staged is not None:
            last, text = staged
            edits.append((t.start, tokens[last].end + 1, text))
            i = last + 1
            continue
        is_ext = t.text.lower() == "ext" and i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT
        if not is_ext:
            i += 1
            continue
        name = tokens[i + 2].text
        wrapped = i >= 2 and tokens[i - 1].token_type == TokenType.L_PAREN and tokens[i - 2].text.upper() == "TABLE"
        if wrapped and i + 3 < len(tokens) and tokens[i + 3].token_type == TokenType.L_PAREN:
            end = _closing(tokens, i - 1)
            call_text = sql[tokens[i - 2].start:tokens[end].end + 1]
            select = sqlglot.parse_one(f"SELECT * FROM {call_text}", read="druid")
            _, args = _input_table_call(select.find(exp.Table))
            edits.append((tokens[i - 2].start, tokens[end].end + 1, _extern(catalog, name, dict(args))))
            i = end + 1
        else:
            edits.append((t.start, tokens[i + 2].end + 1, _extern(catalog, name, {})))
            i += 3
    for start, end, text in reversed(edits):
        sql = sql[:start] + text + sql[end:]
    return sql


def _output_names(statement) -> list[str] | None:
    """Column names the SELECT produces, or None when a star hides them."""
    select = statement.select
    if not isinstance(select, exp.Select):
        return None
    names = []
    for e in select.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
            for source in statement.sources.values():
                names.extend(n for n, _ in source.signature)
            continue
        names.append(e.alias_or_name)
    return names


def _native_type(sql_type: str) -> str:
    from common.types.column_type import ColumnType
    from common.ingest.external_source import extend_column_type

    try:
        return extend_column_type(sql_type, "?", "catalog").native_name
    except ValidationError:
        return ColumnType.parse(sql_type).native_name


def prepare_ingestion(sql: str, context: dict, catalog) -> tuple[str, object, dict]:
    """(SQL for the task, parsed statement, task spec) for an INSERT/REPLACE."""
    from common.ingest.statement import parse_ingestion

    sql = rewrite_input_tables(sql, catalog)
    statement = parse_ingestion(sql, context)
    finalize = statement.context.get("finalizeAggregations", True)
    if str(finalize).lower() in ("false", "0"):
        raise ValidationError("finalizeAggregations = false (storing aggregator intermediates such as sketches) is not "
                              "supported: strata stores finalized values; remove the setting or set it to true")
    max_tasks = statement.context.get("maxNumTasks")
    if max_tasks is not None:
        try:
            if int(max_tasks) < 2:
                raise ValueError
        except (TypeError, ValueError):
            raise ValidationError(f"maxNumTasks must be an integer >= 2 (one controller and at least one worker, "
                                  f"as in Druid), got {max_tasks!r}") from None
    table = catalog.datasource_spec(statement.datasource)
    props = (table or {}).get("properties") or {}
    task_spec: dict = {"context": dict(statement.context)}
    if statement.partitioned_by is None:
        if not props.get("segmentGranularity"):
            raise ValidationError(
                f"{statement.mode} INTO {statement.datasource} needs a segment granularity: add PARTITIONED BY "
                f"(e.g. PARTITIONED BY DAY), or set segmentGranularity on the datasource in the catalog")
        task_spec["segmentGranularity"] = props["segmentGranularity"]
    if not statement.clustered_by and props.get("clusterKeys"):
        task_spec["clusterKeys"] = [k["column"] for k in props["clusterKeys"]]
    options = {c["name"]: storage_options(c) for c in (table or {}).get("columns") or []}
    options = {name: opts for name, opts in options.items() if opts}
    if options:
        # nested storage options of declared JSON columns, multiValueHandling of multi-value strings
        task_spec["columnOptions"] = options
    if props.get("projections"):
        # Every segment the task writes gets the table's projections, as they are defined now.
        task_spec["projections"] = list(props["projections"])
    if props.get("targetSegmentRows") and not any(k in statement.context for k in ("rowsPerSegment",
                                                                                      "targetSegmentRows")):
        task_spec["context"]["targetSegmentRows"] = int(props["targetSegmentRows"])
    discovering = any(source.discover for source in statement.sources.values())
    if discovering:
        # Declared catalog types are the provided schema of discovered columns.
        declared_types = {c["name"]: c["sqlType"] for c in (table or {}).get("columns") or [] if c.get("sqlType")}
        if declared_types:
            task_spec["declaredTypes"] = {n: _native_type(t) for n, t in declared_types.items()}
    if props.get("sealed") and discovering:
        # What * stands for is known once the task has discovered the input: the task checks.
        task_spec["sealedColumns"] = sorted({c["name"] for c in table.get("columns") or []})
    elif props.get("sealed"):
        declared = {c["name"] for c in table.get("columns") or []} | {"__time"}
        names = _output_names(statement)
        if names is None:
            raise ValidationError(f"datasource {statement.datasource} is sealed: list the columns instead of *")
        undeclared = [n for n in names if n not in declared]
        if undeclared:
            raise ValidationError(
                f"datasource {statement.datasource} is sealed and does not declare {', '.join(undeclared)}; add "
                f"them to its catalog entry (ALTER TABLE {statement.datasource} ADD COLUMN ...) or drop them from "
                "the SELECT")
    return sql, statement, task_spec
