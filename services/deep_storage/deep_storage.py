"""The deep storage contract: ``DeepStorage`` (push, pull, delete, exists, size, uri, list), its
errors, segment keys (``deep_storage_key``, ``check_key``) and what every pyarrow-backed store
shares."""

from __future__ import annotations

import abc
import contextlib
import os
import tempfile

import pyarrow.fs as pafs

from common.errors import StrataError, ValidationError
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import segment_filename

CHUNK_BYTES = 8 << 20
TMP_PREFIX = ".tmp-"


class DeepStorageError(StrataError):
    """A deep storage operation failed; the message names the store, bucket/key or path."""


class DeepStorageNotFoundError(DeepStorageError):
    """The object for a key does not exist."""


def deep_storage_key(segment_id: SegmentId) -> str:
    """The conventional deep storage key of a segment: one folder per datasource."""
    return f"{segment_id.datasource}/{segment_filename(segment_id)}"


def check_key(key: str) -> str:
    """Keys are relative, '/'-separated and free of '.'/'..' parts, so no key escapes the root."""
    if not isinstance(key, str) or not key:
        raise ValidationError(f"deep storage key must be a non-empty string, got {key!r}")
    parts = key.split("/")
    if key.startswith("/") or "\\" in key or any(p in ("", ".", "..") for p in parts):
        raise ValidationError(f"deep storage key '{key}' is invalid: use a relative path like "
                              "'datasource/segment.sseg' without empty, '.' or '..' parts")
    if parts[-1].startswith(TMP_PREFIX):
        raise ValidationError(f"deep storage key '{key}' is invalid: names starting with '{TMP_PREFIX}' "
                              "are reserved for uploads in progress")
    return key


def fsync_dir(directory: str) -> None:
    # The rename is only durable once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class DeepStorage(abc.ABC):
    """Durable storage of segment files by key."""

    @abc.abstractmethod
    def push(self, local_path: str, key: str) -> int:
        """Upload ``local_path`` as ``key`` (replacing it); readers see the old or the whole new
        object, never a part. Returns the bytes written."""

    @abc.abstractmethod
    def pull(self, key: str, local_path: str) -> int:
        """Download ``key`` to ``local_path``; the file appears only complete and fsynced.
        Raises DeepStorageNotFoundError (leaving ``local_path`` untouched) if the key is missing."""

    @abc.abstractmethod
    def delete(self, key: str) -> bool:
        """Remove ``key``; returns False if it did not exist (deleting twice is not an error)."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        ...

    @abc.abstractmethod
    def size(self, key: str) -> int:
        """Size in bytes; raises DeepStorageNotFoundError if the key is missing."""

    @abc.abstractmethod
    def uri(self, key: str) -> str:
        """Where ``key`` lives, as a URL for messages and metadata (file:///... or s3://...)."""

    # Not abstract: a store without ranged reads is read whole (a partial copy is cut locally).
    def read_ranges(self, key: str):
        """A context manager giving ``(read_at(offset, length) -> bytes, size)`` over ``key``, so
        a reader fetches only the byte ranges it needs (a partial copy of a segment)."""
        raise DeepStorageError(f"{type(self).__name__} cannot read byte ranges of '{key}'")

    # Not abstract: stores that only serve segments (and test doubles) need not list.
    def list(self, prefix: str, partial: bool = False) -> list[str]:
        """The keys under the folder ``prefix`` ('a/b' or 'a/b/'), sorted; uploads in progress are
        not keys and are left out unless ``partial`` (cleanup after a killed uploader needs to
        see them). A missing folder lists as empty."""
        raise DeepStorageError(f"{type(self).__name__} cannot list keys under '{prefix}'")

    def delete_prefix(self, prefix: str) -> int:
        """Remove everything under the folder ``prefix``, uploads in progress included (a failed
        ingestion cleaning up after itself); returns how many keys were deleted."""
        raise DeepStorageError(f"{type(self).__name__} cannot delete keys under '{prefix}'")


class ArrowDeepStorage(DeepStorage):
    """The parts of the contract that are the same over any pyarrow filesystem."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self._fs = fs

    @abc.abstractmethod
    def _path(self, key: str) -> str:
        """The filesystem path of a (checked) key."""

    def _not_found(self, key: str) -> DeepStorageNotFoundError:
        return DeepStorageNotFoundError(f"deep storage object {self.uri(key)} does not exist; check that the segment "
                                        "was pushed and not deleted, and that [deep_storage] url is the one the "
                                        "segment was published to")

    def _failed(self, op: str, key: str, exc: BaseException) -> DeepStorageError:
        return DeepStorageError(f"deep storage {op} of {self.uri(key)} failed: {exc}")

    def _info(self, key: str) -> pafs.FileInfo:
        path = self._path(check_key(key))
        try:
            return self._fs.get_file_info(path)
        except OSError as exc:
            raise self._failed("lookup", key, exc) from None

    def exists(self, key: str) -> bool:
        return self._info(key).type == pafs.FileType.File

    def size(self, key: str) -> int:
        info = self._info(key)
        if info.type != pafs.FileType.File:
            raise self._not_found(key)
        return info.size

    def delete(self, key: str) -> bool:
        if not self.exists(key):
            return False
        try:
            self._fs.delete_file(self._path(key))
        except FileNotFoundError:
            return False  # deleted concurrently: the outcome the caller wanted
        except OSError as exc:
            raise self._failed("delete", key, exc) from None
        return True

    def _folder(self, prefix: str) -> tuple[str, str]:
        folder = check_key(prefix.rstrip("/")) if isinstance(prefix, str) else check_key(prefix)
        return folder, self._path(folder)

    def _files_under(self, folder: str, base: str) -> list[str]:
        try:
            infos = self._fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError as exc:
            raise self._failed("listing", folder, exc) from None
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)

    def list(self, prefix: str, partial: bool = False) -> list[str]:
        folder, base = self._folder(prefix)
        keys = []
        for path in self._files_under(folder, base):
            rel = path[len(base):].lstrip("/").replace(os.sep, "/")
            if partial or not rel.rsplit("/", 1)[-1].startswith(TMP_PREFIX):
                keys.append(f"{folder}/{rel}")
        return keys

    def delete_prefix(self, prefix: str) -> int:
        folder, base = self._folder(prefix)
        deleted = 0
        for path in self._files_under(folder, base):
            try:
                self._fs.delete_file(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._failed("delete", folder, exc) from None
            if not path.rsplit("/", 1)[-1].startswith(TMP_PREFIX):
                deleted += 1
        try:
            self._fs.delete_dir(base)  # the now-empty folder (a no-op marker on S3)
        except (FileNotFoundError, OSError):
            pass
        return deleted

    @contextlib.contextmanager
    def read_ranges(self, key: str):
        try:
            src = self._fs.open_input_file(self._path(check_key(key)))
        except FileNotFoundError:
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._failed("download", key, exc) from None

        def read_at(offset: int, length: int) -> bytes:
            try:
                return bytes(src.read_at(length, offset))
            except OSError as exc:
                raise self._failed("ranged download", key, exc) from None

        with src:
            yield read_at, src.size()

    def pull(self, key: str, local_path: str) -> int:
        expected = self.size(key)  # raises before any local file is created if the key is missing
        target = os.path.abspath(local_path)
        directory = os.path.dirname(target)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".part", dir=directory)
        except OSError as exc:
            raise DeepStorageError(f"cannot pull {self.uri(key)}: cannot create a file in {directory}: {exc}") from None
        try:
            with os.fdopen(fd, "wb") as out:
                try:
                    src = self._fs.open_input_stream(self._path(key))
                except FileNotFoundError:
                    raise self._not_found(key) from None
                except OSError as exc:
                    raise self._failed("download", key, exc) from None
                written = 0
                with src:
                    while True:
                        try:
                            chunk = src.read(CHUNK_BYTES)
                        except OSError as exc:
                            raise self._failed("download", key, exc) from None
                        if not chunk:
                            break
                        out.write(chunk)
                        written += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            if written != expected:
                raise DeepStorageError(f"deep storage download of {self.uri(key)} was short: got {written} of "
                                       f"{expected} bytes (object replaced during the download?); retry the pull")
            os.replace(tmp, target)
        except DeepStorageError:
            unlink_quietly(tmp)
            raise
        except OSError as exc:
            unlink_quietly(tmp)
            raise DeepStorageError(f"cannot pull {self.uri(key)} to {target}: {exc} "
                                   "(disk full or directory not writable?)") from None
        except BaseException:
            unlink_quietly(tmp)
            raise
        fsync_dir(directory)
        return written

    def _local_size(self, local_path: str, key: str) -> int:
        try:
            return os.path.getsize(local_path)
        except OSError as exc:
            raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: {exc}") from None
