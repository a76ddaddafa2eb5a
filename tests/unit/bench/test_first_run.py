"""bench/first_run.py: every variant is a query text not seen before that asks for the same rows
(the benchmarks' first-run figures rely on both), for strata's native queries and SQL planner and
for DuckDB."""

import json

import duckdb
import pyarrow as pa
import pytest

from bench import first_run
from bench.engine import queries as engine_queries
from common.demo import table as demo_table
from common.query import execute
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.sql.sql_plan import plan_sql
from common.types.column_type import ColumnType
from tests.unit.sql.fake_catalog import FakeCatalog

DATA = demo_table(3_000)
SCHEMA = {f.name: ColumnType.from_arrow(f.type, f.name) for f in DATA.schema}
CATALOG = FakeCatalog({"wiki": SCHEMA})


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    built = build_segments(DATA, "wiki", str(tmp_path_factory.mktemp("segs")), segment_granularity="day")
    opened = [Segment.open(p) for p, _ in built]
    yield opened
    for segment in opened:
        segment.close()


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    con.register("wiki_arrow", DATA.set_column(0, "__time", DATA.column("__time").cast(pa.timestamp("ms"))))
    con.sql("CREATE TABLE wiki AS SELECT * FROM wiki_arrow")
    yield con
    con.close()


def _user(duck) -> str:
    return duck.sql("SELECT \"user\" FROM wiki GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").fetchall()[0][0]


def _rows(table: pa.Table) -> list:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_fresh_numbers_never_repeat():
    taken = [first_run.fresh() for _ in range(1000)]
    assert len(set(taken)) == len(taken) and min(taken) >= 1


@pytest.mark.parametrize("index", range(5))
def test_native_variants_are_new_texts_with_the_same_rows(segments, duck, index):
    name, _kind, native, _sql = engine_queries(_user(duck))[index]
    want = execute(native, segments).table
    texts = {json.dumps(native, sort_keys=True)}
    for k in (1, 2, 977):
        variant = first_run.native(native, k)
        texts.add(json.dumps(variant, sort_keys=True))
        got = execute(variant, segments).table
        assert _rows(got) == _rows(want), name
        assert len(got.column_names) == len(want.column_names)
    assert len(texts) == 4, f"{name}: a variant repeated a query text"
    assert native == engine_queries(_user(duck))[index][2], "the original query was changed in place"


def test_a_topn_metric_follows_its_renamed_aggregator():
    topn = {"queryType": "topN", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-19"], "granularity": "all",
            "dimension": "page", "metric": {"type": "numeric", "metric": "s"}, "threshold": 3,
            "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}],
            "postAggregations": [{"type": "arithmetic", "name": "p", "fn": "+",
                                  "fields": [{"type": "fieldAccess", "fieldName": "s"}]}]}
    variant = first_run.native(topn, 5)
    assert variant["aggregations"][0]["name"] == "s_r5"
    assert variant["metric"] == {"type": "numeric", "metric": "s_r5"}
    assert variant["postAggregations"][0]["name"] == "p_r5"
    assert variant["postAggregations"][0]["fields"][0]["fieldName"] == "s_r5"


def test_a_scan_whose_interval_starts_after_the_data_begins_is_refused():
    scan = {"queryType": "scan", "dataSource": "wiki", "intervals": ["2015-09-13/2015-09-14"], "columns": ["page"]}
    with pytest.raises(ValueError, match="2015-09-13/2015-09-14"):
        first_run.native(scan, 1)


@pytest.mark.parametrize("index", range(5))
def test_sql_variants_give_duckdb_the_same_rows(duck, index):
    _name, _kind, _native, sql = engine_queries(_user(duck))[index]
    want = _rows(duck.sql(sql).to_arrow_table())
    for k in (1, 50, 2000):
        text = first_run.sql(sql, k)
        assert text != sql
        assert _rows(duck.sql(text).to_arrow_table()) == want, text


@pytest.mark.parametrize("sql", [
    "SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1",
    "SELECT channel, isRobot, COUNT(*) AS c FROM wiki WHERE namespace = 'Main' GROUP BY 1, 2",
    "SELECT page, SUM(added) AS s FROM wiki GROUP BY page ORDER BY s DESC LIMIT 5",
])
def test_sql_variants_plan_to_new_native_queries_over_every_segment(sql):
    """The bound reaches the native query the historicals see (an alias or a comment would not),
    on a whole hour before the data: every day segment stays whole inside the interval."""
    def native_text(text):
        return json.dumps(plan_sql(text, CATALOG).explain()["PLAN"][0]["query"], sort_keys=True)

    seen = {native_text(sql)}
    for k in (1, 2, 30):
        planned = plan_sql(first_run.sql(sql, k), CATALOG).explain()["PLAN"][0]["query"]
        start = planned["intervals"][0].split("/")[0]
        assert start < "2015-09-12" and start.endswith(":00:00.000Z"), start
        seen.add(native_text(first_run.sql(sql, k)))
    assert len(seen) == 4


def test_one_minute_variants_stay_inside_the_minute_and_never_repeat():
    text = "SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' " \
           "AND __time < TIMESTAMP '2015-09-12 00:01:00'"
    variants = [first_run.one_minute(text, k) for k in range(1, 20_000)]
    assert len(set(variants)) == len(variants)
    for variant in variants[:3] + variants[-3:]:
        bound = variant.rsplit("'", 2)[1]
        assert "2015-09-12 00:00:09" <= bound < "2015-09-12 00:01:00", bound
    with pytest.raises(ValueError, match="00:01:00"):
        first_run.one_minute("SELECT 1", 1)


def test_clickhouse_variants_bound_the_hour_its_projection_stores():
    text = "SELECT toStartOfHour(__time) AS t, count() FROM b.wiki GROUP BY t"
    assert first_run.clickhouse_sql(text, 3) == (
        "SELECT toStartOfHour(__time) AS t, count() FROM b.wiki WHERE "
        "toStartOfHour(__time) >= toDateTime64('2015-09-11 20:00:00', 3, 'UTC') GROUP BY t")


def test_repeated_and_first_runs_time_the_original_and_fresh_texts():
    calls = []
    repeated, first, out = first_run.repeated_and_first(
        lambda text: calls.append(text) or text, first_run.sql_variant("SELECT 1 FROM wiki"), 3)
    assert out == "SELECT 1 FROM wiki" and repeated >= 0 and first >= 0
    assert calls[:4] == ["SELECT 1 FROM wiki"] * 4  # a warm-up run, then 3 timed
    fresh = calls[4:]
    assert len(fresh) == 4 and len(set(fresh)) == 4 and "SELECT 1 FROM wiki" not in fresh
