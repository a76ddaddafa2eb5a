"""Draw every strata dashboard's panels from a real Prometheus's data, for docs/operations.md.

    PYTHONPATH=. .venv/bin/python scripts/dashboard_pictures.py [--minutes 4] [--out docs/images/dashboards]

Starts a local cluster (``strata up``: coordinator, broker, two historicals) and a real Prometheus
scraping it every second (the Debian package's binary), runs the mixed workload of
tests/harness/monitored_cluster.py, and on the way: a successful Spark ingestion with three rows
that do not parse, an ingestion that fails (no parse exceptions allowed), then ``--minutes`` of
queries with a historical killed at 60% of them. Then it evaluates each panel's own PromQL (from the committed dashboard
JSON, ``$__rate_interval`` = 15s) over the run with query_range and draws one PNG per dashboard,
panels laid out as in Grafana. Needs matplotlib (the ``bench`` extra), not a runtime dependency.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from tests.harness.monitored_cluster import DASHBOARDS, MonitoredCluster, edits_file  # noqa: E402

RATE_WINDOW = "15s"
UNITS = {"short": "", "bytes": "bytes", "Bps": "bytes/s", "s": "seconds", "ops": "per second",
         "reqps": "queries/s", "percentunit": "ratio"}


def _legend(fmt: str, labels: dict) -> str:
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()
    return text or json.dumps(labels, sort_keys=True)


def _log(message: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


def run_workload(mc: MonitoredCluster, minutes: float, work: Path) -> tuple[float, float]:
    """The scripted run; returns its (start, end) in Unix seconds. The ingestions come first (their
    Spark jobs take what they take); then ``minutes`` of queries, with historical-2 killed at 60%."""
    start = time.time()
    mc.load_data()
    mc.start_workload()
    _log("workload running")
    good = edits_file(work / "edits.json")
    task = mc.ingest(work / "edits.json", max_parse_exceptions=10)
    _log(f"ingestion {task.id}: {task.state}")
    if task.state == "SUCCESS":
        mc.wait_edits(good)
    edits_file(work / "more-edits.json", rows=2000, start="2016-06-29")
    failed = mc.ingest(work / "more-edits.json", max_parse_exceptions=0)
    _log(f"ingestion {failed.id}: {failed.state} (no parse exceptions allowed)")
    queries_from = time.time()
    _sleep_until(queries_from + 0.6 * minutes * 60)
    mc.cluster.kill("historical-2", signal.SIGKILL)
    _log("historical-2 killed")
    _sleep_until(queries_from + minutes * 60)
    _sleep_until(time.time() + 3)  # the last scrapes and rule evaluations
    return start, time.time()


def _sleep_until(when: float) -> None:
    while time.time() < when:
        time.sleep(min(1.0, max(when - time.time(), 0.0)))


def draw(mc: MonitoredCluster, start: float, end: float, out: Path, step: float = 2.0) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dash = json.loads(path.read_text(encoding="utf-8"))
        panels = dash["panels"]
        rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
        fig = plt.figure(figsize=(16, rows * 0.42), dpi=72)
        grid = fig.add_gridspec(rows, 24, hspace=1.4, wspace=1.2, left=0.04, right=0.99, top=0.97, bottom=0.03)
        fig.suptitle(f"{dash['title']}  (a real Prometheus scraping the test workload for {(end - start) / 60:.0f} minutes)",
                     fontsize=13, x=0.01, ha="left")
        for panel in panels:
            g = panel["gridPos"]
            if panel["type"] == "row":
                ax = fig.add_subplot(grid[g["y"]:g["y"] + 1, :])
                ax.axis("off")
                ax.text(0, 0.2, panel["title"], fontsize=12, fontweight="bold")
                continue
            ax = fig.add_subplot(grid[g["y"] + 1:g["y"] + g["h"], g["x"]:g["x"] + g["w"]])
            _draw_panel(ax, mc, panel, start, end, step)
        target = out / f"{dash['uid']}.png"
        fig.savefig(target)
        plt.close(fig)
        written.append(target)
        _log(f"wrote {target}")
    return written


def _draw_panel(ax, mc: MonitoredCluster, panel: dict, start: float, end: float, step: float) -> None:
    ax.set_title(panel["title"], fontsize=10, loc="left")
    lines = 0
    last_values = []
    for target in panel["targets"]:
        expr = target["expr"].replace("$__rate_interval", RATE_WINDOW)
        for series in mc.prom.query_range(expr, start, end, step):
            points = [(datetime.fromtimestamp(float(t), timezone.utc), float(v)) for t, v in series["values"]]
            points = [(t, v) for t, v in points if math.isfinite(v)]
            if not points:
                continue
            xs, ys = zip(*points)
            ax.plot(xs, ys, linewidth=1.2, label=_legend(target.get("legendFormat", ""), series["metric"]))
            last_values.append(ys[-1])
            lines += 1
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    if panel["type"] == "stat" and last_values:
        ax.text(0.98, 0.9, f"{sum(last_values):g}", transform=ax.transAxes, ha="right", va="top", fontsize=18,
                fontweight="bold")
    if lines == 0:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    elif lines <= 8:
        ax.legend(fontsize=7, loc="upper left")
    else:
        ax.legend(fontsize=6, loc="upper left", ncol=2)
    ax.set_ylabel(UNITS.get(unit, unit), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    ax.grid(alpha=0.3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0,
                        help="minutes of queries after the ingestions (default 3)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "dashboards"), help="where the PNGs go")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strata-dashboards-") as tmp:
        work = Path(tmp)
        mc = MonitoredCluster(work)
        try:
            mc.start()
            _log(f"cluster up; Prometheus at {mc.prom.url}")
            start, end = run_workload(mc, args.minutes, work)
            draw(mc, start, end, Path(args.out))
        finally:
            mc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
