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
import os
import sys
from urllib.parse import quote

from common.errors import StrataError
from services.cli.coordinator_rest_client import (
    DEFAULT_TIMEOUT_S,
    CoordinatorRestClient,
    add_coordinator_arguments,
    coordinator_from_args,
    print_json,
    read_json_argument,
)
from services.coordinator.core.rules import rules_from_json

BASE = "/druid/coordinator/v1/rules"


class RulesRestClient(CoordinatorRestClient):
    def __init__(self, base_url: str, authorization: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(base_url, BASE, authorization, timeout_s)

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
    value = read_json_argument(text, "--rules")
    rules_from_json(value)  # names the rule and field at fault before the round trip
    return value


def client_from_args(args) -> RulesRestClient:
    return RulesRestClient(*coordinator_from_args(args))


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
    print_json(out)
    return 0


def cmd_rules(args) -> int:
    return run_rules(client_from_args(args), args)


def register(subparsers, default_dir: str = "var/cluster") -> argparse.ArgumentParser:
    p = subparsers.add_parser("rules", help="retention and load rules: list, get, set, history")
    add_coordinator_arguments(p, default_dir)
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
