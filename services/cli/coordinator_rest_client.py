"""``CoordinatorRestClient``: JSON over the coordinator's REST API for the command-line tools
(``strata catalog``, ``strata rules``), and the pieces their commands share: the
``--coordinator-http/--dir/--user/--timeout`` arguments, finding the coordinator from them, and
reading a JSON argument given as text, a file or ``-`` for stdin.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.request
from urllib.parse import urlencode

from common.errors import StrataError
from services.transport_security import transport_security_from_env

DEFAULT_TIMEOUT_S = 30.0


class CoordinatorRequestError(StrataError):
    """A REST call answered with an error status; ``current_version`` is set on 409."""

    def __init__(self, status: int, message: str, current_version: int | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.current_version = current_version


def basic_authorization(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class CoordinatorRestClient:
    """Requests below ``base_path`` (e.g. ``/druid/coordinator/v1/rules``) of the coordinator at
    ``base_url``; answers are decoded JSON, errors a ``CoordinatorRequestError``."""

    def __init__(self, base_url: str, base_path: str, authorization: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base = base_url.rstrip("/") + base_path
        self.authorization = authorization
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, query: dict | None = None, body=None, headers: dict | None = None):
        url = self.base + "/" + path.lstrip("/")
        params = {k: v for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()})
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.authorization:
            req.add_header("Authorization", self.authorization)
        for name, value in (headers or {}).items():
            req.add_header(name, value)
        try:
            # https: trust the CA in STRATA_TLS_CA_FILE (else the system's roots).
            context = transport_security_from_env().http_client_context() if url.startswith("https:") else None
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=context) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"error": raw.decode(errors="replace")}
            raise CoordinatorRequestError(exc.code, payload.get("error", ""), payload.get("currentVersion")) from None
        except (urllib.error.URLError, OSError) as exc:
            raise StrataError(f"cannot reach the coordinator at {self.base}: {exc}; is the cluster up?") from None


def add_coordinator_arguments(parser: argparse.ArgumentParser, default_dir: str) -> None:
    parser.add_argument("--dir", default=default_dir, help="directory of a cluster started with 'strata up'")
    parser.add_argument("--coordinator-http", help="coordinator HTTP URL (default: from --dir)")
    parser.add_argument("--user", help="user name (password from STRATA_PASSWORD; default user STRATA_USER)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per request")


def coordinator_from_args(args) -> tuple[str, str | None, float]:
    """(URL, Authorization header or None, timeout) from the arguments of ``add_coordinator_arguments``."""
    url = getattr(args, "coordinator_http", None)
    if not url:
        from services.cli.local_cluster import LocalCluster  # needed only without --coordinator-http

        url = LocalCluster(args.dir).endpoints().get("coordinator_http")
        if not url:
            raise StrataError(f"no coordinator in the cluster at {args.dir}; pass --coordinator-http URL")
    user = getattr(args, "user", None) or os.environ.get("STRATA_USER")
    auth = basic_authorization(user, os.environ.get("STRATA_PASSWORD", "")) if user else None
    return url, auth, getattr(args, "timeout", DEFAULT_TIMEOUT_S)


def read_json_argument(text: str, option: str):
    """The JSON value of ``option`` given as JSON text, a file name, or ``-`` for stdin."""
    if text == "-":
        text = sys.stdin.read()
    elif os.path.exists(text):
        with open(text) as f:
            text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StrataError(f"{option} is not valid JSON (nor a file): {exc.msg} at line {exc.lineno} column "
                          f"{exc.colno}") from None


def print_json(value) -> None:
    print(json.dumps(value, indent=2))
