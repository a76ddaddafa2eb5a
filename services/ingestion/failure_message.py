"""failure_message: what a failed Spark ingestion job says to the user, taken out of the Spark
and Python errors around it (a Python worker that could not start, an executor's Python error
wrapped in a Java stack trace)."""

from __future__ import annotations

import re

from common.errors import StrataError


def failure_message(exc: BaseException) -> str:
    if isinstance(exc, StrataError):
        return str(exc)
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # A Python worker (or its daemon) that could not start: Spark puts what it printed after this line.
    if "Error from python worker:" in lines:
        said = lines[lines.index("Error from python worker:") + 1:]
        said = [ln.strip() for ln in said[:next((i for i, ln in enumerate(said) if ln.startswith("PYTHONPATH was")),
                                                 len(said))]]
        path = lines[lines.index("PYTHONPATH was:") + 1].strip() if "PYTHONPATH was:" in lines[:-1] else "?"
        return (f"Spark's Python workers could not start: {' '.join(said)[:500]} (their PYTHONPATH: {path[:500]}). "
                "The executors' Python must import strata and its dependencies: install it there or set "
                "spark.executorEnv.PYTHONPATH (STRATA_SPARK_CONF)")
    # A Python error on an executor arrives wrapped in a Java stack trace; its last Python line is the cause.
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Failed)\b", ln.strip()):
            return ln.strip()[:1000]
    return (lines[0] if lines else type(exc).__name__)[:1000]


__all__ = ["failure_message"]
