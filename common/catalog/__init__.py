"""The table catalog (Druid's catalog proposal): user-declared metadata for datasources (schema
``druid``) and input tables (schema ``ext``), kept in the coordinator's metadata DB.

    table_spec.py      TableId, ColumnSpec, TableSpec, TableMetadata and their JSON forms
    validation.py      what each table type may say: properties, column types, names
    operations.py      PUT merge, moveColumn, dropColumn, hideColumns as pure spec -> spec edits,
                       and the CreateTable / EditTable / DropTable operations
    ddl.py             CREATE / ALTER / DROP TABLE statements to those operations
    input_table.py     an input table as EXTERN's input source, format and signature
    catalog_errors.py  not found, already exists, stale version

Everything here is pure; the store, REST and gRPC edges live in services/coordinator.
"""

from common.catalog.catalog_errors import (
    SchemaNotFoundError,
    TableExistsError,
    TableNotFoundError,
    VersionConflictError,
)
from common.catalog.ddl import translate_ddl
from common.catalog.operations import (
    ACTIONS,
    AddColumns,
    CatalogOperation,
    CreateTable,
    DropColumns,
    DropTable,
    EditTable,
    HideColumns,
    MergeUpdate,
    MoveColumn,
    SetProperties,
    TableEdit,
    apply_edits,
    edit_from_json,
)
from common.catalog.table_spec import (
    ACTIVE,
    DATASOURCE,
    DRUID_SCHEMA,
    EXT_SCHEMA,
    HTTP,
    INLINE,
    INPUT_TYPES,
    LOCAL,
    SCHEMAS,
    TABLE_TYPES,
    ColumnSpec,
    TableId,
    TableMetadata,
    TableSpec,
)
from common.catalog.validation import SEGMENT_GRANULARITIES, SQL_TYPES, validate_spec, validate_table

__all__ = [
    "ACTIONS", "ACTIVE", "DATASOURCE", "DRUID_SCHEMA", "EXT_SCHEMA", "HTTP", "INLINE",
    "INPUT_TYPES", "LOCAL", "SCHEMAS", "SEGMENT_GRANULARITIES", "SQL_TYPES", "TABLE_TYPES", "AddColumns",
    "CatalogOperation", "ColumnSpec", "CreateTable", "DropColumns", "DropTable", "EditTable", "HideColumns",
    "MergeUpdate", "MoveColumn", "SchemaNotFoundError", "SetProperties", "TableEdit", "TableExistsError", "TableId", "TableMetadata",
    "TableNotFoundError", "TableSpec", "VersionConflictError", "apply_edits", "edit_from_json",
    "translate_ddl", "validate_spec", "validate_table",
]
