"""The ingestion SELECT, from Druid SQL to Spark SQL.

sqlglot does the dialect work; this module rewrites what it cannot: Druid's time functions
(TIME_PARSE, TIME_FLOOR, TIME_CEIL, TIME_SHIFT, TIME_FORMAT, TIME_EXTRACT, FLOOR/CEIL(ts TO unit),
MILLIS_TO_TIMESTAMP ...), string functions whose names or defaults differ (REGEXP_EXTRACT takes the
whole match by default in Druid, group 1 in Spark), and the EARLIEST/LATEST aggregators of a
rollup. Source placeholders become the names of the temp views the source reader registered.

Spark runs with the UTC session time zone (spark_session.py), so a timestamp's wall clock is UTC
and time zone arguments convert with from_utc_timestamp/to_utc_timestamp around the operation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp

from common.errors import UnsupportedError, ValidationError
from common.ingest.statement import produces_json as druid_produces_json
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Period
from common.types.interval import Interval

ISO_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
_TRUNC_UNITS = {"PT1S": "SECOND", "PT1M": "MINUTE", "PT1H": "HOUR", "P1D": "DAY", "P1W": "WEEK", "P1M": "MONTH",
                "P3M": "QUARTER", "P1Y": "YEAR"}
_EXTRACT = {
    "EPOCH": "unix_seconds(:ts)", "SECOND": "second(:ts)", "MINUTE": "minute(:ts)", "HOUR": "hour(:ts)",
    "DAY": "dayofmonth(:ts)", "DOW": "extract(DAYOFWEEK_ISO FROM :ts)", "ISODOW": "extract(DAYOFWEEK_ISO FROM :ts)",
    "DOY": "dayofyear(:ts)", "WEEK": "weekofyear(:ts)", "MONTH": "month(:ts)", "QUARTER": "quarter(:ts)",
    "YEAR": "year(:ts)", "ISOYEAR": "extract(YEAROFWEEK FROM :ts)", "MILLISECOND": "pmod(unix_millis(:ts), 1000)",
    "DECADE": "floor(year(:ts) / 10)", "CENTURY": "ceil(year(:ts) / 100)", "MILLENNIUM": "ceil(year(:ts) / 1000)",
}


def _tpl(template: str, **args: exp.Expression) -> exp.Expression:
    """A Spark SQL template with :name placeholders filled by expressions."""
    return exp.replace_placeholders(sqlglot.parse_one(template, read="spark"),
                                    **{k: v.copy() for k, v in args.items()})


def _string_arg(node: exp.Expression, fn: str, what: str) -> str:
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    raise ValidationError(f"{fn}: the {what} must be a string literal, got {node.sql('druid')}")


def _tz(args: list, i: int, fn: str) -> str | None:
    if len(args) <= i or isinstance(args[i], exp.Null):
        return None
    tz = _string_arg(args[i], fn, "time zone")
    return None if tz in ("UTC", "Etc/UTC", "Z") else tz


def _in_zone(ts: exp.Expression, tz: str | None, op: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Apply ``op`` to the wall-clock time in ``tz``, then convert back to UTC."""
    if tz is None:
        return op(ts)
    local = _tpl("from_utc_timestamp(:ts, :tz)", ts=ts, tz=exp.Literal.string(tz))
    return _tpl("to_utc_timestamp(:v, :tz)", v=op(local), tz=exp.Literal.string(tz))


def _period(node: exp.Expression, fn: str) -> Period:
    try:
        return Period.parse(_string_arg(node, fn, "period"))
    except ValidationError as exc:
        raise ValidationError(f"{fn}: {exc}") from None


def floor_expression(ts: exp.Expression, period: Period, fn: str = "TIME_FLOOR") -> exp.Expression:
    """The start of ``ts``'s bucket, with buckets aligned as Druid aligns them (epoch origin, ISO weeks)."""
    text = str(period)
    if text in _TRUNC_UNITS:
        return _tpl(f"date_trunc('{_TRUNC_UNITS[text]}', :ts)", ts=ts)
    if period.has_calendar_part:
        months = period.years * 12 + period.months
        # Months counted from 1970-01, floored to a multiple of the period, back to a timestamp.
        k = _tpl(f"floor(((year(:ts) - 1970) * 12 + month(:ts) - 1) / {months}) * {months}", ts=ts)
        return _tpl("make_timestamp(CAST(1970 + floor(:k / 12) AS INT), CAST(pmod(:k, 12) + 1 AS INT), 1, 0, 0, 0)",
                    k=exp.paren(k))
    if period.weeks:
        raise UnsupportedError(f"{fn}: period {text} is not supported; use P1W or a number of days")
    size = period.fixed_millis
    return _tpl(f"timestamp_millis(CAST(floor(unix_millis(:ts) / {size}) * {size} AS BIGINT))", ts=ts)


def shift_expression(ts: exp.Expression, period: Period, step: exp.Expression) -> exp.Expression:
    step = exp.paren(step.copy())
    parts = [f"{n} * :step" if n else "0" for n in (period.years, period.months, period.weeks, period.days)]
    secs = f"CAST({period.millis} AS DECIMAL(18, 6)) / 1000 * :step" if period.millis else "0"
    return _tpl(f":ts + make_interval({', '.join(parts)}, 0, 0, {secs})", ts=ts, step=step)


# ---- function rewrites -----------------------------------------------------------------------------------


def _time_parse(args: list) -> exp.Expression:
    fn = "TIME_PARSE"
    if not 1 <= len(args) <= 3:
        raise ValidationError(f"{fn} takes (string[, pattern[, timezone]]), got {len(args)} arguments")
    pattern = None if len(args) < 2 or isinstance(args[1], exp.Null) else _string_arg(args[1], fn, "pattern")
    tz = _tz(args, 2, fn)
    s = args[0]
    if pattern is None:
        parsed = _tpl("TRY_CAST(:s AS TIMESTAMP)", s=s)
        if tz is None:
            return parsed
        # A zone written in the text wins over the argument, as in Druid.
        return _tpl("CASE WHEN :s RLIKE '(Z|[+-][0-9]{2}:?[0-9]{2})$' THEN :p ELSE to_utc_timestamp(:p, :tz) END",
                    s=s, p=parsed, tz=exp.Literal.string(tz))
    parsed = _tpl("try_to_timestamp(:s, :f)", s=s, f=exp.Literal.string(pattern))
    return parsed if tz is None else _tpl("to_utc_timestamp(:p, :tz)", p=parsed, tz=exp.Literal.string(tz))


def _time_floor(args: list) -> exp.Expression:
    if not 2 <= len(args) <= 4:
        raise ValidationError(f"TIME_FLOOR takes (timestamp, period[, origin[, timezone]]), got {len(args)} arguments")
    if len(args) >= 3 and not isinstance(args[2], exp.Null):
        raise UnsupportedError("TIME_FLOOR with an origin is not supported in ingestion; pass NULL as the origin")
    period = _period(args[1], "TIME_FLOOR")
    return _in_zone(args[0], _tz(args, 3, "TIME_FLOOR"), lambda t: floor_expression(t, period))


def _time_ceil(args: list) -> exp.Expression:
    if not 2 <= len(args) <= 4:
        raise ValidationError(f"TIME_CEIL takes (timestamp, period[, origin[, timezone]]), got {len(args)} arguments")
    if len(args) >= 3 and not isinstance(args[2], exp.Null):
        raise UnsupportedError("TIME_CEIL with an origin is not supported in ingestion; pass NULL as the origin")
    period = _period(args[1], "TIME_CEIL")

    def ceil(t: exp.Expression) -> exp.Expression:
        floor = floor_expression(t, period, "TIME_CEIL")
        return _tpl("CASE WHEN :f = :t THEN :t ELSE :up END", f=floor, t=t,
                    up=shift_expression(floor, period, exp.Literal.number(1)))

    return _in_zone(args[0], _tz(args, 3, "TIME_CEIL"), ceil)


def _time_shift(args: list) -> exp.Expression:
    if not 3 <= len(args) <= 4:
        raise ValidationError(f"TIME_SHIFT takes (timestamp, period, step[, timezone]), got {len(args)} arguments")
    period = _period(args[1], "TIME_SHIFT")
    return _in_zone(args[0], _tz(args, 3, "TIME_SHIFT"), lambda t: shift_expression(t, period, args[2]))


def _time_format(args: list) -> exp.Expression:
    if not 1 <= len(args) <= 3:
        raise ValidationError(f"TIME_FORMAT takes (timestamp[, pattern[, timezone]]), got {len(args)} arguments")
    pattern = ISO_FORMAT if len(args) < 2 or isinstance(args[1], exp.Null) else _string_arg(args[1], "TIME_FORMAT",
                                                                                            "pattern")
    tz = _tz(args, 2, "TIME_FORMAT")
    ts = args[0] if tz is None else _tpl("from_utc_timestamp(:ts, :tz)", ts=args[0], tz=exp.Literal.string(tz))
    return _tpl("date_format(:ts, :f)", ts=ts, f=exp.Literal.string(pattern))


def _time_extract(args: list) -> exp.Expression:
    if not 1 <= len(args) <= 3:
        raise ValidationError(f"TIME_EXTRACT takes (timestamp[, unit[, timezone]]), got {len(args)} arguments")
    unit = "MILLISECOND" if len(args) < 2 else _string_arg(args[1], "TIME_EXTRACT", "unit").upper()
    if unit not in _EXTRACT:
        raise ValidationError(f"TIME_EXTRACT: unknown unit '{unit}'; valid: {', '.join(_EXTRACT)}")
    tz = _tz(args, 2, "TIME_EXTRACT")
    ts = args[0] if tz is None else _tpl("from_utc_timestamp(:ts, :tz)", ts=args[0], tz=exp.Literal.string(tz))
    return _tpl(_EXTRACT[unit], ts=ts)


def _arity(name: str, args: list, lo: int, hi: int) -> None:
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ValidationError(f"{name} takes {want} arguments, got {len(args)}")


def _simple(template: str, lo: int, hi: int | None = None) -> Callable[[list], exp.Expression]:
    names = ["a", "b", "c"]

    def rewrite(args: list, _name: str = "") -> exp.Expression:
        _arity(_name or template, args, lo, hi if hi is not None else lo)
        return _tpl(template, **dict(zip(names, args)))

    return rewrite


def _parse_long(args: list) -> exp.Expression:
    _arity("PARSE_LONG", args, 1, 2)
    if len(args) == 1:
        return _tpl("TRY_CAST(:s AS BIGINT)", s=args[0])
    return _tpl("TRY_CAST(conv(:s, :r, 10) AS BIGINT)", s=args[0], r=args[1])


def _first_last(fn: str, by_time: bool) -> Callable[[list], exp.Expression]:
    def rewrite(args: list) -> exp.Expression:
        if by_time:
            _arity(fn, args, 2, 3)
            return _tpl(f"{'min_by' if 'EARLIEST' in fn else 'max_by'}(:v, :t)", v=args[0], t=args[1])
        _arity(fn, args, 1, 2)
        return _tpl(f"{'min_by' if 'EARLIEST' in fn else 'max_by'}(:v, {TIME_COLUMN})", v=args[0])

    return rewrite


def _time_in_interval(args: list) -> exp.Expression:
    _arity("TIME_IN_INTERVAL", args, 2, 2)
    iv = Interval.parse(_string_arg(args[1], "TIME_IN_INTERVAL", "interval"))
    return _tpl(f":t >= timestamp_millis({iv.start}) AND :t < timestamp_millis({iv.end})", t=args[0])


def _unsupported(name: str, hint: str) -> Callable[[list], exp.Expression]:
    def rewrite(args: list) -> exp.Expression:
        raise UnsupportedError(f"{name} is not supported in Spark ingestion; {hint}")

    return rewrite


_ANONYMOUS: dict[str, Callable[[list], exp.Expression]] = {
    "TIME_PARSE": _time_parse,
    "TIME_FLOOR": _time_floor,
    "TIME_CEIL": _time_ceil,
    "TIME_SHIFT": _time_shift,
    "TIME_FORMAT": _time_format,
    "TIME_EXTRACT": _time_extract,
    "TIME_IN_INTERVAL": _time_in_interval,
    "MILLIS_TO_TIMESTAMP": _simple("timestamp_millis(CAST(:a AS BIGINT))", 1),
    "TIMESTAMP_TO_MILLIS": _simple("unix_millis(:a)", 1),
    "TEXTCAT": _simple("concat(:a, :b)", 2),
    "STRLEN": _simple("length(:a)", 1),
    "CONTAINS_STRING": _simple("instr(:a, :b) > 0", 2),
    "ICONTAINS_STRING": _simple("instr(lower(:a), lower(:b)) > 0", 2),
    "STRING_FORMAT": lambda args: exp.Anonymous(this="format_string", expressions=[a.copy() for a in args]),
    "PARSE_LONG": _parse_long,
    "BITWISE_AND": _simple(":a & :b", 2),
    "BITWISE_OR": _simple(":a | :b", 2),
    "BITWISE_XOR": _simple(":a ^ :b", 2),
    "BITWISE_COMPLEMENT": _simple("~:a", 1),
    "BITWISE_SHIFT_LEFT": _simple("shiftleft(:a, :b)", 2),
    "BITWISE_SHIFT_RIGHT": _simple("shiftright(:a, :b)", 2),
    "ARRAY_OFFSET": _simple("get(:a, :b)", 2),  # 0-based, null past the end (as Druid)
    "ARRAY_ORDINAL": _simple("try_element_at(:a, :b)", 2),  # 1-based
    "MV_TO_ARRAY": _simple(":a", 1),
    "ARRAY_TO_MV": _simple(":a", 1),
    "MV_LENGTH": _simple("size(:a)", 1),
    "MV_CONTAINS": _simple("array_contains(:a, :b)", 2),
    "EARLIEST": _first_last("EARLIEST", False),
    "LATEST": _first_last("LATEST", False),
    "EARLIEST_BY": _first_last("EARLIEST_BY", True),
    "LATEST_BY": _first_last("LATEST_BY", True),
    "ANY_VALUE": _simple("any_value(:a)", 1),
    "APPROX_COUNT_DISTINCT_BUILTIN": _simple("approx_count_distinct(:a)", 1),
    "APPROX_COUNT_DISTINCT_DS_HLL": _simple("approx_count_distinct(:a)", 1, 3),
    "APPROX_COUNT_DISTINCT_DS_THETA": _simple("approx_count_distinct(:a)", 1, 2),
    "LOOKUP": _unsupported("LOOKUP", "join a lookup table after ingestion or map values with CASE"),
    "DS_HLL": _unsupported("DS_HLL", "sketch columns cannot be built at ingestion yet; count at query time"),
    "DS_THETA": _unsupported("DS_THETA", "sketch columns cannot be built at ingestion yet; count at query time"),
}


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Anonymous):
        fn = _ANONYMOUS.get(node.name.upper())
        if fn is not None:
            return fn(list(node.expressions))
        return node
    if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None:
        unit = node.args["to"].name.upper()
        if unit not in ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"):
            raise ValidationError(f"{type(node).__name__.upper()}(... TO {unit}): unknown unit; use SECOND, MINUTE, "
                                  "HOUR, DAY, WEEK, MONTH, QUARTER or YEAR")
        floor = _tpl(f"date_trunc('{unit}', :t)", t=node.this)
        if isinstance(node, exp.Floor):
            return floor
        period = Period.parse({v: k for k, v in _TRUNC_UNITS.items()}[unit])
        return _tpl("CASE WHEN :f = :t THEN :t ELSE :up END", f=floor, t=node.this,
                    up=shift_expression(floor, period, exp.Literal.number(1)))
    if isinstance(node, exp.DateTrunc):
        unit = node.args["unit"]
        unit_text = unit.this if isinstance(unit, exp.Literal) else unit.name
        return _tpl(f"date_trunc('{unit_text.upper()}', :t)", t=node.this)
    if isinstance(node, exp.TimestampDiff) and isinstance(node.this, exp.Column):
        # sqlglot's druid reader leaves TIMESTAMPDIFF(unit, a, b) as (this=unit, expression=a, unit=b).
        end = node.args.get("unit")
        end = exp.column(end.name) if isinstance(end, exp.Var) else end
        return exp.Anonymous(this="timestampdiff", expressions=[exp.var(node.this.name.upper()),
                                                                node.expression.copy(), end])
    if isinstance(node, exp.RegexpExtract) and node.args.get("group") is None:
        # Druid's REGEXP_EXTRACT without an index returns the whole match (group 0); Spark's default is 1.
        node = node.copy()
        node.set("group", exp.Literal.number(0))
        return node
    return node


# ---- JSON functions: strata's own semantics as Arrow UDFs (json_udfs.py) --------------------------

_JSON_UDFS = ("strata_parse_json", "strata_try_parse_json", "strata_json_query", "strata_json_object")
_VALUE_SUFFIX = {"BIGINT": "bigint", "INT": "bigint", "INTEGER": "bigint", "SMALLINT": "bigint", "TINYINT": "bigint",
                 "DOUBLE": "double", "FLOAT": "double", "DECIMAL": "double", "REAL": "double",
                 "VARCHAR": "string", "CHAR": "string", "TEXT": "string", "STRING": "string"}


def _udf(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=f"strata_{name}", expressions=[a.copy() for a in args])


def _json_path_literal(node: exp.Expression, fn: str) -> exp.Expression:
    from common.json.path_steps import has_wildcard, parse_path, path_text

    if isinstance(node, exp.JSONPath):
        text = node.sql(dialect="druid")
        text = text[1:-1].replace("''", "'") if len(text) >= 2 and text[0] == text[-1] == "'" else text
    else:
        text = _string_arg(node, fn, "JSON path")
    parts = parse_path(text)
    if has_wildcard(parts):
        raise UnsupportedError(f"{fn}: wildcard paths ('{text}') are not supported in ingestion; select the "
                               "elements by index, or keep the JSON column and use the wildcard at query time")
    return exp.Literal.string(path_text(parts))


def produces_json(node: exp.Expression, json_columns) -> bool:
    """True when ``node`` (Druid SQL, or already rewritten for Spark) yields COMPLEX<json>."""
    inner = node.unalias() if isinstance(node, exp.Alias) else node
    if isinstance(inner, exp.Anonymous) and inner.name.lower() in _JSON_UDFS:
        return True
    return druid_produces_json(node, json_columns)


def _rewrite_json(node: exp.Expression, json_columns) -> exp.Expression | None:
    if isinstance(node, exp.ParseJSON):
        return _udf("try_parse_json" if node.args.get("safe") else "parse_json", node.this)
    if isinstance(node, exp.JSONValue):
        returning = node.args.get("returning")
        type_name = returning.this.name if isinstance(returning, exp.DataType) else "VARCHAR"
        suffix = _VALUE_SUFFIX.get(type_name.upper())
        if suffix is None:
            raise ValidationError(f"JSON_VALUE cannot return {type_name}; valid: BIGINT, DOUBLE, FLOAT, VARCHAR")
        return _udf(f"json_value_{suffix}", node.this, _json_path_literal(node.args["path"], "JSON_VALUE"))
    if isinstance(node, exp.JSONObject):
        members, json_keys = [], []
        for pair in node.expressions:
            if not isinstance(pair, exp.JSONKeyValue) or not (isinstance(pair.this, exp.Literal) and pair.this.is_string):
                raise UnsupportedError("JSON_OBJECT in ingestion takes string literal keys: "
                                       f"'{node.sql(dialect='druid')}'")
            members += [pair.this.copy(), pair.expression.copy()]
            if produces_json(pair.expression, json_columns):
                json_keys.append(pair.this.this)
        import json as _json

        return _udf("json_object", exp.Anonymous(this="named_struct", expressions=members),
                    exp.Literal.string(_json.dumps(json_keys)))
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        args = list(node.expressions)
        if name == "TRY_PARSE_JSON":
            _arity(name, args, 1, 1)
            return _udf("try_parse_json", args[0])
        if name == "JSON_QUERY":
            _arity(name, args, 2, 2)
            return _udf("json_query", args[0], _json_path_literal(args[1], name))
        if name == "TO_JSON_STRING":
            _arity(name, args, 1, 1)
            kind = "json" if produces_json(args[0], json_columns) else "plain"
            return _udf("to_json_string", args[0], exp.Literal.string(kind))
    return None


def to_spark_sql(select: exp.Query, views: Mapping[str, str], json_columns=frozenset()) -> str:
    """Spark SQL for the ingestion SELECT; ``views`` maps source placeholders to temp view names;
    ``json_columns`` are the input columns holding COMPLEX<json> text."""
    tree = select.copy()
    for table in list(tree.find_all(exp.Table)):
        if table.name in views and isinstance(table.this, exp.Identifier):
            table.set("this", exp.to_identifier(views[table.name]))
    # Children first, so a rewrite's arguments are already Spark (TIME_FLOOR(TIME_PARSE(x), ...)).
    for node in reversed(list(tree.walk(bfs=False))):
        new = _rewrite_json(node, json_columns)
        new = _rewrite(node) if new is None else new
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree.sql(dialect="spark")


def check_time_column(schema) -> None:
    """The SELECT's result must have a TIMESTAMP ``__time`` (``schema``: a Spark StructType)."""
    fields = {f.name: f.dataType.simpleString() for f in schema.fields}
    if TIME_COLUMN not in fields:
        raise ValidationError(
            f"the SELECT has no {TIME_COLUMN} column (it returns {', '.join(fields) or 'nothing'}); add one, e.g. "
            f"TIME_PARSE(\"timestamp\") AS {TIME_COLUMN}, MILLIS_TO_TIMESTAMP(millis) AS {TIME_COLUMN}, or "
            f"TIMESTAMP '2000-01-01' AS {TIME_COLUMN} for data without time")
    kind = fields[TIME_COLUMN]
    if kind in ("timestamp", "timestamp_ntz", "date"):
        return
    if kind in ("string", "varchar"):
        hint = f"parse it: TIME_PARSE(col) AS {TIME_COLUMN}"
    elif kind in ("bigint", "int", "smallint", "tinyint"):
        hint = f"convert epoch milliseconds: MILLIS_TO_TIMESTAMP(col) AS {TIME_COLUMN}"
    else:
        hint = f"make it a TIMESTAMP, e.g. TIME_PARSE(col) AS {TIME_COLUMN}"
    raise ValidationError(f"{TIME_COLUMN} must be a TIMESTAMP but the SELECT makes it {kind.upper()}; {hint}")


__all__ = ["ISO_FORMAT", "check_time_column", "floor_expression", "produces_json", "shift_expression",
           "to_spark_sql"]
