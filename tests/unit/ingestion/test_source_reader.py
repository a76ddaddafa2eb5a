"""Listing inputs on the driver (no Spark): local files by baseDir/filter/files, downloads with a
size limit and clear errors."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from common.errors import ValidationError
from common.ingest.external_source import ExternalSource
from common.ingest.input_files import download, list_input, local_files
from services.ingestion.source_reader import reader_ddl


def test_local_files(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("a.csv", "b.json", "sub/c.csv", ".hidden.csv"):
        (tmp_path / name).write_text("x")
    assert local_files({"baseDir": str(tmp_path), "filter": "*.csv"}) == [str(tmp_path / "a.csv"),
                                                                        str(tmp_path / "sub" / "c.csv")]
    assert local_files({"files": [str(tmp_path / "b.json")]}) == [str(tmp_path / "b.json")]
    with pytest.raises(ValidationError, match="baseDir '.*nope' does not exist"):
        local_files({"baseDir": str(tmp_path / "nope")})
    with pytest.raises(ValidationError, match=r"no file in baseDir .* matches filter '\*.parquet'"):
        local_files({"baseDir": str(tmp_path), "filter": "*.parquet"})
    with pytest.raises(ValidationError, match="file '.*missing.csv' does not exist"):
        local_files({"files": [str(tmp_path / "missing.csv")]})


def test_inline_and_ddl():
    src = ExternalSource.of({"type": "inline", "data": "a\n"}, {"type": "csv"},
                            [{"name": "a`b", "type": "string"}, {"name": "n", "type": "ARRAY<LONG>"}])
    [f] = list_input(src, "/unused")
    assert f.data == "a\n" and f.name == "inline data"
    assert reader_ddl(src.signature).startswith("`a``b` STRING, `n` ARRAY<BIGINT>, __strata_file STRING")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "data.json").write_text('{"a": 1}\n' * 100)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path / "www")))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def test_download(server, tmp_path):
    target = tmp_path / "out.json"
    assert download(f"{server}/data.json", str(target), timeout_s=10, max_bytes=10_000) == 900
    with pytest.raises(ValidationError, match="over the limit of 100"):
        download(f"{server}/data.json", str(tmp_path / "o2"), timeout_s=10, max_bytes=100)
    with pytest.raises(ValidationError, match="answered 404"):
        download(f"{server}/nope.json", str(tmp_path / "o3"), timeout_s=10, max_bytes=100)
    src = ExternalSource.of({"type": "http", "uris": [f"{server}/data.json"]}, {"type": "json"},
                            [{"name": "a", "type": "long"}])
    [f] = list_input(src, str(tmp_path / "dl"))
    assert f.name == f"{server}/data.json" and open(f.path).read().count("\n") == 100


def test_unreachable_server(tmp_path):
    with pytest.raises(ValidationError, match="cannot download it"):
        download("http://127.0.0.1:9/x.json", str(tmp_path / "x"), timeout_s=2, max_bytes=100)
