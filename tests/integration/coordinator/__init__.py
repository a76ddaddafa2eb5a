"""The coordinator's metadata store against SQLite and a real PostgreSQL."""
