"""``strata rules ...``: retention and load rules from the command line, over the coordinator's
Druid-compatible REST API (``/druid/coordinator/v1/rules``).

    strata rules list                                   every datasource's rules, and _default
    strata rules get wiki [--full]                      one datasource's (--full: with _default)
    strata rules set wiki --rules rules.json [--author A] [--comment C]   the whole list
    strata rules history [wiki] [--count N | --interval 2024-01-01/2024-02-01]

``--rules`` is JSON text, a file, or ``-`` for stdin; it is checked here first, so a mistake is
named (rule and field) before the round trip. Coordinator and credentials as ``strata catalog``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from urllib.parse import quote

from common.errors import StrataError
from services.cli.catalog_command import DEFAULT_TIMEOUT_S, CatalogRestClient, basic_authorization
from services.coordinator.core.rules import rules_from_json

BASE = "/druid/coordinator/v1/rules"


class RulesRestClient(CatalogRestClient):
    def __init__(self, base_url: str, authorization: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(base_url, authorization, timeout_s)
        self.base = base_url.rstrip("/") + BASE

    def all(self) -> dict:
        return self.request("GET", "")

    def get(self, datasource: str, full: bool = False) -> list:
        return self.request("GET", quote(datasource, safe=""), {"full": "true" if full else None})

    def set(self, datasource: str, rules: list, author: str = "", comment: str = "") -> dict:
        return self.request("POST", quote(datasource, safe=""), None, rules,
                            {"X-Druid-Author": author, "X-Druid-Comment": comment})

    def history(self, datasource: str | None = None, count: int | None = None, interval: str | None = None) -> list:
        path = f"{quote(datasource, safe='')}/history" if datasource else "history"
        return self.request("GET", path, {"count": count, "interval": interval})


def _read_rules(text: str) -> list:
    if text == "-":
        text = sys.stdin.read()
    elif os.path.exists(text):
        with open(text) as f:
            text = f.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StrataError(f"--rules is not valid JSON (nor a file): {exc.msg} at line {exc.lineno} column "
                          f"{exc.colno}") from None
    rules_from_json(value)  # names the rule and field at fault before the round trip
    return value


def client_from_args(args) -> RulesRestClient:
    url = getattr(args, "coordinator_http", None)
    if not url:
        from services.cli.local_cluster import LocalCluster  # needed only without --coordinator-http

        url = LocalCluster(args.dir).endpoints().get("coordinator_http")
        if not url:
            raise StrataError(f"no coordinator in the cluster at {args.dir}; pass --coordinator-http URL")
    user = getattr(args, "user", None) or os.environ.get("STRATA_USER")
    auth = basic_authorization(user, os.environ.get("STRATA_PASSWORD", "")) if user else None
    return RulesRestClient(url, auth, getattr(args, "timeout", DEFAULT_TIMEOUT_S))


def run_rules(client: RulesRestClient, args) -> int:
    if args.action == "list":
        out = client.all()
    elif args.action == "get":
        out = client.get(args.datasource, args.full)
    elif args.action == "set":
        out = client.set(args.datasource, _read_rules(args.rules), args.author or os.environ.get("USER", ""),
                         args.comment or "")
        for warning in (out or {}).get("warnings", []):
            print(f"warning: {warning}", file=sys.stderr)
        print(f"set the rules of {args.datasource}")
        return 0
    else:
        if args.count is not None and args.interval:
            raise StrataError("give either --count or --interval, not both")
        out = client.history(args.datasource, args.count, args.interval)
    print(json.dumps(out, indent=2))
    return 0


def cmd_rules(args) -> int:
    return run_rules(client_from_args(args), args)


def register(subparsers, default_dir: str = "var/cluster") -> argparse.ArgumentParser:
    p = subparsers.add_parser("rules", help="retention and load rules: list, get, set, history")
    p.add_argument("--dir", default=default_dir, help="directory of a cluster started with 'strata up'")
    p.add_argument("--coordinator-http", help="coordinator HTTP URL (default: from --dir)")
    p.add_argument("--user", help="user name (password from STRATA_PASSWORD; default user STRATA_USER)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per request")
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every datasource's rules and the cluster default (_default)")
    a = actions.add_parser("get", help="one datasource's rules")
    a.add_argument("datasource")
    a.add_argument("--full", action="store_true", help="followed by the _default rules, as they apply")
    a = actions.add_parser("set", help="replace a datasource's whole rule list (_default: the cluster default)")
    a.add_argument("datasource")
    a.add_argument("--rules", required=True, help="the rule list as JSON text, a file, or - for stdin")
    a.add_argument("--author", help="who (audit; default $USER)")
    a.add_argument("--comment", help="why (audit)")
    a = actions.add_parser("history", help="who changed the rules, when and why (newest first)")
    a.add_argument("datasource", nargs="?")
    a.add_argument("--count", type=int, help="the last N changes")
    a.add_argument("--interval", help="changes within an ISO interval (default: the last week)")
    p.set_defaults(func=cmd_rules)
    return p
