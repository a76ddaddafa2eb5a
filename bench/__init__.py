"""Benchmarks that print ratios against DuckDB and ClickHouse (see docs/benchmarks.md)."""
