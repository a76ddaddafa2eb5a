"""S3DeepStorage: deep storage in an S3 bucket (AWS, MinIO, moto) through pyarrow's S3FileSystem,
and where its credentials come from."""

from __future__ import annotations

import os
import shutil
import threading
import uuid

import pyarrow.fs as pafs

from common.errors import ValidationError
from services.deep_storage.deep_storage import (CHUNK_BYTES, TMP_PREFIX, DeepStorageError, DeepStorageNotFoundError,
                                                ArrowDeepStorage, check_key)

# S3 CopyObject copies at most 5 GiB in one request, which is all pyarrow's copy_file issues.
_MAX_SERVER_COPY = 5 * 1024**3
# Environment variables that mean "the AWS SDK can find credentials by itself" (web identity on
# EKS, ECS task roles, named profiles); without one of these or explicit keys we fail fast
# instead of letting the SDK probe instance metadata and fail later with a vaguer message.
_SDK_CREDENTIAL_SOURCES = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                           "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_PROFILE")


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


class S3DeepStorage(ArrowDeepStorage):
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
        tmp = f"{parent}/{TMP_PREFIX}{uuid.uuid4().hex}-{name}"
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
                shutil.copyfileobj(src, out, CHUNK_BYTES)
        except DeepStorageError:
            raise
        except FileNotFoundError as exc:
            if not os.path.exists(local_path):
                raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: "
                                       "the local file does not exist") from None
            raise self._failed("upload", key, exc) from None
        except OSError as exc:
            raise self._failed("upload", key, exc) from None
