"""The router's routing table and its cross-site refusal (services/router/core/route_table.py)."""

from __future__ import annotations

import pytest

from services.router.core.route_table import (
    BROKER, COORDINATOR, Route, cross_site_refusal, forwarded_headers, returned_headers, route_for,
)


@pytest.mark.parametrize("path, route", [
    ("/druid/v2/sql", Route(BROKER, "/druid/v2/sql")),
    ("/druid/v2", Route(BROKER, "/druid/v2")),
    ("/druid/v2/sql/abc", Route(BROKER, "/druid/v2/sql/abc")),
    ("/druid/indexer/v1/tasks", Route(BROKER, "/druid/indexer/v1/tasks")),
    ("/druid/coordinator/v1/rules/wiki", Route(COORDINATOR, "/druid/coordinator/v1/rules/wiki")),
    ("/proxy/coordinator/druid/coordinator/v1/datasources", Route(COORDINATOR, "/druid/coordinator/v1/datasources")),
    ("/proxy/overlord/druid/indexer/v1/tasks", Route(BROKER, "/druid/indexer/v1/tasks")),
    ("/druid/indexer/v1/supervisor", Route(COORDINATOR, "/druid/indexer/v1/supervisor")),
    ("/druid/indexer/v1/supervisor/wiki/status", Route(COORDINATOR, "/druid/indexer/v1/supervisor/wiki/status")),
    ("/proxy/overlord/druid/indexer/v1/supervisor/wiki/suspend",
     Route(COORDINATOR, "/druid/indexer/v1/supervisor/wiki/suspend")),
    ("/druid/indexer/v1/supervisors", Route(BROKER, "/druid/indexer/v1/supervisors")),
    ("/druid/indexer/v1/task/t1/log", Route(COORDINATOR, "/druid/indexer/v1/task/t1/log")),
    ("/proxy/overlord/druid/indexer/v1/task/t1/log?offset=-10",
     Route(COORDINATOR, "/druid/indexer/v1/task/t1/log?offset=-10")),
    ("/druid/indexer/v1/task/t1/reports", Route(BROKER, "/druid/indexer/v1/task/t1/reports")),
    ("/druid/indexer/v1/task/log/status", Route(BROKER, "/druid/indexer/v1/task/log/status")),
    ("/", None), ("/index.html", None), ("/druid", None), ("/druid/v2x", None), ("/proxy/other/x", None),
])
def test_route_for(path, route):
    assert route_for(path) == route


def test_authorization_passes_and_identity_headers_do_not():
    out = forwarded_headers({"Authorization": "Basic eDp5", "X-Strata-User": "admin", "Host": "r:8888",
                             "Connection": "keep-alive", "Content-Type": "application/json",
                             "x-strata-remote-address": "1.2.3.4:5"})
    assert out == {"Authorization": "Basic eDp5", "Content-Type": "application/json"}


def test_returned_headers_drop_framing_and_login_dialog():
    upstream = [("Content-Length", "3"), ("WWW-Authenticate", "Basic"), ("X-Druid-SQL-Query-Id", "q1"),
                ("Transfer-Encoding", "chunked")]
    assert returned_headers(upstream, {"X-Requested-With": "XMLHttpRequest"}) == {
        "X-Druid-SQL-Query-Id": "q1", "WWW-Authenticate": None}
    assert returned_headers(upstream, {}) == {"X-Druid-SQL-Query-Id": "q1", "WWW-Authenticate": "Basic"}


@pytest.mark.parametrize("method, headers, refused", [
    ("GET", {"Origin": "http://evil.example"}, False),
    ("POST", {}, False),  # curl, pydruid: no Origin
    ("POST", {"Origin": "http://r:8888", "Host": "r:8888"}, False),
    ("DELETE", {"origin": "http://R:8888", "host": "r:8888"}, False),
    ("POST", {"Origin": "http://evil.example", "Host": "r:8888"}, True),
    ("POST", {"Origin": "http://r:8889", "Host": "r:8888"}, True),
    ("PUT", {"Origin": "null", "Host": "r:8888"}, True),
    ("DELETE", {"Sec-Fetch-Site": "cross-site"}, True),
])
def test_cross_site_refusal(method, headers, refused):
    reason = cross_site_refusal(method, headers)
    assert (reason is not None) == refused
    if refused:
        assert "refused" in reason or "cross-site" in reason
