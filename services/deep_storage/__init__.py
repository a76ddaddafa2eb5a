"""Deep storage: where published segment files live durably (Druid's deep storage). Historicals
pull from it, ingestion and ``strata publish`` push to it, compaction and failed tasks delete.

Keys are '/'-separated relative paths (see ``deep_storage_key``). Two backends share one contract:

- ``LocalDeepStorage(root)``: a directory, e.g. a shared volume in a one-machine cluster;
- ``S3DeepStorage(bucket, prefix)``: any S3-speaking store (AWS, MinIO, moto), through
  ``pyarrow.fs.S3FileSystem``.

Readers never see half-written objects: ``push`` writes a temporary file/key and renames or
server-side copies it into place, and ``pull`` downloads next to the target, fsyncs, and renames,
so a crash leaves either the old file or the new one. Historicals still verify every checksum
after a pull (services/historical/segment_cache.py); the atomicity here keeps torn files from
being published at all.

    deep_storage.py  the DeepStorage contract, errors, keys, what pyarrow-backed stores share
    local.py         LocalDeepStorage
    s3.py            S3DeepStorage, s3_credentials_from_env
    factory.py       deep_storage_from_url, deep_storage_from_config
"""

from services.deep_storage.deep_storage import (DeepStorage, DeepStorageError, DeepStorageNotFoundError, check_key,
                                                deep_storage_key)
from services.deep_storage.factory import deep_storage_from_config, deep_storage_from_url
from services.deep_storage.local import LocalDeepStorage
from services.deep_storage.s3 import S3DeepStorage, s3_credentials_from_env

__all__ = [
    "DeepStorage",
    "DeepStorageError",
    "DeepStorageNotFoundError",
    "LocalDeepStorage",
    "S3DeepStorage",
    "check_key",
    "deep_storage_from_config",
    "deep_storage_from_url",
    "deep_storage_key",
    "s3_credentials_from_env",
]
