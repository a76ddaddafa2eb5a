"""Benchmarks that print ratios against DuckDB (see docs/benchmarks.md)."""
