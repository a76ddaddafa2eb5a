"""ScalarTranslator: sqlglot expressions to typed ``Scalar`` trees, resolving columns through a
``Scope`` and checking types against the function catalog.

SQL spellings collapse here onto one canonical call each (``EXTRACT``, ``FLOOR(t TO unit)`` and
``DATE_TRUNC`` become ``TIME_EXTRACT``/``TIME_FLOOR``; ``ts + INTERVAL`` becomes ``TIME_SHIFT``;
``BETWEEN`` and ``TIME_IN_INTERVAL`` become comparisons), and session facts are made explicit:
the session time zone is written into every time function, CURRENT_TIMESTAMP becomes a literal.
Later stages therefore never need the session, and two spellings of one expression compare equal
(which is how GROUP BY expressions are matched in the select list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from common.errors import UnsupportedError, ValidationError, unknown_name_message
from common.query.filter_values import check_like
from common.sql import functions
from common.sql.array_translator import MV_FUNCTIONS, array_call_nodes, array_type_of, cast_to_array, mv_call
from common.sql.json_translator import json_function, json_node, json_value
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.scalar import Call, Literal, Scalar
from common.sql.sql_literals import literal_value, parameter_literal, parse_timestamp
from common.sql.sql_text import LazySqlText, sql_text, written_name
from common.sql.sql_types import (BIGINT, BOOLEAN, CAST_TARGETS, DOUBLE, INTERVAL, NULL, TIMESTAMP, VARCHAR, SqlType, is_multi_value,
                                  common_type)
from common.sql.statement import PARAMETER_PREFIX
from common.types.interval import Interval

_UNIT_PERIODS = {
    "MILLISECOND": "PT0.001S", "SECOND": "PT1S", "MINUTE": "PT1M", "HOUR": "PT1H", "DAY": "P1D", "WEEK": "P1W",
    "MONTH": "P1M", "QUARTER": "P3M", "YEAR": "P1Y",
}
_EXTRACT_UNITS = ("EPOCH", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "DOW", "ISODOW", "DOY", "WEEK", "MONTH",
                  "QUARTER", "YEAR", "ISOYEAR", "DECADE", "CENTURY", "MILLENNIUM")
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "MOD", exp.IntDiv: "/"}
# sqlglot node classes that are plain functions of their positional arguments
_SIMPLE_FUNCTIONS = {
    exp.Lower: "LOWER", exp.Upper: "UPPER", exp.Reverse: "REVERSE", exp.Length: "CHAR_LENGTH", exp.Abs: "ABS",
    exp.Sqrt: "SQRT", exp.Exp: "EXP", exp.Ln: "LN", exp.Pow: "POWER", exp.Left: "LEFT", exp.Right: "RIGHT",
    exp.Replace: "REPLACE", exp.RegexpLike: "REGEXP_LIKE", exp.RegexpReplace: "REGEXP_REPLACE", exp.Sign: "SIGN",
    exp.Cbrt: "CBRT", exp.Atan2: "ATAN2", exp.Nullif: "NULLIF", exp.Repeat: "REPEAT",
}
# Newer sqlglot versions give the trigonometric functions their own classes.
for _name in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan"):
    if hasattr(exp, _name):
        _SIMPLE_FUNCTIONS[getattr(exp, _name)] = _name.upper()
# functions sqlglot leaves anonymous, by upper-case name
_ANONYMOUS = {
    "STRLEN": "CHAR_LENGTH", "CHARACTER_LENGTH": "CHAR_LENGTH", "CHAR_LENGTH": "CHAR_LENGTH", "LENGTH": "CHAR_LENGTH",
    "TEXTCAT": "CONCAT", "CONTAINS_STRING": "CONTAINS_STRING", "ICONTAINS_STRING": "ICONTAINS_STRING",
    "NVL": "COALESCE", "SIN": "SIN", "COS": "COS", "TAN": "TAN", "ASIN": "ASIN", "ACOS": "ACOS", "ATAN": "ATAN",
    "LOG10": "LOG10", "POWER": "POWER", "REPEAT": "REPEAT", "STRPOS": "STRPOS",
    "MILLIS_TO_TIMESTAMP": "MILLIS_TO_TIMESTAMP",
    "TIMESTAMP_TO_MILLIS": "TIMESTAMP_TO_MILLIS", "REGEXP_LIKE": "REGEXP_LIKE", "LTRIM": "LTRIM", "RTRIM": "RTRIM",
    "BTRIM": "TRIM",
}
_AGGREGATE_NAMES = ("EARLIEST", "LATEST", "APPROX_COUNT_DISTINCT", "APPROX_COUNT_DISTINCT_DS_HLL", "ANY_VALUE",
                    "EARLIEST_BY", "LATEST_BY", "APPROX_QUANTILE", "APPROX_QUANTILE_DS", "DS_HLL", "STRING_AGG",
                    "ARRAY_AGG", "LISTAGG", "BIT_AND", "BIT_OR", "BIT_XOR", "STDDEV", "VARIANCE")
_TIME_FUNCTIONS = ("TIME_FLOOR", "TIME_CEIL", "TIME_SHIFT", "TIME_EXTRACT", "TIME_PARSE", "TIME_FORMAT",
                   "TIME_IN_INTERVAL", "TIMESTAMPADD", "CURRENT_TIMESTAMP", "CURRENT_DATE", "NOW")
_OPERATORS = {"+", "-", "*", "/", "NEG", "=", "<>", "<", "<=", ">", ">=", "AND", "OR", "NOT", "IS_NULL",
              "IS_NOT_NULL", "IN", "CASE"}
# For "did you mean" hints: every name the translator accepts.
KNOWN_FUNCTIONS = sorted(
    (set(functions.SIGNATURES) - _OPERATORS) | set(_TIME_FUNCTIONS)
    | {"EXTRACT", "DATE_TRUNC", "POSITION", "SUBSTR", "NULLIF", "NVL", "BTRIM", "STRLEN", "CAST", "TRUNCATE", "DIV",
       "COUNT", "SUM", "MIN", "MAX", "AVG", "APPROX_COUNT_DISTINCT", "ANY_VALUE", "EARLIEST", "LATEST"}
    | set(MV_FUNCTIONS))

_BOOLEAN_TEXT = {"true": 1.0, "false": 0.0}


def is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.Filter):
        return is_aggregate(node.this)
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).upper() in _AGGREGATE_NAMES


def _unordered_json(node: exp.Expression, *operands: Scalar) -> None:
    """JSON values have no order (Druid: "Cannot apply '<' to arguments of type COMPLEX<JSON>");
    compare the paths inside them (JSON_VALUE) instead."""
    for operand in operands:
        if operand.type.name.startswith("COMPLEX"):
            raise ValidationError(f"cannot order {operand.type} values in '{sql_text(node)}'; JSON values compare "
                                  "only for equality: compare a path inside them (JSON_VALUE(col, '$.path')) instead")


def contains_aggregate(node: exp.Expression) -> bool:
    if is_aggregate(node):
        return True
    if isinstance(node, (exp.Subquery, exp.Select)):
        return False  # a subquery's aggregates are its own
    return any(contains_aggregate(c) for c in node.iter_expressions())


@dataclass(frozen=True)
class Session:
    """What a statement's meaning depends on beyond its text."""

    time_zone: str = "UTC"
    now_ms: int = 0
    parameters: tuple | None = ()  # None: planning without values (describe); parameters read as NULL
    deadline: PlanningDeadline = field(default=NO_DEADLINE, compare=False, hash=False)  # checked per node
    # What the translation read besides the text and the catalog ("current time"): a plan that
    # read the clock must not be reused later. Filled in while translating.
    reads: set = field(default_factory=set, compare=False, hash=False)

    def now(self) -> int:
        self.reads.add("current time")
        return self.now_ms


class Scope:
    """Name resolution for one clause. Subclasses resolve columns; ``intercept`` lets the
    aggregate scope replace whole subtrees (group keys, aggregate calls) before translation."""

    clause = "expression"

    def resolve(self, node: exp.Column) -> Scalar:
        raise ValidationError(f"column '{sql_text(node)}' cannot be used in {self.clause}")

    def intercept(self, node: exp.Expression, translator: ScalarTranslator) -> Scalar | None:
        return None


class ScalarTranslator:
    def __init__(self, session: Session, scope: Scope) -> None:
        self.session = session
        self.scope = scope

    # ---- entry points ------------------------------------------------------------------------
    def translate(self, node: exp.Expression) -> Scalar:
        self.session.deadline.check()
        hit = self.scope.intercept(node, self)
        if hit is not None:
            return hit
        return self._translate(node)

    def condition(self, node: exp.Expression) -> Scalar:
        out = self.translate(node)
        if out.type not in (BOOLEAN, NULL):
            raise ValidationError(f"{self.scope.clause} must be a boolean condition, but '{sql_text(node)}' "
                                  f"is {out.type}")
        return out

    # ---- helpers -----------------------------------------------------------------------------
    def call(self, op: str, args: list[Scalar], node: exp.Expression, arg_nodes: list | None = None) -> Call:
        texts = [LazySqlText(a) if isinstance(a, exp.Expression) else str(a) for a in arg_nodes] if arg_nodes else None
        text = LazySqlText(node)
        shown = written_name(node, op) if op[:1].isalpha() else op
        t = functions.result_type(op, [a.type for a in args], text, texts, shown)
        sig = functions.SIGNATURES[op]
        for i, a in enumerate(args):
            if sig.kinds[min(i, len(sig.kinds) - 1)] == "k" and not isinstance(a, Literal):
                raise ValidationError(f"argument {i + 1} of {shown} must be a constant in '{text}'")
            if isinstance(a, Literal) and a.value is not None:
                _check_constant(op, i, a.value, text, shown)
        return Call(op, tuple(args), t)

    def tz(self) -> Literal:
        return Literal(self.session.time_zone, VARCHAR)

    def literal_string(self, node: exp.Expression | None, what: str) -> str | None:
        if node is None:
            return None
        value = self.translate(node)
        if isinstance(value, Literal) and (value.value is None or isinstance(value.value, str)):
            return value.value
        raise ValidationError(f"{what} must be a string literal, got '{sql_text(node)}'")

    def _unit(self, node: exp.Expression | None, what: str) -> str:
        if node is None:
            raise ValidationError(f"{what} needs a unit")
        name = node.name if isinstance(node, (exp.Var, exp.Column, exp.Identifier)) else self.literal_string(node, what)
        unit = str(name).upper()
        if unit.endswith("S") and (unit[:-1] in _UNIT_PERIODS or unit[:-1] in _EXTRACT_UNITS):
            unit = unit[:-1]  # HOURS, DAYS ...
        return unit

    def _period(self, node: exp.Expression | None, what: str) -> str:
        unit = self._unit(node, what)
        if unit not in _UNIT_PERIODS:
            raise ValidationError(f"unknown time unit '{unit}' in {what}; valid: {', '.join(_UNIT_PERIODS)}")
        return _UNIT_PERIODS[unit]

    def coerce_pair(self, a: Scalar, b: Scalar, node: exp.Expression) -> tuple[Scalar, Scalar]:
        """Make two operands comparable, as SQL's implicit casts do."""
        if a.type == b.type or NULL in (a.type, b.type):
            return a, b
        if is_multi_value(a.type) and b.type == VARCHAR or is_multi_value(b.type) and a.type == VARCHAR:
            # A multi-value string compares as its values do (a filter matches any value).
            return a, b
        if all(t.column_type is not None and t.column_type.is_array for t in (a.type, b.type)):
            return a, b  # whole arrays compare after widening their elements (native compare)
        if a.type.is_numeric and b.type.is_numeric:
            return a, b
        if a.type == BOOLEAN and b.type.is_numeric or b.type == BOOLEAN and a.type.is_numeric:
            return a, b
        if VARCHAR in (a.type, b.type):
            other = b if a.type == VARCHAR else a
            text = a if a.type == VARCHAR else b
            if isinstance(text, Literal) and text.value is None:
                converted: Scalar | None = Literal(None, other.type)
            elif other.type == TIMESTAMP:
                if isinstance(text, Literal):
                    converted = Literal(parse_timestamp(text.value, self.session.time_zone, "literal"), TIMESTAMP)
                else:
                    converted = self.cast_to(text, TIMESTAMP)
            elif other.type.is_numeric:
                if isinstance(text, Literal):
                    try:
                        # Druid reads 'true'/'false' (any case) as 1/0 where a number is wanted, so
                        # discovered booleans (LONG 0/1) compare with the text they came from.
                        number = _BOOLEAN_TEXT.get(text.value.lower(), None) if isinstance(text.value, str) \
                            else None
                        number = float(text.value) if number is None else number
                    except ValueError:
                        raise ValidationError(f"cannot compare {other.type} with '{text.value}' in '{sql_text(node)}'; "
                                              "use a number, or 'true'/'false'") from None
                    converted = Literal(int(number), BIGINT) if number.is_integer() and other.type.is_exact \
                        else Literal(number, DOUBLE)
                else:
                    converted = Call("CAST", (text,), DOUBLE)
            else:
                converted = None
            if converted is not None:
                return (converted, b) if a.type == VARCHAR else (a, converted)
        raise ValidationError(f"cannot compare {a.type} with {b.type} in '{sql_text(node)}'; CAST one side")

    # ---- dispatch ----------------------------------------------------------------------------
    def _translate(self, node: exp.Expression) -> Scalar:
        if isinstance(node, exp.Paren):
            return self.translate(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise ValidationError(f"'{sql_text(node)}' is only allowed in the select list or COUNT(*)")
            return self.scope.resolve(node)
        if isinstance(node, exp.Literal):
            value = literal_value(node)
            if isinstance(value, str):
                return Literal(value, VARCHAR)
            if isinstance(value, int) and not -2**63 <= value < 2**63:
                return Literal(float(value), DOUBLE)  # beyond BIGINT: an approximate number, as in Druid
            return Literal(value, BIGINT if isinstance(value, int) else DOUBLE)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), BOOLEAN)
        if isinstance(node, exp.Null):
            return Literal(None, NULL)
        if isinstance(node, exp.Placeholder):
            return self._parameter(node)
        if isinstance(node, exp.Neg):
            inner = self.translate(node.this)
            number = isinstance(inner, Literal) and isinstance(inner.value, (int, float))
            if number and not isinstance(inner.value, bool):
                return Literal(-inner.value, inner.type)
            return self.call("NEG", [inner], node, [node.this])
        if type(node) in _ARITHMETIC:
            return self._arithmetic(node)
        if isinstance(node, exp.DPipe):
            return self.call("CONCAT", [self.translate(node.this), self.translate(node.expression)], node)
        if type(node) in _COMPARISONS:
            a, b = self.coerce_pair(self.translate(node.this), self.translate(node.expression), node)
            if _COMPARISONS[type(node)] not in ("=", "<>"):
                _unordered_json(node, a, b)
            return self.call(_COMPARISONS[type(node)], [a, b], node, [node.this, node.expression])
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            a, b = self.coerce_pair(self.translate(node.this), self.translate(node.expression), node)
            both_null = Call("AND", (Call("IS_NULL", (a,), BOOLEAN), Call("IS_NULL", (b,), BOOLEAN)), BOOLEAN)
            equal = Call("COALESCE", (self.call("=", [a, b], node), Literal(False, BOOLEAN)), BOOLEAN)
            same = Call("OR", (both_null, equal), BOOLEAN)
            return same if isinstance(node, exp.NullSafeEQ) else Call("NOT", (same,), BOOLEAN)
        if isinstance(node, (exp.And, exp.Or)):
            op = "AND" if isinstance(node, exp.And) else "OR"
            # sqlglot nests a chain a AND b AND c to the left, one level per term: walk the chain
            # without recursing and check the flat call once (per level, both were quadratic).
            kind, operands, stack = type(node), [], [node]
            while stack:
                item = stack.pop()
                if type(item) is kind:
                    stack += [item.expression, item.this]
                else:
                    operands.append(item)
            flat = []
            for a in (self.translate(o) for o in operands):
                flat.extend(a.args if isinstance(a, Call) and a.op == op else [a])
            return self.call(op, flat, node, None)
        if isinstance(node, exp.Not):
            return self.call("NOT", [self.translate(node.this)], node, [node.this])
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, (exp.Like, exp.ILike, exp.Escape)):
            return self._like(node)
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between):
            value = self.translate(node.this)
            lo, hi = self.translate(node.args["low"]), self.translate(node.args["high"])
            v1, lo = self.coerce_pair(value, lo, node)
            v2, hi = self.coerce_pair(value, hi, node)
            _unordered_json(node, value, lo, hi)
            return Call("AND", (Call(">=", (v1, lo), BOOLEAN), Call("<=", (v2, hi), BOOLEAN)), BOOLEAN)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            args = [self.condition(node.this), self.translate(node.args["true"])]
            if node.args.get("false") is not None:
                args.append(self.translate(node.args["false"]))
            return self.call("CASE", args, node)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node)
        if isinstance(node, exp.Interval):
            return self._interval(node)
        if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDatetime)):
            return Literal(self.session.now(), TIMESTAMP)
        if isinstance(node, exp.CurrentDate):
            return self._floor_literal(self.session.now(), "P1D")
        if isinstance(node, exp.Window):
            raise UnsupportedError("window functions (OVER) are not supported")
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select)):
            raise UnsupportedError(f"subqueries in {self.scope.clause} are not supported: '{sql_text(node)}'; "
                                   "join with the subquery in FROM instead")
        json = json_node(self, node)
        if json is not None:
            return json
        if is_aggregate(node):
            name = node.this.key.upper() if isinstance(node, exp.Filter) else (
                str(node.this).upper() if isinstance(node, exp.Anonymous) else node.key.upper())
            raise ValidationError(f"aggregate function {name} is not allowed in {self.scope.clause}: "
                                  f"'{sql_text(node)}'")
        return self._function(node)

    def _parameter(self, node: exp.Placeholder) -> Scalar:
        name = str(node.this or "")
        if not name.startswith(PARAMETER_PREFIX):
            raise ValidationError(f"named parameters are not supported ('{sql_text(node)}'); use ? placeholders")
        position = int(name[len(PARAMETER_PREFIX):])
        params = self.session.parameters
        if params is None:
            return Literal(None, NULL)
        if position >= len(params):
            raise ValidationError(f"the query has more ? parameters than the {len(params)} given "
                                  f"(parameter {position + 1} is missing)")
        return parameter_literal(params[position], position)

    def _arithmetic(self, node: exp.Expression) -> Scalar:
        a, b = self.translate(node.this), self.translate(node.expression)
        op = _ARITHMETIC[type(node)]
        if op in ("+", "-") and INTERVAL in (a.type, b.type):
            ts, iv = (a, b) if b.type == INTERVAL else (b, a)
            if iv.type != INTERVAL or ts.type not in (TIMESTAMP, NULL) or (op == "-" and ts is b):
                raise ValidationError(f"INTERVAL arithmetic needs TIMESTAMP +/- INTERVAL in '{sql_text(node)}'")
            period, count = iv.value
            step = -count if op == "-" else count
            return Call("TIME_SHIFT", (ts, Literal(period, VARCHAR), Literal(step, BIGINT), self.tz()), TIMESTAMP)
        if isinstance(node, exp.IntDiv):
            a, b = (x if x.type == BIGINT else Call("CAST", (x,), BIGINT) for x in (a, b))
        return self.call(op, [a, b], node, [node.this, node.expression])

    def _is(self, node: exp.Is) -> Scalar:
        target = node.expression
        value = self.translate(node.this)
        if isinstance(target, exp.Null):
            return Call("IS_NULL", (value,), BOOLEAN)
        if isinstance(target, exp.Boolean):
            if value.type not in (BOOLEAN, NULL):
                raise ValidationError(f"IS TRUE/FALSE needs a BOOLEAN, got {value.type} in '{sql_text(node)}'")
            truth = value if target.this else Call("NOT", (value,), BOOLEAN)
            return Call("COALESCE", (truth, Literal(False, BOOLEAN)), BOOLEAN)
        raise UnsupportedError(f"IS {sql_text(target)} is not supported; use IS NULL, IS TRUE or IS FALSE")

    def _like(self, node: exp.Expression) -> Scalar:
        escape = None
        if isinstance(node, exp.Escape):
            escape = self.literal_string(node.expression, "LIKE ESCAPE")
            node = node.this
        negate = bool(node.args.get("negate"))
        value, pattern = self.translate(node.this), self.translate(node.expression)
        if isinstance(pattern, Literal) and isinstance(pattern.value, str):
            check_like(pattern.value, escape, strict=True)  # SQL's escape rules, at planning
        if isinstance(node, exp.ILike):
            value = self.call("LOWER", [value], node)
            pattern = self.call("LOWER", [pattern], node)
        args = [value, pattern] + ([Literal(escape, VARCHAR)] if escape is not None else [])
        out = self.call("LIKE", args, node, [node.this, node.expression] + ([escape] if escape else []))
        return Call("NOT", (out,), BOOLEAN) if negate else out

    def _in(self, node: exp.In) -> Scalar:
        if node.args.get("query") is not None:
            raise UnsupportedError(f"IN (SELECT ...) is supported only as a condition of its own in WHERE "
                                   f"(x IN (SELECT ...) AND ...); not here: '{sql_text(node)}'")
        value = self.translate(node.this)
        items = []
        for item in node.expressions:
            v, it = self.coerce_pair(value, self.translate(item), node)
            value = v
            items.append(it)
        return self.call("IN", [value] + items, node)

    def _case(self, node: exp.Case) -> Scalar:
        subject = self.translate(node.this) if node.this is not None else None
        args: list[Scalar] = []
        for branch in node.args.get("ifs") or []:
            if subject is not None:
                s, key = self.coerce_pair(subject, self.translate(branch.this), node)
                cond: Scalar = Call("=", (s, key), BOOLEAN)
            else:
                cond = self.condition(branch.this)
            args += [cond, self.translate(branch.args["true"])]
        if node.args.get("default") is not None:
            args.append(self.translate(node.args["default"]))
        return self.call("CASE", args, node)

    def _cast(self, node: exp.Expression) -> Scalar:
        to = node.args["to"]
        if isinstance(node.this, exp.JSONValue) and not node.this.args.get("returning"):
            return json_value(self, node.this, to)
        array_target = array_type_of(to, sql_text(node))
        if array_target is not None:
            return cast_to_array(self.translate(node.this), array_target, node)
        type_name = to.this.name if isinstance(to.this, exp.DataType.Type) else str(to.this).upper()
        target = CAST_TARGETS.get(type_name)
        if target is None:
            raise UnsupportedError(f"CAST to {sql_text(to)} is not supported; valid: BIGINT, DOUBLE, FLOAT, VARCHAR, "
                                   "TIMESTAMP, DATE, BOOLEAN")
        value = self.translate(node.this)
        if value.type == INTERVAL or not value.type.is_scalar:
            raise ValidationError(f"cannot CAST {value.type} in '{sql_text(node)}'")
        if target == TIMESTAMP and isinstance(value, Literal) and isinstance(value.value, str):
            value = Literal(parse_timestamp(value.value, self.session.time_zone, "TIMESTAMP literal"), TIMESTAMP)
        elif value.type != target:
            value = self.cast_to(value, target)
        if type_name == "DATE":
            if isinstance(value, Literal) and value.value is not None:
                return self._floor_literal(value.value, "P1D")
            return Call("TIME_FLOOR", (value, Literal("P1D", VARCHAR), Literal(None, NULL), self.tz()), TIMESTAMP)
        return value

    def cast_to(self, value: Scalar, target: SqlType) -> Scalar:
        if value.type == target:
            return value
        if isinstance(value, Literal) and value.value is None:
            return Literal(None, target)
        # Text <-> TIMESTAMP conversions depend on the session time zone, so they become the
        # time functions that carry it.
        if value.type == TIMESTAMP and target == VARCHAR:
            return Call("TIME_FORMAT", (value, Literal("yyyy-MM-dd HH:mm:ss", VARCHAR), self.tz()), VARCHAR)
        if value.type == VARCHAR and target == TIMESTAMP:
            return Call("TIME_PARSE", (value, Literal(None, NULL), self.tz()), TIMESTAMP)
        return Call("CAST", (value,), target)

    def _interval(self, node: exp.Interval) -> Scalar:
        value = literal_value(node.this) if node.this is not None else None
        unit = node.args.get("unit")
        if isinstance(value, str):
            m = re.match(r"^\s*([+-]?\d+)\s*([A-Za-z]*)\s*$", value)
            if not m:
                raise UnsupportedError(f"INTERVAL '{value}' is not supported; use e.g. INTERVAL '2' HOUR")
            value = int(m.group(1))
            if m.group(2):
                unit = exp.Var(this=m.group(2))
        if not isinstance(value, int):
            raise ValidationError(f"INTERVAL needs a whole number of units, got '{sql_text(node)}'")
        return Literal((self._period(unit, "INTERVAL"), value), INTERVAL)

    def _floor_literal(self, ms: int, period: str) -> Literal:
        from common.sql.rules.fold_constants import evaluate_constant

        call = Call("TIME_FLOOR", (Literal(ms, TIMESTAMP), Literal(period, VARCHAR), Literal(None, NULL), self.tz()),
                    TIMESTAMP)
        return evaluate_constant(call)

    # ---- functions -----------------------------------------------------------------------------
    def _args(self, nodes) -> list[Scalar]:
        return [self.translate(n) for n in nodes if n is not None]

    def _function(self, node: exp.Expression) -> Scalar:
        mv = mv_call(self, node)
        if mv is not None:
            return mv
        array_call = array_call_nodes(node)
        if array_call is not None:
            return self.call(array_call[0], self._args(array_call[1]), node, array_call[1])
        cls = type(node)
        if cls in _SIMPLE_FUNCTIONS:
            nodes = [node.this] + [node.args.get(k) for k in ("expression", "replacement", "times")
                                   if node.args.get(k) is not None]
            return self.call(_SIMPLE_FUNCTIONS[cls], self._args(nodes), node, nodes)
        if isinstance(node, exp.Concat):
            return self.call("CONCAT", self._args(node.expressions), node)
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            nodes = [node.this] + list(node.expressions)
            op = {exp.Coalesce: "COALESCE", exp.Greatest: "GREATEST", exp.Least: "LEAST"}[cls]
            return self.call(op, self._args(nodes), node, nodes)
        if isinstance(node, exp.Substring):
            nodes = [node.this, node.args.get("start"), node.args.get("length")]
            return self.call("SUBSTRING", self._args(nodes), node, [n for n in nodes if n is not None])
        if isinstance(node, exp.Trim):
            position = str(node.args.get("position") or "BOTH").upper()
            op = {"BOTH": "TRIM", "LEADING": "LTRIM", "TRAILING": "RTRIM"}[position]
            nodes = [node.this, node.expression]
            return self.call(op, self._args(nodes), node, [n for n in nodes if n is not None])
        if isinstance(node, exp.StrPosition):
            nodes = [node.this, node.args.get("substr")]
            args = self._args(nodes)
            if node.args.get("position") is not None:
                start = self.translate(node.args["position"])
                if not isinstance(start, Literal) or not isinstance(start.value, int):
                    raise ValidationError(f"the start position of STRPOS must be an integer literal in "
                                          f"'{sql_text(node)}'")
                args.append(start)
            return self.call("STRPOS", args, node)
        if isinstance(node, exp.Pad):
            args = self._args([node.this, node.expression])
            fill = node.args.get("fill_pattern")
            args.append(self.translate(fill) if fill is not None else Literal(" ", VARCHAR))
            return self.call("LPAD" if node.args.get("is_left") else "RPAD", args, node)
        if isinstance(node, exp.RegexpExtract):
            nodes = [node.this, node.expression, node.args.get("position") or node.args.get("group")]
            return self.call("REGEXP_EXTRACT", self._args(nodes), node)
        if isinstance(node, exp.Round):
            return self.call("ROUND", self._args([node.this, node.args.get("decimals")]), node)
        if isinstance(node, (exp.Floor, exp.Ceil)):
            return self._floor_ceil(node)
        if isinstance(node, exp.Trunc):
            return self._truncate(node, self.translate(node.this), node.args.get("decimals"))
        if isinstance(node, exp.Log):
            if node.expression is None:
                return self.call("LN", self._args([node.this]), node)
            base = literal_value(node.this)
            if base == 10:
                return self.call("LOG10", self._args([node.expression]), node)
            x = self.call("LN", self._args([node.expression]), node)
            return self.call("/", [x, self.call("LN", self._args([node.this]), node)], node)
        if isinstance(node, exp.Extract):
            unit = self._unit(node.this, "EXTRACT")
            if unit not in _EXTRACT_UNITS:
                raise ValidationError(f"unknown EXTRACT unit '{unit}'; valid: {', '.join(_EXTRACT_UNITS)}")
            return self.call("TIME_EXTRACT", [self.translate(node.expression), Literal(unit, VARCHAR), self.tz()], node)
        if isinstance(node, exp.DateTrunc):
            period = self._period(node.args.get("unit"), "DATE_TRUNC")
            return self.call("TIME_FLOOR", [self.translate(node.this), Literal(period, VARCHAR), Literal(None, NULL),
                                            self.tz()], node)
        if isinstance(node, exp.Anonymous):
            return self._anonymous(node)
        if isinstance(node, exp.Func):
            name = written_name(node, node.sql_name() if hasattr(node, "sql_name") else node.key.upper())
            raise ValidationError(unknown_name_message("function", name, KNOWN_FUNCTIONS))
        raise UnsupportedError(f"'{sql_text(node)}' is not supported")

    def _floor_ceil(self, node: exp.Expression) -> Scalar:
        op = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
        shown = written_name(node, op)
        value = self.translate(node.this)
        to = node.args.get("to")
        if to is None:
            if value.type == TIMESTAMP:
                raise ValidationError(f"{shown} of a TIMESTAMP needs a unit: {shown}(__time TO DAY)")
            return self.call(op, [value], node)
        period = self._period(to, f"{shown}(... TO unit)")
        return self.call(f"TIME_{op}", [value, Literal(period, VARCHAR), Literal(None, NULL), self.tz()], node)

    def _truncate(self, node: exp.Expression, value: Scalar, digits: exp.Expression | None) -> Scalar:
        """TRUNCATE(x, d): toward zero at d decimal digits, as FLOOR or CEIL by sign."""
        d = literal_value(digits) if digits is not None else 0
        if not isinstance(d, int):
            raise ValidationError(f"the digits of TRUNCATE must be an integer literal in '{sql_text(node)}'")
        if not value.type.is_numeric and value.type != NULL:
            raise ValidationError(f"TRUNCATE needs a number, got {value.type} in '{sql_text(node)}'")
        if value.type.is_exact and d >= 0:
            return value
        scale = Literal(10.0 ** d, DOUBLE)
        scaled = Call("*", (value, scale), DOUBLE)
        down = Call("/", (Call("FLOOR", (scaled,), DOUBLE), scale), DOUBLE)
        up = Call("/", (Call("CEIL", (scaled,), DOUBLE), scale), DOUBLE)
        out = Call("CASE", (Call(">=", (value, Literal(0, BIGINT)), BOOLEAN), down, up), DOUBLE)
        return out if value.type != BIGINT else Call("CAST", (out,), BIGINT)

    def _anonymous(self, node: exp.Anonymous) -> Scalar:
        name = str(node.this).upper()
        nodes = list(node.expressions)
        if name in ("TRUNCATE", "TRUNC"):
            if len(nodes) not in (1, 2):
                raise ValidationError(f"{name} takes 1 or 2 arguments in '{sql_text(node)}'")
            return self._truncate(node, self.translate(nodes[0]), nodes[1] if len(nodes) > 1 else None)
        if name == "DIV":
            args = self._args(nodes)
            if len(args) != 2:
                raise ValidationError(f"DIV takes 2 arguments in '{sql_text(node)}'")
            args = [a if a.type == BIGINT else self.cast_to(a, BIGINT) for a in args]
            return self.call("/", args, node, nodes)
        if name in ("TIME_FLOOR", "TIME_CEIL"):
            args = self._args(nodes[:2])
            origin = self.translate(nodes[2]) if len(nodes) > 2 else Literal(None, NULL)
            if origin.type == VARCHAR and isinstance(origin, Literal) and origin.value is not None:
                origin = Literal(parse_timestamp(origin.value, self.session.time_zone, "origin"), TIMESTAMP)
            tz = self.translate(nodes[3]) if len(nodes) > 3 else self.tz()
            if len(nodes) < 2 or len(nodes) > 4:
                raise ValidationError(f"{name} takes 2 to 4 arguments (timestamp, period[, origin[, timezone]]), "
                                      f"got {len(nodes)} in '{sql_text(node)}'")
            return self.call(name, args + [origin, tz], node)
        if name == "TIME_SHIFT":
            if len(nodes) not in (3, 4):
                raise ValidationError(f"TIME_SHIFT takes 3 or 4 arguments (timestamp, period, step[, timezone]), "
                                      f"got {len(nodes)} in '{sql_text(node)}'")
            args = self._args(nodes[:3])
            return self.call(name, args + [self.translate(nodes[3]) if len(nodes) > 3 else self.tz()], node)
        if name == "TIME_EXTRACT":
            if len(nodes) not in (1, 2, 3):
                raise ValidationError(f"TIME_EXTRACT takes 1 to 3 arguments, got {len(nodes)} in '{sql_text(node)}'")
            unit = self.literal_string(nodes[1], "TIME_EXTRACT unit").upper() if len(nodes) > 1 else "MILLISECOND"
            if unit not in _EXTRACT_UNITS:
                raise ValidationError(f"unknown TIME_EXTRACT unit '{unit}'; valid: {', '.join(_EXTRACT_UNITS)}")
            tz = self.translate(nodes[2]) if len(nodes) > 2 else self.tz()
            return self.call(name, [self.translate(nodes[0]), Literal(unit, VARCHAR), tz], node)
        if name in ("TIME_PARSE", "TIME_FORMAT"):
            if not 1 <= len(nodes) <= 3:
                raise ValidationError(f"{name} takes 1 to 3 arguments, got {len(nodes)} in '{sql_text(node)}'")
            args = self._args(nodes[:1])
            args.append(self.translate(nodes[1]) if len(nodes) > 1 else Literal(None, NULL))
            args.append(self.translate(nodes[2]) if len(nodes) > 2 else self.tz())
            return self.call(name, args, node)
        if name == "TIME_IN_INTERVAL":
            if len(nodes) != 2:
                raise ValidationError(f"TIME_IN_INTERVAL takes 2 arguments, got {len(nodes)} in '{sql_text(node)}'")
            ts = self.translate(nodes[0])
            if ts.type not in (TIMESTAMP, NULL):
                raise ValidationError(f"TIME_IN_INTERVAL needs a TIMESTAMP, got {ts.type} in '{sql_text(node)}'")
            text = self.literal_string(nodes[1], "TIME_IN_INTERVAL interval")
            interval = Interval.parse(text)
            return Call("AND", (Call(">=", (ts, Literal(interval.start, TIMESTAMP)), BOOLEAN),
                                Call("<", (ts, Literal(interval.end, TIMESTAMP)), BOOLEAN)), BOOLEAN)
        if name == "TIMESTAMPADD":
            if len(nodes) != 3:
                raise ValidationError(f"TIMESTAMPADD takes 3 arguments (unit, count, timestamp) in '{sql_text(node)}'")
            period = self._period(nodes[0], "TIMESTAMPADD")
            return self.call("TIME_SHIFT", [self.translate(nodes[2]), Literal(period, VARCHAR),
                                            self.translate(nodes[1]), self.tz()], node)
        json = json_function(self, name, nodes, node)
        if json is not None:
            return json
        if name in ("CURRENT_TIMESTAMP", "NOW", "LOCALTIMESTAMP"):
            return Literal(self.session.now(), TIMESTAMP)
        if name in ("POWER", "LOG10") or name in _ANONYMOUS:
            op = _ANONYMOUS.get(name, name)
            args = self._args(nodes)
            if op == "STRPOS" and len(args) == 3:
                raise ValidationError(f"STRPOS takes 2 arguments in '{sql_text(node)}'")
            return self.call(op, args, node, nodes)
        if name in functions.SIGNATURES:
            return self.call(name, self._args(nodes), node, nodes)
        raise ValidationError(unknown_name_message("function", name, KNOWN_FUNCTIONS))


def unify_types(types: list[SqlType], what: str) -> SqlType:
    out = NULL
    for t in types:
        unified = common_type(out, t)
        if unified is None:
            raise ValidationError(f"{what}: incompatible types {out} and {t}; CAST one of them")
        out = unified
    return out


__all__ = ["KNOWN_FUNCTIONS", "ScalarTranslator", "Scope", "Session", "contains_aggregate", "is_aggregate",
           "literal_value", "parse_timestamp", "sql_text", "unify_types"]


# Constant arguments whose kind the signature alone cannot express: (function, position) -> kind.
# (The others are checked where they are translated, with messages of their own.)
_CONSTANT_KINDS = {
    ("TIME_FORMAT", 1): str, ("TIME_FORMAT", 2): str, ("TIME_PARSE", 1): str, ("TIME_PARSE", 2): str,
    ("SUBSTRING", 1): int, ("SUBSTRING", 2): int, ("STRPOS", 2): int,
}
# Instants Python's datetime can represent (years 1 to 9999).
_MIN_MILLIS, _MAX_MILLIS = -62_135_596_800_000, 253_402_300_799_999


def _check_constant(op: str, position: int, value, text: str, shown: str | None = None) -> None:
    shown = shown or op
    kind = _CONSTANT_KINDS.get((op, position))
    if kind is str and not isinstance(value, str):
        raise ValidationError(f"argument {position + 1} of {shown} must be a string literal, got {value!r} in '{text}'")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        if not (isinstance(value, float) and value.is_integer()):
            raise ValidationError(f"argument {position + 1} of {shown} must be an integer, got {value!r} in '{text}'")
    if op == "MILLIS_TO_TIMESTAMP" and isinstance(value, (int, float)) and not _MIN_MILLIS <= value <= _MAX_MILLIS:
        raise ValidationError(f"{shown}({value}) is outside years 1 to 9999 in '{text}'")
