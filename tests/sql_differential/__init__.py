"""SQL differential suite: a corpus of Druid-dialect queries run through the broker of a real
embedded cluster over Arrow Flight SQL (the ADBC driver), checked against DuckDB over the same
Arrow tables, or against expected rows for system tables."""
