"""Conversions between protobuf messages and strata's domain types (SegmentId, Interval, schemas)."""

from __future__ import annotations

from common.rpc.gen.strata.v1 import types_pb2
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from common.types.interval import Interval


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
