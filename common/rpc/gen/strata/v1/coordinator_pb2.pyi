from common.rpc.gen.strata.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PublishSegmentsRequest(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentDescriptor]
    def __init__(self, segments: _Optional[_Iterable[_Union[_types_pb2.SegmentDescriptor, _Mapping]]] = ...) -> None: ...

class PublishSegmentsResponse(_message.Message):
    __slots__ = ("published",)
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    published: int
    def __init__(self, published: _Optional[int] = ...) -> None: ...

class ListSegmentsRequest(_message.Message):
    __slots__ = ("datasource", "include_unused")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_UNUSED_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    include_unused: bool
    def __init__(self, datasource: _Optional[str] = ..., include_unused: _Optional[bool] = ...) -> None: ...

class SegmentRecord(_message.Message):
    __slots__ = ("descriptor", "used", "created_ms")
    DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    descriptor: _types_pb2.SegmentDescriptor
    used: bool
    created_ms: int
    def __init__(self, descriptor: _Optional[_Union[_types_pb2.SegmentDescriptor, _Mapping]] = ..., used: _Optional[bool] = ..., created_ms: _Optional[int] = ...) -> None: ...

class ListSegmentsResponse(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[SegmentRecord]
    def __init__(self, segments: _Optional[_Iterable[_Union[SegmentRecord, _Mapping]]] = ...) -> None: ...

class MarkUnusedRequest(_message.Message):
    __slots__ = ("ids", "datasource", "interval")
    IDS_FIELD_NUMBER: _ClassVar[int]
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    datasource: str
    interval: _types_pb2.Interval
    def __init__(self, ids: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., datasource: _Optional[str] = ..., interval: _Optional[_Union[_types_pb2.Interval, _Mapping]] = ...) -> None: ...

class MarkUnusedResponse(_message.Message):
    __slots__ = ("marked",)
    MARKED_FIELD_NUMBER: _ClassVar[int]
    marked: int
    def __init__(self, marked: _Optional[int] = ...) -> None: ...

class ListServersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerStatus(_message.Message):
    __slots__ = ("info", "served", "served_bytes")
    INFO_FIELD_NUMBER: _ClassVar[int]
    SERVED_FIELD_NUMBER: _ClassVar[int]
    SERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    info: _types_pb2.ServerInfo
    served: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    served_bytes: int
    def __init__(self, info: _Optional[_Union[_types_pb2.ServerInfo, _Mapping]] = ..., served: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., served_bytes: _Optional[int] = ...) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ("servers", "leader")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[ServerStatus]
    leader: str
    def __init__(self, servers: _Optional[_Iterable[_Union[ServerStatus, _Mapping]]] = ..., leader: _Optional[str] = ...) -> None: ...

class LoadStatusRequest(_message.Message):
    __slots__ = ("datasource",)
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    def __init__(self, datasource: _Optional[str] = ...) -> None: ...

class SegmentLoad(_message.Message):
    __slots__ = ("id", "servers", "wanted_replicas")
    ID_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    WANTED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    id: _types_pb2.SegmentId
    servers: _containers.RepeatedScalarFieldContainer[str]
    wanted_replicas: int
    def __init__(self, id: _Optional[_Union[_types_pb2.SegmentId, _Mapping]] = ..., servers: _Optional[_Iterable[str]] = ..., wanted_replicas: _Optional[int] = ...) -> None: ...

class LoadStatusResponse(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[SegmentLoad]
    def __init__(self, segments: _Optional[_Iterable[_Union[SegmentLoad, _Mapping]]] = ...) -> None: ...
