from services.rpc.gen.strata.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PublishSegmentsRequest(_message.Message):
    __slots__ = ("segments", "replace_datasource", "replace_intervals", "task_id", "stream", "replace_expected", "check_replace_expected")
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_INTERVALS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    REPLACE_EXPECTED_FIELD_NUMBER: _ClassVar[int]
    CHECK_REPLACE_EXPECTED_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentDescriptor]
    replace_datasource: str
    replace_intervals: _containers.RepeatedCompositeFieldContainer[_types_pb2.Interval]
    task_id: str
    stream: StreamCommit
    replace_expected: _containers.RepeatedCompositeFieldContainer[_types_pb2.SegmentId]
    check_replace_expected: bool
    def __init__(self, segments: _Optional[_Iterable[_Union[_types_pb2.SegmentDescriptor, _Mapping]]] = ..., replace_datasource: _Optional[str] = ..., replace_intervals: _Optional[_Iterable[_Union[_types_pb2.Interval, _Mapping]]] = ..., task_id: _Optional[str] = ..., stream: _Optional[_Union[StreamCommit, _Mapping]] = ..., replace_expected: _Optional[_Iterable[_Union[_types_pb2.SegmentId, _Mapping]]] = ..., check_replace_expected: _Optional[bool] = ...) -> None: ...

class StreamCommit(_message.Message):
    __slots__ = ("datasource", "topic", "start", "end")
    class StartEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class EndEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    topic: str
    start: _containers.ScalarMap[int, int]
    end: _containers.ScalarMap[int, int]
    def __init__(self, datasource: _Optional[str] = ..., topic: _Optional[str] = ..., start: _Optional[_Mapping[int, int]] = ..., end: _Optional[_Mapping[int, int]] = ...) -> None: ...

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
    __slots__ = ("descriptor", "used", "created_ms", "realtime")
    DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    REALTIME_FIELD_NUMBER: _ClassVar[int]
    descriptor: _types_pb2.SegmentDescriptor
    used: bool
    created_ms: int
    realtime: bool
    def __init__(self, descriptor: _Optional[_Union[_types_pb2.SegmentDescriptor, _Mapping]] = ..., used: _Optional[bool] = ..., created_ms: _Optional[int] = ..., realtime: _Optional[bool] = ...) -> None: ...

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

class AllocateSegmentsRequest(_message.Message):
    __slots__ = ("datasource", "intervals", "mode", "task_id", "partitions")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    intervals: _containers.RepeatedCompositeFieldContainer[_types_pb2.Interval]
    mode: str
    task_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, datasource: _Optional[str] = ..., intervals: _Optional[_Iterable[_Union[_types_pb2.Interval, _Mapping]]] = ..., mode: _Optional[str] = ..., task_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("interval", "version", "first_partition", "core_partitions")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FIRST_PARTITION_FIELD_NUMBER: _ClassVar[int]
    CORE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    interval: _types_pb2.Interval
    version: str
    first_partition: int
    core_partitions: int
    def __init__(self, interval: _Optional[_Union[_types_pb2.Interval, _Mapping]] = ..., version: _Optional[str] = ..., first_partition: _Optional[int] = ..., core_partitions: _Optional[int] = ...) -> None: ...

class AllocateSegmentsResponse(_message.Message):
    __slots__ = ("allocations",)
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    allocations: _containers.RepeatedCompositeFieldContainer[Allocation]
    def __init__(self, allocations: _Optional[_Iterable[_Union[Allocation, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "datasource", "type", "state", "statement", "spec_json", "report_json", "error", "created_ms", "started_ms", "finished_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATEMENT_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    datasource: str
    type: str
    state: str
    statement: str
    spec_json: str
    report_json: str
    error: str
    created_ms: int
    started_ms: int
    finished_ms: int
    def __init__(self, id: _Optional[str] = ..., datasource: _Optional[str] = ..., type: _Optional[str] = ..., state: _Optional[str] = ..., statement: _Optional[str] = ..., spec_json: _Optional[str] = ..., report_json: _Optional[str] = ..., error: _Optional[str] = ..., created_ms: _Optional[int] = ..., started_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ...) -> None: ...

class SubmitTaskRequest(_message.Message):
    __slots__ = ("datasource", "type", "statement", "spec_json")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATEMENT_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    type: str
    statement: str
    spec_json: str
    def __init__(self, datasource: _Optional[str] = ..., type: _Optional[str] = ..., statement: _Optional[str] = ..., spec_json: _Optional[str] = ...) -> None: ...

class TaskRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("datasource", "state")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    state: str
    def __init__(self, datasource: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class UpdateTaskRequest(_message.Message):
    __slots__ = ("id", "state", "report_json", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    report_json: str
    error: str
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., report_json: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ListSupervisorsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSupervisorsResponse(_message.Message):
    __slots__ = ("supervisors_json",)
    SUPERVISORS_JSON_FIELD_NUMBER: _ClassVar[int]
    supervisors_json: str
    def __init__(self, supervisors_json: _Optional[str] = ...) -> None: ...

class ListRulesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRulesResponse(_message.Message):
    __slots__ = ("rules_json",)
    RULES_JSON_FIELD_NUMBER: _ClassVar[int]
    rules_json: str
    def __init__(self, rules_json: _Optional[str] = ...) -> None: ...
