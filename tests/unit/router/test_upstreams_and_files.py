"""Where the router forwards (discovery announcements, the coordinator leader) and which console
files it serves (no path outside the console's directory; the charting library only once installed)."""

from __future__ import annotations

import json

import pytest

from services.discovery.keys import leader_key, node_key
from services.discovery.local_discovery import LocalDiscovery
from services.router.console_files import SECURITY_HEADERS, ConsoleFiles
from services.router.core.route_table import BROKER, COORDINATOR
from services.router.upstreams import NoUpstream, Upstreams


def announce(discovery, role: str, node_id: str, port: int) -> None:
    info = {"id": node_id, "role": role, "host": "10.0.0.1", "http_port": port}
    discovery.put(node_key(role, node_id), json.dumps(info).encode())


@pytest.fixture
def discovery():
    d = LocalDiscovery(reap_interval_s=None)
    yield d
    d.close()


def test_the_leading_coordinator_is_chosen(discovery):
    announce(discovery, "coordinator", "c1", 8081)
    announce(discovery, "coordinator", "c2", 9081)
    upstreams = Upstreams(discovery)
    assert upstreams.address(COORDINATOR) == ("10.0.0.1", 8081)  # no leader yet: any announced one
    discovery.put(leader_key("coordinator"), b"c2")
    assert upstreams.address(COORDINATOR) == ("10.0.0.1", 9081)


def test_brokers_are_taken_in_turn_and_none_is_a_clear_error(discovery):
    upstreams = Upstreams(discovery)
    with pytest.raises(NoUpstream, match="no broker is announced"):
        upstreams.address(BROKER)
    announce(discovery, "broker", "b1", 8092)
    announce(discovery, "broker", "b2", 9092)
    assert {upstreams.address(BROKER)[1] for _ in range(4)} == {8092, 9092}


def test_console_files(tmp_path):
    (tmp_path / "index.html").write_text("<html></html>")
    (tmp_path / "app.js").write_text("export {}")
    (tmp_path / "notes.txt").write_text("not served")
    files = ConsoleFiles(str(tmp_path))
    status, ctype, body, headers = files.handle("GET", "/", {}, b"", {})
    assert (status, ctype, body) == (200, "text/html; charset=utf-8", b"<html></html>")
    assert headers == SECURITY_HEADERS and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert files.handle("GET", "/app.js", {}, b"", {})[1].startswith("text/javascript")
    for path in ("/notes.txt", "/../app.js", "/%2e%2e/etc/passwd", "/vendor/uPlot.esm.js"):
        assert files.handle("GET", path, {}, b"", {}) is None
    assert files.handle("POST", "/app.js", {}, b"", {}) is None
    assert not files.has_charts
    dist = tmp_path / "node_modules" / "uplot" / "dist"
    dist.mkdir(parents=True)
    (dist / "uPlot.esm.js").write_text("export default 1")
    (dist / "uPlot.min.css").write_text("")
    (dist / "other.js").write_text("")
    files = ConsoleFiles(str(tmp_path))
    assert files.has_charts and files.handle("GET", "/vendor/uPlot.esm.js", {}, b"", {})[2] == b"export default 1"
    assert files.handle("GET", "/node_modules/uplot/dist/other.js", {}, b"", {}) is None
