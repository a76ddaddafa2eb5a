"""Page load of the web console, view by view, in headless Chromium (Debian's, as the browser
tests drive it) against a local cluster (``strata up``: coordinator, broker, one historical and
the router serving the console; authentication off, so no login step).

Each view in the console's navigation is opened ``--runs`` times. A *first load* is a fresh
browser context (empty cache, no connections) opening ``/#view``; a *repeated load* reloads the
same page in that context (the console's files are revalidated: they are served ``no-cache``).
Three figures per load, in milliseconds from the start of the navigation:

- *DOMContentLoaded*: the HTML and every ES module parsed and run (module scripts are deferred);
- *load*: the stylesheet and the rest fetched too (Navigation Timing's ``loadEventEnd``);
- *ready*: the view shows its data: a section is in ``<main>`` and no "loading…" text is left
  (recorded in the page by a MutationObserver, so the harness's polling does not add to it).

Medians over the runs, with the slowest run after a slash. The issue's target: the Query view
ready in under 1 s.

    .venv/bin/python bench/console_load.py [--rows 100000] [--runs 5] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from playwright.sync_api import sync_playwright  # noqa: E402
from bench.demo_cluster import demo_cluster  # noqa: E402


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY_TIMEOUT_MS = 60_000

# Runs in every page before its own scripts: notes when the view first shows its data.
READY_PROBE = """
(() => {
  const ready = () => {
    const main = document.querySelector("main");
    return main && main.querySelector("section") && !/loading/i.test(main.textContent);
  };
  const check = () => {
    if (window.__strataReady === undefined && ready()) window.__strataReady = performance.now();
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true, characterData: true });
})();
"""
TIMINGS = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  return [n.domContentLoadedEventEnd, n.loadEventEnd, window.__strataReady];
}"""


def timed_load(page, url: str | None) -> tuple[float, float, float]:
    """(DOMContentLoaded, load, ready) ms of a navigation to ``url``, or of a reload without one."""
    if url is None:
        page.reload(wait_until="load")
    else:
        page.goto(url, wait_until="load")
    page.wait_for_function("() => window.__strataReady !== undefined", timeout=READY_TIMEOUT_MS)
    return tuple(page.evaluate(TIMINGS))


def view_names(browser, console: str) -> list[str]:
    """The views the console's navigation links to (so views added later are timed too)."""
    page = browser.new_page()
    page.goto(console, wait_until="load")
    page.wait_for_selector("nav a")
    names = page.eval_on_selector_all("nav a", "as => as.map(a => a.getAttribute('href').slice(1))")
    page.close()
    return names


def summary(samples: list[float]) -> str:
    return f"{statistics.median(samples):.0f} / {max(samples):.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the demo datasource 'wiki'")
    ap.add_argument("--runs", type=int, default=5, help="first loads (fresh contexts) per view; each is reloaded "
                                                       "as many times")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not shutil.which(CHROMIUM):
        print(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)", file=sys.stderr)
        return 2
    lines = []
    with demo_cluster(args.rows, prefix="strata-console-load-") as (_cluster, endpoints):
        console = endpoints["console"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                views = view_names(browser, console)
                lines.append("| view | first load: DOMContentLoaded | load | ready | "
                             "repeated: DOMContentLoaded | load | ready |")
                lines.append("|---|---|---|---|---|---|---|")
                for view in views:
                    first, repeated = [], []
                    for _ in range(args.runs):
                        context = browser.new_context(viewport={"width": 1280, "height": 800})
                        context.add_init_script(READY_PROBE)
                        page = context.new_page()
                        first.append(timed_load(page, f"{console}#{view}"))
                        repeated.append(timed_load(page, None))
                        context.close()
                    cells = [summary([t[i] for t in runs]) for runs in (first, repeated) for i in range(3)]
                    lines.append(f"| {view} | " + " | ".join(cells) + " |")
            finally:
                browser.close()
    lines.append("")
    lines.append(f"ms from the start of navigation, median / slowest of {args.runs} runs; "
                 f"{args.rows:,} rows; load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d')}")
    print("\n".join(lines) if args.markdown else "\n".join(line.replace("|", " ") for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
