"""The corpus: golden-file style ``.sql`` files under ``corpus/``, one case per ``-- name:`` block.

    -- name: count_by_channel
    -- ordered: false                 optional; default: ordered iff the query has a top-level ORDER BY
    -- parameters: ["#en.wikipedia"]  optional; bound to ``?`` through ADBC (and DuckDB)
    -- tolerance: 0.03                optional relative tolerance (default 1e-9, floats only)
    -- types: loose                   optional; skip the column type check
    -- xfail: bug: ...                optional; a known strata bug (strict xfail)
    SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel;
    -- duckdb:                        optional: the DuckDB spelling when the dialects differ
    SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel;

Instead of ``-- duckdb:`` a case may give ``-- expected:`` followed by JSON rows (on that line and
on comment lines right after it), for tables DuckDB does not have (system tables). Timestamps in
expected rows are ISO-8601 strings.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
_DIRECTIVE = re.compile(r"^--\s*([a-z_]+):\s*(.*)$")
_KNOWN = {"name", "ordered", "parameters", "tolerance", "types", "xfail", "expected", "duckdb"}


@dataclass
class Case:
    name: str
    file: str
    sql: str
    duckdb: str | None = None
    expected: list | None = None
    ordered: bool | None = None
    parameters: list = field(default_factory=list)
    tolerance: float = 1e-9
    check_types: bool = True
    xfail: str | None = None

    @property
    def oracle_sql(self) -> str:
        return self.duckdb if self.duckdb is not None else self.sql


def _strip(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


def _parse_block(lines: list[str], file: str) -> Case:
    meta: dict[str, str] = {}
    sql_lines: list[str] = []
    duck_lines: list[str] | None = None
    expected_text: list[str] | None = None
    for line in lines:
        m = _DIRECTIVE.match(line.strip())
        if m and m.group(1) in _KNOWN:
            key, value = m.group(1), m.group(2)
            if key == "duckdb":
                duck_lines = []
                expected_text = None
            elif key == "expected":
                expected_text = [value]
            else:
                meta[key] = value
            continue
        if expected_text is not None and line.startswith("--"):
            expected_text.append(line[2:])
            continue
        if line.strip().startswith("--") and not sql_lines and duck_lines is None:
            continue  # a plain comment before the SQL
        (duck_lines if duck_lines is not None else sql_lines).append(line)
    name = meta.get("name", "").strip()
    sql = _strip("\n".join(sql_lines))
    if not name or not sql:
        raise ValueError(f"{file}: a case needs '-- name:' and SQL (got name={name!r})")
    case = Case(name=name, file=file, sql=sql)
    if duck_lines is not None:
        case.duckdb = _strip("\n".join(duck_lines))
    if expected_text is not None:
        case.expected = json.loads(" ".join(expected_text))
    if "ordered" in meta:
        case.ordered = meta["ordered"].strip().lower() in ("true", "yes", "1")
    if "parameters" in meta:
        case.parameters = json.loads(meta["parameters"])
    if "tolerance" in meta:
        case.tolerance = float(meta["tolerance"])
    if meta.get("types", "").strip() == "loose":
        case.check_types = False
    if "xfail" in meta:
        case.xfail = meta["xfail"].strip()
    return case


def parse_file(path: str) -> list[Case]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"^--\s*name:", line.strip()):
            blocks.append([])
        if blocks:
            blocks[-1].append(line)
    return [_parse_block(b, os.path.basename(path)) for b in blocks]


def load_corpus(directory: str = CORPUS_DIR) -> list[Case]:
    cases: list[Case] = []
    for fname in sorted(os.listdir(directory)):
        if fname.endswith(".sql"):
            cases += parse_file(os.path.join(directory, fname))
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    return cases


def is_ordered(case: Case) -> bool:
    """Explicit ``-- ordered:``, else whether the strata query has a top-level ORDER BY."""
    if case.ordered is not None:
        return case.ordered
    from common.sql.statement import parse_statement

    query = parse_statement(case.sql).query
    return query.args.get("order") is not None
