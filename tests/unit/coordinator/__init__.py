"""Coordinator duties: exact-command tests and an in-memory cluster simulation."""
