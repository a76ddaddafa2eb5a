"""RestartableS3: the moto S3 server of tests/fixtures/s3_server.py, but one a test can stop and
start again on the same port, to take deep storage away from a running cluster and give it back.

The objects survive a restart (moto keeps its buckets in the process, not in the server thread),
as they would on a real S3 endpoint that was unreachable for a while. Nodes reach it over HTTP on
127.0.0.1 with the credentials ``AWS_ENV`` puts in the environment, which child processes inherit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from tests.fixtures.s3_server import _ENV as AWS_ENV
from tests.fixtures.s3_server import S3Server

_START_DEADLINE_S = 30.0


class RestartableS3:
    def __init__(self) -> None:
        self.port = 0
        self.info: S3Server | None = None
        self._server = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_level: int | None = None

    def start(self) -> RestartableS3:
        """Start (the first time on a free port, then on the same one) and wait until it answers."""
        from moto.server import ThreadedMotoServer

        if self._server is not None:
            return self
        first = self.info is None
        if first:
            self._saved_env = {k: os.environ.get(k) for k in AWS_ENV}
            os.environ.update(AWS_ENV)
            werkzeug = logging.getLogger("werkzeug")  # one line per request would bury a failure's output
            self._saved_level = werkzeug.level
            werkzeug.setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        # ThreadedMotoServer.start() waits with no deadline; bound it.
        starter = threading.Thread(target=server.start, daemon=True)
        starter.start()
        starter.join(_START_DEADLINE_S)
        if starter.is_alive():
            raise RuntimeError(f"moto S3 server did not start on port {self.port} within {_START_DEADLINE_S:.0f}s")
        self._server = server
        if first:
            host, self.port = server.get_host_and_port()
            self.info = S3Server(f"http://{host}:{self.port}", f"strata-faults-{uuid.uuid4().hex[:8]}", "segments",
                                 "us-east-1")
        fs = self.info.filesystem()
        deadline = time.monotonic() + _START_DEADLINE_S
        while True:
            try:
                if first:
                    fs.create_dir(self.info.bucket)
                else:
                    fs.get_file_info(self.info.bucket)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop answering: connections to the port are refused until ``start``."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def close(self) -> None:
        self.stop()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._saved_level is not None:
            logging.getLogger("werkzeug").setLevel(self._saved_level)
