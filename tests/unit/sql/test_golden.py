"""Golden plans: every case in tests/sql/*.sql is planned and its native queries compared with the
JSON stored under it. ``STRATA_UPDATE_GOLDEN=1`` rewrites the files with what the planner now
produces (review the diff before committing).

A case is plain SQL between comment lines::

    -- name: topn_pages
    -- context: {"sqlTimeZone": "America/Los_Angeles"}      (optional)
    -- parameters: ["#en.wikipedia"]                        (optional)
    SELECT ...;
    -- native:
    -- [ ...JSON, one line per comment... ]
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from common.demo import SCHEMA as WIKI_SCHEMA
from common.sql import plan_sql
from common.types.column_type import ColumnType
from tests.unit.sql.fake_catalog import FakeCatalog

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "sql")
UPDATE = os.environ.get("STRATA_UPDATE_GOLDEN") == "1"
BASE_CONTEXT = {"sqlCurrentTimestamp": "2015-09-14T00:00:00Z"}


def golden_catalog() -> FakeCatalog:
    wiki = {f.name: ColumnType.from_arrow(f.type, f.name) for f in WIKI_SCHEMA}
    countries = {"__time": ColumnType.parse("TIMESTAMP"), "isoCode": ColumnType.parse("STRING"),
                 "name": ColumnType.parse("STRING"), "population": ColumnType.parse("LONG"),
                 "area": ColumnType.parse("DOUBLE")}
    segments = pa.table({"segment_id": pa.array([], pa.string()), "datasource": pa.array([], pa.string()),
                         "num_rows": pa.array([], pa.int64()), "size": pa.array([], pa.int64())})
    servers = pa.table({"server": pa.array([], pa.string()), "server_type": pa.array([], pa.string())})
    arrays = {"__time": ColumnType.parse("TIMESTAMP"), "s": ColumnType.parse("STRING"),
              "arrayLong": ColumnType.parse("ARRAY<LONG>"), "arrayDouble": ColumnType.parse("ARRAY<DOUBLE>"),
              "arrayString": ColumnType.parse("ARRAY<STRING>")}
    return FakeCatalog({"wiki": wiki, "countries": countries, "arrays": arrays},
                       {"segments": segments, "servers": servers})


@dataclass
class Case:
    file: str
    name: str
    sql: str
    context: dict = field(default_factory=dict)
    parameters: list = field(default_factory=list)
    native: str = ""  # the JSON text, comment markers removed


def parse_golden(path: str) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    mode = "sql"
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("-- name:"):
            current = Case(path, line[len("-- name:"):].strip(), "")
            cases.append(current)
            mode = "sql"
        elif current is None:
            continue
        elif line.startswith("-- context:"):
            current.context = json.loads(line[len("-- context:"):])
        elif line.startswith("-- parameters:"):
            current.parameters = json.loads(line[len("-- parameters:"):])
        elif line.startswith("-- native:"):
            mode = "native"
        elif mode == "native" and line.startswith("--"):
            current.native += line[3:] + "\n"
        elif mode == "sql" and not line.startswith("--"):
            current.sql += line + "\n"
    for c in cases:
        c.sql = c.sql.strip().rstrip(";").strip()
    return cases


def render(cases: list[Case], produced: dict[str, str]) -> str:
    out = []
    for c in cases:
        out.append(f"-- name: {c.name}")
        if c.context:
            out.append(f"-- context: {json.dumps(c.context)}")
        if c.parameters:
            out.append(f"-- parameters: {json.dumps(c.parameters)}")
        out.append(c.sql + ";")
        out.append("-- native:")
        out.extend("-- " + line for line in produced[c.name].splitlines())
        out.append("")
    return "\n".join(out)


def native_json(case: Case, catalog) -> str:
    plan = plan_sql(case.sql, catalog, case.parameters, {**BASE_CONTEXT, **case.context})
    return json.dumps(plan.native_queries(), indent=2)


FILES = sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.sql")))
ALL_CASES = [c for f in FILES for c in parse_golden(f)]


def test_golden_files_are_well_formed():
    assert len(ALL_CASES) >= 60
    names = [(os.path.basename(c.file), c.name) for c in ALL_CASES]
    assert len(set(names)) == len(names), "duplicate case names"
    for c in ALL_CASES:
        assert c.sql, f"{c.name}: no SQL"


if UPDATE:
    def test_update_golden_files():
        catalog = golden_catalog()
        for path in FILES:
            cases = parse_golden(path)
            produced = {c.name: native_json(c, catalog) for c in cases}
            with open(path, "w", encoding="utf-8") as f:
                f.write(render(cases, produced))


@pytest.mark.parametrize("case", ALL_CASES, ids=[f"{os.path.basename(c.file)[:-4]}:{c.name}" for c in ALL_CASES])
def test_golden(case):
    if UPDATE:
        pytest.skip("rewriting golden files")
    got = json.loads(native_json(case, golden_catalog()))
    assert case.native.strip(), f"{case.name}: no expected plan; run with STRATA_UPDATE_GOLDEN=1"
    assert got == json.loads(case.native), f"{case.name} in {case.file}:\n{json.dumps(got, indent=2)}"
