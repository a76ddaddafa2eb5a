"""Before and after a change, from one run: the engine and cluster benchmarks against a baseline
commit and this tree, alternately, then the medians side by side.

    .venv/bin/python bench/before_after.py [--baseline 1578185] [--rounds 3] [--benches engine,cluster,...]

The baseline is checked out into a temporary git worktree (``git worktree add --detach``) and its
C extensions built there (``setup.py build_ext --inplace``). This tree's ``bench/`` is copied over
the baseline's, so both sides run the same benchmark definitions (queries, sizes, timing) and only
the code under test differs; the demo data is generated from a fixed seed, so both see the same
rows. Each round runs every benchmark once per tree, the order swapped every round (before, after;
after, before; ...), so the rest of the machine's load falls on both sides alike: the machine this
was written on has 2 cores shared by about 7 engineers and their test suites, and single figures
move by tens of percent from minute to minute. ``bench/hop_cpu.py`` runs like the others, each
tree's cluster from its own ``LocalCluster`` (its ``--baseline`` mode starts the baseline's nodes
from this tree's cluster launcher, whose configuration a baseline from before a launcher change
may not take: 1578185's coordinator did not come up).

The table shows, per figure, the median over the rounds before and after, after/before, and the
lowest and highest per-round after/before (round i's after against round i's before): a ratio
whose range straddles 1 is noise. Peer figures (DuckDB, measured in the same processes) are kept
as a control: their after/before says how much the load moved between the two sides.

Sizes are small on purpose (the whole run takes minutes, not hours); they show a change in the
code's cost, not the absolute figures of docs/benchmarks.md's tables.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BASELINE = "1578185"  # main just before the issue #24 runtime work began

# bench -> (arguments, {column header: label}) for the Markdown tables it prints, peers marked "(peer)".
BENCHES = {
    "engine": (["--rows", "1000000", "--runs", "7", "--markdown"],
               {"strata ms repeated": "strata repeated", "strata ms first run": "strata first run",
                "DuckDB ms repeated": "DuckDB repeated (peer)"}),
    "cluster": (["--rows", "500000", "--runs", "7", "--latency-runs", "100", "--seconds", "3",
                 "--url-rows", "200000", "--markdown"],
                {"cluster ms": "native via broker", "engine ms": "in-process engine",
                 "DuckDB Parquet ms": "DuckDB (peer)", "strata ms": "strata"}),
    "projections_cluster": (["--rows", "500000", "--runs", "7", "--markdown"],
                            {"proj ms": "ADBC, projection", "base ms": "ADBC, no projection",
                             "proj ms lean": "lean client, projection", "in-process proj ms": "in-process",
                             "DuckDB ms": "DuckDB (peer)"}),
    "hop_cpu": (["--rows", "500000", "--runs", "300", "--rounds", "1"],
                {cell: cell for cell in ("wall p50 ms", "broker CPU ms", "historicals CPU ms", "client CPU ms")}),
}
# Figures printed outside the tables: (bench, regex with one number group per label, labels).
LINES = [
    ("cluster", r"trivial query through the broker.*?p50 ([\d.]+) ms.*?; (\d+) queries/s",
     ("trivial native query p50 ms", "trivial native queries/s (8 clients)")),
    ("cluster", r"one-segment SQL query through Flight SQL.*?p50 ([\d.]+) ms.*?all processes ([\d.]+)",
     ("one-segment SQL p50 ms (ADBC)", "one-segment SQL CPU ms, all processes")),
    ("cluster", r"SELECT 1 \(no historical\) through Flight SQL.*?p50 ([\d.]+) ms.*?all processes ([\d.]+)",
     ("SELECT 1 p50 ms (ADBC)", "SELECT 1 CPU ms, all processes")),
    ("projections_cluster", r"floor .*?with ADBC ([\d.]+) / ([\d.]+), with the lean client ([\d.]+) / ([\d.]+)",
     ("floor ADBC repeated", "floor ADBC first run", "floor lean repeated", "floor lean first run")),
    ("projections_cluster", r"CPU ms per query.*?lean: broker ([\d.]+), historical ([\d.]+)",
     ("hourly, lean client: broker CPU ms", "hourly, lean client: historicals CPU ms")),
]
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*|nan")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True, text=True).stdout.strip()


def checkout(ref: str, where: str) -> str:
    """``ref`` in a temporary worktree at ``where`` with this tree's bench/ and its C extensions built."""
    git("worktree", "add", "--detach", where, ref)
    for name in os.listdir(os.path.join(ROOT, "bench")):
        if name.endswith(".py"):
            shutil.copy2(os.path.join(ROOT, "bench", name), os.path.join(where, "bench", name))
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=where, check=True,
                   env=dict(os.environ, PYTHONPATH=where), capture_output=True)
    return where


class BenchFailed(Exception):
    """A benchmark run that printed no table (its cluster did not come up, say)."""


def run(tree: str, side: str, bench: str, extra: list[str], timeout_s: float) -> str:
    """One benchmark's output, run from ``tree`` (its processes too: they start from the cwd and
    PYTHONPATH, ahead of the venv's editable install)."""
    cmd = [sys.executable, os.path.join(tree, "bench", f"{bench}.py"), *BENCHES[bench][0], *extra]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True,
                          timeout=timeout_s)
    # A bench that printed its table and then exits 1 (a goal missed, a "same rows" NO) still
    # measured; one that printed no table failed.
    printed = any(line.startswith("|") for line in done.stdout.splitlines())
    if done.returncode != 0 and not printed:
        raise BenchFailed(f"{bench} in {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(f"  {bench:<20} {side:<6} {time.monotonic() - started:5.0f} s, "
          f"load average {os.getloadavg()[0]:.1f}" + (f", exit {done.returncode}" if done.returncode else ""),
          flush=True)
    return done.stdout


def numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(cell)]


def tables(text: str):
    """Each Markdown table in ``text``: (header cells, rows of cells)."""
    block: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            if len(block) > 2:
                yield block[0], [r for r in block[2:] if len(r) == len(block[0])]
            block = []


def figures(bench: str, text: str) -> dict[str, float]:
    """The figures of one run: table cells named in BENCHES (a "repeated / first run" cell gives
    two), and the LINES figures."""
    wanted = BENCHES[bench][1]
    out: dict[str, float] = {}
    for header, rows in tables(text):
        for i, column in enumerate(header):
            if column not in wanted:
                continue
            key = 1 if header[:2] == ["round", "query"] else 0  # hop_cpu: the query is the second cell
            for row in rows:
                values = numbers(row[i])
                tags = [""] if len(values) == 1 else [" repeated", " first run"]
                for tag, value in zip(tags, values):
                    out[f"{row[key]} · {wanted[column]}{tag}"] = value
    for name, pattern, labels in LINES:
        if name == bench:
            found = re.search(pattern, text, re.S)
            if found:
                out.update(zip(labels, map(float, found.groups())))
    return out


def report(bench: str, before: list[dict], after: list[dict]) -> list[tuple]:
    lines = []
    names = sorted({name for b in before for name in b})  # a query's figures together
    for name in names:
        pairs = [(b[name], a[name]) for b, a in zip(before, after) if name in b and name in a and b[name] > 0]
        if not pairs:
            continue
        b_med = statistics.median(p[0] for p in pairs)
        a_med = statistics.median(p[1] for p in pairs)
        per_round = [a / b for b, a in pairs]
        lines.append((bench, name, b_med, a_med, a_med / b_med if b_med else float("nan"),
                      min(per_round), max(per_round)))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=BASELINE, help="the commit to compare against")
    ap.add_argument("--after", help="a commit to measure instead of this tree as it is (checked out like the "
                                    "baseline, so this tree may change while the benchmarks run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--benches", default=",".join(BENCHES), help=f"comma-separated, of {', '.join(BENCHES)}")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds one benchmark run may take")
    ap.add_argument("--save", help="a directory to keep each run's output in (<bench>-<side>-<round>.txt)")
    args = ap.parse_args()
    benches = [b.strip() for b in args.benches.split(",") if b.strip()]
    unknown = sorted(set(benches) - set(BENCHES))
    if unknown:
        raise SystemExit(f"unknown bench(es) {unknown}; choose from {', '.join(BENCHES)}")
    if args.after:
        head, dirty = git("rev-parse", "--short", args.after), ""
    else:
        head = git("rev-parse", "--short", "HEAD")
        dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    work = tempfile.mkdtemp(prefix="strata-before-after-")
    before_tree = os.path.join(work, "before")
    after_tree = os.path.join(work, "after") if args.after else ROOT
    started = datetime.now(timezone.utc)
    load_start = os.getloadavg()
    lines: list[tuple] = []
    try:
        checkout(args.baseline, before_tree)
        if args.after:
            checkout(args.after, after_tree)
        print(f"before: {args.baseline} in {before_tree}; after: {head}{dirty} in {after_tree}; "
              f"{args.rounds} rounds, order swapped each round", flush=True)
        runs: dict[str, tuple[list, list]] = {b: ([], []) for b in benches}
        for round_no in range(args.rounds):
            print(f"round {round_no + 1}", flush=True)
            order = ((before_tree, "before"), (after_tree, "after"))
            for bench in runs:
                for tree, side in (order if round_no % 2 == 0 else order[::-1]):
                    try:
                        text = run(tree, side, bench, [], args.timeout)
                    except BenchFailed as exc:  # that round of that bench is left out, on both sides
                        print(f"  {exc}", flush=True)
                        text = ""
                    save(args.save, f"{bench}-{side}-{round_no + 1}", text)
                    runs[bench][0 if side == "before" else 1].append(figures(bench, text))
            if round_no + 1 < args.rounds:  # a run stopped early still has the rounds it finished
                print_table(lines + [line for bench, (before, after) in runs.items()
                                     for line in report(bench, before, after)])
        for bench, (before, after) in runs.items():
            lines += report(bench, before, after)
    finally:
        for tree in (before_tree, after_tree):
            if tree != ROOT:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    finished = datetime.now(timezone.utc)
    print()
    print(f"before = {args.baseline}, after = {head}{dirty}; {args.rounds} rounds; "
          f"{started:%Y-%m-%d %H:%M}-{finished:%H:%M} UTC; load average (1/5/15 min) at the start "
          f"{load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f}, at the end "
          + "/".join(f"{x:.1f}" for x in os.getloadavg())
          + f"; {os.cpu_count()} cores shared with about 7 engineers' work")
    print_table(lines)
    return 0


def print_table(lines: list[tuple]) -> None:
    print("| bench | figure | before | after | after/before | per-round after/before |")
    print("|---|---|---|---|---|---|")
    for bench, name, b, a, ratio, low, high in lines:
        print(f"| {bench} | {name} | {b:.2f} | {a:.2f} | {ratio:.2f} | {low:.2f}-{high:.2f} |", flush=True)
    print()
    print("| bench | strata figures | geomean after/before | peer figures | peers' geomean after/before | "
          "strata's / peers' | strata figures worse in every round |")
    print("|---|---|---|---|---|---|---|")
    for bench in dict.fromkeys(line[0] for line in lines):
        own = [line for line in lines if line[0] == bench and "(peer)" not in line[1]]
        peers = [line for line in lines if line[0] == bench and "(peer)" in line[1]]
        mine, theirs = geomean([line[4] for line in own]), geomean([line[4] for line in peers])
        worse = sum(1 for line in own if line[5] > 1)
        print(f"| {bench} | {len(own)} | {mine:.2f} | {len(peers)} | {theirs:.2f} | {mine / theirs:.2f} | {worse} |"
              if peers else f"| {bench} | {len(own)} | {mine:.2f} | 0 | - | - | {worse} |", flush=True)


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def save(directory: str | None, name: str, text: str) -> None:
    if directory:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
