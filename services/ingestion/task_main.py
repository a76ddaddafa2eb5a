"""The process of one ingestion task: ``python -m services.ingestion.task_main --task-id ID
--coordinator HOST:PORT``. Started by the leader coordinator's TaskRunner.

It reads the task from the coordinator (its statement was parsed on the broker and travels as JSON
in the task spec), runs the Spark job (segments to deep storage), publishes through the
coordinator in one transaction, and reports progress and the final state.
SIGTERM cancels: the job stops, deletes what it uploaded, and the task ends CANCELED.

This is the cold path (one JVM per task); a warm task driver (task_driver.py) calls ``run_task``
with the session it keeps.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
import traceback

import grpc

from common.errors import StrataError, ValidationError
from common.ingest.task_master import task_master
from services.rpc.gen.strata.v1 import catalog_pb2, catalog_pb2_grpc, coordinator_pb2, coordinator_pb2_grpc
from services.grpc_server import channel
from services.transport_security import transport_security_for_task

log = logging.getLogger("strata.task")


def _update(stub, task_id: str, state: str, report: dict | None = None, error: str = "") -> None:
    request = coordinator_pb2.UpdateTaskRequest(id=task_id, state=state, error=error,
                                                report_json=json.dumps(report) if report is not None else "")
    stub.UpdateTask(request, timeout=60)


def _statement(spec: dict):
    """The typed statement the broker parsed (``spec["statement"]``, see IngestionStatement.to_json);
    the task's SQL text is kept for people and is not parsed again here."""
    from common.ingest.statement import IngestionStatement

    if "statement" not in spec:
        raise ValidationError("the task carries no parsed statement (spec.statement); it was created by an older "
                              "broker: submit the INSERT/REPLACE again")
    return IngestionStatement.from_json(spec["statement"])


def _compaction(stub, coordinator: str, task, spec: dict, cleanups: list):
    """The REPLACE a compaction task runs, its spec with the catalog's projections as they are
    now (the point of compacting: segments get the current definitions), and the used segments
    its publish expects to find in the rewritten chunks (a segment appended meanwhile refuses it)."""
    from common.catalog.table_spec import TableSpec
    from common.types.interval import Interval
    from services.rpc.convert import descriptor_from_proto
    from services.deep_storage import deep_storage_from_url
    from services.ingestion.compaction import compaction_metrics, prepare_compaction, present_segments
    from common.ingest.statement import parse_ingestion

    datasource = task.datasource
    interval = Interval.parse(spec["interval"]) if spec.get("interval") else None
    listed = stub.ListSegments(coordinator_pb2.ListSegmentsRequest(datasource=datasource, include_unused=False),
                               timeout=60)
    descriptors = [descriptor_from_proto(r.descriptor) for r in listed.segments if r.used]
    storage = deep_storage_from_url(os.environ.get("STRATA_DEEP_STORAGE_URL", "var/strata/deep-storage"),
                                    os.environ.get("STRATA_DEEP_STORAGE_ENDPOINT", ""))
    work_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"strata-compact-{task.id}")
    # The exported rows live until the task ends (a warm driver process outlives its tasks).
    cleanups.append(lambda: shutil.rmtree(work_dir, True))
    sql, column_options = prepare_compaction(datasource, descriptors, interval,
                                             lambda d, local: storage.pull(d.location, local), work_dir)
    catalog = catalog_pb2_grpc.CatalogServiceStub(channel(coordinator, transport_security_for_task()))
    try:
        meta = catalog.GetTable(catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name=datasource)),
                                timeout=60)
        table = TableSpec.from_json(json.loads(meta.spec_json or "{}"))
        projections = table.projections
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise
        projections = []
    return parse_ingestion(sql, spec.get("context") or {}), {
        **spec, "projections": projections, "keptMetrics": compaction_metrics(descriptors, interval),
        "columnOptions": {**(spec.get("columnOptions") or {}), **column_options}}, \
        present_segments(descriptors, interval)


def run_task(task_id: str, coordinator: str, cancel_event: threading.Event, spark=None) -> int:
    """Runs one task to a final state it reports to the coordinator. ``spark``: a warm session
    (task_driver.py) to run on; None starts this process's own."""
    from services.ingestion.coordinator_publisher import ConditionalReplacePublisher, CoordinatorPublisher
    from services.ingestion.ingestion_report import IngestionCancelled, IngestionFailed
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from services.ingestion.spark_session import get_or_create_session

    stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel(coordinator, transport_security_for_task()))
    task = stub.GetTask(coordinator_pb2.TaskRequest(id=task_id), timeout=60)
    spec = json.loads(task.spec_json or "{}")
    cleanups: list = []
    expected = None  # a compaction's: the used segments its replace was built from
    try:
        if task.type == "kafka":
            return _run_stream(stub, task_id, spec, cancel_event, spark, coordinator, task.created_ms)
        if task.type == "compact":
            statement, spec, expected = _compaction(stub, coordinator, task, spec, cleanups)
        else:
            statement = _statement(spec)
        if spec.get("clusterKeys") and not statement.clustered_by:
            import dataclasses

            # The datasource's catalog clusterKeys apply when the statement has no CLUSTERED BY.
            statement = dataclasses.replace(statement, clustered_by=tuple(spec["clusterKeys"]))
        default_granularity = None
        if spec.get("segmentGranularity"):
            from common.types.granularity import Granularity

            default_granularity = Granularity.parse(spec["segmentGranularity"])
        from common.types.column_type import ColumnType

        sealed = spec.get("sealedColumns")
        job = IngestionJob(task_id, statement, default_granularity, dict(spec.get("context") or {}),
                           tuple(spec.get("projections") or ()), dict(spec.get("columnOptions") or {}),
                           {n: ColumnType.parse(t) for n, t in (spec.get("declaredTypes") or {}).items()},
                           tuple(sealed) if sealed is not None else None,
                           dict(spec.get("keptMetrics") or {}) if task.type == "compact" else {})
        if spark is None:
            spark = get_or_create_session(f"strata-{task_id}", master=task_master(spec))

        def progress(phase: str, details: dict) -> None:
            try:
                _update(stub, task_id, "RUNNING", {"phase": phase, **details})
            except Exception:  # progress is best effort; the final update is not
                log.warning("progress update failed", exc_info=True)

        publisher = CoordinatorPublisher(stub, task_id, statement.datasource)
        if expected is not None:
            publisher = ConditionalReplacePublisher(publisher, expected)
        report = run_ingestion(spark, job, os.environ.get("STRATA_DEEP_STORAGE_URL", "var/strata/deep-storage"),
                               os.environ.get("STRATA_DEEP_STORAGE_ENDPOINT", ""), publisher, progress,
                               cancel_event)
        _update(stub, task_id, "SUCCESS", report.to_json())
        return 0
    except IngestionCancelled as exc:
        _update(stub, task_id, "CANCELED", exc.report.to_json(), str(exc))
        return 1
    except IngestionFailed as exc:
        _update(stub, task_id, "FAILED", exc.report.to_json(), str(exc))
        return 1
    except StrataError as exc:
        _update(stub, task_id, "FAILED", {}, str(exc))
        return 1
    except Exception as exc:  # anything else still ends the task with a reason
        _update(stub, task_id, "FAILED", {}, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        return 2
    finally:
        for cleanup in cleanups:
            cleanup()


def _catalog_table(coordinator: str, datasource: str) -> dict | None:
    """The datasource's catalog entry (JSON), or None when it has none."""

    catalog = catalog_pb2_grpc.CatalogServiceStub(channel(coordinator, transport_security_for_task()))
    try:
        meta = catalog.GetTable(catalog_pb2.GetTableRequest(id=catalog_pb2.TableId(schema="druid", name=datasource)),
                                timeout=60)
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return None
    return json.loads(meta.spec_json or "{}")


def _run_stream(stub, task_id: str, spec: dict, cancel_event: threading.Event, spark, coordinator: str = "",
                created_ms: int = 0) -> int:
    """A Kafka supervisor's task: micro-batches until taskDuration, a cancel (suspend, terminate)
    or a refused publish; each micro-batch is published with its offsets (stream_task.py)."""
    from services.ingestion.coordinator_publisher import CoordinatorPublisher  # start-up cost, as in run_task
    from services.ingestion.spark_session import get_or_create_session  # start-up cost: pyspark
    # start-up cost: pyspark, confluent-kafka
    from services.ingestion.stream_task import StreamTaskFailed, run_supervisor_task

    if spark is None:
        spark = get_or_create_session(f"strata-{task_id}")
    datasource = spec["supervisor"]["spec"]["dataSchema"]["dataSource"] if "spec" in spec["supervisor"] else \
        spec["supervisor"]["dataSchema"]["dataSource"]

    def progress(report: dict) -> None:
        try:
            _update(stub, task_id, "RUNNING", report)
        except Exception:  # progress is best effort; the final update is not
            log.warning("progress update failed", exc_info=True)

    try:
        # The catalog's definition as it is when the task starts applies to all its micro-batches.
        table = _catalog_table(coordinator, datasource) if coordinator else None
        report = run_supervisor_task(spark, task_id, spec, CoordinatorPublisher(stub, task_id, datasource),
                                     os.environ.get("STRATA_DEEP_STORAGE_URL", "var/strata/deep-storage"),
                                     os.environ.get("STRATA_DEEP_STORAGE_ENDPOINT", ""), cancel_event, progress,
                                     table, created_ms or None)
    except StreamTaskFailed as exc:
        # Its report keeps the parse exception samples (partition, offset, reason) for the status.
        _update(stub, task_id, "FAILED", exc.report, str(exc))
        return 1
    _update(stub, task_id, "CANCELED" if cancel_event.is_set() else "SUCCESS", report)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task-id", required=True)
    ap.add_argument("--coordinator", required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    return run_task(args.task_id, args.coordinator, cancel)


if __name__ == "__main__":
    sys.exit(main())
