"""IngestionStatement: a Druid SQL INSERT or REPLACE, parsed into what the ingestion job needs.

    [SET key = value; ...]
    INSERT INTO ds SELECT ... [PARTITIONED BY granularity] [CLUSTERED BY col, ...]
    REPLACE INTO ds OVERWRITE ALL | OVERWRITE WHERE <__time ranges> SELECT ... PARTITIONED BY ...

``common.sql.statement_kind.classify`` splits off the SET prefixes (read by the shared SET
parser) and says whether this is an INSERT or REPLACE at all. sqlglot parses the SELECT, the
OVERWRITE condition and the granularity expressions; its tokenizer only finds where Druid's extra
clauses (the INSERT/REPLACE head, PARTITIONED BY, CLUSTERED BY, EXTEND lists) begin and end,
since no sqlglot dialect knows them. Each piece is handed to sqlglot as the whole statement with
everything else blanked out (newlines kept), so every line and column in an error is a position
in the text the user wrote.

External sources in FROM (``TABLE(EXTERN(...))``, ``TABLE(localfiles(...)) EXTEND (...)``,
``TABLE(localfiles(...)) PARTIAL (...)`` for a discovered schema) are cut out of the SELECT the same way and replaced by placeholder table names; ``sources`` maps each
placeholder to its ExternalSource, so the Spark side only swaps names for temp views.

The statement is parsed once, on the broker; ``to_json`` / ``from_json`` carry it to the task as
structured JSON (the SELECT as sqlglot's serialized tree), so the task parses nothing again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp, serde
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from common.errors import UnsupportedError, ValidationError
from common.sql.set_statement import location
from common.sql.catalog import DRUID as _DRUID
from common.sql.catalog import EXT as _EXT
from common.sql.statement_kind import blank_outside, classify, tokenize
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.granularity import SIMPLE_GRANULARITIES, Granularity, Period
from common.types.interval import ETERNITY, MAX_MS, MIN_MS, Interval, condense, parse_instant
from common.ingest.external_source import ExternalSource, extend_column_type, parse_table_function

SOURCE_PLACEHOLDER = "__extern"
STATEMENT_FORMAT = 1  # of to_json(); bump when its fields change meaning
_VALID_GRANULARITIES = ("SECOND, MINUTE, FIVE_MINUTE, TEN_MINUTE, FIFTEEN_MINUTE, THIRTY_MINUTE, HOUR, SIX_HOUR, "
                        "EIGHT_HOUR, DAY, WEEK, MONTH, QUARTER, YEAR, ALL or ALL TIME, an ISO-8601 period string "
                        "such as 'PT5M', TIME_FLOOR(__time, 'PT1H') or FLOOR(__time TO DAY)")
_FLOOR_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


@dataclass(frozen=True)
class IngestionStatement:
    mode: str  # "INSERT" or "REPLACE"
    datasource: str
    overwrite: None | str | tuple[Interval, ...]  # None (INSERT), "ALL", or the OVERWRITE WHERE ranges
    partitioned_by: Granularity | None  # None: not given; the catalog default applies
    clustered_by: tuple[str, ...]
    select: exp.Query  # druid dialect; sources appear as placeholder tables (see ``sources``)
    sources: Mapping[str, ExternalSource]
    context: Mapping[str, object] = field(default_factory=dict)
    sql: str = field(default="", compare=False)  # the text parsed, on the broker (not sent to the task)

    @property
    def replace_intervals(self) -> list[Interval] | None:
        """What a REPLACE overwrites; None for INSERT."""
        if self.overwrite is None:
            return None
        return [ETERNITY] if self.overwrite == "ALL" else list(self.overwrite)

    def json_columns(self) -> tuple[str, ...]:
        """Output columns that carry COMPLEX<json> documents (stored as nested columns): a JSON
        input column selected as it is (or through ``*``), or an expression of COMPLEX<json> type
        (PARSE_JSON, TRY_PARSE_JSON, JSON_OBJECT, JSON_QUERY), under its output name."""
        if not isinstance(self.select, exp.Select):
            return ()
        json_inputs = {n for src in self.sources.values() for n, t in src.signature if t.complex_name == "json"}
        out = []
        for e in self.select.expressions:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                out.extend(n for src in self.sources.values() for n, t in src.signature if n in json_inputs)
                continue
            inner = e.unalias() if isinstance(e, exp.Alias) else e
            if produces_json(e, json_inputs):  # a JSON input column, or PARSE_JSON, JSON_OBJECT, JSON_QUERY ..
                out.append(e.alias_or_name)
            elif e.alias_or_name == "__dynamic" and isinstance(inner, exp.Anonymous):  # schema_discovery's struct
                out.extend(a.name for a in inner.expressions if isinstance(a, exp.Column) and a.name in json_inputs)
        return tuple(dict.fromkeys(out))

    @property
    def is_rollup(self) -> bool:
        return self.select.args.get("group") is not None if isinstance(self.select, exp.Select) else False

    def to_json(self) -> dict:
        """The statement as the broker hands it to the ingestion task: plain JSON, the SELECT as
        sqlglot's serialized tree (positions kept for messages), nothing left to parse."""
        if self.overwrite is None or self.overwrite == "ALL":
            overwrite = self.overwrite
        else:
            overwrite = [[iv.start, iv.end] for iv in self.overwrite]
        return {
            "format": STATEMENT_FORMAT, "mode": self.mode, "datasource": self.datasource, "overwrite": overwrite,
            "partitionedBy": self.partitioned_by.to_json() if self.partitioned_by is not None else None,
            "clusteredBy": list(self.clustered_by), "select": serde.dump(self.select),
            "sources": {name: {"inputSource": src.input_source, "inputFormat": src.input_format,
                               "signature": [{"name": n, "type": t.native_name} for n, t in src.signature],
                               "where": src.where, "discover": src.discover,
                               "partial": [{"name": n, "type": t.native_name} for n, t in src.partial],
                               "exclude": list(src.exclude)}
                        for name, src in self.sources.items()},
            "context": dict(self.context),
        }

    @staticmethod
    def from_json(data) -> IngestionStatement:
        """The inverse of ``to_json``; a payload that is not one is a ValidationError naming the field."""
        if not isinstance(data, dict):
            raise ValidationError(f"the task's statement must be a JSON object, got {type(data).__name__}")
        if data.get("format") != STATEMENT_FORMAT:
            raise ValidationError(f"the task's statement has format {data.get('format')!r}; this task reads format "
                                  f"{STATEMENT_FORMAT}: submit the INSERT/REPLACE again through a broker of this version")
        try:
            mode, datasource = data["mode"], data["datasource"]
            if mode not in ("INSERT", "REPLACE") or not isinstance(datasource, str) or not datasource:
                raise ValueError(f"mode {mode!r} / datasource {datasource!r}")
            overwrite = data["overwrite"]
            if overwrite is not None and overwrite != "ALL":
                overwrite = tuple(Interval(int(lo), int(hi)) for lo, hi in overwrite)
            granularity = data["partitionedBy"]
            select = serde.load(data["select"])
            if not isinstance(select, exp.Query):
                raise TypeError(f"select is a {type(select).__name__}, not a query")
            sources = {name: ExternalSource(dict(src["inputSource"]), dict(src["inputFormat"]),
                                            tuple((c["name"], ColumnType.parse(c["type"])) for c in src["signature"]),
                                            src.get("where", ""), bool(src.get("discover", False)),
                                            tuple((c["name"], ColumnType.parse(c["type"]))
                                                  for c in src.get("partial") or ()),
                                            tuple(str(c) for c in src.get("exclude") or ()))
                       for name, src in data["sources"].items()}
            return IngestionStatement(mode, datasource, overwrite,
                                      Granularity.parse(granularity) if granularity is not None else None,
                                      tuple(str(c) for c in data["clusteredBy"]), select, sources,
                                      dict(data.get("context") or {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValidationError(f"the task's statement is malformed ({what}); submit the INSERT/REPLACE again") \
                from None


def _blank(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


def _parse_error(clause: str, exc: ParseError) -> ValidationError:
    err = exc.errors[0] if exc.errors else {}
    desc = err.get("description") or str(exc)
    near = (err.get("highlight") or "").strip()
    where = f"line {err['line']}, column {err['col']}" if "line" in err else "an unknown position"
    return ValidationError(f"{clause}: {desc} at {where}" + (f" (near '{near}')" if near else ""))


class _Tokens:
    """A statement's tokens with position helpers."""

    def __init__(self, sql: str, tokens: list[Token]) -> None:
        self.sql = sql
        self.tokens = tokens

    def at(self, tok: Token) -> str:
        return location(self.sql, tok.start)

    def word(self, i: int) -> str:
        return self.tokens[i].text.upper() if i < len(self.tokens) and self.tokens[i].token_type not in (
            TokenType.STRING, TokenType.IDENTIFIER) else ""

    def close_paren(self, i: int) -> int:
        """Index of the parenthesis closing the one at ``i``."""
        depth = 0
        for j in range(i, len(self.tokens)):
            t = self.tokens[j].token_type
            if t == TokenType.L_PAREN:
                depth += 1
            elif t == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    return j
        raise ValidationError(f"unbalanced parenthesis opened at {self.at(self.tokens[i])}; add the missing ')'")


def parse_ingestion(sql: str, context: Mapping[str, object] | None = None) -> IngestionStatement:
    """Parse one ingestion statement (with optional SET prefixes, which override ``context``)."""
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError("the ingestion statement is empty; write INSERT INTO ... or REPLACE INTO ...")
    classified = classify(sql)
    head = classified.tokens[0]
    if classified.explain:
        raise UnsupportedError(f"EXPLAIN PLAN FOR {classified.head.upper()} is not supported; run the statement "
                               "itself, or EXPLAIN its SELECT")
    if not classified.kind.is_ingestion:
        raise ValidationError(f"expected INSERT or REPLACE at {location(sql, head.start)}, found '{head.text}'; an "
                              "ingestion statement reads INSERT INTO ds SELECT ... PARTITIONED BY DAY")
    return _parse_main(_Tokens(sql, list(classified.tokens)), list(classified.tokens),
                       {**dict(context or {}), **classified.settings})


def _parse_main(ts: _Tokens, toks: list[Token], ctx: dict) -> IngestionStatement:
    sql = ts.sql
    sub = _Tokens(sql, toks)
    head = toks[0]
    mode = head.text.upper()
    if head.token_type not in (TokenType.INSERT, TokenType.REPLACE):
        raise ValidationError(f"expected INSERT or REPLACE at {ts.at(head)}, found '{head.text}'; an ingestion "
                              "statement reads INSERT INTO ds SELECT ... PARTITIONED BY DAY")
    if len(toks) < 3 or toks[1].token_type != TokenType.INTO:
        raise ValidationError(f"{mode} at {ts.at(head)} must be followed by INTO <datasource>")
    i = 2
    name_parts = []
    while i < len(toks) and toks[i].token_type not in (TokenType.OVERWRITE, TokenType.SELECT, TokenType.WITH,
                                                        TokenType.L_PAREN):
        if toks[i].token_type != TokenType.DOT:
            name_parts.append(toks[i])
        i += 1
    datasource = _datasource(ts, head, name_parts)

    overwrite: None | str | tuple[Interval, ...] = None
    if i < len(toks) and toks[i].token_type == TokenType.OVERWRITE:
        if mode != "REPLACE":
            raise ValidationError(f"OVERWRITE at {ts.at(toks[i])} is only for REPLACE; INSERT appends")
        i += 1
        if sub.word(i) == "ALL":
            overwrite = "ALL"
            i += 1
        elif i < len(toks) and toks[i].token_type == TokenType.WHERE:
            cond_start = i + 1
            i = _find_query_start(sub, cond_start)
            if i == cond_start:
                raise ValidationError(f"OVERWRITE WHERE at {ts.at(toks[cond_start - 1])} needs a condition on __time")
            text = blank_outside(sql, toks[cond_start].start, toks[i - 1].end + 1)
            overwrite = tuple(_overwrite_intervals(text, ts.at(toks[cond_start])))
        else:
            where = ts.at(toks[i]) if i < len(toks) else "the end"
            raise ValidationError(f"OVERWRITE at {where} must be followed by ALL or WHERE __time >= TIMESTAMP "
                                  "'...' AND __time < TIMESTAMP '...'")
    elif mode == "REPLACE":
        where = ts.at(toks[i]) if i < len(toks) else "the end"
        raise ValidationError(f"REPLACE needs OVERWRITE ALL or OVERWRITE WHERE <__time range> before the SELECT "
                              f"(at {where})")
    if i >= len(toks) or toks[i].token_type not in (TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN):
        where = ts.at(toks[i]) if i < len(toks) else "the end of the statement"
        raise ValidationError(f"expected SELECT or WITH at {where} after {mode} INTO {datasource}")
    query_start = i
    query_end, partition_at, cluster_at = _find_trailers(sub, query_start)

    partitioned_by = None
    clustered: list[Token] = []
    if partition_at is not None:
        end = cluster_at if cluster_at is not None and cluster_at > partition_at else len(toks)
        partitioned_by = _granularity(ts, toks[partition_at], toks[partition_at + 1:end])
    if cluster_at is not None:
        if partition_at is not None and cluster_at < partition_at:
            raise ValidationError(f"CLUSTERED BY at {ts.at(toks[cluster_at])} must come after PARTITIONED BY")
        clustered = toks[cluster_at + 2:]

    select, sources = _parse_select(sub, query_start, query_end)
    clustered_by = _clustered_by(ts, toks[cluster_at] if cluster_at is not None else None, clustered, select)
    if isinstance(overwrite, tuple) and partitioned_by is not None:
        _check_aligned(overwrite, partitioned_by)
    return IngestionStatement(mode, datasource, overwrite, partitioned_by, tuple(clustered_by), select, sources,
                              ctx, sql)


def _datasource(ts: _Tokens, head: Token, parts: list[Token]) -> str:
    if not parts:
        raise ValidationError(f"{head.text.upper()} INTO at {ts.at(head)} needs a datasource name")
    names = [p.text for p in parts]
    if len(names) == 2 and names[0].lower() == "druid":
        names = names[1:]
    if len(names) != 1:
        raise ValidationError(f"datasource name at {ts.at(parts[0])} must be one name (optionally druid.name), "
                              f"got {'.'.join(names)}")
    name = names[0]
    if not name or name.startswith(".") or any(c in name for c in "/\\\t\n\r") or len(name) > 255:
        raise ValidationError(f"datasource name '{name}' at {ts.at(parts[0])} is invalid: it must not start with "
                              "'.', contain '/', '\\' or whitespace control characters, or exceed 255 characters")
    return name


def _find_query_start(sub: _Tokens, i: int) -> int:
    depth = 0
    toks = sub.tokens
    while i < len(toks):
        t = toks[i].token_type
        if t == TokenType.L_PAREN:
            depth += 1
        elif t == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and t in (TokenType.SELECT, TokenType.WITH):
            return i
        i += 1
    return i


def _find_trailers(sub: _Tokens, start: int) -> tuple[int, int | None, int | None]:
    """(end of the query, index of PARTITIONED BY, index of CLUSTERED) at parenthesis depth 0."""
    toks = sub.tokens
    depth = 0
    partition_at = cluster_at = None
    for i in range(start, len(toks)):
        t = toks[i].token_type
        if t == TokenType.L_PAREN:
            depth += 1
        elif t == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and t == TokenType.PARTITION_BY and partition_at is None:
            if not toks[i].text.upper().startswith("PARTITIONED"):
                raise ValidationError(f"'{toks[i].text}' at {sub.at(toks[i])}: write PARTITIONED BY")
            partition_at = i
        elif depth == 0 and sub.word(i) == "CLUSTERED" and sub.word(i + 1) == "BY" and cluster_at is None:
            cluster_at = i
    ends = [x for x in (partition_at, cluster_at) if x is not None]
    return (min(ends) if ends else len(toks)), partition_at, cluster_at


# ---- the SELECT ---------------------------------------------------------------------------------------


def _parse_select(sub: _Tokens, start: int, end: int) -> tuple[exp.Query, dict[str, ExternalSource]]:
    toks, sql = sub.tokens, sub.sql
    if start >= end:
        raise ValidationError(f"the SELECT at {sub.at(toks[min(start, len(toks) - 1)])} is empty")
    text = blank_outside(sql, toks[start].start, toks[end - 1].end + 1)
    sources: dict[str, ExternalSource] = {}
    i = start
    while i < end:
        if toks[i].token_type == TokenType.TABLE and i + 1 < end and toks[i + 1].token_type == TokenType.L_PAREN:
            close = sub.close_paren(i + 1)
            if close >= end:
                raise ValidationError(f"TABLE( at {sub.at(toks[i])} is not closed before the end of the SELECT")
            region_end = close
            j = close + 1
            partial = None
            if sub.word(j) in ("EXTEND", "PARTIAL"):
                keyword = sub.word(j)
                j += 1
                if j >= end or toks[j].token_type != TokenType.L_PAREN:
                    raise ValidationError(f"{keyword} at {sub.at(toks[j - 1])} needs a column list: "
                                          f"{keyword} (col TYPE, ...)")
                if keyword == "PARTIAL":
                    cols_close = sub.close_paren(j)
                    partial = _extend_columns(sub, j, cols_close, "PARTIAL")
                    region_end = cols_close
                    j = cols_close + 1
            extend = None
            if partial is None and j < end and toks[j].token_type == TokenType.L_PAREN:
                cols_close = sub.close_paren(j)
                extend = _extend_columns(sub, j, cols_close)
                region_end = cols_close
                if sub.word(cols_close + 1) in ("EXTEND", "PARTIAL"):
                    raise ValidationError(f"{sub.word(cols_close + 1)} at {sub.at(toks[cols_close + 1])}: give either "
                                          "EXTEND (the full schema) or PARTIAL (some columns, the rest discovered), "
                                          "not both")
            name = f"{SOURCE_PLACEHOLDER}{len(sources)}"
            where = f"FROM TABLE(...) at {sub.at(toks[i])}"
            call_text = blank_outside(sql, toks[i + 2].start, toks[close - 1].end + 1) if close > i + 2 else ""
            if not call_text.strip():
                raise ValidationError(f"{where}: TABLE() needs a table function such as EXTERN(...)")
            sources[name] = parse_table_function(call_text, where, extend, partial)
            lo, hi = toks[i].start, toks[region_end].end + 1
            region = _blank(sql[lo:hi])
            text = text[:lo] + name + region[len(name):] + text[hi:]
            i = region_end + 1
        else:
            i += 1
    try:
        select = sqlglot.parse_one(text, read="druid")
    except ParseError as exc:
        raise _parse_error("SELECT", exc) from None
    if not isinstance(select, exp.Query):
        raise ValidationError(f"expected a SELECT at {sub.at(toks[start])}, got {type(select).__name__}")
    _check_select(sub, select, toks[start], sources)
    return select, sources


def _extend_columns(sub: _Tokens, open_i: int, close_i: int, keyword: str = "EXTEND"):
    toks = sub.tokens
    where = f"{keyword} at {sub.at(toks[open_i])}"
    items: list[list[Token]] = [[]]
    depth = 0
    for tok in toks[open_i + 1:close_i]:
        if tok.token_type in (TokenType.L_PAREN, TokenType.LT):
            depth += 1
        elif tok.token_type in (TokenType.R_PAREN, TokenType.GT):
            depth -= 1
        if tok.token_type == TokenType.COMMA and depth == 0:
            items.append([])
        else:
            items[-1].append(tok)
    out = []
    for item in items:
        if len(item) < 2:
            at = sub.at(item[0]) if item else sub.at(toks[open_i])
            raise ValidationError(f"{where}: each column needs a name and a type (e.g. added BIGINT), at {at}")
        name = item[0].text
        type_text = sub.sql[item[1].start:item[-1].end + 1]
        out.append((name, extend_column_type(type_text, name, f"{where}, column at {sub.at(item[0])}")))
    return tuple(out)


def _check_select(sub: _Tokens, select: exp.Query, first: Token, sources: dict) -> None:
    if select.args.get("order") is not None:
        raise ValidationError(f"the SELECT starting at {sub.at(first)} has an ORDER BY; ingestion sorts segments by "
                              "__time, then CLUSTERED BY columns: use CLUSTERED BY instead")
    ctes = {cte.alias_or_name for cte in select.find_all(exp.CTE)}
    for table in select.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue
        name = table.name
        if name in sources or name in ctes:
            continue
        meta = table.this.meta
        at = f" at line {meta['line']}" if "line" in meta else ""
        raise ValidationError(f"FROM {table.sql('druid')}{at}: ingestion reads external data only; use "
                              "TABLE(EXTERN(...)), or TABLE(localfiles(...)), TABLE(http(...)), TABLE(inline(...)) "
                              "with EXTEND (col TYPE, ...)")
    if not sources:
        raise ValidationError(f"the SELECT at {sub.at(first)} reads no external source; add FROM TABLE(EXTERN(...))")


# ---- PARTITIONED BY / CLUSTERED BY ---------------------------------------------------------------------


def _granularity(ts: _Tokens, head: Token, toks: list[Token]) -> Granularity:
    where = f"PARTITIONED BY at {ts.at(head)}"
    if not toks:
        raise ValidationError(f"{where} needs a granularity: {_VALID_GRANULARITIES}")
    words = [t.text.upper() for t in toks]
    try:
        if len(toks) == 1 and toks[0].token_type == TokenType.STRING:
            gran = Granularity.parse(toks[0].text)
        elif words in (["ALL"], ["ALL", "TIME"]):
            return Granularity.parse("all")
        elif len(toks) == 1 and words[0].lower() in SIMPLE_GRANULARITIES:
            gran = Granularity.parse(words[0])
        elif len(toks) > 1:
            gran = _granularity_expression(ts, toks, where)
        else:
            raise ValidationError(f"unknown granularity '{toks[0].text}'")
    except ValidationError as exc:
        if str(exc).startswith(where):
            raise
        raise ValidationError(f"{where}: {exc}; valid: {_VALID_GRANULARITIES}") from None
    if gran.is_none:
        raise ValidationError(f"{where}: granularity NONE would make a segment per millisecond; use e.g. HOUR or DAY")
    return gran


def _granularity_expression(ts: _Tokens, toks: list[Token], where: str) -> Granularity:
    text = blank_outside(ts.sql, toks[0].start, toks[-1].end + 1)
    try:
        node = sqlglot.parse_one(text, read="druid")
    except ParseError as exc:
        raise _parse_error(where, exc) from None

    def is_time(arg) -> bool:
        return isinstance(arg, exp.Column) and arg.name == TIME_COLUMN

    if isinstance(node, exp.Floor) and node.args.get("to") is not None and is_time(node.this):
        unit = node.args["to"].name.upper()
        if unit not in _FLOOR_UNITS:
            raise ValidationError(f"{where}: FLOOR(__time TO {unit}) is not a segment granularity; units: "
                                  f"{', '.join(_FLOOR_UNITS)}")
        return Granularity.parse(unit)
    if isinstance(node, exp.Anonymous) and node.name.upper() == "TIME_FLOOR":
        args = node.expressions
        if len(args) < 2 or not is_time(args[0]) or not (isinstance(args[1], exp.Literal) and args[1].is_string):
            raise ValidationError(f"{where}: write TIME_FLOOR(__time, 'PT1H') with a literal ISO-8601 period")
        tz = None
        if len(args) >= 4 and isinstance(args[3], exp.Literal):
            tz = args[3].this
        if len(args) >= 3 and not isinstance(args[2], exp.Null):
            raise ValidationError(f"{where}: TIME_FLOOR with an origin is not a supported segment granularity")
        return Granularity.of_period(Period.parse(args[1].this), tz)
    raise ValidationError(f"{where}: '{node.sql('druid')}' is not a granularity")


def _clustered_by(ts: _Tokens, head: Token | None, toks: list[Token], select: exp.Query) -> list[str]:
    if head is None:
        return []
    where = f"CLUSTERED BY at {ts.at(head)}"
    if not toks:
        raise ValidationError(f"{where} needs one or more column names")
    items: list[list[Token]] = [[]]
    for tok in toks:
        if tok.token_type == TokenType.COMMA:
            items.append([])
        else:
            items[-1].append(tok)
    out: list[str] = []
    for item in items:
        if not item:
            raise ValidationError(f"{where}: empty item in the column list")
        if len(item) == 2 and item[1].text.upper() in ("ASC", "DESC"):
            if item[1].text.upper() == "DESC":
                raise ValidationError(f"{where}: DESC at {ts.at(item[1])} is not supported; segments sort ascending")
            item = item[:1]
        if len(item) != 1:
            raise ValidationError(f"{where}: '{ts.sql[item[0].start:item[-1].end + 1]}' at {ts.at(item[0])} is not a "
                                  "column name; give the expression an alias in the SELECT and cluster by the alias")
        tok = item[0]
        name = tok.text
        if tok.token_type == TokenType.NUMBER:
            pos = int(tok.text)
            projections = select.selects if isinstance(select, exp.Query) else []
            if not 1 <= pos <= len(projections) or isinstance(projections[pos - 1], exp.Star):
                raise ValidationError(f"{where}: ordinal {pos} at {ts.at(tok)} does not name a SELECT column")
            name = projections[pos - 1].alias_or_name
        if name in out:
            raise ValidationError(f"{where}: column '{name}' is listed twice")
        out.append(name)
    return out


# ---- OVERWRITE WHERE ----------------------------------------------------------------------------------


def _overwrite_intervals(text: str, at: str) -> list[Interval]:
    where = f"OVERWRITE WHERE at {at}"
    try:
        cond = sqlglot.parse_one(text, read="druid")
    except ParseError as exc:
        raise _parse_error(where, exc) from None
    intervals = condense(_ranges(cond, where))
    if not intervals:
        raise ValidationError(f"{where}: the condition selects no time at all; check the bounds")
    return intervals


def _instant(node: exp.Expression, where: str) -> int:
    if isinstance(node, exp.Cast) and node.to.is_type("timestamp", "date", "datetime"):
        node = node.this
    if isinstance(node, exp.Anonymous) and node.name.upper() == "TIME_PARSE" and len(node.expressions) == 1:
        node = node.expressions[0]
    if isinstance(node, exp.Literal) and node.is_string:
        try:
            return parse_instant(node.this)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None
    raise ValidationError(f"{where}: '{node.sql('druid')}' is not a time literal; use TIMESTAMP '2020-01-01 00:00:00'")


def _ranges(node: exp.Expression, where: str) -> list[Interval]:
    if isinstance(node, exp.Paren):
        return _ranges(node.this, where)
    if isinstance(node, exp.And):
        left, right = _ranges(node.left, where), _ranges(node.right, where)
        return [iv for a in left for b in right if (iv := a.intersect(b)) is not None]
    if isinstance(node, exp.Or):
        return condense(_ranges(node.left, where) + _ranges(node.right, where))
    if isinstance(node, exp.Between) and _is_time(node.this):
        lo, hi = _instant(node.args["low"], where), _instant(node.args["high"], where)
        return [Interval(lo, hi + 1)] if lo <= hi else []
    if isinstance(node, (exp.GTE, exp.GT, exp.LT, exp.LTE, exp.EQ)):
        left, right, op = node.left, node.right, type(node)
        if _is_time(right) and not _is_time(left):
            left, right = right, left
            op = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}[op]
        if _is_time(left):
            t = _instant(right, where)
            lo, hi = {exp.GTE: (t, MAX_MS), exp.GT: (t + 1, MAX_MS), exp.LT: (MIN_MS, t),
                      exp.LTE: (MIN_MS, t + 1), exp.EQ: (t, t + 1)}[op]
            return [Interval(lo, hi)] if lo < hi else []
    raise ValidationError(f"{where}: only comparisons of __time with TIMESTAMP literals, joined by AND/OR, are "
                          f"allowed; got '{node.sql('druid')}'")


def _is_time(node) -> bool:
    return isinstance(node, exp.Column) and node.name == TIME_COLUMN


def _check_aligned(intervals: tuple[Interval, ...], gran: Granularity) -> None:
    if gran.is_all:
        if any(not iv.is_eternity for iv in intervals):
            raise ValidationError("OVERWRITE WHERE with PARTITIONED BY ALL TIME must cover all time; use "
                                  "OVERWRITE ALL, or a finer PARTITIONED BY")
        return
    import numpy as np

    for iv in intervals:
        for bound in (iv.start, iv.end):
            if bound in (MIN_MS, MAX_MS):
                continue
            if int(gran.bucket_start(np.array([bound], np.int64))[0]) != bound:
                raise ValidationError(
                    f"OVERWRITE WHERE interval {iv} is not aligned with PARTITIONED BY {gran.to_json()}: every bound "
                    "must start a time chunk; widen the interval or choose a finer granularity")


def produces_json(node: exp.Expression, json_columns) -> bool:
    """True when ``node`` (Druid SQL) yields COMPLEX<json>: a JSON input column as it is, or
    PARSE_JSON, TRY_PARSE_JSON, JSON_OBJECT or JSON_QUERY."""
    inner = node.unalias() if isinstance(node, exp.Alias) else node
    if isinstance(inner, exp.Column):
        return inner.name in json_columns
    if isinstance(inner, (exp.ParseJSON, exp.JSONObject)):
        return True
    if isinstance(inner, exp.Anonymous):
        return inner.name.upper() in ("TRY_PARSE_JSON", "JSON_QUERY")
    return False


def statement_sources(sql: str) -> tuple[str | None, list[str], bool]:
    """(the datasource after INSERT/REPLACE INTO, or None when not found; input tables
    ``ext.name`` the SQL text names; whether it calls an inline table function such as
    TABLE(EXTERN(...)) or TABLE(localfiles(...))), from its tokens, before any parsing: ingestion
    rewrites ``ext.name`` into EXTERN first, so this looks at the text the user wrote."""
    try:
        tokens = tokenize(sql)
    except ValidationError:  # the parser reports it
        return None, [], False
    target = None
    names: list[str] = []
    inline = False
    for i, t in enumerate(tokens):
        if (target is None and t.text.upper() in ("INSERT", "REPLACE") and i + 2 < len(tokens)
                and tokens[i + 1].text.upper() == "INTO"):
            parts = [tokens[i + 2].text]
            j = i + 3
            while j + 1 < len(tokens) and tokens[j].token_type == TokenType.DOT:
                parts.append(tokens[j + 1].text)
                j += 2
            if len(parts) == 2 and parts[0].lower() == _DRUID:
                parts = parts[1:]
            target = parts[0] if len(parts) == 1 else ""
        if t.text.lower() == _EXT and i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
            if tokens[i + 2].text not in names:
                names.append(tokens[i + 2].text)
        if (t.text.upper() == "TABLE" and i + 3 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
                and tokens[i + 3].token_type == TokenType.L_PAREN):
            inline = True
    return target or None, names, inline


__all__ = ["SOURCE_PLACEHOLDER", "STATEMENT_FORMAT", "IngestionStatement", "parse_ingestion", "produces_json",
           "statement_sources"]

