from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Interval(_message.Message):
    __slots__ = ("start_ms", "end_ms")
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    start_ms: int
    end_ms: int
    def __init__(self, start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ...) -> None: ...

class SegmentId(_message.Message):
    __slots__ = ("datasource", "interval", "version", "partition")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    interval: Interval
    version: str
    partition: int
    def __init__(self, datasource: _Optional[str] = ..., interval: _Optional[_Union[Interval, _Mapping]] = ..., version: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class SegmentDescriptor(_message.Message):
    __slots__ = ("id", "size_bytes", "num_rows", "location", "manifest_json", "num_partitions")
    ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    id: SegmentId
    size_bytes: int
    num_rows: int
    location: str
    manifest_json: bytes
    num_partitions: int
    def __init__(self, id: _Optional[_Union[SegmentId, _Mapping]] = ..., size_bytes: _Optional[int] = ..., num_rows: _Optional[int] = ..., location: _Optional[str] = ..., manifest_json: _Optional[bytes] = ..., num_partitions: _Optional[int] = ...) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("id", "role", "host", "grpc_port", "http_port", "flight_port", "max_cache_bytes", "started_ms", "tier")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    GRPC_PORT_FIELD_NUMBER: _ClassVar[int]
    HTTP_PORT_FIELD_NUMBER: _ClassVar[int]
    FLIGHT_PORT_FIELD_NUMBER: _ClassVar[int]
    MAX_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    id: str
    role: str
    host: str
    grpc_port: int
    http_port: int
    flight_port: int
    max_cache_bytes: int
    started_ms: int
    tier: str
    def __init__(self, id: _Optional[str] = ..., role: _Optional[str] = ..., host: _Optional[str] = ..., grpc_port: _Optional[int] = ..., http_port: _Optional[int] = ..., flight_port: _Optional[int] = ..., max_cache_bytes: _Optional[int] = ..., started_ms: _Optional[int] = ..., tier: _Optional[str] = ...) -> None: ...

class QueryStats(_message.Message):
    __slots__ = ("segments", "rows_in_segments", "rows_after_prefilter", "rows_scanned", "rows_matched", "bytes_read")
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    ROWS_IN_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    ROWS_AFTER_PREFILTER_FIELD_NUMBER: _ClassVar[int]
    ROWS_SCANNED_FIELD_NUMBER: _ClassVar[int]
    ROWS_MATCHED_FIELD_NUMBER: _ClassVar[int]
    BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    segments: int
    rows_in_segments: int
    rows_after_prefilter: int
    rows_scanned: int
    rows_matched: int
    bytes_read: int
    def __init__(self, segments: _Optional[int] = ..., rows_in_segments: _Optional[int] = ..., rows_after_prefilter: _Optional[int] = ..., rows_scanned: _Optional[int] = ..., rows_matched: _Optional[int] = ..., bytes_read: _Optional[int] = ...) -> None: ...

class ArrowChunk(_message.Message):
    __slots__ = ("ipc_stream", "stats", "last")
    IPC_STREAM_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    ipc_stream: bytes
    stats: QueryStats
    last: bool
    def __init__(self, ipc_stream: _Optional[bytes] = ..., stats: _Optional[_Union[QueryStats, _Mapping]] = ..., last: _Optional[bool] = ...) -> None: ...
