"""Golden cases for the projection matcher: every case in tests/projection_match/*.sql names a
projection (as ``ALTER TABLE .. ADD PROJECTION`` SQL, or Druid's JSON), a query, and what the
matcher must answer for one segment: ``match``, or the ``RefusalReason`` it refuses with.
``STRATA_UPDATE_GOLDEN=1`` rewrites the ``expect`` lines with what the matcher now answers
(review the diff before committing).

A case::

    -- name: time_extract_reads_raw_time
    -- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n FROM wiki GROUP BY 1, 2
    -- projection-json: {...}                          (instead of the SQL form)
    -- segment: 2015-09-12/2015-09-13                  (optional; this day by default)
    -- context: {"sqlTimeZone": "America/Los_Angeles"}  (optional; the query's SQL context)
    SELECT COUNT(*) FROM wiki WHERE TIME_EXTRACT(__time, 'MINUTE') < 30;
    -- expect: raw_time
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

import pytest

from common.query.engine import scan_spec_for
from common.query.model import query_from_json
from common.query.projection import ProjectionSpec
from common.query.projection_match import Refusal, RefusalReason, match_projection
from common.segment.manifest import ProjectionManifest
from common.sql import plan_sql
from common.sql.projection_select import projection_from_select
from common.types.column_type import ColumnType
from common.types.interval import Interval
from tests.unit.sql.test_golden import golden_catalog

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "projection_match")
UPDATE = os.environ.get("STRATA_UPDATE_GOLDEN") == "1"
DEFAULT_SEGMENT = "2015-09-12/2015-09-13"


def matcher_catalog():
    """The golden catalog, plus ``t`` (Druid's projection test columns: strings a, b; long c;
    double d; float e) and ``rolled``, a rollup table whose metrics are columns."""
    catalog = golden_catalog()
    t = {"__time": "TIMESTAMP", "a": "STRING", "b": "STRING", "c": "LONG", "d": "DOUBLE", "e": "FLOAT"}
    rolled = {"__time": "TIMESTAMP", "channel": "STRING", "page": "STRING", "sum_added": "LONG", "cnt": "LONG",
              "max_delta": "LONG"}
    for name, cols in (("t", t), ("rolled", rolled)):
        catalog.schemas[name] = {k: ColumnType.parse(v) for k, v in cols.items()}
    return catalog


@dataclass
class Case:
    file: str
    name: str
    sql: str = ""
    projection_sql: str = ""
    projection_json: str = ""
    segment: str = DEFAULT_SEGMENT
    context: dict = field(default_factory=dict)
    expect: str = ""


def parse_cases(path: str) -> list[Case]:
    cases: list[Case] = []
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("-- name:"):
            cases.append(Case(path, line[len("-- name:"):].strip()))
        elif not cases:
            continue
        elif line.startswith("-- projection:"):
            cases[-1].projection_sql = line[len("-- projection:"):].strip()
        elif line.startswith("-- projection-json:"):
            cases[-1].projection_json = line[len("-- projection-json:"):].strip()
        elif line.startswith("-- context:"):
            cases[-1].context = json.loads(line[len("-- context:"):])
        elif line.startswith("-- segment:"):
            cases[-1].segment = line[len("-- segment:"):].strip()
        elif line.startswith("-- expect:"):
            cases[-1].expect = line[len("-- expect:"):].strip()
        elif not line.startswith("--"):
            cases[-1].sql += line + "\n"
    for c in cases:
        c.sql = c.sql.strip().rstrip(";").strip()
    return cases


def answer(case: Case, catalog) -> tuple[str, str]:
    """(``match`` or the refusal reason, the detail) for the case's one native query."""
    context = {"sqlCurrentTimestamp": "2015-09-14T00:00:00Z", **case.context}
    natives = plan_sql(case.sql, catalog, (), context).native_queries()
    assert len(natives) == 1, f"{case.name}: plans as {len(natives)} native queries"
    datasource = natives[0]["dataSource"]
    if case.projection_json:
        spec_json = json.loads(case.projection_json)
    else:
        spec_json = projection_from_select("p", case.projection_sql, catalog, datasource)
    spec = ProjectionSpec.from_json(spec_json)
    spec.validate(dict(catalog.datasource_schema(datasource)))
    manifest = ProjectionManifest(spec.name, spec_json, (), (), 1, (), (), spec.time_column, True)
    got = match_projection(manifest, scan_spec_for(query_from_json(natives[0])), Interval.parse(case.segment))
    if isinstance(got, Refusal):
        return got.reason.value, got.detail
    return "match", ""


FILES = sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.sql")))
ALL_CASES = [c for f in FILES for c in parse_cases(f)]


def test_cases_are_well_formed():
    assert len(ALL_CASES) >= 40
    names = [(os.path.basename(c.file), c.name) for c in ALL_CASES]
    assert len(set(names)) == len(names), "duplicate case names"
    allowed = {"match"} | {r.value for r in RefusalReason}
    for c in ALL_CASES:
        assert c.sql and (c.projection_sql or c.projection_json), c.name
        assert UPDATE or c.expect in allowed, f"{c.name}: expect '{c.expect}' is not one of {sorted(allowed)}"
    # Both outcomes, and every reason, are covered.
    assert UPDATE or {c.expect for c in ALL_CASES} == allowed


if UPDATE:
    def test_update_expectations():
        catalog = matcher_catalog()
        for path in FILES:
            text = open(path, encoding="utf-8").read()
            out, name = [], None
            for line in text.splitlines():
                if line.startswith("-- name:"):
                    name = line[len("-- name:"):].strip()
                if line.startswith("-- expect:"):
                    case = next(c for c in parse_cases(path) if c.name == name)
                    line = f"-- expect: {answer(case, catalog)[0]}"
                out.append(line)
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(out) + "\n")


@pytest.mark.parametrize("case", ALL_CASES, ids=[f"{os.path.basename(c.file)[:-4]}:{c.name}" for c in ALL_CASES])
def test_matcher_golden(case):
    if UPDATE:
        pytest.skip("rewriting expectations")
    got, detail = answer(case, matcher_catalog())
    assert got == case.expect, f"{case.name} in {case.file}: got {got} ({detail})"
