"""Deep storage from configuration: a directory or file:/// URL, or s3://bucket/prefix."""

from __future__ import annotations

import urllib.parse

from common.errors import ValidationError
from services.deep_storage.deep_storage import DeepStorage
from services.deep_storage.local import LocalDeepStorage
from services.deep_storage.s3 import S3DeepStorage


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
