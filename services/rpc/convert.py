"""Conversions between protobuf messages and strata's domain types (SegmentId, Interval, schemas,
segment descriptors, server infos, tasks, catalog table ids and metadata)."""

from __future__ import annotations

import json

from common.catalog.table_spec import TableId, TableMetadata, TableSpec
from common.errors import ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from common.types.interval import Interval
from services.rpc.gen.strata.v1 import catalog_pb2, coordinator_pb2, types_pb2


def interval_to_proto(iv: Interval) -> types_pb2.Interval:
    return types_pb2.Interval(start_ms=iv.start, end_ms=iv.end)


def interval_from_proto(msg: types_pb2.Interval) -> Interval:
    return Interval(msg.start_ms, msg.end_ms)


def segment_id_to_proto(sid: SegmentId) -> types_pb2.SegmentId:
    return types_pb2.SegmentId(datasource=sid.datasource, interval=interval_to_proto(sid.interval),
                               version=sid.version, partition=sid.partition)


def segment_id_from_proto(msg: types_pb2.SegmentId) -> SegmentId:
    return SegmentId(msg.datasource, interval_from_proto(msg.interval), msg.version, msg.partition)


def schema_to_proto(schema: dict[str, ColumnType]) -> dict[str, str]:
    return {name: ctype.native_name for name, ctype in schema.items()}


def schema_from_proto(schema) -> dict[str, ColumnType]:
    return {name: ColumnType.parse(text) for name, text in schema.items()}


def descriptor_to_proto(d: SegmentDescriptor) -> types_pb2.SegmentDescriptor:
    return types_pb2.SegmentDescriptor(id=segment_id_to_proto(d.id), size_bytes=d.size, num_rows=d.num_rows,
                                       location=d.location, manifest_json=d.manifest_json.encode(),
                                       num_partitions=d.num_partitions)


def descriptor_from_proto(msg: types_pb2.SegmentDescriptor) -> SegmentDescriptor:
    if not msg.location:
        raise ValidationError(f"segment {segment_id_from_proto(msg.id)} has no deep storage location")
    return SegmentDescriptor(segment_id_from_proto(msg.id), msg.size_bytes, msg.num_rows, msg.location,
                             msg.num_partitions or 1, msg.manifest_json.decode())


def server_info_to_proto(info: dict) -> types_pb2.ServerInfo:
    fields = {k: info[k] for k in ("id", "role", "host", "grpc_port", "http_port", "flight_port", "max_cache_bytes",
                                   "started_ms", "tier") if k in info}
    return types_pb2.ServerInfo(**fields)


def task_to_proto(t) -> coordinator_pb2.Task:
    return coordinator_pb2.Task(id=t.id, datasource=t.datasource, type=t.type, state=t.state, statement=t.statement,
                                spec_json=json.dumps(t.spec), report_json=json.dumps(t.report), error=t.error,
                                created_ms=t.created_ms, started_ms=t.started_ms, finished_ms=t.finished_ms)


def table_id_to_proto(table: TableId) -> catalog_pb2.TableId:
    return catalog_pb2.TableId(schema=table.schema, name=table.name)


def table_id_from_proto(msg: catalog_pb2.TableId) -> TableId:
    return TableId(msg.schema, msg.name)


def metadata_to_proto(m: TableMetadata) -> catalog_pb2.TableMetadata:
    return catalog_pb2.TableMetadata(id=table_id_to_proto(m.id), creation_time=m.creation_time,
                                     update_time=m.update_time, state=m.state,
                                     spec_json=json.dumps(m.spec.to_json()))


def metadata_from_proto(msg: catalog_pb2.TableMetadata) -> TableMetadata:
    table = table_id_from_proto(msg.id)
    return TableMetadata(table, msg.creation_time, msg.update_time, msg.state,
                         TableSpec.from_text(msg.spec_json, str(table)))
