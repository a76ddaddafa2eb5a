"""CPU seconds of this process and its descendants, by kind, from /proc.

Benchmarks on a shared machine report CPU seconds beside wall time: wall time grows with other
people's load, CPU seconds much less. Kinds: ``driver`` (this process), ``jvm`` (the Spark JVM),
``python workers`` (pyspark.daemon and the workers it forked, counting children they already
reaped). Empty where /proc is not there.
"""

from __future__ import annotations

import os


def process_cpu() -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    procs = {}
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # Fields after the command: state, ppid, ... utime, stime, cutime, cstime at 11..14.
        procs[int(pid)] = (int(stat[1]), sum(int(x) for x in stat[11:15]) / tick, cmd)
    me = os.getpid()
    mine, frontier = set(), {me}
    while frontier:
        frontier = {p for p, (ppid, _, _) in procs.items() if ppid in frontier} - mine
        mine |= frontier
    out: dict[str, float] = {}
    if me in procs:
        # Own utime + stime only: reaped children (cutime) of the driver are not Spark's.
        with open(f"/proc/{me}/stat", "rb") as f:
            stat = f.read().rsplit(b")", 1)[1].split()
        out["driver"] = (int(stat[11]) + int(stat[12])) / tick
    for p in mine:
        _, cpu, cmd = procs[p]
        kind = "jvm" if "java" in cmd.split(" ")[0] else "python workers" if "pyspark.daemon" in cmd else None
        if kind:
            out[kind] = out.get(kind, 0.0) + cpu
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())}


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


__all__ = ["cpu_delta", "load_average", "process_cpu"]
