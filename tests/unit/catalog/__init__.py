"""Unit tests of the table catalog model (common/catalog)."""
