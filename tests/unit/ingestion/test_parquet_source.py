"""Which Parquet files Spark (or pyarrow inside Spark tasks) may read instead of row_parser, decided
from footers on the driver; and how an ArrowScan cuts and reads them. No Spark here."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.types.column_type import ColumnType
from services.ingestion.arrow_scan import _tasks, plain_projection, read_pieces, travel_type
from services.ingestion.parquet_source import NativeGroup, native_cast, plan_parquet
from common.ingest.row_parser import arrow_type, cast_column, parse_file
from common.ingest.external_source import ExternalSource
from common.ingest.statement import parse_ingestion


def sig(**cols):
    return [(name, ColumnType.parse(kind)) for name, kind in cols.items()]


@pytest.fixture
def typed(tmp_path):
    table = pa.table({
        "i8": pa.array([1, -2, None], pa.int8()), "u32": pa.array([1, 2, 4_000_000_000], pa.uint32()),
        "u64": pa.array([1, 2, 3], pa.uint64()), "i64": pa.array([1, 2, 1 << 60]),
        "b": [True, False, None], "f": pa.array([1.5, None, -0.0], pa.float32()), "d": [0.1, 2.5, None],
        "s": ["x", None, "é"], "dict": pa.array(["a", "b", "a"]).dictionary_encode(),
        "bin": [b"x", b"y", None], "ms": pa.array([0, 1, None], pa.timestamp("ms", tz="UTC")),
        "naive": pa.array([0, 1, 2], pa.timestamp("us")), "ns": pa.array([0, 1, 2], pa.timestamp("ns", tz="UTC")),
        "day": pa.array([datetime.date(2020, 1, 1), None, datetime.date(1, 1, 1)]), "tags": [["a"], [], None],
        "dec": pa.array([decimal.Decimal("1.250"), None, decimal.Decimal("-0.001")], pa.decimal128(9, 3)),
        "bigdec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-12345678901234567.89")],
                           pa.decimal128(20, 2)),
    })
    path = tmp_path / "typed.parquet"
    pq.write_table(table, path, row_group_size=2)
    return str(path)


@pytest.mark.parametrize("column, declared, native", [
    ("i8", "BIGINT", True), ("u32", "BIGINT", True), ("u64", "BIGINT", False), ("b", "BIGINT", True),
    ("d", "BIGINT", False), ("s", "BIGINT", False),
    ("i8", "VARCHAR", True), ("b", "VARCHAR", True), ("s", "VARCHAR", True), ("dict", "VARCHAR", True),
    ("d", "VARCHAR", False), ("bin", "VARCHAR", False),
    ("f", "DOUBLE", True), ("d", "DOUBLE", True), ("u32", "DOUBLE", True), ("i64", "DOUBLE", False),
    ("f", "FLOAT", True), ("d", "FLOAT", False),
    ("ms", "TIMESTAMP", True), ("naive", "TIMESTAMP", True), ("ns", "TIMESTAMP", False), ("day", "TIMESTAMP", True),
    ("day", "VARCHAR", True), ("day", "BIGINT", False), ("day", "DOUBLE", False),
    ("dec", "DOUBLE", True), ("dec", "VARCHAR", False), ("dec", "BIGINT", False), ("bigdec", "DOUBLE", False),
    ("tags", "ARRAY<VARCHAR>", False), ("s", "COMPLEX<json>", False),
])
def test_a_file_goes_native_only_when_every_needed_column_converts_exactly(typed, column, declared, native):
    plan = plan_parquet([typed], sig(**{column: declared}), True)
    assert (len(plan.groups), plan.fallback) == ((1, ()) if native else (0, (0,)))
    if native:
        [group] = plan.groups
        assert group.row_groups == ((2, 1),) and plan.rows == 3


def test_unneeded_and_missing_columns_do_not_matter(typed):
    plan = plan_parquet([typed], sig(s="VARCHAR", absent="BIGINT"), True)  # ns, bin, tags ... are not needed
    [group] = plan.groups
    assert [c[0] for c in group.columns] == ["s"]


def test_what_falls_back(tmp_path, typed):
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    odd = tmp_path / "odd[1].parquet"
    odd.write_bytes(open(typed, "rb").read())
    brotli = tmp_path / "brotli.parquet"
    pq.write_table(pa.table({"s": ["x"]}), brotli, compression="brotli")
    paths = [str(tmp_path / "junk.parquet"), str(odd), str(brotli), None, typed]
    plan = plan_parquet(paths, sig(s="VARCHAR"), True)
    assert plan.fallback == (0, 1, 2, 3) and plan.groups[0].paths == (typed,)
    assert plan_parquet([typed], sig(s="VARCHAR"), False).fallback == (0,)


def test_native_casts_are_the_ones_row_parser_makes(typed):
    """What native_cast vouches for, row_parser converts without parse exceptions, to the same Arrow
    values as a plain Arrow cast (which Spark's CAST matches; the Spark side is in the integration tests)."""
    table = pq.read_table(typed)
    spark_kind = {"i8": "byte", "u32": "long", "b": "boolean", "f": "float", "d": "double", "s": "string",
                  "dict": "string", "ms": "timestamp", "naive": "timestamp_ntz", "day": "date",
                  "dec": "decimal(9,3)"}
    for column, kind in spark_kind.items():
        for declared in ("BIGINT", "VARCHAR", "DOUBLE", "FLOAT", "TIMESTAMP"):
            exact = column in ("i8", "u32", "f", "dec")  # sources of at most 32 bits, decimals of at most 15 digits
            ctype = ColumnType.parse(declared)
            if not native_cast(kind, exact, ctype):
                continue
            source = ExternalSource.of({"type": "inline", "data": "x"}, {"type": "parquet"},
                                       [{"name": column, "type": declared}])
            with open(typed, "rb") as f:
                parsed = pa.Table.from_batches(list(parse_file(typed, f, source.input_format, source.signature)))
            assert parsed.column("__strata_error").null_count == parsed.num_rows, (column, declared)
            assert parsed.column(column).to_pylist() == table.column(column).cast(arrow_type(ctype)).to_pylist()


def test_decimals_become_the_nearest_double_on_every_path(tmp_path):
    """Arrow's decimal-to-double cast misses the nearest double for some values; the batch path,
    the Arrow scan and row by row all give float(Decimal)."""
    values = [decimal.Decimal(i * 7 - 9000) / 1000 for i in range(2000)] + [None]
    column = pa.array(values, pa.decimal128(12, 3))
    assert column.cast(pa.float64()).to_pylist() != [None if v is None else float(v) for v in values]  # Arrow's miss
    assert cast_column(column, pa.float64()).to_pylist() == [None if v is None else float(v) for v in values]
    path = tmp_path / "dec.parquet"
    pq.write_table(pa.table({"dec": column}), path)
    [batch] = list(read_pieces([(str(path), 0, 0, len(values))], [("dec", "dec", pa.float64())]))
    assert batch.column(0).to_pylist() == [None if v is None else float(v) for v in values]


def _dates(tmp_path, name, days):
    path = tmp_path / name
    pq.write_table(pa.table({"day": pa.array(days, pa.int32()).cast(pa.date32())}), path)
    return str(path)


def test_dates_go_native_only_with_four_digit_years(tmp_path):
    """Spark prints years past 9999 with a sign and row_parser cannot hold them; so a DATE column
    goes native only when its statistics bound it to years 1-9999 (an all-null column too)."""
    inside = _dates(tmp_path, "in.parquet", [-719_162, None, 2_932_896])
    beyond = _dates(tmp_path, "beyond.parquet", [0, 2_932_897])
    before = _dates(tmp_path, "before.parquet", [-719_163, 0])
    nulls = _dates(tmp_path, "nulls.parquet", [None, None])
    no_stats = tmp_path / "nostats.parquet"
    pq.write_table(pa.table({"day": pa.array([0], pa.int32()).cast(pa.date32())}), no_stats, write_statistics=False)
    plan = plan_parquet([inside, beyond, before, nulls, str(no_stats)], sig(day="VARCHAR"), True)
    assert plan.fallback == (1, 2, 4) and plan.groups[0].paths == (inside, nulls)


def test_row_by_row_converts_dates_and_decimals_as_the_batch_cast_does(tmp_path):
    """A value that does not fit sends its batch row by row; the other rows' DATE and DECIMAL
    values must come out as the whole-batch cast gives them, not as parse exceptions."""
    path = tmp_path / "mixed.parquet"
    days = [datetime.date(2013, 7, 15), datetime.date(1, 1, 1), None]
    decs = [decimal.Decimal("-8.979"), None, decimal.Decimal("-123456789.123456")]
    pq.write_table(pa.table({"day": days, "dec": pa.array(decs, pa.decimal128(15, 6)), "n": ["1", "x", "3"]}), path)
    source = ExternalSource.of({"type": "inline", "data": "x"}, {"type": "parquet"},
                               [{"name": "day", "type": "VARCHAR"}, {"name": "dec", "type": "DOUBLE"},
                                {"name": "n", "type": "BIGINT"}])
    with open(path, "rb") as f:
        parsed = pa.Table.from_batches(list(parse_file(str(path), f, source.input_format, source.signature)))
    good = parsed.filter(pa.compute.is_null(parsed.column("__strata_error")))
    assert good.column("day").to_pylist() == ["2013-07-15", None]
    assert good.column("dec").to_pylist() == [-8.979, -123456789.123456]
    assert parsed.num_rows == 3 and good.num_rows == 2


def test_plain_projection():
    def projection(select: str):
        stmt = parse_ingestion(f"INSERT INTO x {select} PARTITIONED BY DAY".replace(
            "SRC", "TABLE(localfiles(files => ARRAY['/a.parquet'], format => 'parquet')) EXTEND (ts TIMESTAMP, "
                   "a VARCHAR, \"b\" BIGINT)"))
        [(name, source)] = stmt.sources.items()
        return plain_projection(stmt.select, name, source.signature)

    assert projection('SELECT ts AS __time, a, "b" AS c FROM SRC') == [("__time", "ts"), ("a", "a"), ("c", "b")]
    assert projection("SELECT t.ts AS __time, t.a FROM SRC AS t") == [("__time", "ts"), ("a", "a")]
    for select in ("SELECT ts AS __time, a FROM SRC WHERE a = 'x'", "SELECT ts AS __time, UPPER(a) AS a FROM SRC",
                   "SELECT * FROM SRC", "SELECT DISTINCT ts AS __time FROM SRC", "SELECT ts AS __time, 1 AS one FROM SRC",
                   "SELECT ts AS __time, a FROM SRC GROUP BY 1, 2", "SELECT ts AS __time, a FROM SRC LIMIT 5"):
        assert projection(select) is None, select


def _group(sizes, path="/f.parquet"):
    return NativeGroup((path,), (), (tuple(sizes),))


def test_tasks_split_big_row_groups_and_pack_small_ones():
    [one] = [_tasks([_group([4_000_000])], 1)]
    assert [sum(p[3] for p in t) for t in one] == [2_000_000, 2_000_000]
    assert [p[2] for t in one for p in t] == [0, 2_000_000]
    small = _tasks([_group([1000] * 1000)], 2)
    assert len(small) == 4 and sum(p[3] for t in small for p in t) == 1_000_000
    assert _tasks([_group([0])], 2) == ()


def test_read_pieces_slices_and_casts(typed, tmp_path):
    path = tmp_path / "big.parquet"
    words = [None if i % 7 == 0 else f"w{i % 30}" for i in range(1000)]
    pq.write_table(pa.table({"n": pa.array(range(1000), pa.int32()), "t": pa.array(range(1000), pa.timestamp("ms")),
                             "s": pa.array(words), "big": pa.array(words, pa.large_string())}),
                   path, row_group_size=600)
    columns = [("__time", "t", pa.timestamp("us", tz="UTC")), ("n", "n", pa.int64()), ("gone", "gone", pa.string()),
               ("s", "s", pa.string()), ("s2", "big", pa.string()), ("n_text", "n", pa.string())]
    batches = list(read_pieces([(str(path), 0, 100, 450), (str(path), 1, 0, 400)], columns, batch_rows=128))
    table = pa.Table.from_batches(batches)
    # STRING columns travel as dictionary arrays, whatever the file stores them as.
    assert table.schema == pa.schema([pa.field(n, travel_type(t)) for n, _, t in columns])
    assert table.schema.field("s").type == pa.dictionary(pa.int32(), pa.string())
    assert table.column("n").to_pylist() == list(range(100, 550)) + list(range(600, 1000))
    assert table.column("gone").null_count == table.num_rows
    wanted = words[100:550] + words[600:1000]
    assert table.column("s").to_pylist() == table.column("s2").to_pylist() == wanted
    assert table.column("n_text").to_pylist() == [str(i) for i in list(range(100, 550)) + list(range(600, 1000))]
    assert table.column("__time")[0].as_py().timestamp() == 0.1


def test_count_on_driver_reads_each_row_group_once_and_counts_as_the_tasks_do(tmp_path):
    from common.types.granularity import Granularity
    from services.ingestion.arrow_scan import TASK_COLUMN, ArrowScan, count_chunks, count_on_driver, scan_rows

    path = tmp_path / "times.parquet"
    day = 86_400_000
    # Nulls, times before 1970 and far ahead, and row groups that cross day boundaries.
    times = [None if i % 97 == 0 else (i - 90_000) * 263_000 + (i % 5) * day * 40 for i in range(300_000)]
    pq.write_table(pa.table({"t": pa.array(times, pa.timestamp("ms")), "x": [str(i % 13) for i in range(300_000)]}),
                   path, row_group_size=100_000)
    groups = [NativeGroup((str(path),), (), ((100_000, 100_000, 100_000),))]
    columns = (("__time", "t", pa.timestamp("us", tz="UTC")), ("x", "x", pa.string()))
    scan = ArrowScan(_tasks(groups, 8), columns)
    assert scan_rows(scan) == 300_000
    assert any(piece[2] for task in scan.tasks for piece in task)  # some row groups are cut
    for gran in (Granularity.parse("day"), Granularity.parse("hour"), Granularity.parse("all")):
        want: dict = {}
        for i in range(len(scan.tasks)):
            [batch] = count_chunks([pa.record_batch([pa.array([i], pa.int64())], names=[TASK_COLUMN])], scan, gran)
            for chunk, n in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                want[chunk] = want.get(chunk, 0) + n
        got = count_on_driver(scan, gran)
        assert got == want
        assert got[None] == sum(1 for t in times if t is None)
        assert sum(got.values()) == 300_000
