"""bench/before_after.py reads the figures the benchmarks print: the Markdown cells it names (a
"repeated / first run" cell gives two figures), the figures in free-text lines, and hop_cpu's
side-by-side rounds; medians and per-round ratios pair round i's before with round i's after."""

from bench import before_after

ENGINE = """rows 1,000,000; 7 day segments; load average 3.0
| query | strata ms repeated | DuckDB ms repeated | ratio repeated | strata ms first run | DuckDB ms first run | ratio first run | rows scanned | same rows |
|---|---|---|---|---|---|---|---|---|
| hourly timeseries count+sum | 7.6 | 12.8 | 0.59 | 7.2 | 13.5 | 0.53 | 1,000,000 | yes |
| scan rows of one user (equality) | 2.1 | 16.9 | 0.12 | 5.2 | 15.6 | 0.33 | 72 | yes |
ratio = strata ms / DuckDB ms
"""

CLUSTER = """| query | cluster ms | engine ms | DuckDB Parquet ms | DuckDB table ms | ClickHouse ms | same rows |
|---|---|---|---|---|---|---|
| hourly | 10.5 / 30.25 | 4.0 / 9.0 | 12.0 / 13.0 | 1 / 1 | nan / nan | yes |
trivial query through the broker (one text, repeated): p50 1.25 ms, p99 3.00 ms; 812 queries/s with 8 concurrent clients

| SQL query (ADBC Flight SQL) | strata ms | DuckDB Parquet ms | same rows |
|---|---|---|---|
| hourly | 6.5 / 20.0 | 11.0 / 12.0 | yes |
one-segment SQL query through Flight SQL (ADBC), one text repeated: p50 5.90 ms, p99 9.00 ms (goal p50 <= 3 ms); CPU ms per query: broker 2.15, historical 1.00; all processes 3.15
"""

HOP = """rows 500,000, 4 segments, 100 runs per query and round; CPU ms per query from /proc
| round | query | wall p50 ms | broker CPU ms | historicals CPU ms | client CPU ms |
|---|---|---|---|---|---|
| 1 | hourly | 5.00 | 2.000 | 1.000 | 0.500 |
| 1 | daily | 4.00 | 1.000 | 1.000 | 0.500 |
load average 3.1
"""


def test_named_cells_and_lines_become_figures():
    engine = before_after.figures("engine", ENGINE)
    assert engine == {
        "hourly timeseries count+sum · strata repeated": 7.6, "hourly timeseries count+sum · strata first run": 7.2,
        "hourly timeseries count+sum · DuckDB repeated (peer)": 12.8,
        "scan rows of one user (equality) · strata repeated": 2.1,
        "scan rows of one user (equality) · strata first run": 5.2,
        "scan rows of one user (equality) · DuckDB repeated (peer)": 16.9}
    cluster = before_after.figures("cluster", CLUSTER)
    assert cluster["hourly · native via broker repeated"] == 10.5
    assert cluster["hourly · native via broker first run"] == 30.25
    assert cluster["hourly · strata first run"] == 20.0  # the ADBC table's "strata ms"
    assert cluster["trivial native queries/s (8 clients)"] == 812
    assert cluster["one-segment SQL CPU ms, all processes"] == 3.15
    assert not any("ClickHouse" in name or "table" in name for name in cluster)  # not asked for


def test_hop_figures_and_ratios_pair_round_i_before_with_round_i_after():
    hop = before_after.figures("hop_cpu", HOP)
    assert hop["hourly · broker CPU ms"] == 2.0 and hop["daily · wall p50 ms"] == 4.0 and len(hop) == 8
    before = [{"q · broker CPU ms": 2.5}, {"q · broker CPU ms": 2.0}]
    after = [{"q · broker CPU ms": 2.0}, {"q · broker CPU ms": 1.0}]
    [(bench, name, b_med, a_med, ratio, low, high)] = before_after.report("hop_cpu", before, after)
    assert (b_med, a_med, ratio) == (2.25, 1.5, 1.5 / 2.25)
    assert (low, high) == (0.5, 0.8)  # round 2: 1.0 / 2.0, round 1: 2.0 / 2.5
