from services.rpc.gen.strata.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunQueryRequest(_message.Message):
    __slots__ = ("query_json", "segments", "schema", "query_id")
    class SchemaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    QUERY_JSON_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    query_json: str
    segments: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    schema: _containers.ScalarMap[str, str]
    query_id: str
    def __init__(self, query_json: _Optional[str] = ..., segments: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., schema: _Optional[_Mapping[str, str]] = ..., query_id: _Optional[str] = ...) -> None: ...

class HistoricalLoadStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HistoricalLoadStatusResponse(_message.Message):
    __slots__ = ("served", "loading", "cache_bytes", "max_cache_bytes")
    SERVED_FIELD_NUMBER: _ClassVar[int]
    LOADING_FIELD_NUMBER: _ClassVar[int]
    CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    served: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    loading: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    cache_bytes: int
    max_cache_bytes: int
    def __init__(self, served: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., loading: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., cache_bytes: _Optional[int] = ..., max_cache_bytes: _Optional[int] = ...) -> None: ...
