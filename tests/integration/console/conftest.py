"""Fixtures of the console's browser tests: a cluster with authentication on behind a router
(module-scoped: each test module gets its own), and Debian's chromium through Playwright."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.demo import table as demo_table
from tests.harness.auth_cluster import auth_cluster
from tests.harness.console_page import CHROMIUM, CHROMIUM_ARGS, XSS


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("console")
    c = auth_cluster(directory)
    try:
        c.coordinator.task_runner.max_running = 0  # submitted tasks stay PENDING: no Spark here
        c.wiki = demo_table(3_000, days=1)
        c.wait_queryable("wiki", len(c.publish(c.wiki, "wiki")))
        hostile = pa.table({"__time": pa.array([1_600_000_000_000, 1_600_000_060_000], pa.timestamp("ms")),
                            "label": [XSS, "plain"], "n": [1, 2]})
        c.wait_queryable("secret", len(c.publish(hostile, "secret")))
        c.start_router()
        c.url = f"http://127.0.0.1:{c.router.http.port}/"
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
