"""Ingestion: reading input files into Arrow and building segments from them. Today this is the
local (single-process) path used by the quickstart and benchmarks; the Spark job builds on it."""
