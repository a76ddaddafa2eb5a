"""Evaluation: the value model, the function protocol, the operators, and the public API.

A value is a ``pa.Array`` (one entry per row) or a ``pa.Scalar`` (a constant sub-expression, kept
unexpanded so ``x + 1`` never materializes a column of ones). Booleans travel as ``pa.bool_`` and
count as LONG, as in Druid. Every operator and function pairs output-type inference, which also
rejects bad argument types naming the offending sub-expression, with a vectorized implementation;
``infer_type`` and ``evaluate`` run the same checks, so they can never disagree. Nothing loops over
rows. The built-in function library lives in ``functions.py`` and registers itself here (the
package ``__init__`` imports it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import UnsupportedError, ValidationError, unknown_name_message
from common.expr.node import COMPARISONS, LOGICAL, BinaryOp, Call, Expr, Identifier, Literal, UnaryOp
from common.expr.nesting import depth_guard
from common.types.column_type import DOUBLE, LONG, STRING, ColumnType, TypeKind
from common.types.number_parsing import boolean_text_as_number, double_to_long, text_to_double, to_long_values
from common.types.time_zone import time_zone

Value = pa.Array | pa.Scalar
Type = ColumnType | None  # None: the type of a bare null, which fits anywhere
TS = pa.timestamp("ms", tz="UTC")
_LONG_KINDS = (TypeKind.LONG, TypeKind.TIMESTAMP)
_NUMERIC_KINDS = (TypeKind.LONG, TypeKind.DOUBLE, TypeKind.FLOAT, TypeKind.TIMESTAMP)


# ---- value model ---------------------------------------------------------------------------
def is_scalar(v: Value) -> bool:
    return isinstance(v, pa.Scalar)


def type_of(v: Value) -> Type:
    t = v.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_boolean(t):
        return LONG
    return ColumnType.from_arrow(t)


def null_of(t: Type) -> pa.Scalar:
    return pa.scalar(None, pa.null() if t is None else t.to_arrow())


def plain(v: Value) -> Value:
    if not is_scalar(v) and pa.types.is_dictionary(v.type):
        return v.dictionary_decode()
    return v


def on_numpy(fn: Callable, out_type: pa.DataType, *args: Value) -> Value:
    """Apply a numpy function to arrow values (at least one an array); nulls are masked and
    scalars broadcast."""
    mask = None
    data = []
    for a in args:
        if is_scalar(a):
            if not a.is_valid:
                n = max(len(x) for x in args if not is_scalar(x))
                return pa.nulls(n, out_type)
            data.append(a.as_py())
            continue
        if a.null_count:
            m = a.is_null().to_numpy(zero_copy_only=False)
            mask = m if mask is None else (mask | m)
            a = pc.fill_null(a, pa.scalar(0, a.type))
        data.append(a.to_numpy(zero_copy_only=False))
    with np.errstate(all="ignore"):
        out = fn(*data)
    return pa.array(out, type=out_type, mask=mask)


def _parse_double(s: Value) -> Value:
    return text_to_double(s)


def to_long(v: Value) -> Value:
    """CAST(v AS BIGINT): number_parsing.to_long_values holds the rule (JSON_VALUE shares it)."""
    v = plain(v)
    t = v.type
    if pa.types.is_timestamp(t):
        return v.cast(pa.int64())
    if not (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_null(t) or pa.types.is_floating(t)
            or pa.types.is_string(t)):
        raise UnsupportedError(f"cannot convert {t} to LONG")
    if pa.types.is_string(t):
        v = boolean_text_as_number(v)
    return to_long_values(v)


def to_double(v: Value) -> Value:
    v = plain(v)
    t = v.type
    if pa.types.is_float64(t):
        return v
    if pa.types.is_timestamp(t):
        v = v.cast(pa.int64())
    if pa.types.is_string(t):
        return _parse_double(boolean_text_as_number(v))
    return v.cast(pa.float64(), safe=False)  # longs beyond 2**53 round, as SQL and Java convert them


def to_string(v: Value) -> Value:
    """Druid's asString: numbers print as Java does for common values, instants as millis."""
    v = plain(v)
    t = v.type
    if pa.types.is_string(t):
        return v
    if pa.types.is_timestamp(t) or pa.types.is_boolean(t):
        v = v.cast(pa.int64())
    if pa.types.is_floating(v.type):
        x = v.cast(pa.float64())
        s = x.cast(pa.string())
        whole = pc.and_(pc.equal(pc.trunc(x), x), pc.less(pc.abs(x), 1e7))
        s = pc.if_else(whole, pc.binary_join_element_wise(s, ".0", ""), s)
        for arrow_text, java_text in (("nan", "NaN"), ("inf", "Infinity"), ("-inf", "-Infinity")):
            s = pc.if_else(pc.equal(s, arrow_text), java_text, s)
        # Java writes magnitudes outside [1e-3, 1e7) as d.dddE±n; those are rare, so they are
        # formatted once per distinct value.
        a = pc.abs(x)
        sci = pc.and_(pc.and_(pc.is_finite(x), pc.not_equal(x, 0.0)), pc.or_(pc.less(a, 1e-3), pc.greater_equal(a, 1e7)))
        sci = sci.fill_null(False)
        if pc.any(sci).as_py():
            picked = x.filter(sci)
            uniq = pc.unique(picked)
            texts = pa.array([java_scientific(u) for u in uniq.to_pylist()], pa.string())
            s = pc.replace_with_mask(s, sci, texts.take(pc.index_in(picked, value_set=uniq)))
        return s
    return v.cast(pa.string())


def java_scientific(x: float) -> str:
    """Java's Double.toString for |x| outside [1e-3, 1e7): shortest digits, like 1.0E10 or 1.5E-5."""
    import numpy as np

    text = np.format_float_scientific(x, unique=True, trim="0")
    mantissa, exponent = text.split("e")
    return f"{mantissa}E{int(exponent)}"


def to_timestamp(v: Value) -> Value:
    v = plain(v)
    if pa.types.is_timestamp(v.type):
        return v.cast(TS)
    if pa.types.is_string(v.type):
        return to_timestamp_from_text(v)
    return to_long(v).cast(TS)


def cast_value(v: Value, t: Type) -> Value:
    if t is None:
        return v
    kind = t.kind
    if kind is TypeKind.LONG:
        return to_long(v)
    if kind is TypeKind.DOUBLE:
        return to_double(v)
    if kind is TypeKind.FLOAT:
        return to_double(v).cast(pa.float32())
    if kind is TypeKind.STRING:
        return to_string(v)
    if kind is TypeKind.TIMESTAMP:
        return to_timestamp(v)
    if kind is TypeKind.ARRAY:
        from common.expr.array_functions import cast_array  # a cycle: array_functions imports this module

        return cast_array(v, t)
    raise UnsupportedError(f"cannot cast to {t}; expressions support LONG, DOUBLE, FLOAT, STRING, TIMESTAMP and arrays")


def truthy(v: Value) -> Value:
    """Druid's asBoolean as pa.bool_: numbers are true when positive (NaN is false), strings when
    'true' in any case; null stays null."""
    v = plain(v)
    t = v.type
    if pa.types.is_boolean(t):
        return v
    if pa.types.is_null(t):
        return v.cast(pa.bool_())
    if pa.types.is_string(t):
        return pc.equal(pc.utf8_lower(v), "true")
    if pa.types.is_floating(t):
        return pc.greater(v, 0.0)
    return pc.greater(to_long(v), 0)


def unify(types: list[Type]) -> Type:
    """The common type of several results (conditionals, coalesce): numbers widen, else STRING."""
    out: Type = None
    for t in types:
        if t is None:
            continue
        if out is None or out == t:
            out = t
        elif out.kind in _LONG_KINDS and t.kind in _LONG_KINDS:
            out = LONG
        elif out.kind in _NUMERIC_KINDS and t.kind in _NUMERIC_KINDS:
            out = DOUBLE
        else:
            out = STRING
    return out


def compare(op: str, a: Value, b: Value) -> Value:
    """Comparison with Druid's coercions: two strings compare as text, a string against a number
    compares as DOUBLE, LONG/TIMESTAMP pairs as integers (no precision loss), else DOUBLE. Druid
    has no TIMESTAMP type; here a string against a TIMESTAMP is read as an ISO-8601 instant."""
    ta, tb = type_of(a), type_of(b)
    kinds = {t.kind for t in (ta, tb) if t is not None}
    if not kinds:  # null against null
        a, b = a.cast(pa.int64()), b.cast(pa.int64())
    elif TypeKind.ARRAY in kinds:
        # array_functions builds on this module: imported here, not at the top, to avoid a cycle
        from common.expr.array_functions import compare_arrays

        return compare_arrays(op, a, b, ta, tb)
    elif kinds == {TypeKind.TIMESTAMP, TypeKind.STRING}:
        a, b = to_timestamp(a), to_timestamp(b)
    elif kinds == {TypeKind.STRING}:
        a, b = plain(a).cast(pa.string()), plain(b).cast(pa.string())
    elif kinds <= set(_LONG_KINDS):
        a, b = to_long(a), to_long(b)
    else:
        return _compare_doubles(op, to_double(a), to_double(b))
    return _COMPARATORS[op](a, b)


def _compare_doubles(op: str, a: Value, b: Value) -> Value:
    """Doubles in SQL's total order (DuckDB, Java's Double.compare): NaN equals NaN and orders
    above every number; Arrow's comparisons say false for any NaN."""
    out = _COMPARATORS[op](a, b)
    nan_a, nan_b = pc.is_nan(a), pc.is_nan(b)
    if not (pc.any(nan_a).as_py() or pc.any(nan_b).as_py()):
        return out
    nan_a, nan_b = pc.fill_null(nan_a, False), pc.fill_null(nan_b, False)
    both = pc.and_(nan_a, nan_b)
    fixed = {
        "==": lambda: pc.or_(pc.fill_null(out, False), both),
        "!=": lambda: pc.and_(pc.fill_null(out, True), pc.invert(both)),
        "<": lambda: pc.or_(pc.fill_null(out, False), pc.and_(pc.invert(nan_a), nan_b)),
        "<=": lambda: pc.or_(pc.fill_null(out, False), nan_b),
        ">": lambda: pc.or_(pc.fill_null(out, False), pc.and_(nan_a, pc.invert(nan_b))),
        ">=": lambda: pc.or_(pc.fill_null(out, False), nan_a),
    }[op]()
    unknown = pc.or_(pc.is_null(a), pc.is_null(b))
    return pc.if_else(unknown, pa.scalar(None, pa.bool_()), fixed)


_COMPARATORS = {
    "==": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
    ">": pc.greater, ">=": pc.greater_equal,
}


def _null_if_zero(v: Value) -> Value:
    return pc.if_else(pc.equal(v, 0), pa.scalar(None, v.type), v)


def arithmetic(op: str, a: Value, b: Value, out: ColumnType) -> Value:
    """Java semantics: LONG math wraps and divides truncating toward zero; any double makes the
    result DOUBLE; dividing or taking the remainder by zero gives null (SQL, not Java's error)."""
    if out == LONG:
        a, b = to_long(a), to_long(b)
    else:
        a, b = to_double(a), to_double(b)
    if op == "+":
        return pc.add(a, b)
    if op == "-":
        return pc.subtract(a, b)
    if op == "*":
        return pc.multiply(a, b)
    if op == "/":
        return pc.divide(a, _null_if_zero(b))
    if op == "%":
        b = _null_if_zero(b)
        if out == LONG:
            # (MIN_LONG % -1) overflows in C; it is 0 in Java.
            b_safe = pc.if_else(pc.equal(b, -1), 1, b)
            return on_numpy(np.fmod, pa.int64(), a, b_safe)
        return on_numpy(np.fmod, pa.float64(), a, b)
    if op == "^":
        if out == LONG:
            # Java's LongMath.pow semantics for negative exponents: 1, -1 or 0, never an error.
            neg = pc.less(b, 0)
            frac = double_to_long(pc.power(a.cast(pa.float64(), safe=False), b.cast(pa.float64(), safe=False)))
            frac = pc.if_else(pc.equal(a, 0), pa.scalar(None, pa.int64()), frac)  # 0 ^ -n divides by zero
            return pc.if_else(neg, frac, pc.power(a, pc.if_else(neg, 0, b)))
        return pc.power(a, b)
    raise ValidationError(f"unknown arithmetic operator '{op}'")


# ---- text to instants ------------------------------------------------------------------------
# Lenient ISO-8601 as Druid's parser reads it: date-only, non-zero-padded fields (2022-6-14),
# 'T' or a space before the time, optional minutes/seconds/fraction and offset.
ISO_INSTANT = (
    r"^\s*(?P<Y>\d{4})(?:-(?P<M>\d{1,2})(?:-(?P<D>\d{1,2}))?)?"
    r"(?:[T ](?P<h>\d{1,2})(?::(?P<m>\d{1,2})(?::(?P<s>\d{1,2})(?:[.,](?P<f>\d{1,9}))?)?)?)?"
    r"\s*(?P<z>Z|z|[+-]\d{2}(?::?\d{2})?)?\s*$"
)
_MONTHS = pa.array(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])


def parse_instants(s: pa.Array, regex: str, tz: str | None, two_digit_year: bool = False) -> pa.Array:
    """Strings to TIMESTAMP through a regex with named fields (Y M Mn D h h12 ap m s f z); rows that
    do not match or name an impossible date become null."""
    struct = pc.extract_regex(s, regex)
    names = {struct.type.field(i).name for i in range(struct.type.num_fields)}
    matched = pc.fill_null(pc.is_valid(struct), False).to_numpy(zero_copy_only=False)

    def field(name: str, default: int) -> np.ndarray:
        if name not in names:
            return np.full(len(s), default, np.int64)
        text = pc.struct_field(struct, name)
        text = pc.if_else(pc.equal(text, ""), str(default), text)
        return pc.fill_null(text.cast(pa.int64()), default).to_numpy(zero_copy_only=False)

    year, month, day = field("Y", 1970), field("M", 1), field("D", 1)
    if two_digit_year:  # Joda's 'yy' pivots on the current year, two digits within 50 years of it
        now = dt.date.today().year
        year = (now - 50) // 100 * 100 + year
        year = np.where(year < now - 50, year + 100, year)
    if "Mn" in names:
        name = pc.utf8_slice_codeunits(pc.utf8_lower(pc.struct_field(struct, "Mn")), start=0, stop=3)
        month = pc.fill_null(pc.index_in(name, value_set=_MONTHS), -1).to_numpy(zero_copy_only=False) + 1
    hour = field("h", 0)
    if "h12" in names:
        pm = pc.equal(pc.utf8_lower(pc.struct_field(struct, "ap")), "pm").to_numpy(zero_copy_only=False)
        hour = np.where(field("h12", 12) > 12, 99, field("h12", 12) % 12 + np.where(pm, 12, 0))
    minute, second = field("m", 0), field("s", 0)
    millis = np.zeros(len(s), np.int64)
    if "f" in names:
        frac = pc.utf8_rpad(pc.struct_field(struct, "f"), width=3, padding="0")
        millis = pc.utf8_slice_codeunits(frac, start=0, stop=3).cast(pa.int64()).to_numpy(zero_copy_only=False)
    valid = matched & (month >= 1) & (month <= 12) & (hour <= 23) & (minute <= 59) & (second <= 59)
    first = ((year - 1970) * 12 + np.where(valid, month - 1, 0)).astype("datetime64[M]")
    start = first.astype("datetime64[D]").astype(np.int64)
    month_len = (first + 1).astype("datetime64[D]").astype(np.int64) - start
    valid &= (day >= 1) & (day <= month_len)
    local = (start + day - 1) * 86_400_000 + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis
    local = np.where(valid, local, 0)
    zone = time_zone(tz) if tz else None
    zoned = local if zone is None else zone.from_local(local, ambiguous="earliest", nonexistent="earliest")
    if "z" in names:
        z = pc.utf8_upper(pc.replace_substring(pc.struct_field(struct, "z"), ":", ""))
        has_offset = pc.not_equal(z, "").to_numpy(zero_copy_only=False)
        digits = pc.utf8_rpad(pc.if_else(pc.equal(z, "Z"), "+0000", z), width=5, padding="0")
        hh = _digits(pc.utf8_slice_codeunits(digits, start=1, stop=3))
        mm = _digits(pc.utf8_slice_codeunits(digits, start=3, stop=5))
        sign = np.where(pc.starts_with(digits, "-").to_numpy(zero_copy_only=False), -1, 1)
        zoned = np.where(has_offset, local - sign * (hh * 3_600_000 + mm * 60_000), zoned)
    mask = ~valid
    if s.null_count:
        mask |= s.is_null().to_numpy(zero_copy_only=False)
    return pa.array(zoned, pa.int64(), mask=mask).cast(TS)


def _digits(text: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.if_else(pc.equal(text, ""), "0", text).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)


def to_timestamp_from_text(s: Value, tz: str | None = None) -> Value:
    if is_scalar(s):
        return parse_instants(pa.repeat(s, 1), ISO_INSTANT, tz)[0]
    return parse_instants(plain(s), ISO_INSTANT, tz)


# ---- registry --------------------------------------------------------------------------------
Infer = Callable[[Call, list[Type]], Type]
Apply = Callable[[list[Value], list[Type], Type, Call], Value]


@dataclass(frozen=True)
class Function:
    """``kinds`` gives each argument's accepted kind (last one repeats): 'a' any scalar value,
    's' text (numbers are converted, as Druid does), 'n' number, 't' instant (TIMESTAMP or LONG
    millis), 'j' a JSON value (COMPLEX<json> or JSON text), 'x' any value at all, 'k' a constant, 'l' a literal (the output type depends on it). ``strict``: a null
    argument makes the result null without calling ``apply``. ``boolean``: the LONG result travels
    as pa.bool_, like the comparisons."""

    name: str
    min_args: int
    max_args: int | None
    kinds: str
    infer: Infer
    apply: Apply
    strict: bool = True
    doc: str = ""
    boolean: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}()" if self.name[0].isalpha() else f"'{self.name}'"

    def check(self, node: Expr, types: list[Type]) -> Type:
        """Validate arity and argument kinds, then infer the output type; errors quote ``node``."""
        args = node.children()
        n = len(args)
        if n < self.min_args or (self.max_args is not None and n > self.max_args):
            want = str(self.min_args) if self.min_args == self.max_args else (
                f"at least {self.min_args}" if self.max_args is None else f"{self.min_args} to {self.max_args}")
            raise ValidationError(
                f"{self.label} takes {want} argument{'' if want.endswith(' 1') or want == '1' else 's'}, "
                f"got {n} in '{node.to_string()}'"
                + (f"; usage: {self.doc}" if self.doc else "")
            )
        for i, (arg, t) in enumerate(zip(args, types)):
            kind = self.kinds[min(i, len(self.kinds) - 1)]
            check_kind(node, i, arg, t, kind, self.label)
        return self.infer(node, types)


def type_error(call: Expr, what: str, t: ColumnType, hint: str = "") -> ValidationError:
    return ValidationError(f"cannot apply {what} to {t} in '{call.to_string()}'" + (f"; {hint}" if hint else ""))


def check_kind(call: Expr, i: int, arg: Expr, t: Type, kind: str, name: str) -> None:
    if kind in "kl":
        if arg.columns():
            raise ValidationError(
                f"argument {i + 1} of {name} must be a constant, not '{arg.to_string()}', in '{call.to_string()}'"
            )
        if kind == "l" and not isinstance(arg, Literal):
            raise ValidationError(
                f"argument {i + 1} of {name} must be a literal, not '{arg.to_string()}', in '{call.to_string()}'"
            )
        return
    if t is None:
        return
    if kind == "x":
        return  # any value: scalars, arrays and JSON alike
    if kind == "j":
        if t.complex_name != "json" and not t.is_string:
            raise type_error(call, name, t, f"'{arg.to_string()}' must be a COMPLEX<json> column (or JSON text); "
                                            "parse text with parse_json() or declare the column as COMPLEX<json>")
        return
    if t.kind in (TypeKind.ARRAY, TypeKind.COMPLEX):
        raise type_error(call, name, t, "expressions work on single values, not arrays or JSON")
    if kind == "n" and t.kind is TypeKind.STRING:
        raise type_error(call, name, t, f"convert '{arg.to_string()}' with cast(x, 'DOUBLE') first")
    if kind == "t" and t.kind not in (TypeKind.TIMESTAMP, TypeKind.LONG):
        hint = f"parse '{arg.to_string()}' with timestamp_parse() first" if t.is_string else \
            "pass __time, a TIMESTAMP or LONG epoch milliseconds"
        raise type_error(call, name, t, hint)


FUNCTIONS: dict[str, Function] = {}


def lookup(name: str) -> Function:
    fn = FUNCTIONS.get(name) or FUNCTIONS.get(name.lower())
    if fn is None:
        raise ValidationError(unknown_name_message("function", name, FUNCTIONS))
    return fn


def _fixed(t: Type) -> Infer:
    return lambda call, types: t


def register(*names: str, args: tuple[int, int | None], kinds: str, out, strict: bool = True, doc: str = "",
             boolean: bool = False):
    infer = out if callable(out) else _fixed(out)

    def deco(apply: Apply) -> Apply:
        for name in names:
            FUNCTIONS[name] = Function(name, args[0], args[1], kinds, infer, apply, strict, doc, boolean)
        return apply

    return deco


def const(v: Value, what: str = "argument"):
    """The Python value of a constant argument. Function.check has already refused arguments that
    reference columns, so an array here is a folded constant of one row."""
    if is_scalar(v):
        return v.as_py()
    if len(v) != 1:
        raise ValidationError(f"{what} must be a constant")
    return v[0].as_py()


def const_int(v: Value, what: str) -> int:
    x = const(v, what)
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if not isinstance(x, int):
        raise ValidationError(f"{what} must be an integer, got {x!r}")
    return x


def const_str(v: Value, what: str) -> str:
    x = const(v, what)
    if not isinstance(x, str):
        raise ValidationError(f"{what} must be a string, got {x!r}")
    return x


# ---- operators --------------------------------------------------------------------------------
def numeric_infer(call: Expr, types: list[Type]) -> Type:
    return LONG if all(t is None or t.kind in _LONG_KINDS for t in types) else DOUBLE


def _arithmetic_infer(node: Expr, types: list[Type]) -> Type:
    op = node.op if isinstance(node, (BinaryOp, UnaryOp)) else "?"
    for arg, t in zip(node.children(), types):
        if t is not None and t.kind not in _NUMERIC_KINDS:
            if t.is_string and op == "+":
                hint = "use concat() to join strings"
            elif t.is_string:
                hint = f"convert it with cast({arg.to_string()}, 'DOUBLE') to treat the text as a number"
            else:
                hint = "arithmetic needs numbers"
            raise type_error(node, f"'{op}'", t, hint)
    return numeric_infer(node, types)


def _logic(args, types, out, node):
    values = [truthy(a) for a in args]
    if node.op == "!":
        return pc.invert(values[0])
    return (pc.and_kleene if node.op == "&&" else pc.or_kleene)(*values)


BINARY_OPERATORS: dict[str, Function] = {}
for _op in ("+", "-", "*", "/", "%", "^"):
    BINARY_OPERATORS[_op] = Function(
        _op, 2, 2, "a", _arithmetic_infer, lambda args, types, out, node: arithmetic(node.op, args[0], args[1], out))
for _op in COMPARISONS:
    BINARY_OPERATORS[_op] = Function(
        _op, 2, 2, "x", lambda node, types: LONG, lambda args, types, out, node: compare(node.op, args[0], args[1]),
        boolean=True)
for _op in LOGICAL:
    BINARY_OPERATORS[_op] = Function(_op, 2, 2, "a", lambda node, types: LONG, _logic, strict=False)
UNARY_OPERATORS = {
    "-": Function("-", 1, 1, "a", _arithmetic_infer,
                  lambda args, types, out, node: pc.negate(cast_value(args[0], out))),
    "!": Function("!", 1, 1, "a", lambda node, types: LONG, _logic, strict=False),
}


def _function_for(node: Expr) -> Function:
    if isinstance(node, BinaryOp):
        return BINARY_OPERATORS[node.op]
    if isinstance(node, UnaryOp):
        return UNARY_OPERATORS[node.op]
    return lookup(node.name)


# ---- type inference ---------------------------------------------------------------------------
def _infer(node: Expr, column_types: Mapping[str, ColumnType]) -> Type:
    if isinstance(node, Literal):
        return node.type
    if isinstance(node, Identifier):
        if node.name not in column_types:
            raise ValidationError(unknown_name_message("column", node.name, column_types))
        t = column_types[node.name]
        return ColumnType.parse(t) if isinstance(t, str) else t
    fn = _function_for(node)
    return fn.check(node, [_infer(child, column_types) for child in node.children()])


def infer_type(expr: Expr, column_types: Mapping[str, ColumnType]) -> ColumnType:
    """The expression's output type; booleans are LONG and a bare null is STRING, as in Druid.
    Raises ValidationError for unknown columns or functions and for type errors."""
    return _infer(expr, column_types) or STRING


# ---- evaluation -------------------------------------------------------------------------------
def _normalize(arr, name: str, num_rows: int) -> pa.Array:
    """One Arrow representation per logical type, so kernels see few physical types: int64 for
    integers, timestamp[ms, UTC] for instants, string (or dictionary<string>) for text."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            arr = arr.chunk(0)
        else:
            value_type = arr.type.value_type if pa.types.is_dictionary(arr.type) else None
            arr = (arr.cast(value_type) if value_type is not None else arr).combine_chunks()
    elif not isinstance(arr, pa.Array):
        arr = pa.array(arr)
    t = arr.type
    if pa.types.is_dictionary(t):
        vt = t.value_type
        if pa.types.is_string(vt):
            pass
        elif pa.types.is_large_string(vt) or pa.types.is_string_view(vt):
            arr = pa.DictionaryArray.from_arrays(arr.indices, arr.dictionary.cast(pa.string()))
        else:
            return _normalize(arr.dictionary_decode(), name, num_rows)
    elif pa.types.is_integer(t) and not pa.types.is_int64(t):
        arr = arr.cast(pa.int64(), safe=False)
    elif pa.types.is_float16(t):
        arr = arr.cast(pa.float32())
    elif pa.types.is_decimal(t):
        arr = arr.cast(pa.float64())
    elif pa.types.is_timestamp(t) and t != TS:
        if t.tz is None:
            arr = arr.cast(pa.timestamp(t.unit, tz="UTC"))
        arr = arr.cast(TS, safe=False)
    elif pa.types.is_date(t):
        arr = arr.cast(pa.timestamp("ms")).cast(TS)
    elif pa.types.is_large_string(t) or pa.types.is_string_view(t):
        arr = arr.cast(pa.string())
    if len(arr) != num_rows:
        raise ValidationError(f"column '{name}' has {len(arr)} rows but the batch has {num_rows}")
    return arr


class _Batch:
    """The columns of one evaluation; each referenced column is loaded (and normalized) once."""

    def __init__(self, columns: Mapping[str, pa.Array], num_rows: int,
                 column_types: Mapping[str, ColumnType] | None = None) -> None:
        self.columns = columns
        self.num_rows = num_rows
        self.loaded: dict[str, pa.Array] = {}
        # Static types where values alone cannot tell: COMPLEX<json> travels as text.
        self.column_types = column_types or {}

    def column(self, name: str) -> pa.Array:
        if name not in self.loaded:
            try:
                raw = self.columns[name]
            except KeyError:
                raw = None  # a column this segment lacks reads as nulls, as in Druid
            self.loaded[name] = pa.nulls(self.num_rows) if raw is None else _normalize(raw, name, self.num_rows)
        return self.loaded[name]


def _literal_value(node: Literal) -> pa.Scalar:
    return pa.scalar(node.value, None if node.type is None else node.type.to_arrow())


# Functions whose result is COMPLEX<json> (text underneath): their callers must know it is JSON.
JSON_RESULTS = frozenset({"json_query", "json_object", "json_merge", "parse_json", "try_parse_json"})


def _json_or(child: Expr, batch: _Batch, t: Type) -> Type:
    """``t``, or COMPLEX<json> for a JSON column or a JSON-valued call (the text does not say)."""
    if isinstance(child, Identifier):
        static = batch.column_types.get(child.name)
        if static is not None and static.complex_name == "json":
            return static
    elif isinstance(child, Call) and child.name.lower() in JSON_RESULTS:
        return ColumnType.parse("COMPLEX<json>")
    return t


def _eval(node: Expr, batch: _Batch) -> Value:
    if isinstance(node, Literal):
        return _literal_value(node)
    if isinstance(node, Identifier):
        return batch.column(node.name)
    fn = _function_for(node)
    children = node.children()
    args = [_eval(child, batch) for child in children]
    types = [_json_or(child, batch, type_of(a)) for child, a in zip(children, args)]
    out = fn.check(node, types)
    if fn.strict and any(is_scalar(a) and not a.is_valid for a in args):
        return pa.scalar(None, pa.bool_()) if fn.boolean else null_of(out)
    try:
        return _apply(fn, args, types, out, node)
    except pa.ArrowCapacityError:
        # e.g. REPEAT/LPAD with a huge count: the input's size decides, so it is the user's to fix.
        raise ValidationError(f"'{node.to_string()}' makes more text than an Arrow string column holds "
                              f"(2 GiB per batch of rows); use a smaller count or length") from None


def _apply(fn: Function, args: list[Value], types: list[Type], out: Type, node: Expr) -> Value:
    arrays = [i for i, a in enumerate(args) if not is_scalar(a)]
    if not arrays:
        # A constant sub-expression: run the kernels on one row and keep the result a scalar.
        result = fn.apply([pa.repeat(a, 1) for a in args], types, out, node)
        return result if is_scalar(result) else result[0]
    if len(arrays) == 1:
        i = arrays[0]
        a = args[i]
        if pa.types.is_dictionary(a.type) and len(a.dictionary) < len(a):
            return _apply_to_dictionary(fn, args, i, types, out, node)
    return fn.apply([plain(a) for a in args], types, out, node)


def _apply_to_dictionary(fn: Function, args: list[Value], i: int, types: list[Type], out: Type, node: Expr) -> Value:
    """Evaluate once per distinct value, then map back through the indices: the same answer as
    decoding, at the cost of the dictionary instead of the rows. A null row becomes one extra
    dictionary entry, so functions that turn null into a value (nvl, isnull) still see it."""
    arr = args[i]
    indices, dictionary = arr.indices.cast(pa.int32()), arr.dictionary
    if indices.null_count:
        dictionary = pa.concat_arrays([dictionary, pa.nulls(1, dictionary.type)])
        indices = pc.fill_null(indices, len(dictionary) - 1)
    per_value = fn.apply(args[:i] + [dictionary] + args[i + 1:], types, out, node)
    if is_scalar(per_value):
        return per_value
    if pa.types.is_string(per_value.type):
        return pa.DictionaryArray.from_arrays(indices, per_value)
    return per_value.take(indices)


def _expand(v: Value, num_rows: int) -> pa.Array:
    return pa.repeat(v, num_rows) if is_scalar(v) else v


def evaluate(expr: Expr, columns: Mapping[str, pa.Array], num_rows: int) -> pa.Array:
    """The expression over a batch: an Arrow array of ``num_rows`` values. Comparisons and logic
    give pa.bool_; string results over a dictionary column stay dictionary-encoded. ``columns``
    may load lazily: only the columns the expression references are read."""
    with depth_guard("the expression"):
        return _expand(_eval(expr, _Batch(columns, num_rows)), num_rows)


def evaluate_column(expr: Expr, columns: Mapping[str, pa.Array], num_rows: int,
                    column_types: Mapping[str, ColumnType]) -> pa.Array:
    """Like ``evaluate`` but typed as ``infer_type`` says: booleans become int64 1/0, dictionaries
    are decoded, the result's Arrow type is ``infer_type(...).to_arrow()``."""
    with depth_guard("the expression"):
        out = infer_type(expr, column_types)
        result = plain(_eval(expr, _Batch(columns, num_rows, column_types)))
    if out.kind in (TypeKind.ARRAY, TypeKind.COMPLEX):
        return _expand(result, num_rows).cast(out.to_arrow())
    return _expand(cast_value(result, out), num_rows)


def evaluate_predicate(expr: Expr, columns: Mapping[str, pa.Array], num_rows: int) -> pa.BooleanArray:
    """Druid truthiness per row as pa.bool_; null stays null (callers treat it as false)."""
    with depth_guard("the expression"):
        return _expand(truthy(_eval(expr, _Batch(columns, num_rows))), num_rows)
