from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TableId(_message.Message):
    __slots__ = ("schema", "name")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    schema: str
    name: str
    def __init__(self, schema: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class TableMetadata(_message.Message):
    __slots__ = ("id", "creation_time", "update_time", "state", "spec_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    creation_time: int
    update_time: int
    state: str
    spec_json: str
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ..., creation_time: _Optional[int] = ..., update_time: _Optional[int] = ..., state: _Optional[str] = ..., spec_json: _Optional[str] = ...) -> None: ...

class CreateTableRequest(_message.Message):
    __slots__ = ("id", "spec_json", "action", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    spec_json: str
    action: str
    version: int
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ..., spec_json: _Optional[str] = ..., action: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class UpdateTableRequest(_message.Message):
    __slots__ = ("id", "spec_json", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    spec_json: str
    version: int
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ..., spec_json: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class EditTableRequest(_message.Message):
    __slots__ = ("id", "edits_json", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    EDITS_JSON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    edits_json: str
    version: int
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ..., edits_json: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class WriteTableResponse(_message.Message):
    __slots__ = ("table", "written")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    table: TableMetadata
    written: bool
    def __init__(self, table: _Optional[_Union[TableMetadata, _Mapping]] = ..., written: _Optional[bool] = ...) -> None: ...

class GetTableRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ...) -> None: ...

class DropTableRequest(_message.Message):
    __slots__ = ("id", "if_exists", "purge")
    ID_FIELD_NUMBER: _ClassVar[int]
    IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    id: TableId
    if_exists: bool
    purge: bool
    def __init__(self, id: _Optional[_Union[TableId, _Mapping]] = ..., if_exists: _Optional[bool] = ..., purge: _Optional[bool] = ...) -> None: ...

class DropTableResponse(_message.Message):
    __slots__ = ("dropped", "segments_marked_unused", "version")
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_MARKED_UNUSED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    dropped: bool
    segments_marked_unused: int
    version: int
    def __init__(self, dropped: _Optional[bool] = ..., segments_marked_unused: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class ListSchemasRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSchemasResponse(_message.Message):
    __slots__ = ("schemas",)
    SCHEMAS_FIELD_NUMBER: _ClassVar[int]
    schemas: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, schemas: _Optional[_Iterable[str]] = ...) -> None: ...

class ListTablesRequest(_message.Message):
    __slots__ = ("schema", "since_update_time")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SINCE_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    schema: str
    since_update_time: int
    def __init__(self, schema: _Optional[str] = ..., since_update_time: _Optional[int] = ...) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("tables", "deleted", "max_update_time")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    MAX_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[TableMetadata]
    deleted: _containers.RepeatedCompositeFieldContainer[TableId]
    max_update_time: int
    def __init__(self, tables: _Optional[_Iterable[_Union[TableMetadata, _Mapping]]] = ..., deleted: _Optional[_Iterable[_Union[TableId, _Mapping]]] = ..., max_update_time: _Optional[int] = ...) -> None: ...

class FlushRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FlushResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...
