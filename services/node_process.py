"""NodeProcess: what every role's process shares: ports, identity, health, and a foreground run
that stops cleanly on SIGTERM/SIGINT (strata runs as PID 1 in containers)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time


class NodeProcess:
    role = ""

    def __init__(self, config) -> None:
        self.config = config
        from services.transport_security import transport_security_from_config

        self.security = transport_security_from_config(config)  # TLS and the internal credential
        self.started_ms = int(time.time() * 1000)
        self._stopped = threading.Event()

    def node_id(self, grpc_port: int) -> str:
        return self.config.node.id or f"{self.role}-{self.config.advertise_host}-{grpc_port}"

    def server_info(self, node_id: str, grpc_port: int, http_port: int, flight_port: int = 0, **extra) -> dict:
        return {"id": node_id, "role": self.role, "host": self.config.advertise_host, "grpc_port": grpc_port,
                "http_port": http_port, "flight_port": flight_port, "started_ms": self.started_ms, **extra}

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        self._stopped.set()

    def endpoints(self) -> dict:
        raise NotImplementedError

    def run_forever(self) -> int:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stopped.set())
        self.start()
        logging.getLogger(f"strata.{self.role}").info("%s started: %s", self.role, self.endpoints())
        # Waits in short steps: Python runs a signal handler only when the main thread runs
        # bytecode, and the kernel may deliver SIGTERM to any of the gRPC/Flight threads, so an
        # unbounded wait could miss it (the broker once sat 20 s until SIGKILL after SIGTERM).
        while not self._stopped.wait(0.2):
            pass
        self.stop()
        return 0


def log_tail(path: str, lines: int = 20) -> str:
    """The last lines of a process log, for errors that say why a child process died."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def process_group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` still runs (nodes and tasks each lead their own
    group, so their children count too); a group we may not signal is someone's, so alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
