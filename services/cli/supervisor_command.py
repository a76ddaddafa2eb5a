"""``strata supervisor ...``: Kafka supervisors from the command line, over the coordinator's
Druid-compatible REST API (``/druid/indexer/v1/supervisor``).

    strata supervisor list [--full | --state]          ids; --full with specs, --state with states
    strata supervisor get wiki                         the spec
    strata supervisor create --spec spec.json          create or update (JSON text, a file or -)
    strata supervisor status wiki                      state, health, offsets, lag, recentErrors
    strata supervisor stats wiki                       rows processed and unparseable per task
    strata supervisor health wiki                      exit 0 when healthy, 1 when not
    strata supervisor suspend|resume|terminate wiki
    strata supervisor reset wiki [--offsets '{"0": 100}']   forget the committed offsets, or set some

``--spec`` is checked here first, so a mistake is named (its key path) before the round trip.
Coordinator and credentials as ``strata catalog``.
"""

from __future__ import annotations

import argparse
from urllib.parse import quote

from common.errors import StrataError
from common.ingest.supervisor_spec import parse_supervisor_spec
from services.cli.coordinator_rest_client import (
    DEFAULT_TIMEOUT_S,
    CoordinatorRequestError,
    CoordinatorRestClient,
    add_coordinator_arguments,
    coordinator_from_args,
    print_json,
    read_json_argument,
)

BASE = "/druid/indexer/v1/supervisor"
ACTIONS = ("suspend", "resume", "terminate")


class SupervisorRestClient(CoordinatorRestClient):
    def __init__(self, base_url: str, authorization: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(base_url, BASE, authorization, timeout_s)

    def list(self, full: bool = False, state: bool = False):
        return self.request("GET", "", {"full": "" if full else None, "state": "true" if state else None})

    def get(self, supervisor_id: str) -> dict:
        return self.request("GET", quote(supervisor_id, safe=""))

    def create(self, spec: dict) -> dict:
        return self.request("POST", "", None, spec)

    def call(self, supervisor_id: str, action: str, method: str = "GET", body=None):
        return self.request(method, f"{quote(supervisor_id, safe='')}/{action}", None, body)

    def health(self, supervisor_id: str) -> bool:
        try:
            return bool(self.call(supervisor_id, "health").get("healthy"))
        except CoordinatorRequestError as exc:
            if exc.status == 503:  # Druid's answer for an unhealthy supervisor
                return False
            raise


def _read_spec(text: str) -> dict:
    value = read_json_argument(text, "--spec")
    parse_supervisor_spec(value)  # names the key at fault before the round trip
    return value


def _read_offsets(text: str) -> dict[str, int]:
    value = read_json_argument(text, "--offsets")
    if not isinstance(value, dict) or not value:
        raise StrataError('--offsets must be a JSON object of partition -> offset, e.g. \'{"0": 100}\'')
    return value


def client_from_args(args) -> SupervisorRestClient:
    return SupervisorRestClient(*coordinator_from_args(args))


def run_supervisor(client: SupervisorRestClient, args) -> int:
    action = args.action
    if action == "list":
        out = client.list(args.full, args.state)
    elif action == "get":
        out = client.get(args.id)
    elif action == "create":
        out = client.create(_read_spec(args.spec))
        print(f"supervisor {out['id']} created or updated")
        return 0
    elif action in ("status", "stats"):
        out = client.call(args.id, action)
    elif action == "health":
        healthy = client.health(args.id)
        print("healthy" if healthy else f"unhealthy: see 'strata supervisor status {args.id}' (recentErrors)")
        return 0 if healthy else 1
    elif action in ACTIONS:
        client.call(args.id, action, "POST")
        print(f"supervisor {args.id}: {action} done")
        return 0
    else:  # reset
        if args.offsets:
            stream = client.get(args.id)
            spec = stream.get("spec", stream)
            topic = spec["ioConfig"]["topic"]
            client.call(args.id, "resetOffsets", "POST", {"type": "kafka", "partitions": {
                "type": "end", "stream": topic, "partitionOffsetMap": _read_offsets(args.offsets)}})
            print(f"supervisor {args.id}: offsets of {topic} set")
        else:
            client.call(args.id, "reset", "POST")
            print(f"supervisor {args.id}: committed offsets forgotten (tasks start per useEarliestOffset)")
        return 0
    print_json(out)
    return 0


def cmd_supervisor(args) -> int:
    return run_supervisor(client_from_args(args), args)


def register(subparsers, default_dir: str = "var/cluster") -> argparse.ArgumentParser:
    p = subparsers.add_parser("supervisor", help="Kafka supervisors: list, get, create, status, stats, health, "
                                                 "suspend, resume, terminate, reset")
    add_coordinator_arguments(p, default_dir)
    actions = p.add_subparsers(dest="action", required=True)
    a = actions.add_parser("list", help="supervisor ids (terminated ones are not listed)")
    shown = a.add_mutually_exclusive_group()
    shown.add_argument("--full", action="store_true", help="with their specs and states")
    shown.add_argument("--state", action="store_true", help="with their states")
    a = actions.add_parser("create", help="create a supervisor, or update the one of the spec's datasource")
    a.add_argument("--spec", required=True, help="the Kafka supervisor spec as JSON text, a file, or - for stdin")
    for name, text in (("get", "the supervisor's spec"),
                       ("status", "state, health, offsets, lag and recentErrors (Druid's status payload)"),
                       ("stats", "rows processed and unparseable per running task"),
                       ("health", "exit status 0 when healthy, 1 when not"),
                       ("suspend", "stop reading (the task is cancelled; lag builds up in Kafka)"),
                       ("resume", "read again from the committed offsets"),
                       ("terminate", "stop the supervisor for good (POST its spec to start it again)")):
        actions.add_parser(name, help=text).add_argument("id", help="the supervisor id (its datasource)")
    a = actions.add_parser("reset", help="forget the committed offsets, or set some partitions' (--offsets)")
    a.add_argument("id", help="the supervisor id (its datasource)")
    a.add_argument("--offsets", help='partition -> next offset to read, as JSON text, a file or -: \'{"0": 100}\'')
    p.set_defaults(func=cmd_supervisor)
    return p
