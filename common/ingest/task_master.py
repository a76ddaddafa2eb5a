"""Which Spark master an ingestion task runs on: the configured one (``STRATA_SPARK_MASTER``, else
``local[*]``; or a Spark Connect server, ``STRATA_SPARK_REMOTE``), unless the task needs its own.

Shared by the coordinator's task runner (a task that needs its own master cannot go to a warm
driver, whose session is already started) and the ingestion task process (which starts its
session on it). Pure: the task's spec and the process environment, no Spark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

MASTER_ENV = "STRATA_SPARK_MASTER"
REMOTE_ENV = "STRATA_SPARK_REMOTE"


def default_master() -> str:
    return os.environ.get(MASTER_ENV, "").strip() or "local[*]"


def configured_remote() -> str | None:
    """The Spark Connect server sessions connect to (``STRATA_SPARK_REMOTE``), or None."""
    return os.environ.get(REMOTE_ENV, "").strip() or None


def task_master(spec: Mapping, configured: str | None = None) -> str | None:
    """The master a task needs instead of the configured one, or None: ``maxNumTasks`` on a local
    master is Spark's task slots, fixed when a session starts (so a warm driver cannot run it)."""
    if configured is None and configured_remote() is not None:
        return None  # a Connect server's slots are its own; the task runs there like any other
    configured = configured if configured is not None else default_master()
    max_tasks = (spec.get("context") or {}).get("maxNumTasks")
    if max_tasks is None or not configured.startswith("local"):
        return None
    # Druid counts one controller plus workers; locally the workers are Spark's task slots.
    return f"local[{max(1, int(max_tasks) - 1)}]"


__all__ = ["MASTER_ENV", "REMOTE_ENV", "configured_remote", "default_master", "task_master"]
