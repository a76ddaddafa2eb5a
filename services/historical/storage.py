"""Deep storage: where published segment files live durably (Druid's deep storage).

Keys are '/'-separated relative paths (see ``deep_storage_key``). Two backends share one contract:

- ``LocalDeepStorage(root)``: a directory, e.g. a shared volume in a one-machine cluster;
- ``S3DeepStorage(bucket, prefix)``: any S3-speaking store (AWS, MinIO, moto), through
  ``pyarrow.fs.S3FileSystem``.

Readers never see half-written objects: ``push`` writes a temporary file/key and renames or
server-side copies it into place, and ``pull`` downloads next to the target, fsyncs, and renames,
so a crash leaves either the old file or the new one. Historicals still verify every checksum
after a pull (segment_cache.py); the atomicity here keeps torn files from being published at all.
"""

from __future__ import annotations

import abc
import os
import shutil
import tempfile
import threading
import urllib.parse
import uuid

import pyarrow.fs as pafs

from common.errors import StrataError, ValidationError
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import segment_filename

_CHUNK = 8 << 20
# S3 CopyObject copies at most 5 GiB in one request, which is all pyarrow's copy_file issues.
_MAX_SERVER_COPY = 5 * 1024**3
_TMP_PREFIX = ".tmp-"
# Environment variables that mean "the AWS SDK can find credentials by itself" (web identity on
# EKS, ECS task roles, named profiles); without one of these or explicit keys we fail fast
# instead of letting the SDK probe instance metadata and fail later with a vaguer message.
_SDK_CREDENTIAL_SOURCES = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                           "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_PROFILE")


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
    if parts[-1].startswith(_TMP_PREFIX):
        raise ValidationError(f"deep storage key '{key}' is invalid: names starting with '{_TMP_PREFIX}' "
                              "are reserved for uploads in progress")
    return key


def _fsync_dir(directory: str) -> None:
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


def _unlink_quietly(path: str) -> None:
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


class _ArrowDeepStorage(DeepStorage):
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
            if partial or not rel.rsplit("/", 1)[-1].startswith(_TMP_PREFIX):
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
            if not path.rsplit("/", 1)[-1].startswith(_TMP_PREFIX):
                deleted += 1
        try:
            self._fs.delete_dir(base)  # the now-empty folder (a no-op marker on S3)
        except (FileNotFoundError, OSError):
            pass
        return deleted

    def pull(self, key: str, local_path: str) -> int:
        expected = self.size(key)  # raises before any local file is created if the key is missing
        target = os.path.abspath(local_path)
        directory = os.path.dirname(target)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".part", dir=directory)
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
                            chunk = src.read(_CHUNK)
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
            _unlink_quietly(tmp)
            raise
        except OSError as exc:
            _unlink_quietly(tmp)
            raise DeepStorageError(f"cannot pull {self.uri(key)} to {target}: {exc} "
                                   "(disk full or directory not writable?)") from None
        except BaseException:
            _unlink_quietly(tmp)
            raise
        _fsync_dir(directory)
        return written

    def _local_size(self, local_path: str, key: str) -> int:
        try:
            return os.path.getsize(local_path)
        except OSError as exc:
            raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: {exc}") from None


class LocalDeepStorage(_ArrowDeepStorage):
    """Deep storage in a local (or shared, mounted) directory."""

    def __init__(self, root: str) -> None:
        super().__init__(pafs.LocalFileSystem())
        self.root = os.path.abspath(os.path.expanduser(root))

    def __repr__(self) -> str:
        return f"LocalDeepStorage({self.root!r})"

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def uri(self, key: str) -> str:
        return "file://" + urllib.parse.quote(self._path(check_key(key)))

    def push(self, local_path: str, key: str) -> int:
        target = self._path(check_key(key))
        size = self._local_size(local_path, key)
        directory = os.path.dirname(target)
        tmp = None
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".part", dir=directory)
            with open(local_path, "rb") as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            if tmp:
                _unlink_quietly(tmp)
            raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: {exc}") from None
        except BaseException:
            if tmp:
                _unlink_quietly(tmp)
            raise
        _fsync_dir(directory)
        return size


def _split_endpoint(endpoint: str) -> tuple[str, str]:
    """'http://host:9000' -> ('http', 'host:9000'); no scheme means https, as the AWS SDK assumes."""
    endpoint = endpoint.strip().rstrip("/")
    if "://" in endpoint:
        scheme, _, host = endpoint.partition("://")
        scheme = scheme.lower()
        if scheme not in ("http", "https") or not host or "/" in host:
            raise ValidationError(f"S3 endpoint '{endpoint}' is invalid: use http://host:port or https://host[:port]")
        return scheme, host
    return "https", endpoint


def s3_credentials_from_env(bucket: str, env=None) -> dict:
    """Keyword arguments for S3FileSystem's credentials, from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
    (and AWS_SESSION_TOKEN); empty when another SDK credential source is configured."""
    env = os.environ if env is None else env
    key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
    if key and secret:
        creds = {"access_key": key, "secret_key": secret}
        if env.get("AWS_SESSION_TOKEN"):
            creds["session_token"] = env["AWS_SESSION_TOKEN"]
        return creds
    if key or secret:
        missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
        raise DeepStorageError(f"S3 credentials for bucket '{bucket}' are incomplete: {missing} is not set; "
                               "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
    if any(env.get(name) for name in _SDK_CREDENTIAL_SOURCES):
        return {}
    raise DeepStorageError(f"no S3 credentials for bucket '{bucket}': set AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY in the environment (strata never reads them from the config "
                           f"file), or one of {', '.join(_SDK_CREDENTIAL_SOURCES)}")


class S3DeepStorage(_ArrowDeepStorage):
    """Deep storage in an S3 bucket under a key prefix. The bucket must already exist."""

    def __init__(self, bucket: str, prefix: str = "", endpoint: str | None = None, region: str | None = None, *,
                 connect_timeout_s: float = 10.0, request_timeout_s: float = 60.0, env=None) -> None:
        if not bucket or "/" in bucket:
            raise ValidationError(f"S3 bucket name '{bucket}' is invalid; "
                                  "[deep_storage] url should be s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint or ""
        self.region = region or ""
        # Deadlines for every request: the SDK retries a few times, each attempt bounded.
        kwargs: dict = {"connect_timeout": connect_timeout_s, "request_timeout": request_timeout_s,
                        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
        if self.endpoint:
            kwargs["scheme"], kwargs["endpoint_override"] = _split_endpoint(self.endpoint)
        if self.region:
            kwargs["region"] = self.region
        kwargs.update(s3_credentials_from_env(bucket, env))
        super().__init__(pafs.S3FileSystem(**kwargs))
        self._bucket_checked = False
        self._check_lock = threading.Lock()

    def __repr__(self) -> str:
        where = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"S3DeepStorage(s3://{self.bucket}/{self.prefix}{where})"

    @property
    def _where(self) -> str:
        if self.endpoint:
            return f" at endpoint {self.endpoint}"
        return f" in region {self.region}" if self.region else ""

    def _object_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _path(self, key: str) -> str:
        return f"{self.bucket}/{self._object_key(key)}"

    def uri(self, key: str) -> str:
        return f"s3://{self._path(check_key(key))}"

    def _not_found(self, key: str) -> DeepStorageNotFoundError:
        return DeepStorageNotFoundError(f"deep storage object {self.uri(key)} (bucket '{self.bucket}', key "
                                        f"'{self._object_key(key)}') does not exist; check that the segment was pushed "
                                        "and not deleted, and that [deep_storage] url is the one it was published to")

    def _failed(self, op: str, key: str | None, exc: BaseException) -> DeepStorageError:
        what = self.uri(key) if key is not None else f"s3://{self.bucket}"
        text = str(exc)
        upper = text.upper()
        if "NO_SUCH_BUCKET" in upper or "NOSUCHBUCKET" in upper:
            return self._no_bucket()
        if "ACCESS_DENIED" in upper or "ACCESSDENIED" in upper or "INVALIDACCESSKEYID" in upper \
                or "SIGNATUREDOESNOTMATCH" in upper or "FORBIDDEN" in upper:
            return DeepStorageError(f"S3 {op} of {what} was denied{self._where}: check AWS_ACCESS_KEY_ID/"
                                    f"AWS_SECRET_ACCESS_KEY and the bucket policy ({text})")
        if "NETWORK_CONNECTION" in upper or "COULDN'T CONNECT" in upper or "CONNECTION REFUSED" in upper:
            return DeepStorageError(f"cannot reach S3{self._where} for {op} of {what}: check [deep_storage] "
                                    f"endpoint and that the server is up ({text})")
        return DeepStorageError(f"S3 {op} of {what}{self._where} failed: {text}")

    def _no_bucket(self) -> DeepStorageError:
        return DeepStorageError(f"S3 bucket '{self.bucket}' does not exist{self._where}; create it or fix "
                                "[deep_storage] url (s3://bucket/prefix)")

    def check_bucket(self) -> None:
        """Fail with a clear error if the bucket is missing or unreachable (once per instance)."""
        if self._bucket_checked:
            return
        with self._check_lock:
            if self._bucket_checked:
                return
            try:
                info = self._fs.get_file_info(self.bucket)
            except OSError as exc:
                raise self._failed("bucket lookup", None, exc) from None
            if info.type == pafs.FileType.NotFound:
                raise self._no_bucket()
            self._bucket_checked = True

    def _info(self, key: str) -> pafs.FileInfo:
        # A missing bucket looks like a missing key to HEAD; check it first so the error says so.
        self.check_bucket()
        return super()._info(key)

    def list(self, prefix: str, partial: bool = False) -> list[str]:
        self.check_bucket()
        return super().list(prefix, partial)

    def delete_prefix(self, prefix: str) -> int:
        self.check_bucket()
        return super().delete_prefix(prefix)

    def push(self, local_path: str, key: str) -> int:
        check_key(key)
        self.check_bucket()
        size = self._local_size(local_path, key)
        final = self._path(key)
        if size > _MAX_SERVER_COPY:
            # Too big for one CopyObject: a multipart upload also becomes visible only when complete.
            self._upload(local_path, final, key)
            return size
        # Upload under a temporary key and copy into place: if reading the local file fails midway,
        # pyarrow still completes the upload on close, and that torn object must not get the real key.
        parent, _, name = final.rpartition("/")
        tmp = f"{parent}/{_TMP_PREFIX}{uuid.uuid4().hex}-{name}"
        try:
            self._upload(local_path, tmp, key)
            try:
                uploaded = self._fs.get_file_info(tmp).size
            except OSError as exc:
                raise self._failed("upload", key, exc) from None
            if uploaded != size:
                raise DeepStorageError(f"S3 upload of {local_path} to {self.uri(key)} was short: {uploaded} of {size} "
                                       "bytes arrived; retry the push")
            try:
                self._fs.copy_file(tmp, final)
            except OSError as exc:
                raise self._failed("copy into place", key, exc) from None
        finally:
            try:
                self._fs.delete_file(tmp)
            except OSError:
                pass  # never uploaded, or already gone; a leftover temp key is harmless
        return size

    def _upload(self, local_path: str, path: str, key: str) -> None:
        try:
            with open(local_path, "rb") as src, self._fs.open_output_stream(path) as out:
                shutil.copyfileobj(src, out, _CHUNK)
        except DeepStorageError:
            raise
        except FileNotFoundError as exc:
            if not os.path.exists(local_path):
                raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: "
                                       "the local file does not exist") from None
            raise self._failed("upload", key, exc) from None
        except OSError as exc:
            raise self._failed("upload", key, exc) from None


def deep_storage_from_url(url: str, endpoint: str = "", region: str = "") -> DeepStorage:
    """A plain path or file:///dir -> LocalDeepStorage; s3://bucket/prefix -> S3DeepStorage."""
    url = (url or "").strip()
    if not url:
        raise ValidationError("[deep_storage] url is empty; use a directory, file:///dir or s3://bucket/prefix")
    if url.startswith("s3://"):
        bucket, _, prefix = url[len("s3://"):].partition("/")
        if not bucket:
            raise ValidationError(f"[deep_storage] url '{url}' has no bucket; use s3://bucket/prefix")
        return S3DeepStorage(bucket, prefix, endpoint or None, region or None)
    if url.startswith("file://"):
        parsed = urllib.parse.urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise ValidationError(f"[deep_storage] url '{url}' names host '{parsed.netloc}'; a file url needs an "
                                  "absolute path: file:///dir")
        return LocalDeepStorage(urllib.parse.unquote(parsed.path))
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise ValidationError(f"[deep_storage] url '{url}' uses unsupported scheme '{scheme}'; use a directory, "
                              "file:///dir or s3://bucket/prefix")
    return LocalDeepStorage(url)


def deep_storage_from_config(section) -> DeepStorage:
    """From a NodeConfig ``deep_storage`` section (url, endpoint, region)."""
    return deep_storage_from_url(section.url, section.endpoint, section.region)
