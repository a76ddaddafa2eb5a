"""CatalogService over gRPC (CatalogClient): CRUD, edits, DDL operations, delta listing for
brokers, and status codes mapped back to the catalog's exceptions."""

from __future__ import annotations

import grpc
import pytest

from common.catalog import (
    ColumnSpec,
    TableExistsError,
    TableId,
    TableNotFoundError,
    TableSpec,
    VersionConflictError,
    translate_ddl,
)
from common.catalog.operations import AddColumns, HideColumns, MoveColumn
from common.errors import ValidationError
from services.discovery.keys import CATALOG_VERSION_KEY
from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.catalog_client import CatalogClient
from services.coordinator.store import SegmentRecord
from services.grpc_server import channel
from services.security.authorizer import Unauthenticated
from tests.integration.catalog.conftest import basic

SPEC = TableSpec.from_json({"type": "datasource", "properties": {"segmentGranularity": "DAY"},
                            "columns": [{"name": "a", "sqlType": "VARCHAR"}, {"name": "b", "sqlType": "BIGINT"}]})


@pytest.fixture(scope="module")
def client(coordinator):
    with CatalogClient(f"127.0.0.1:{coordinator.grpc.port}", timeout_s=10) as c:
        yield c


def test_crud_and_versions(client, coordinator, name):
    table = TableId("druid", name)
    stored, written = client.create(table, SPEC)
    assert written and stored.spec == SPEC and client.get(table) == stored
    assert coordinator.discovery.get_prefix(CATALOG_VERSION_KEY)[CATALOG_VERSION_KEY] == str(stored.version).encode()
    with pytest.raises(TableExistsError) as err:
        client.create(table, SPEC)
    assert err.value.current_version == stored.version
    again, written = client.create(table, TableSpec("datasource"), "IfNew")
    assert not written and again == stored
    updated = client.update(table, {"properties": {"targetSegmentRows": 7}}, version=stored.version)
    assert updated.spec.target_segment_rows == 7 and updated.version > stored.version
    with pytest.raises(VersionConflictError) as err:
        client.update(table, {"properties": {"targetSegmentRows": 8}}, version=stored.version)
    assert err.value.current_version == updated.version
    edited = client.edit(table, [AddColumns((ColumnSpec("c", "DOUBLE"),)), MoveColumn("c", "first"),
                                 HideColumns(("old",))], version=updated.version)
    assert edited.spec.column_names == ["c", "a", "b"] and edited.spec.hidden_columns == ["old"]
    with pytest.raises(ValidationError, match="column 'c' already exists"):
        client.edit(table, [AddColumns((ColumnSpec("c"),))])
    with pytest.raises(ValidationError, match="segmentGranularity"):
        client.create(TableId("druid", f"{name}_bad"), TableSpec("datasource", {"segmentGranularity": "P9D"}))
    with pytest.raises(TableNotFoundError):
        client.get(TableId("druid", f"{name}_missing"))
    out = client.drop(table)
    assert out.dropped and out.version > edited.version
    with pytest.raises(TableNotFoundError):
        client.drop(table)
    assert not client.drop(table, if_exists=True).dropped


def test_list_and_delta_for_brokers(client, name):
    full = client.list()
    assert client.schemas() == ["druid", "ext"]
    ds, src = TableId("druid", name), TableId("ext", f"{name}_src")
    client.create(ds, SPEC)
    client.create(src, TableSpec.from_json({"type": "inline", "properties": {"format": "csv", "data": "x"}}))
    delta = client.changes(full.version)
    assert [t.id for t in delta.tables] == [ds, src] and delta.deleted == []
    client.drop(src)
    client.edit(ds, [MoveColumn("b", "first")])
    delta2 = client.changes(delta.version)
    assert [t.id for t in delta2.tables] == [ds] and delta2.deleted == [src]
    assert delta2.tables[0].spec.column_names == ["b", "a"]
    assert client.changes(delta2.version).tables == []
    everything = client.list()
    assert ds in [t.id for t in everything.tables] and src not in [t.id for t in everything.tables]
    assert everything.version == delta2.version
    assert all(t.id.schema == "ext" for t in client.list("ext").tables)
    assert client.flush() == delta2.version


def test_ddl_operations_with_purge(client, coordinator, name):
    day = 86_400_000
    coordinator.store.publish([SegmentRecord(SegmentId(name, Interval(0, day), "v1", 0), 1, 1, "x", "{}")])
    result = client.execute(translate_ddl(f"CREATE TABLE {name} (__time TIMESTAMP, a VARCHAR) PARTITIONED BY HOUR"))
    assert result.message == f"created table druid.{name}" and result.table.spec.segment_granularity == "PT1H"
    result = client.execute(translate_ddl(f"CREATE TABLE IF NOT EXISTS {name} (b VARCHAR)"))
    assert "already exists" in result.message
    result = client.execute(translate_ddl(f"ALTER TABLE {name} ADD COLUMN b BIGINT, MOVE COLUMN b FIRST, "
                                          "SET (targetSegmentRows = 100)"))
    assert result.table.spec.column_names == ["b", "__time", "a"] and result.table.spec.target_segment_rows == 100
    result = client.execute(translate_ddl(f"DROP TABLE {name} PURGE"))
    assert result.segments_marked_unused == 1 and "1 segments" in result.message
    assert coordinator.store.list(name) == []
    assert "nothing dropped" in client.execute(translate_ddl(f"DROP TABLE IF EXISTS {name}")).message


def test_status_codes(coordinator, name):
    stub = catalog_pb2_grpc.CatalogServiceStub(channel(f"127.0.0.1:{coordinator.grpc.port}"))
    with pytest.raises(grpc.RpcError) as err:
        stub.GetTable(catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name=name)), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        stub.CreateTable(catalog_pb2.CreateTableRequest(id=catalog_pb2.TableId(schema="druid", name=name),
                                                        spec_json='{"type": "datasource", "properties": {"x": 1}}'),
                         timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown datasource property x" in err.value.details()
    out = stub.CreateTable(catalog_pb2.CreateTableRequest(id=catalog_pb2.TableId(schema="druid", name=name),
                                                          spec_json='{"type": "datasource"}'), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        stub.UpdateTable(catalog_pb2.UpdateTableRequest(id=catalog_pb2.TableId(schema="druid", name=name),
                                                        spec_json="{}", version=1), timeout=10)
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert dict(err.value.trailing_metadata())["current-version"] == str(out.table.update_time)
    with pytest.raises(grpc.RpcError) as err:
        stub.ListTables(catalog_pb2.ListTablesRequest(schema="nope"), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_grpc_authentication_and_permissions(secured):
    target = f"127.0.0.1:{secured.grpc.port}"
    with CatalogClient(target) as anonymous:
        with pytest.raises(Unauthenticated):
            anonymous.schemas()
    with CatalogClient(target, basic("admin")["Authorization"]) as admin:
        admin.create(TableId("druid", "pub_grpc"), SPEC)
        admin.create(TableId("druid", "hidden_grpc"), SPEC)
    with CatalogClient(target) as shared:
        reader = shared.as_user(basic("reader")["Authorization"])
        names = [t.id.name for t in reader.list().tables]
        assert "pub_grpc" in names and "hidden_grpc" not in names
        with pytest.raises(PermissionError, match="WRITE"):
            reader.drop(TableId("druid", "pub_grpc"))
        with pytest.raises(PermissionError):
            reader.get(TableId("druid", "hidden_grpc"))


def test_install_catalog_is_idempotent(coordinator):
    from services.coordinator.catalog_server import install_catalog

    assert install_catalog(coordinator) is coordinator.catalog
