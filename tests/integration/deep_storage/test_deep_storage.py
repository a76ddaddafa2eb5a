"""The deep storage contract, run over a local directory and over a real S3 server (moto on
loopback): byte-identical round trips of real segment files, clear errors naming the bucket/key,
and atomic pulls and pushes."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from common.errors import ValidationError
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.types import parse_instant
from services.deep_storage import (
    DeepStorageError,
    DeepStorageNotFoundError,
    LocalDeepStorage,
    S3DeepStorage,
    deep_storage_from_config,
    deep_storage_from_url,
    deep_storage_key,
)
from services.node_config import DeepStorageSection
from tests.fixtures.s3_server import s3_server  # noqa: F401

T0 = parse_instant("2020-01-01")


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path):
    if request.param == "local":
        return LocalDeepStorage(str(tmp_path / "deep"))
    server = request.getfixturevalue("s3_server")
    # A prefix per test keeps tests independent on the shared bucket.
    return S3DeepStorage(server.bucket, f"{server.prefix}/{uuid.uuid4().hex[:8]}", server.endpoint, server.region)


@pytest.fixture(scope="module")
def segment_file(tmp_path_factory) -> str:
    table = pa.table({
        "__time": pa.array([T0 + i * 1000 for i in range(500)], pa.int64()),
        "channel": [f"#c{i % 5}" for i in range(500)],
        "added": pa.array(range(500), pa.int64()),
    })
    [(path, _)] = build_segments(table, "wiki", str(tmp_path_factory.mktemp("segments")), version="v1")
    return path


def bucket_keys(storage: S3DeepStorage) -> list[str]:
    selector = pafs.FileSelector(f"{storage.bucket}/{storage.prefix}", recursive=True, allow_not_found=True)
    return sorted(i.path for i in storage._fs.get_file_info(selector) if i.type == pafs.FileType.File)


def test_round_trip_is_byte_identical(storage, segment_file, tmp_path):
    sid = Segment.open(segment_file).id
    key = deep_storage_key(sid)
    assert key == f"wiki/{os.path.basename(segment_file)}"
    data = open(segment_file, "rb").read()
    assert not storage.exists(key)
    assert storage.push(segment_file, key) == len(data)
    assert storage.exists(key)
    assert storage.size(key) == len(data)
    target = tmp_path / "cache" / "deeper" / "copy.sseg"
    assert storage.pull(key, str(target)) == len(data)
    assert target.read_bytes() == data
    assert Segment.open(str(target), verify=True).id == sid
    assert sorted(os.listdir(target.parent)) == ["copy.sseg"]  # no temp file left behind
    # Pushing again replaces the object.
    other = tmp_path / "other.bin"
    other.write_bytes(b"x" * 10)
    storage.push(str(other), key)
    assert storage.size(key) == 10
    assert storage.delete(key) is True
    assert not storage.exists(key)
    assert storage.delete(key) is False


def test_uri(storage):
    if isinstance(storage, LocalDeepStorage):
        assert storage.uri("wiki/a.sseg") == f"file://{storage.root}/wiki/a.sseg"
    else:
        assert storage.uri("wiki/a.sseg") == f"s3://{storage.bucket}/{storage.prefix}/wiki/a.sseg"


def test_missing_key_errors_name_the_object(storage, tmp_path):
    key = "wiki/missing.sseg"
    with pytest.raises(DeepStorageNotFoundError) as err:
        storage.size(key)
    msg = str(err.value)
    assert storage.uri(key) in msg and "does not exist" in msg
    if isinstance(storage, S3DeepStorage):
        assert f"bucket '{storage.bucket}'" in msg and f"key '{storage.prefix}/{key}'" in msg
    with pytest.raises(DeepStorageNotFoundError, match="missing.sseg"):
        storage.pull(key, str(tmp_path / "x.sseg"))
    assert storage.exists(key) is False


def test_pull_of_a_missing_key_leaves_no_file(storage, tmp_path):
    target = tmp_path / "cache" / "seg.sseg"
    with pytest.raises(DeepStorageNotFoundError):
        storage.pull("wiki/missing.sseg", str(target))
    assert not target.exists()
    assert not target.parent.exists() or os.listdir(target.parent) == []
    # An existing file at the target is left exactly as it was.
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"previous")
    with pytest.raises(DeepStorageNotFoundError):
        storage.pull("wiki/missing.sseg", str(target))
    assert target.read_bytes() == b"previous"
    assert os.listdir(target.parent) == ["seg.sseg"]


def test_push_leaves_only_the_final_object(storage, segment_file):
    storage.push(segment_file, "wiki/a.sseg")
    if isinstance(storage, S3DeepStorage):
        assert bucket_keys(storage) == [f"{storage.bucket}/{storage.prefix}/wiki/a.sseg"]
    else:
        assert os.listdir(os.path.join(storage.root, "wiki")) == ["a.sseg"]


def test_push_of_a_missing_local_file(storage, tmp_path):
    missing = str(tmp_path / "nope.sseg")
    with pytest.raises(DeepStorageError, match="nope.sseg") as err:
        storage.push(missing, "wiki/a.sseg")
    assert storage.uri("wiki/a.sseg") in str(err.value)
    assert not storage.exists("wiki/a.sseg")


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "../up", "a/./b", "a\\b", "wiki/.tmp-x"])
def test_invalid_keys(storage, key):
    with pytest.raises(ValidationError, match="deep storage key"):
        storage.exists(key)


def test_missing_bucket_is_named(s3_server):  # noqa: F811
    store = S3DeepStorage("no-such-bucket", "p", s3_server.endpoint, s3_server.region)
    expected = f"S3 bucket 'no-such-bucket' does not exist at endpoint {s3_server.endpoint}"
    with pytest.raises(DeepStorageError, match=expected):
        store.exists("wiki/a.sseg")
    with pytest.raises(DeepStorageError, match=expected):
        store.pull("wiki/a.sseg", "/nonexistent/never-created")


def test_credentials_come_from_the_environment(s3_server):  # noqa: F811
    env = {"AWS_DEFAULT_REGION": "us-east-1"}
    with pytest.raises(DeepStorageError) as err:
        S3DeepStorage(s3_server.bucket, "p", s3_server.endpoint, env=env)
    assert str(err.value).startswith(f"no S3 credentials for bucket '{s3_server.bucket}': set AWS_ACCESS_KEY_ID "
                                     "and AWS_SECRET_ACCESS_KEY")
    with pytest.raises(DeepStorageError, match="incomplete: AWS_SECRET_ACCESS_KEY is not set"):
        S3DeepStorage(s3_server.bucket, "p", s3_server.endpoint, env={"AWS_ACCESS_KEY_ID": "k"})


def test_unreachable_endpoint_is_named(tmp_path):
    store = S3DeepStorage("bucket", "p", "http://127.0.0.1:9", "us-east-1", connect_timeout_s=1,
                          env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    with pytest.raises(DeepStorageError, match=r"cannot reach S3 at endpoint http://127.0.0.1:9"):
        store.exists("wiki/a.sseg")


def test_from_url(s3_server, tmp_path, monkeypatch):  # noqa: F811
    local = deep_storage_from_url(str(tmp_path / "d"))
    assert isinstance(local, LocalDeepStorage) and local.root == str(tmp_path / "d")
    assert deep_storage_from_url(f"file://{tmp_path}/e").root == f"{tmp_path}/e"
    monkeypatch.chdir(tmp_path)
    assert deep_storage_from_url("var/deep").root == str(tmp_path / "var" / "deep")
    s3 = deep_storage_from_url(f"s3://{s3_server.bucket}/a/b/", s3_server.endpoint, s3_server.region)
    assert isinstance(s3, S3DeepStorage)
    assert (s3.bucket, s3.prefix, s3.endpoint, s3.region) == (s3_server.bucket, "a/b", s3_server.endpoint, "us-east-1")
    assert s3.uri("k") == f"s3://{s3_server.bucket}/a/b/k"
    bare = deep_storage_from_url(f"s3://{s3_server.bucket}", s3_server.endpoint)
    assert bare.prefix == "" and bare.uri("k") == f"s3://{s3_server.bucket}/k"
    section = DeepStorageSection(url=s3_server.url, endpoint=s3_server.endpoint, region=s3_server.region)
    configured = deep_storage_from_config(section)
    assert isinstance(configured, S3DeepStorage) and configured.prefix == s3_server.prefix
    configured.exists("k")  # reachable with the configured endpoint and env credentials
    for bad, match in [("s3:///prefix", "has no bucket"), ("gs://b/p", "unsupported scheme 'gs'"),
                       ("file://host/dir", "names host 'host'"), ("", "url is empty")]:
        with pytest.raises(ValidationError, match=match):
            deep_storage_from_url(bad)


def test_list_and_delete_prefix(storage, segment_file, tmp_path):
    """A failed ingestion removes its folder of uploads, leaving every other key alone."""
    keep = "wiki/other.sseg"
    storage.push(segment_file, keep)
    job = ["wiki/job-1/a.sseg", "wiki/job-1/b.sseg", "wiki/job-1/deeper/c.sseg"]
    for key in job:
        storage.push(segment_file, key)
    assert storage.list("wiki/job-1") == sorted(job)
    assert storage.list("wiki/job-1/") == sorted(job)
    assert storage.list("wiki/missing") == []
    assert storage.delete_prefix("wiki/job-1/") == 3
    assert storage.list("wiki/job-1") == []
    assert storage.list("wiki") == [keep]
    assert storage.exists(keep)
    assert storage.delete_prefix("wiki/job-1") == 0  # twice is not an error


def test_delete_prefix_removes_uploads_in_progress(tmp_path, segment_file):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    storage.push(segment_file, "wiki/job-2/a.sseg")
    stray = tmp_path / "deep" / "wiki" / "job-2" / ".tmp-123.part"
    stray.write_bytes(b"partial")
    assert storage.list("wiki/job-2") == ["wiki/job-2/a.sseg"]
    assert storage.delete_prefix("wiki/job-2") == 1
    assert not stray.exists()


@pytest.mark.parametrize("prefix", ["", "/abs", "a/../b", "."])
def test_invalid_prefixes(storage, prefix):
    with pytest.raises(ValidationError):
        storage.list(prefix)
    with pytest.raises(ValidationError):
        storage.delete_prefix(prefix)
