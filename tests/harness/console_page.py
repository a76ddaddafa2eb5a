"""The web console in a real browser (Debian's chromium driven by Playwright): the settings and the
helpers the console's browser tests share (tests/integration/console/: their fixtures are in its
conftest.py). STRATA_SCREENSHOTS=1 saves 1280x800 screenshots into docs/images/ (the README's)."""

from __future__ import annotations

import os

import adbc_driver_flightsql.dbapi as adbc

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = os.environ.get("STRATA_SCREENSHOTS") == "1"
IMAGES = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "images")
XSS = "<img src=x onerror=alert(1)>"
TIMEOUT_MS = 30_000


def signed_in(browser, cluster, user) -> object:
    """A fresh page signed in through the console's login form, with any dialog recorded."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(TIMEOUT_MS)
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    # Uncaught script errors and Content-Security-Policy refusals: a view must cause neither.
    page.faults = []
    page.on("pageerror", lambda e: page.faults.append(str(e)))
    page.on("console", lambda m: page.faults.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(cluster.url)
    page.fill("#login-user", user[0])
    page.fill("#login-password", user[1])
    page.click("#login button[type=submit]")
    page.wait_for_selector("nav")
    return page


def flight_sql(cluster, user, sql: str) -> list[tuple]:
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}",
                      db_kwargs={"username": user[0], "password": user[1]}, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r.values()) for r in cur.fetch_arrow_table().to_pylist()]


def shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(IMAGES, f"console-{name}.png"))
