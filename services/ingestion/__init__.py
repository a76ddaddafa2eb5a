"""Ingestion: Druid SQL INSERT/REPLACE statements run as Spark jobs that build segments, push them
to deep storage and publish them atomically (statement -> external_source -> source_reader ->
spark_sql -> partitioning -> build -> spark_job), plus the local single-process reader
(local_input) used by the quickstart and benchmarks."""
