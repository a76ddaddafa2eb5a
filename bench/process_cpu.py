"""CPU seconds of this process and its descendants, by kind, from /proc.

Benchmarks on a shared machine report CPU seconds beside wall time: wall time grows with other
people's load, CPU seconds much less. Kinds: ``driver`` (this process), ``jvm`` (the Spark JVM),
``python workers`` (the Python worker daemon, pyspark.daemon or strata's worker_daemon, and the
workers it forked, counting children they already reaped), ``task driver`` (a warm task driver's
Python process, services.ingestion.task_driver, started by an in-process coordinator). Empty where /proc is not there.
``jvm_threads`` splits the Spark JVM's CPU by thread kind (JIT compilers, GC, task threads, ...).
"""

from __future__ import annotations

import os
import re

# Spark Python worker daemons: pyspark's own, or strata's that pre-imports its modules.
_DAEMONS = ("pyspark.daemon", "services.ingestion.worker_daemon")


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
        kind = "jvm" if "java" in cmd.split(" ")[0] else "python workers" if any(d in cmd for d in _DAEMONS) \
            else "task driver" if "services.ingestion.task_driver" in cmd else None
        if kind:
            out[kind] = out.get(kind, 0.0) + cpu
    return out


# JVM thread names (/proc/PID/task/TID/comm, 15 characters) -> kind.
_JVM_THREADS = (("jit", re.compile(r"^C[12] Compiler|^Sweeper")), ("gc", re.compile(r"^(GC |G1 |VM Periodic|VM Thread)")),
                ("tasks", re.compile(r"^Executor task")), ("shuffle/netty", re.compile(r"shuffle|netty|rpc", re.I)))


def jvm_threads() -> dict[str, float]:
    """CPU seconds of this process's Spark JVM(s) by thread kind: jit, gc, tasks (executor task
    threads, which also run the Arrow transfer to Python), shuffle/netty, other (the driver's
    scheduler, py4j, ...). Threads that already ended are not counted."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = {}
    parents = {}
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parents[int(pid)] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, ppid in parents.items() if ppid in frontier} - mine
        mine |= frontier
    for pid in mine:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                exe = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if "java" not in exe:
            continue
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    stat = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            kind = next((k for k, pattern in _JVM_THREADS if pattern.search(name)), "other")
            out[kind] = out.get(kind, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())}


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


__all__ = ["cpu_delta", "jvm_threads", "load_average", "process_cpu"]
