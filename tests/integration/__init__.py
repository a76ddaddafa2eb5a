"""Integration tests: real servers (S3 via moto, etcd, PostgreSQL) on loopback."""
