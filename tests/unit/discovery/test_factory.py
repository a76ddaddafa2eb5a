"""discovery_from_config and etcd URL parsing (clients are built, nothing is connected)."""

from __future__ import annotations

import pytest

from common.errors import UnsupportedError, ValidationError
from services.discovery import LocalDiscovery, MemoryStore, discovery_from_config
from services.discovery.embedded_client import EmbeddedDiscovery
from services.discovery.etcd_discovery import EtcdDiscovery, parse_etcd_url
from services.node_config import load_config


def config(**env):
    return load_config("historical", env={f"STRATA_DISCOVERY_{k.upper()}": v for k, v in env.items()})


def test_embedded_mode_talks_to_the_coordinator():
    d = discovery_from_config(config(mode="embedded", coordinator="10.0.0.5:8091"))
    try:
        assert isinstance(d, EmbeddedDiscovery) and d.target == "10.0.0.5:8091"
    finally:
        d.close()


def test_the_coordinator_uses_its_own_store_directly():
    store = MemoryStore()
    d = discovery_from_config(config(mode="embedded"), local_store=store)
    try:
        assert isinstance(d, LocalDiscovery) and d.store is store
    finally:
        d.close()


def test_etcd_mode():
    d = discovery_from_config(config(mode="etcd", etcd="http://127.0.0.1:2379"))
    try:
        assert isinstance(d, EtcdDiscovery) and d.url == "http://127.0.0.1:2379"
    finally:
        d.close()


def test_embedded_target_must_be_host_port():
    with pytest.raises(ValidationError, match=r"host:port.*\[discovery\] coordinator"):
        EmbeddedDiscovery("coordinator")


@pytest.mark.parametrize("url, expected", [
    ("http://etcd:2379", [("etcd", 2379)]),
    ("127.0.0.1:23790", [("127.0.0.1", 23790)]),
    ("http://a:1, http://b:2", [("a", 1), ("b", 2)]),
    ("http://etcd", [("etcd", 2379)]),
])
def test_parse_etcd_url(url, expected):
    assert parse_etcd_url(url) == expected


def test_etcd_url_errors_say_what_is_expected():
    with pytest.raises(UnsupportedError, match="only http://"):
        parse_etcd_url("https://etcd:2379")
    with pytest.raises(ValidationError, match="names no endpoint"):
        parse_etcd_url("")
    with pytest.raises(ValidationError, match="invalid port"):
        parse_etcd_url("http://etcd:notaport")
