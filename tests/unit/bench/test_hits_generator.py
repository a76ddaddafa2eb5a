"""bench/hits_generator.py: ClickBench's 105 columns and types, deterministic from a seed, and the
distribution properties ClickBench's queries depend on (checked with DuckDB over the rows)."""

import duckdb
import pyarrow as pa
import pytest

from bench import hits_generator
from bench.hits_generator import BUSY_COUNTER, KNOWN_USER, REFERER_HASH, URL_HASH, generate

ROWS = 20_000


@pytest.fixture(scope="module")
def hits():
    return generate(ROWS, seed=7)


@pytest.fixture(scope="module")
def con(hits):
    c = duckdb.connect()
    c.register("hits", hits)
    yield c
    c.close()


def one(con, sql):
    return con.execute(sql).fetchone()


def test_schema_is_clickbench_105_columns(hits):
    assert hits.num_rows == ROWS
    assert len(hits.schema) == 105
    assert hits.schema.names[:6] == ["WatchID", "JavaEnable", "Title", "GoodEvent", "EventTime", "EventDate"]
    assert hits.schema.names[-1] == "CLID"
    types = dict(zip(hits.schema.names, hits.schema.types))
    assert types["WatchID"] == pa.int64() and types["CounterID"] == pa.int32() and types["OS"] == pa.int16()
    assert types["EventTime"] == pa.timestamp("s") and types["EventDate"] == pa.date32()
    assert types["URL"] == pa.string() and types["HitColor"] == pa.string()
    assert all(hits.column(i).null_count == 0 for i in range(105))  # ClickBench's columns are NOT NULL


def test_same_seed_same_rows_other_seed_other_rows(hits):
    assert generate(ROWS, seed=7).equals(hits)
    assert not generate(ROWS, seed=8).column("UserID").equals(hits.column("UserID"))


def test_a_month_of_times_and_dates_follow_them(con):
    lo, hi, days, mismatched = one(con, "SELECT MIN(EventTime), MAX(EventTime), COUNT(DISTINCT EventDate), "
                                        "COUNT(*) FILTER (WHERE CAST(EventTime AS DATE) <> EventDate) FROM hits")
    assert str(lo) >= "2013-07-01" and str(hi) < "2013-08-01"
    assert days == 31 and mismatched == 0


def test_skewed_users_and_counters(con):
    top_user_share, users = one(con, "SELECT MAX(c) / SUM(c), COUNT(*) FROM "
                                     "(SELECT UserID, COUNT(*) AS c FROM hits GROUP BY 1)")
    assert users > ROWS / 20 and top_user_share > 0.01  # many users, a few heavy ones
    busy = one(con, f"SELECT COUNT(*) FROM hits WHERE CounterID = {BUSY_COUNTER}")[0]
    assert busy > ROWS * 0.08


def test_high_cardinality_strings_with_many_empty(con):
    urls, phrases, no_phrase, no_referer = one(con, """
        SELECT COUNT(DISTINCT URL), COUNT(DISTINCT SearchPhrase), AVG((SearchPhrase = '')::INT),
               AVG((Referer = '')::INT) FROM hits""")
    assert urls > 1_000 and phrases > 300
    assert 0.7 < no_phrase < 0.9 and 0.3 < no_referer < 0.5


def test_the_constants_clickbench_filters_on_find_rows(con):
    assert one(con, f"SELECT COUNT(*) FROM hits WHERE UserID = {KNOWN_USER}")[0] > 0
    assert one(con, f"SELECT COUNT(*) FROM hits WHERE CounterID = {BUSY_COUNTER} AND URLHash = {URL_HASH}")[0] > 0
    assert one(con, f"SELECT COUNT(*) FROM hits WHERE CounterID = {BUSY_COUNTER} AND RefererHash = {REFERER_HASH}")[0] > 0
    # The hash is per string: one URL, one hash.
    assert one(con, "SELECT MAX(n) FROM (SELECT URL, COUNT(DISTINCT URLHash) AS n FROM hits GROUP BY 1)")[0] == 1


def test_flags_and_small_enums(con):
    refresh, mobile, engines, sources = one(con, "SELECT AVG(IsRefresh), AVG(IsMobile), COUNT(DISTINCT AdvEngineID), "
                                                 "COUNT(DISTINCT TraficSourceID) FROM hits")
    assert 0.03 < refresh < 0.15 and 0.05 < mobile < 0.2
    assert engines <= 6 and sources <= 11
    assert one(con, "SELECT COUNT(*) FROM hits WHERE IsMobile = 0 AND MobilePhoneModel <> ''")[0] == 0


def test_parquet_round_trip(tmp_path):
    import pyarrow.parquet as pq

    path = hits_generator.write(1_000, str(tmp_path / "hits.parquet"), seed=1)
    # Parquet keeps seconds as milliseconds; the values survive.
    assert pq.read_table(path).cast(hits_generator.SCHEMA).equals(generate(1_000, seed=1))
