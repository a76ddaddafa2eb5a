from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyValue(_message.Message):
    __slots__ = ("key", "value", "lease_id", "mod_revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    lease_id: int
    mod_revision: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., lease_id: _Optional[int] = ..., mod_revision: _Optional[int] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "value", "lease_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    lease_id: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., lease_id: _Optional[int] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("revision",)
    REVISION_FIELD_NUMBER: _ClassVar[int]
    revision: int
    def __init__(self, revision: _Optional[int] = ...) -> None: ...

class PutIfAbsentResponse(_message.Message):
    __slots__ = ("put", "existing")
    PUT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    put: bool
    existing: KeyValue
    def __init__(self, put: _Optional[bool] = ..., existing: _Optional[_Union[KeyValue, _Mapping]] = ...) -> None: ...

class KeyRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class GetPrefixResponse(_message.Message):
    __slots__ = ("kvs", "revision")
    KVS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    kvs: _containers.RepeatedCompositeFieldContainer[KeyValue]
    revision: int
    def __init__(self, kvs: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class GrantLeaseRequest(_message.Message):
    __slots__ = ("ttl_seconds",)
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ttl_seconds: int
    def __init__(self, ttl_seconds: _Optional[int] = ...) -> None: ...

class LeaseRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    def __init__(self, lease_id: _Optional[int] = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ("lease_id", "ttl_seconds", "alive")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    ttl_seconds: int
    alive: bool
    def __init__(self, lease_id: _Optional[int] = ..., ttl_seconds: _Optional[int] = ..., alive: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefix", "start_revision")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    START_REVISION_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    start_revision: int
    def __init__(self, prefix: _Optional[str] = ..., start_revision: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("type", "kv", "revision")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PUT: _ClassVar[WatchEvent.Type]
        DELETE: _ClassVar[WatchEvent.Type]
    PUT: WatchEvent.Type
    DELETE: WatchEvent.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KV_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    type: WatchEvent.Type
    kv: KeyValue
    revision: int
    def __init__(self, type: _Optional[_Union[WatchEvent.Type, str]] = ..., kv: _Optional[_Union[KeyValue, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...
