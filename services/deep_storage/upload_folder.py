"""Where an ingestion run's uploads go in deep storage: ``{datasource}/_ingest/{task}-{run}/``.

One folder per run lets a failed or cancelled run delete exactly what it uploaded; the task id at
the front of the folder name lets the coordinator find the uploads of a task whose process died
without cleaning up (killed, out of memory) and delete them. Published segments keep their
location inside the folder, so cleanup never removes a key the metadata store references.
"""

from __future__ import annotations

import re
import uuid


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80] or "job"


def ingest_root(datasource: str) -> str:
    """The folder holding every run's uploads of ``datasource``."""
    return f"{datasource}/_ingest/"


def task_key_prefix(datasource: str, task_id: str) -> str:
    """The key prefix every run of ``task_id`` uploads under (not a folder: runs add a suffix).
    The trailing dash keeps task ``t1`` from matching ``t10``."""
    return f"{ingest_root(datasource)}{_safe(task_id)}-"


def new_run_token(task_id: str) -> str:
    """A fresh run's folder name under :func:`ingest_root`."""
    return f"{_safe(task_id)}-{uuid.uuid4().hex[:8]}"


__all__ = ["ingest_root", "new_run_token", "task_key_prefix"]
