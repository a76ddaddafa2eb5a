"""HttpEndpoint with authentication on: open probes, 401 with a Basic challenge elsewhere, the
authenticated user handed to routes in x-strata-user (never the client's), 403 from handlers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.security import ALLOW_ALL
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec, basic_header


@pytest.fixture(scope="module")
def authorizer():
    return BasicAuthorizer("admin", "root-pw", [
        UserSpec("reader", password="r-pw", grants=(Grant("READ", "DATASOURCE", "wiki"),))])


def _echo_route(authorizer):
    def handler(method, path, query, body, headers):
        user = headers.get("x-strata-user")
        if path.endswith("/secret"):
            authorizer.require(user, "READ", "DATASOURCE", "secret")
        return 200, "application/json", json.dumps({"user": user, "method": method}).encode()
    return handler


@pytest.fixture(scope="module")
def endpoint(authorizer):
    ep = HttpEndpoint("127.0.0.1", 0, Metrics("coordinator"), lambda: {"healthy": True}, authorizer)
    ep.route("/druid/", _echo_route(authorizer))
    ep.start()
    yield ep
    ep.stop()


def call(ep, path, method="GET", headers=None, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{ep.port}{path}", method=method, headers=headers or {},
                                 data=body)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@pytest.mark.parametrize("path", ["/status/ready", "/status/health", "/status/live", "/metrics"])
def test_probes_and_metrics_stay_open(endpoint, path):
    assert call(endpoint, path)[0] == 200


@pytest.mark.parametrize("headers", [{}, {"Authorization": basic_header("reader", "wrong")},
                                     {"Authorization": basic_header("ghost", "r-pw")},
                                     {"Authorization": "Bearer made-up"}, {"X-Strata-User": "admin"}])
def test_everything_else_needs_credentials(endpoint, headers):
    for path, method in [("/druid/x", "GET"), ("/druid/x", "POST"), ("/nowhere", "GET"), ("/status/health", "POST")]:
        status, resp_headers, body = call(endpoint, path, method, headers, b"{}" if method == "POST" else None)
        assert status == 401, (path, method, headers)
        assert resp_headers["WWW-Authenticate"].startswith('Basic realm="strata"')
        assert "error" in json.loads(body)


def test_the_authenticated_user_reaches_the_route_and_a_claimed_one_does_not(endpoint):
    status, _, body = call(endpoint, "/druid/x", headers={"Authorization": basic_header("reader", "r-pw"),
                                                          "X-Strata-User": "admin", "x-strata-user": "admin"})
    assert status == 200 and json.loads(body)["user"] == "reader"


def test_bearer_tokens_issued_by_the_authorizer_are_accepted(endpoint, authorizer):
    token = authorizer.issue_token("admin")
    status, _, body = call(endpoint, "/druid/x", headers={"Authorization": f"Bearer {token}"})
    assert status == 200 and json.loads(body)["user"] == "admin"


def test_permission_errors_of_handlers_are_403_naming_the_user(endpoint):
    status, _, body = call(endpoint, "/druid/secret", headers={"Authorization": basic_header("reader", "r-pw")})
    assert status == 403
    assert "user 'reader' may not READ on DATASOURCE 'secret'" in json.loads(body)["error"]
    assert call(endpoint, "/druid/secret", headers={"Authorization": basic_header("admin", "root-pw")})[0] == 200


def test_unknown_routes_are_404_once_authenticated(endpoint):
    assert call(endpoint, "/nowhere", headers={"Authorization": basic_header("reader", "r-pw")})[0] == 404


def test_auth_off_passes_no_user_and_strips_a_claimed_one():
    ep = HttpEndpoint("127.0.0.1", 0, Metrics("broker"), lambda: {"healthy": True})
    assert ep.authorizer is ALLOW_ALL
    ep.route("/druid/", _echo_route(ALLOW_ALL))
    status, _, body = ep.dispatch("GET", "/druid/x", {}, b"", {"X-Strata-User": "admin"})
    assert status == 200 and json.loads(body)["user"] is None


def test_status_health_is_druids_bare_true_and_readiness_is_status_ready():
    """Druid tools poll /status/health for a bare ``true``; strata's probes read /status/ready."""
    state = {"healthy": True}
    ep = HttpEndpoint("127.0.0.1", 0, Metrics("broker"), lambda: {**state, "role": "broker"}).start()
    try:
        assert ep.dispatch("GET", "/status/health", {}, b"", {}) == (200, "application/json", b"true")
        status, ctype, body = ep.dispatch("GET", "/status/ready", {}, b"", {})
        assert (status, ctype) == (200, "application/json")
        assert json.loads(body)["role"] == "broker" and isinstance(json.loads(body)["pid"], int)
        state["healthy"] = False  # not ready (etcd down...): readiness says 503, Druid's health still true
        assert ep.dispatch("GET", "/status/ready", {}, b"", {})[0] == 503
        assert ep.dispatch("GET", "/status/health", {}, b"", {})[:3] == (200, "application/json", b"true")
    finally:
        ep.stop()
