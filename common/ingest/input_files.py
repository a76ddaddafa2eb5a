"""The input files of an EXTERN source, as the ingestion's driver and the broker (reading a small
input table for a SELECT) both list them: local files by baseDir + filter and/or explicit paths,
inline data, and HTTP URIs downloaded first with a deadline and a size limit."""

from __future__ import annotations

import base64
import fnmatch
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from common.errors import ValidationError
from common.ingest.external_source import ExternalSource

DEFAULT_HTTP_TIMEOUT_S = 60.0
DEFAULT_HTTP_MAX_BYTES = 1 << 30
_CHUNK = 1 << 20


@dataclass(frozen=True)
class InputFile:
    name: str  # what messages show: the path, the URI, or "inline data"
    path: str | None = None  # readable by executors
    data: str | None = None  # inline text
    spark_file: str | None = None  # registered with SparkContext.addFile (downloads on a cluster)



def local_files(source: dict) -> list[str]:
    """The files of a local input source, sorted; a missing directory or file is an error."""
    out: set[str] = set()
    base = source.get("baseDir")
    if base:
        base = os.path.abspath(os.path.expanduser(base))
        if not os.path.isdir(base):
            raise ValidationError(f"local input: baseDir '{base}' does not exist or is not a directory")
        pattern = source.get("filter") or "*"
        for root, _dirs, names in os.walk(base):
            for name in names:
                if fnmatch.fnmatchcase(name, pattern) and not name.startswith("."):
                    out.add(os.path.join(root, name))
        if not out and not source.get("files"):
            raise ValidationError(f"local input: no file in baseDir '{base}' matches filter '{pattern}'")
    for f in source.get("files") or []:
        path = os.path.abspath(os.path.expanduser(f))
        if not os.path.isfile(path):
            raise ValidationError(f"local input: file '{f}' does not exist or is not a regular file")
        out.add(path)
    return sorted(out)


def _auth_header(source: dict) -> str | None:
    user = source.get("httpAuthenticationUsername")
    if user is None:
        return None
    pw = source.get("httpAuthenticationPassword") or {}
    if pw.get("type") == "environment":
        var = pw.get("variable", "")
        if var not in os.environ:
            raise ValidationError(f"http input: environment variable '{var}' (the password) is not set")
        password = os.environ[var]
    else:
        password = pw.get("password", "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def download(uri: str, target: str, *, timeout_s: float, max_bytes: int, auth: str | None = None) -> int:
    """Fetch ``uri`` into ``target`` within ``timeout_s`` overall; refuse bodies over ``max_bytes``."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(uri, headers={"User-Agent": "strata-ingestion"})
    if auth:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            length = resp.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise ValidationError(f"http input '{uri}' is {int(length)} bytes, over the limit of {max_bytes}; "
                                      "raise httpInputMaxBytes in the query context")
            written = 0
            with open(target, "wb") as out:
                while True:
                    if time.monotonic() > deadline:
                        raise ValidationError(f"http input '{uri}': download did not finish within {timeout_s:g}s; "
                                              "raise httpInputTimeoutSeconds in the query context")
                    chunk = resp.read(_CHUNK)
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > max_bytes:
                        raise ValidationError(f"http input '{uri}' is over the limit of {max_bytes} bytes; raise "
                                              "httpInputMaxBytes in the query context")
                    out.write(chunk)
            return written
    except urllib.error.HTTPError as exc:
        raise ValidationError(f"http input '{uri}': the server answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ValidationError(f"http input '{uri}': cannot download it: {reason}") from None


def list_input(source: ExternalSource, work_dir: str, context: dict | None = None) -> list[InputFile]:
    """The input files of ``source``; HTTP inputs are downloaded into ``work_dir`` first."""
    context = context or {}
    src = source.input_source
    if src["type"] == "inline":
        return [InputFile("inline data", data=src["data"])]
    if src["type"] == "local":
        return [InputFile(p, path=p) for p in local_files(src)]
    timeout_s = float(context.get("httpInputTimeoutSeconds", DEFAULT_HTTP_TIMEOUT_S))
    max_bytes = int(context.get("httpInputMaxBytes", DEFAULT_HTTP_MAX_BYTES))
    auth = _auth_header(src)
    os.makedirs(work_dir, exist_ok=True)
    out = []
    for i, uri in enumerate(src["uris"]):
        base = os.path.basename(urllib.parse.urlparse(uri).path) or "download"
        target = os.path.join(work_dir, f"{i:05d}-{re.sub(r'[^A-Za-z0-9._-]', '_', base)}")
        download(uri, target, timeout_s=timeout_s, max_bytes=max_bytes, auth=auth)
        out.append(InputFile(uri, path=target))
    return out


__all__ = ["DEFAULT_HTTP_MAX_BYTES", "DEFAULT_HTTP_TIMEOUT_S", "InputFile", "download", "list_input", "local_files"]
