"""LocalDeepStorage: deep storage in a local (or shared, mounted) directory."""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.parse

import pyarrow.fs as pafs

from services.deep_storage.deep_storage import (CHUNK_BYTES, TMP_PREFIX, DeepStorageError, ArrowDeepStorage,
                                                fsync_dir, unlink_quietly, check_key)


class LocalDeepStorage(ArrowDeepStorage):
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
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".part", dir=directory)
            with open(local_path, "rb") as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK_BYTES)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            if tmp:
                unlink_quietly(tmp)
            raise DeepStorageError(f"cannot push {local_path} to {self.uri(key)}: {exc}") from None
        except BaseException:
            if tmp:
                unlink_quietly(tmp)
            raise
        fsync_dir(directory)
        return size
