"""CatalogClient: the coordinator's CatalogService over gRPC, for brokers (catalog cache, DDL) and
tools. Status codes come back as the catalog's own exceptions, so callers handle a stale version
or a missing table the same way whether they talk to the store or to a remote coordinator."""

from __future__ import annotations

import json

import grpc

from common.catalog.catalog_errors import (
    SchemaNotFoundError,
    TableExistsError,
    TableNotFoundError,
    VersionConflictError,
)
from common.catalog.operations import CatalogOperation, CreateTable, DropTable, EditTable, TableEdit
from common.catalog.table_spec import SCHEMAS, TableId, TableMetadata, TableSpec
from common.errors import StrataError, ValidationError
from services.coordinator.catalog_manager import OperationResult
from services.coordinator.catalog_server import CURRENT_VERSION_METADATA
from services.coordinator.catalog_store import CatalogDelta
from services.grpc_server import channel
from services.query_errors import kind_of_code
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.convert import metadata_from_proto, table_id_from_proto, table_id_to_proto
from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc
from services.security.authorizer import Unauthenticated

DEFAULT_TIMEOUT_S = 30.0


def _current_version(exc: grpc.RpcError) -> int:
    for key, value in exc.trailing_metadata() or ():
        if key == CURRENT_VERSION_METADATA:
            return int(value)
    return 0


class CatalogClient:
    """``authorization`` is sent as the ``authorization`` metadata (e.g. 'Basic ...'); every
    call has a deadline of ``timeout_s``."""

    def __init__(self, target: str, authorization: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 security: TransportSecurity = NO_SECURITY) -> None:
        self._channel = channel(target, security)
        self._stub = catalog_pb2_grpc.CatalogServiceStub(self._channel)
        self._metadata = (("authorization", authorization),) if authorization else ()
        self.timeout_s = timeout_s

    def as_user(self, authorization: str | None) -> CatalogClient:
        """The same connection, calling with another user's credentials (a broker running a
        DDL statement for its client). Close only the original."""
        other = object.__new__(CatalogClient)
        other._channel, other._stub, other.timeout_s = self._channel, self._stub, self.timeout_s
        other._metadata = (("authorization", authorization),) if authorization else ()
        return other

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CatalogClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, table: TableId | None = None, expected: int | None = None):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            code, detail = exc.code(), exc.details() or ""
            if code == grpc.StatusCode.NOT_FOUND:
                if table is not None and table.schema in SCHEMAS:
                    raise TableNotFoundError(table) from None
                raise SchemaNotFoundError(table.schema if table else "?", SCHEMAS) from None
            if code == grpc.StatusCode.ABORTED:
                raise VersionConflictError(table, expected or 0, _current_version(exc)) from None
            if code == grpc.StatusCode.ALREADY_EXISTS:
                raise TableExistsError(table, _current_version(exc)) from None
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise ValidationError(detail) from None
            if code == grpc.StatusCode.PERMISSION_DENIED:
                raise PermissionError(detail) from None
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise Unauthenticated(detail) from None
            raise StrataError(f"catalog {method} failed: {code.name}: {detail}", kind=kind_of_code(code)) from None

    # ---- writes -------------------------------------------------------------------------------
    def create(self, table: TableId, spec: TableSpec, action: str = "New", version: int | None = None
               ) -> tuple[TableMetadata, bool]:
        out = self._call("CreateTable", catalog_pb2.CreateTableRequest(
            id=table_id_to_proto(table), spec_json=json.dumps(spec.to_json()), action=action,
            version=version or 0), table, version)
        return metadata_from_proto(out.table), out.written

    def update(self, table: TableId, partial: dict, version: int | None = None) -> TableMetadata:
        out = self._call("UpdateTable", catalog_pb2.UpdateTableRequest(
            id=table_id_to_proto(table), spec_json=json.dumps(partial), version=version or 0), table, version)
        return metadata_from_proto(out.table)

    def edit(self, table: TableId, edits: list[TableEdit], version: int | None = None) -> TableMetadata:
        out = self._call("EditTable", catalog_pb2.EditTableRequest(
            id=table_id_to_proto(table), edits_json=json.dumps([e.to_json() for e in edits]), version=version or 0),
            table, version)
        return metadata_from_proto(out.table)

    def drop(self, table: TableId, if_exists: bool = False, purge: bool = False) -> catalog_pb2.DropTableResponse:
        return self._call("DropTable", catalog_pb2.DropTableRequest(id=table_id_to_proto(table), if_exists=if_exists,
                                                                    purge=purge), table)

    def execute(self, op: CatalogOperation) -> OperationResult:
        """Runs a DDL operation (``common.catalog.translate_ddl``) on the coordinator."""
        if isinstance(op, CreateTable):
            stored, written = self.create(op.table, op.spec, op.action)
            return OperationResult(op.describe() if written else f"table {op.table} already exists; left unchanged",
                                   stored)
        if isinstance(op, EditTable):
            return OperationResult(op.describe(), self.edit(op.table, list(op.edits)))
        if isinstance(op, DropTable):
            out = self.drop(op.table, op.if_exists, op.purge)
            if not out.dropped and not out.segments_marked_unused:
                return OperationResult(f"table {op.table} does not exist; nothing dropped")
            message = op.describe() + (f" ({out.segments_marked_unused} segments)" if op.purge else "")
            return OperationResult(message, None, out.segments_marked_unused)
        raise ValidationError(f"unknown catalog operation {type(op).__name__}; valid: CreateTable, EditTable, "
                              "DropTable")

    def flush(self) -> int:
        return self._call("Flush", catalog_pb2.FlushRequest()).version

    # ---- reads --------------------------------------------------------------------------------
    def get(self, table: TableId) -> TableMetadata:
        return metadata_from_proto(self._call("GetTable", catalog_pb2.GetTableRequest(id=table_id_to_proto(table)),
                                              table))

    def schemas(self) -> list[str]:
        return list(self._call("ListSchemas", catalog_pb2.ListSchemasRequest()).schemas)

    def list(self, schema: str | None = None) -> CatalogDelta:
        """Every live entry, with the version to pass to ``changes`` next."""
        out = self._call("ListTables", catalog_pb2.ListTablesRequest(schema=schema or ""),
                         TableId(schema, "") if schema else None)
        return CatalogDelta([metadata_from_proto(t) for t in out.tables], [], out.max_update_time)

    def changes(self, since: int, schema: str | None = None) -> CatalogDelta:
        """Entries written and ids dropped after ``since`` (> 0)."""
        out = self._call("ListTables", catalog_pb2.ListTablesRequest(schema=schema or "", since_update_time=since),
                         TableId(schema, "") if schema else None)
        return CatalogDelta([metadata_from_proto(t) for t in out.tables],
                            [table_id_from_proto(d) for d in out.deleted], out.max_update_time)
