import gzip
import ipaddress
import os
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from common.demo import SCHEMA, generate, table, write
from common.errors import ValidationError

START = datetime(2015, 9, 12, tzinfo=timezone.utc)
GEO = ("cityName", "countryName", "countryIsoCode", "regionName")
FLAGS = ("isRobot", "isAnonymous", "isMinor", "isNew", "isUnpatrolled")
# What the text formats hold: time under "time", everything else as in SCHEMA.
TEXT_SCHEMA = pa.schema([pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False), *list(SCHEMA)[1:]])


@pytest.fixture(scope="module")
def million() -> pa.Table:
    # Doubles as the speed sanity check: 1M rows must generate within the test timeout.
    return table(1_000_000)


def _as_text_schema(t: pa.Table) -> pa.Table:
    return t.rename_columns(TEXT_SCHEMA.names).cast(TEXT_SCHEMA)


def _ms(t: pa.Table, col: str = "__time") -> np.ndarray:
    return t[col].combine_chunks().cast(pa.int64()).to_numpy()


# --- determinism and schema ---------------------------------------------------------------


def test_same_args_same_rows_whatever_batch_size():
    a = table(150_000, seed=7)
    b = table(150_000, seed=7, batch_size=12_345)
    c = table(150_000, seed=7, batch_size=10_000_000)
    assert a.equals(b) and a.equals(c)


def test_other_seed_other_rows_same_vocabulary():
    a, b = table(20_000, seed=1), table(20_000, seed=2)
    assert not a.equals(b)
    # Vocabularies do not depend on the seed, so docs and tests can name their values.
    assert set(a["channel"].unique().to_pylist()) == set(b["channel"].unique().to_pylist())
    assert "#en.wikipedia" in a["channel"].unique().to_pylist()


def test_schema_and_batch_sizes():
    batches = list(generate(25_000, batch_size=10_000))
    assert [len(b) for b in batches] == [10_000, 10_000, 5_000]
    assert all(b.schema.equals(SCHEMA) for b in batches)
    assert SCHEMA.names[:4] == ["__time", "channel", "page", "user"]
    assert SCHEMA.names[-3:] == ["added", "deleted", "delta"]
    assert SCHEMA.field("__time").type == pa.timestamp("ms", tz="UTC")
    assert not SCHEMA.field("__time").nullable
    assert SCHEMA.field("metroCode").type == pa.int64()
    assert all(SCHEMA.field(f).type == pa.string() for f in FLAGS + GEO + ("comment", "namespace"))


def test_zero_rows():
    t = table(0)
    assert t.num_rows == 0 and t.schema.equals(SCHEMA)


def test_speed_sanity_generates_a_million_rows():
    assert sum(len(b) for b in generate(1_000_000)) == 1_000_000


# --- distributions --------------------------------------------------------------------------


def test_cardinalities(million):
    distinct = {c: pc.count_distinct(million[c]).as_py() for c in SCHEMA.names[1:]}
    assert 40 <= distinct["channel"] <= 60
    assert 10_000 <= distinct["user"] <= 25_000
    assert 50_000 <= distinct["page"] <= 100_000  # ~100k over 10M rows, a bit fewer at 1M
    assert 8 <= distinct["namespace"] <= 12
    assert 100 <= distinct["comment"] <= 1_000
    for flag in FLAGS:
        assert set(million[flag].unique().to_pylist()) == {"true", "false"}


def test_skew(million):
    channels = pc.value_counts(million["channel"]).to_pylist()
    channels.sort(key=lambda r: -r["counts"])
    assert channels[0]["values"] == "#en.wikipedia"
    assert channels[0]["counts"] > 2 * channels[5]["counts"] > 2 * channels[-1]["counts"]
    ns = pc.value_counts(million["namespace"]).to_pylist()
    main = next(r["counts"] for r in ns if r["values"] == "Main")
    assert main > 0.6 * len(million)
    users = np.sort(pc.value_counts(million["user"]).field("counts").to_numpy())[::-1]
    assert users[:100].sum() > 0.2 * len(million)  # a few very active accounts, long tail


def test_nulls(million):
    n = len(million)
    for c in SCHEMA.names:
        if c not in GEO + ("metroCode",):
            assert million[c].null_count == 0, c
    assert 0.85 <= million["cityName"].null_count / n <= 0.95
    masks = [million[c].is_null().to_numpy(zero_copy_only=False) for c in GEO]
    assert all((m == masks[0]).all() for m in masks)  # a row has all geo fields or none
    assert 0.98 <= million["metroCode"].null_count / n <= 0.997
    with_metro = million.filter(million["metroCode"].is_valid())
    assert set(with_metro["countryIsoCode"].unique().to_pylist()) == {"US"}
    assert pc.sum(pc.equal(million["comment"], "")).as_py() > 0


def test_anonymous_exactly_when_user_is_an_ip(million):
    pairs = million.group_by(["user", "isAnonymous"]).aggregate([])
    assert pairs.num_rows == pc.count_distinct(million["user"]).as_py()  # one flag per user

    def is_ip(u: str) -> bool:
        try:
            ipaddress.ip_address(u)
            return True
        except ValueError:
            return False

    for user, anon in zip(pairs["user"].to_pylist(), pairs["isAnonymous"].to_pylist()):
        assert is_ip(user) == (anon == "true"), user
    ips = [u for u, a in zip(pairs["user"].to_pylist(), pairs["isAnonymous"].to_pylist()) if a == "true"]
    assert any(":" in u for u in ips) and any("." in u for u in ips)  # both v4 and v6
    # Geo data comes from the IP, so exactly the anonymous rows have it.
    anon = pc.equal(million["isAnonymous"], "true")
    assert pc.all(pc.equal(anon, million["cityName"].is_valid())).as_py()
    # Bots are registered accounts.
    robots = million.filter(pc.equal(million["isRobot"], "true"))
    assert robots.num_rows > 0 and set(robots["isAnonymous"].unique().to_pylist()) == {"false"}


def test_sizes(million):
    added, deleted, delta = (million[c].to_numpy() for c in ("added", "deleted", "delta"))
    assert (added >= 0).all() and (deleted >= 0).all()
    assert (delta == added - deleted).all()
    assert added.max() > 100 * max(np.median(added), 1)  # heavy tail
    assert (added == 0).any() and (deleted == 0).mean() > 0.3
    new = pc.equal(million["isNew"], "true").to_numpy(zero_copy_only=False)
    assert (deleted[new] == 0).all()


def test_time_sorted_in_range_with_daily_cycle(million):
    ms = _ms(million)
    assert (np.diff(ms) >= 0).all()
    lo = int(START.timestamp() * 1000)
    hi = int((START + timedelta(days=7)).timestamp() * 1000)
    assert lo <= ms[0] and ms[-1] < hi
    assert ms[0] - lo < 60_000 and hi - ms[-1] < 60_000  # spread over the whole range
    per_day = np.bincount((ms - lo) // 86_400_000, minlength=7)
    assert len(per_day) == 7 and (per_day > 0.12 * len(ms)).all()
    per_hour = np.bincount((ms - lo) // 3_600_000 % 24, minlength=24)
    assert 1.3 < per_hour.max() / per_hour.min() < 3.0  # a visible but mild cycle


def test_batches_ascend_across_boundaries():
    last = None
    for b in generate(100_000, batch_size=7_000):
        ms = b.column(0).cast(pa.int64()).to_numpy()
        assert (np.diff(ms) >= 0).all()
        assert last is None or last <= ms[0]
        last = ms[-1]


def test_start_with_zone_and_days():
    t = table(10_000, start="2020-03-01T12:00:00+02:00", days=1)
    ms = _ms(t)
    lo = int(datetime(2020, 3, 1, 10, tzinfo=timezone.utc).timestamp() * 1000)
    assert lo <= ms.min() and ms.max() < lo + 86_400_000


@pytest.mark.parametrize(
    "kwargs",
    [dict(rows=-1), dict(rows=10, days=0), dict(rows=10, batch_size=0), dict(rows=10, start="yesterday")],
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValidationError):
        list(generate(**kwargs))


# --- writing ----------------------------------------------------------------------------------

ROWS = 20_000


@pytest.fixture(scope="module")
def expected() -> pa.Table:
    return table(ROWS, seed=3)


def _read_json(path: str) -> pa.Table:
    opts = pajson.ParseOptions(explicit_schema=TEXT_SCHEMA)
    return pajson.read_json(path, parse_options=opts).cast(TEXT_SCHEMA)


def _read_csv(path: str) -> pa.Table:
    def sql_type(f: pa.Field) -> str:
        return "TIMESTAMPTZ" if f.name == "time" else "BIGINT" if f.type == pa.int64() else "VARCHAR"

    types = {f.name: sql_type(f) for f in TEXT_SCHEMA}
    cols = ", ".join(f"'{k}': '{v}'" for k, v in types.items())
    # allow_quoted_nulls=false: "" is an empty comment, only an unquoted empty field is null.
    sql = f"select * from read_csv('{path}', header=true, allow_quoted_nulls=false, columns={{{cols}}})"
    result = duckdb.connect().sql(sql).arrow()
    result = result.read_all() if isinstance(result, pa.RecordBatchReader) else result
    return result.cast(TEXT_SCHEMA)


def test_write_parquet(tmp_path, expected):
    paths = write(tmp_path / "wiki.parquet", ROWS, seed=3)
    assert paths == [str(tmp_path / "wiki.parquet")]
    assert pq.read_table(paths[0]).equals(expected)


@pytest.mark.parametrize("name", ["wiki.json", "wiki.json.gz"])
def test_write_json(tmp_path, expected, name):
    (path,) = write(tmp_path / name, ROWS, fmt="json", seed=3)
    raw = (gzip.open if name.endswith(".gz") else open)(path, "rb").read()
    first = raw.split(b"\n", 1)[0].decode()
    assert first.startswith('{"time":"2015-09-12T') and '"channel":"#' in first and first.endswith("}")
    assert raw.endswith(b"}\n") and raw.count(b"\n") == ROWS
    assert _read_json(path).equals(_as_text_schema(expected))


@pytest.mark.parametrize("name", ["wiki.csv", "wiki.csv.gz"])
def test_write_csv(tmp_path, expected, name):
    (path,) = write(tmp_path / name, ROWS, fmt="csv", seed=3)
    with (gzip.open if name.endswith(".gz") else open)(path, "rb") as f:
        assert f.readline().decode().startswith('"time","channel","page","user"')
    assert _read_csv(path).equals(_as_text_schema(expected))


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_write_split_into_files(tmp_path, fmt):
    rows = 10_001
    paths = write(tmp_path / "out", rows, fmt=fmt, files=3, seed=5)
    assert [os.path.basename(p) for p in paths] == [f"part-0000{i}.{fmt}" for i in range(3)]
    read = {"parquet": pq.read_table, "json": _read_json, "csv": _read_csv}[fmt]
    parts = [read(p) for p in paths]
    assert [p.num_rows for p in parts] == [3333, 3334, 3334]
    whole = table(rows, seed=5)
    if fmt != "parquet":
        whole = _as_text_schema(whole)
    assert pa.concat_tables(parts).equals(whole)


def test_write_is_byte_identical_across_runs(tmp_path):
    a = write(tmp_path / "a" / "w.json.gz", 5_000, fmt="json")[0]
    b = write(tmp_path / "b" / "w.json.gz", 5_000, fmt="json")[0]
    assert open(a, "rb").read() == open(b, "rb").read()


def test_write_zero_rows(tmp_path):
    (path,) = write(tmp_path / "empty.csv", 0, fmt="csv")
    assert _read_csv(path).num_rows == 0
    (path,) = write(tmp_path / "empty.parquet", 0)
    assert pq.read_table(path).num_rows == 0


def test_write_bad_format(tmp_path):
    with pytest.raises(ValidationError) as err:
        write(tmp_path / "x.avro", 10, fmt="avro")
    assert all(f in str(err.value) for f in ("parquet", "json", "csv"))
    with pytest.raises(ValidationError):
        write(tmp_path / "x.parquet.gz", 10)
    assert not os.listdir(tmp_path)
