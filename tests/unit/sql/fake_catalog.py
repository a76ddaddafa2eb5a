"""A SqlCatalog over in-memory schemas and system tables, as the broker would provide."""

from __future__ import annotations

import pyarrow as pa

from common.sql.catalog import SegmentsOnlyCatalog
from common.types.column_type import ColumnType


class FakeCatalog(SegmentsOnlyCatalog):
    def __init__(self, schemas: dict[str, dict[str, ColumnType]], system: dict[str, pa.Table] | None = None) -> None:
        self.schemas = schemas
        self.system = dict(system or {})
        self.system_calls = 0

    def datasource_names(self) -> list[str]:
        return list(self.schemas)

    def datasource_schema(self, name: str) -> dict[str, ColumnType] | None:
        return self.schemas.get(name)

    def system_table(self, schema: str, name: str) -> pa.Table | None:
        self.system_calls += 1
        return self.system.get(name) if schema == "sys" else None

    def system_table_names(self) -> list[str]:
        return list(self.system)
