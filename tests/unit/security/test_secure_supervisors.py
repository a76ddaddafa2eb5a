"""sys.supervisors under authorization: a user sees the supervisors of datasources they may READ."""

from __future__ import annotations

import pyarrow as pa

from services.broker.core.druid_sys_columns import SUPERVISORS_SCHEMA
from services.security.secure_catalog import SecureSqlCatalog


class Inner:
    def system_table(self, schema, name):
        return pa.Table.from_pylist([
            {"supervisor_id": "wiki", "state": "RUNNING", "detailed_state": "RUNNING", "healthy": 1, "type": "kafka",
             "source": "edits", "suspended": 0, "spec": "{}"},
            {"supervisor_id": "secret", "state": "RUNNING", "detailed_state": "RUNNING", "healthy": 1,
             "type": "kafka", "source": "pay", "suspended": 0, "spec": "{}"}], schema=SUPERVISORS_SCHEMA)


class OnlyWiki:
    enabled = True
    admin_user = "admin"

    def can(self, user, action, resource_type, name) -> bool:
        return user == "admin" or (user == "ann" and name == "wiki")


def test_supervisors_filtered_by_datasource_read():
    ids = lambda user: SecureSqlCatalog(Inner(), OnlyWiki(), user).system_table("sys", "supervisors").column(  # noqa: E731
        "supervisor_id").to_pylist()
    assert ids("ann") == ["wiki"]
    assert ids("admin") == ["wiki", "secret"]
    assert ids("bob") == []
