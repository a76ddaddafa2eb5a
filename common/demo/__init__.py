"""Demo data: deterministic, vectorized generators of realistic rows for the quickstart, tests and
benchmarks. ``wikipedia`` produces Wikipedia-edit rows shaped like Druid's ``wikiticker`` sample
(``__time``, ``channel``, ``page``, ``user``, boolean-as-string flags, sparse geo columns and
``added``/``deleted``/``delta``), as Arrow batches or written to parquet, JSON lines or CSV."""

from common.demo.wikipedia import FORMATS, SCHEMA, generate, table, write

__all__ = ["FORMATS", "SCHEMA", "generate", "table", "write"]
