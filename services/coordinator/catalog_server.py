"""The catalog's gRPC edge (CatalogService) and ``install_catalog``, which puts the whole catalog
(store, gRPC service, REST routes, version announcements) on a coordinator process."""

from __future__ import annotations

import hmac

from common.catalog.catalog_errors import TableExistsError, VersionConflictError
from common.catalog.operations import edit_from_json
from common.catalog.table_spec import TableSpec, parse_json
from common.errors import ValidationError
from services.coordinator import catalog_http
from services.coordinator.catalog_manager import CatalogManager
from services.coordinator.catalog_store import CatalogStore
from services.rpc.convert import metadata_to_proto, table_id_from_proto, table_id_to_proto
from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc
from services.transport_security import INTERNAL_METADATA
from services.security.authorizer import ALLOW_ALL, Authorizer

CURRENT_VERSION_METADATA = "current-version"


def _version(value: int) -> int | None:
    return value or None  # proto3 has no "absent"; update times are never 0


class CatalogServicer(catalog_pb2_grpc.CatalogServiceServicer):
    def __init__(self, manager: CatalogManager, internal_secret: str = "", certified=None) -> None:
        self.manager = manager  # its authorizer identifies and checks callers
        # A call with the cluster's internal credential and no user (a compaction task reading the
        # table's projections) acts as the admin. ``certified(context)``: whether the call came
        # with the cluster's client certificate (mTLS), the other form of that credential.
        self.internal_secret = internal_secret
        self.certified = certified

    def _call(self, context, fn):
        """Runs ``fn(user)`` with the caller's identity; its errors leave with their kind's status."""
        try:
            metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
            headers = {"Authorization": metadata["authorization"]} if "authorization" in metadata else {}
            if not headers and ((self.internal_secret and hmac.compare_digest(
                    metadata.get(INTERNAL_METADATA, "").encode(), self.internal_secret.encode()))
                    or (self.certified is not None and self.certified(context))):
                user = getattr(self.manager.authorizer, "admin_user", None)
            else:
                user = self.manager.authorizer.user_from_headers(headers)
            return fn(user)
        except (VersionConflictError, TableExistsError) as exc:
            # The caller reads the current version to retry against; the status is the kind's
            # (ABORTED, ALREADY_EXISTS), as for every other error, set by ErrorStatusInterceptor.
            context.set_trailing_metadata(((CURRENT_VERSION_METADATA, str(exc.current_version)),))
            raise

    def CreateTable(self, request, context):
        def run(user):
            table = table_id_from_proto(request.id)
            spec = TableSpec.from_text(request.spec_json or "null", str(table))
            stored, written = self.manager.create(user, table, spec, request.action or "New",
                                                  _version(request.version))
            return catalog_pb2.WriteTableResponse(table=metadata_to_proto(stored), written=written)
        return self._call(context, run)

    def UpdateTable(self, request, context):
        def run(user):
            partial = parse_json(request.spec_json or "null", "partial table spec")
            if not isinstance(partial, dict):
                raise ValidationError(f"the update must be a JSON object (a partial table spec), got {partial!r}")
            stored = self.manager.update(user, table_id_from_proto(request.id), partial, _version(request.version))
            return catalog_pb2.WriteTableResponse(table=metadata_to_proto(stored), written=True)
        return self._call(context, run)

    def EditTable(self, request, context):
        def run(user):
            edits = parse_json(request.edits_json or "null", "edit list")
            if not isinstance(edits, list) or not edits:
                raise ValidationError(f"edits_json must be a non-empty JSON list of edits, got {edits!r}")
            stored = self.manager.edit(user, table_id_from_proto(request.id), [edit_from_json(e) for e in edits],
                                       _version(request.version))
            return catalog_pb2.WriteTableResponse(table=metadata_to_proto(stored), written=True)
        return self._call(context, run)

    def GetTable(self, request, context):
        return self._call(context, lambda user: metadata_to_proto(
            self.manager.get(user, table_id_from_proto(request.id))))

    def DropTable(self, request, context):
        def run(user):
            result = self.manager.drop(user, table_id_from_proto(request.id), request.if_exists, request.purge)
            return catalog_pb2.DropTableResponse(dropped=result.dropped is not None,
                                                 segments_marked_unused=result.segments_marked_unused,
                                                 version=result.version)
        return self._call(context, run)

    def ListSchemas(self, request, context):
        return self._call(context, lambda user: catalog_pb2.ListSchemasResponse(schemas=self.manager.schemas()))

    def ListTables(self, request, context):
        def run(user):
            schema = request.schema or None
            if request.since_update_time > 0:
                delta = self.manager.changes(user, request.since_update_time, schema)
                return catalog_pb2.ListTablesResponse(tables=[metadata_to_proto(t) for t in delta.tables],
                                                      deleted=[table_id_to_proto(d) for d in delta.deleted],
                                                      max_update_time=delta.version)
            # Version first: a change landing between the two reads is then fetched again next
            # time rather than missed.
            version = self.manager.store.version()
            tables = self.manager.list(user, schema)
            return catalog_pb2.ListTablesResponse(tables=[metadata_to_proto(t) for t in tables],
                                                  max_update_time=version)
        return self._call(context, run)

    def Flush(self, request, context):
        return self._call(context, lambda user: catalog_pb2.FlushResponse(version=self.manager.flush(user)))


def add_to_server(grpc_server, servicer: CatalogServicer) -> None:
    grpc_server.add(catalog_pb2_grpc.add_CatalogServiceServicer_to_server, servicer,
                    catalog_pb2.DESCRIPTOR.services_by_name["CatalogService"].full_name)


def install_catalog(process, authorizer: Authorizer | None = None) -> CatalogManager:
    """Puts the catalog on a CoordinatorProcess; call it after construction and before
    ``start()`` (gRPC services cannot be added to a running server). Uses the process's
    metadata store (``process.store``; the strata_tables migration runs with the others),
    ``process.grpc``, ``process.http``, ``process.discovery``, and ``authorizer``, else
    ``process.authorizer`` when the process has one, else ALLOW_ALL. Returns the manager, also
    left on ``process.catalog``.

    Calling it again returns the installed manager (switching it to ``authorizer`` if one is
    given), so a test may install a catalog on a process whose main already did."""
    existing = getattr(process, "catalog", None)
    if isinstance(existing, CatalogManager):
        if authorizer is not None:
            existing.authorizer = authorizer
        return existing
    if authorizer is None:
        authorizer = getattr(process, "authorizer", None) or ALLOW_ALL
    manager = CatalogManager(CatalogStore(process.store), process.store, process.discovery, authorizer)
    security = getattr(process, "security", None)
    credential = getattr(process.grpc, "credential", None)
    add_to_server(process.grpc, CatalogServicer(manager, security.internal_secret if security is not None else "",
                                                credential.certified if credential is not None else None))
    catalog_http.register(process.http, manager)
    process.catalog = manager
    # Brokers (re)starting read everything anyway; announcing now gives the key a value at once.
    manager.announce()
    return manager
