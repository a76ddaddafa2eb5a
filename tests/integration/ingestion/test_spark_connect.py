"""Ingestion through a real Spark Connect server (pyspark's start-connect-server.sh, the bundled
spark-connect jar, local[2] inside it): this process is only a Connect client. The ingestion
driver (spark_job.run_ingestion, on a Connect session through spark_api.ConnectSpark) lists and
reads the input, plans, and the server's Python workers import strata, parse the files, cut the
rows into per-segment blobs and build and push the segments to an S3 server; the coordinator
allocates and publishes them and the broker answers. Cancellation goes through session tags
(addTag / interruptTag) instead of job groups."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from services.ingestion.spark_session import WORKER_DAEMON
from tests.fixtures.s3_server import s3_server  # noqa: F401 - a fixture
from tests.fixtures.spark_standalone import start_connect
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows, run

pytest.importorskip("pyspark.sql.connect.session")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")


@pytest.fixture(scope="module")
def connect(tmp_path_factory, s3_server):  # noqa: F811 - a fixture; its credentials are in the env
    # The server's Python workers: this interpreter, this checkout, the S3 credentials.
    env = {"PYTHONPATH": ROOT, "PYSPARK_PYTHON": sys.executable, **{k: os.environ[k] for k in AWS if k in os.environ}}
    # The server's static settings are its own: strata's worker daemon is given at its start.
    server = start_connect(str(tmp_path_factory.mktemp("spark-connect")), env,
                           {"spark.sql.shuffle.partitions": "2", "spark.python.daemon.module": WORKER_DAEMON})
    # pyspark's functions build Connect columns only in "Connect mode"; the suite's shared classic
    # session may run in this process too, so the mode is on for this module only.
    was = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        yield server
    finally:
        if was is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = was
        server.daemon.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3_server):  # noqa: F811 - a fixture
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("connect-cluster")), historicals=1,
                        deep_storage=s3_server.url, deep_storage_endpoint=s3_server.endpoint)
    yield c
    c.stop()


def _data() -> pa.Table:
    times = [datetime(2024, 3, d, h, tzinfo=timezone.utc) for d in (1, 2) for h in range(0, 24, 3)]
    return pa.table({"__time": pa.array(times, pa.timestamp("us", tz="UTC")),
                     "channel": [f"#c{i % 3}" for i in range(len(times))],
                     "added": list(range(len(times)))})


def test_executors_behind_spark_connect_build_and_push_segments(connect, cluster, s3_server):  # noqa: F811
    from pyspark.sql import functions as F

    from common.segment.segment_id import SegmentId
    from common.types.granularity import Granularity
    from services.grpc_server import channel
    from services.ingestion.build import BLOB_DDL, DESCRIPTOR_DDL, BuildSpec, PlannedSegment, descriptor_of
    from services.ingestion.coordinator_publisher import CoordinatorPublisher
    from services.ingestion.partitioning import CHUNK_COLUMN, key_columns_for, plan_partitions
    from services.ingestion.spark_job import _builder, _splitter, chunk_column
    from services.deep_storage.upload_folder import ingest_root, new_run_token
    from services.rpc.gen.strata.v1 import coordinator_pb2_grpc

    spark = connect.session()
    try:
        assert type(spark).__module__.startswith("pyspark.sql.connect")  # a Connect client, no local JVM
        data = _data()
        df = spark.createDataFrame(data)
        granularity = Granularity.parse("DAY")
        chunk = chunk_column(granularity)
        counted = df.select(chunk.alias(CHUNK_COLUMN)).groupBy(CHUNK_COLUMN).count().collect()
        counts = {r[CHUNK_COLUMN]: int(r["count"]) for r in counted}
        assert sorted(counts.values()) == [8, 8]
        plan = plan_partitions(counts, granularity, 1_000_000, {}, key_columns_for(()))

        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel(f"127.0.0.1:{cluster.coordinator.grpc.port}"))
        publisher = CoordinatorPublisher(stub, "connect-test", "connect_wiki")
        chunks = list(plan.chunks.values())
        allocations = publisher.allocate("connect_wiki", [c.interval for c in chunks], "insert",
                                         {c.interval: c.parts for c in chunks})
        segments = {}
        for c in chunks:
            alloc = allocations[c.interval]
            for i in range(c.parts):
                sid = SegmentId("connect_wiki", c.interval, alloc.version, alloc.first_partition + i)
                segments[c.first_index + i] = PlannedSegment(sid, alloc.core_partitions or c.parts)
        spec = BuildSpec(segments, f"{ingest_root('connect_wiki')}{new_run_token('connect-test')}/")

        # The executor side of ingestion, on the Connect server's Python workers.
        built = (df.withColumn(CHUNK_COLUMN, chunk).mapInArrow(_splitter(plan), BLOB_DDL)
                 .repartition(len(segments), F.col("part"))
                 .mapInArrow(_builder(spec, cluster.deep_storage_url, cluster.deep_storage_endpoint), DESCRIPTOR_DDL)
                 .collect())
        descriptors = [descriptor_of(r.asDict(), spec) for r in sorted(built, key=lambda r: r["part"])]
        assert len(descriptors) == 2 and sum(d.num_rows for d in descriptors) == data.num_rows
    finally:
        spark.stop()

    fs = s3_server.filesystem()
    for d in descriptors:  # pushed to the S3 server by the server's workers
        assert fs.get_file_info(f"{s3_server.bucket}/{s3_server.prefix}/{d.location}").size == d.size
    publisher.publish(descriptors, None)
    cluster.wait_queryable("connect_wiki", 2, timeout_s=60)
    got = rows(cluster, "SELECT channel, COUNT(*) AS c, SUM(added) AS s FROM connect_wiki GROUP BY channel "
                        "ORDER BY channel")
    want: dict = {}
    for ch, added in zip(data.column("channel").to_pylist(), data.column("added").to_pylist()):
        c, s = want.get(ch, (0, 0))
        want[ch] = (c + 1, s + added)
    assert got == [{"channel": ch, "c": c, "s": s} for ch, (c, s) in sorted(want.items())]


def _json_lines(path) -> list[dict]:
    """Rows across three days, one bad line (a parse exception the report must count)."""
    events = [{"ts": f"2024-04-0{1 + i % 3}T{i % 24:02d}:00:00Z", "channel": f"#c{i % 4}", "added": i * 7 - 40}
              for i in range(60)]
    lines = [json.dumps(e) for e in events]
    lines.insert(17, '{"ts": "2024-04-01T00:00:00Z", "channel": "#bad", "added": "not a number"')
    path.write_text("\n".join(lines) + "\n")
    return events


def _insert(datasource: str, path, extra: str = "") -> str:
    return f"""{extra}INSERT INTO {datasource} SELECT TIME_PARSE(ts) AS __time, channel, added
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{path}"]}}', '{{"type": "json"}}',
            '[{{"name": "ts", "type": "string"}}, {{"name": "channel", "type": "string"}},
              {{"name": "added", "type": "long"}}]'))
        PARTITIONED BY DAY"""


def _publisher(cluster, job_id: str, datasource: str):
    from services.grpc_server import channel
    from services.ingestion.coordinator_publisher import CoordinatorPublisher
    from services.rpc.gen.strata.v1 import coordinator_pb2_grpc

    stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel(f"127.0.0.1:{cluster.coordinator.grpc.port}"))
    return CoordinatorPublisher(stub, job_id, datasource)


def test_run_ingestion_on_a_spark_connect_session(connect, cluster, s3_server, tmp_path):  # noqa: F811
    from services.ingestion.spark_api import ConnectSpark, spark_api
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from common.ingest.statement import parse_ingestion

    events = _json_lines(tmp_path / "events.json")
    spark = connect.session()
    try:
        assert isinstance(spark_api(spark), ConnectSpark)
        job = IngestionJob("connect-sql", parse_ingestion(_insert("connect_sql", tmp_path / "events.json",
                                                                  "SET maxParseExceptions = 5;\n")))
        phases: list[str] = []
        report = run_ingestion(spark, job, cluster.deep_storage_url, cluster.deep_storage_endpoint,
                               _publisher(cluster, "connect-sql", "connect_sql"),
                               progress=lambda phase, details: phases.append(phase))
    finally:
        spark.stop()
    assert report.status == "SUCCESS", report.error
    assert (report.rows_read, report.parse_exceptions, report.rows_written) == (61, 1, 60)
    assert "added" in report.parse_exception_samples[0].describe()
    assert phases[-2:] == ["publishing", "done"]
    assert len(report.segments) == 3  # one per day
    fs = s3_server.filesystem()
    for s in report.segments:  # pushed to the S3 server by the Connect server's Python workers
        assert fs.get_file_info(f"{s3_server.bucket}/{s3_server.prefix}/{s.location}").size == s.bytes
    cluster.wait_queryable("connect_sql", 3, timeout_s=60)
    got = rows(cluster, "SELECT channel, COUNT(*) AS c, SUM(added) AS s FROM connect_sql GROUP BY channel "
                        "ORDER BY channel")
    want: dict = {}
    for e in events:
        c, s = want.get(e["channel"], (0, 0))
        want[e["channel"]] = (c + 1, s + e["added"])
    assert got == [{"channel": ch, "c": c, "s": s} for ch, (c, s) in sorted(want.items())]


def test_schema_discovery_and_an_aggregating_select_on_spark_connect(connect, cluster, tmp_path):
    """Discovery lists and scans the file on the server's workers; a GROUP BY SELECT is cached
    between the counting and the building pass (on Connect every SELECT is)."""
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from common.ingest.statement import parse_ingestion

    events = _json_lines(tmp_path / "events.json")
    path = tmp_path / "events.json"
    spark = connect.session()
    try:
        job = IngestionJob("connect-discover", parse_ingestion(f"""SET maxParseExceptions = 5;
            INSERT INTO connect_discovered
            SELECT TIME_FLOOR(TIME_PARSE(ts), 'P1D') AS __time, channel, COUNT(*) AS n, SUM(added) AS s
            FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
            GROUP BY 1, 2 PARTITIONED BY DAY"""))
        report = run_ingestion(spark, job, cluster.deep_storage_url, cluster.deep_storage_endpoint,
                               _publisher(cluster, "connect-discover", "connect_discovered"))
    finally:
        spark.stop()
    assert report.status == "SUCCESS", report.error
    decided = {d["column"]: d["chosen"] for d in report.to_json()["schemaDecisions"]}
    assert decided.get("channel") == "STRING"
    cluster.wait_queryable("connect_discovered", 3, timeout_s=60)
    got = rows(cluster, "SELECT channel, SUM(n) AS n, SUM(s) AS s FROM connect_discovered GROUP BY channel "
                        "ORDER BY channel")
    want: dict = {}
    for e in events:
        c, s = want.get(e["channel"], (0, 0))
        want[e["channel"]] = (c + 1, s + e["added"])
    assert got == [{"channel": ch, "n": c, "s": s} for ch, (c, s) in sorted(want.items())]


def test_interrupt_tag_stops_a_running_operation(connect):
    """spark_api's cancel on Connect (interruptTag from another thread) ends a running query of
    the tagged thread well before it would finish."""
    import threading
    import time

    from services.ingestion.spark_api import spark_api

    spark = connect.session()
    api = spark_api(spark)
    outcome: dict = {}

    def slow(batches):
        import time as t

        for batch in batches:
            t.sleep(120)  # far past the test's deadline: only an interrupt ends it in time
            yield batch

    def query() -> None:
        api.start_jobs("strata-test-interrupt", "a query to interrupt")
        try:
            spark.range(0, 4, numPartitions=2).mapInArrow(slow, "id LONG").collect()
            outcome["result"] = "finished"
        except Exception as exc:  # noqa: BLE001 - the interrupt's error is what the test looks for
            outcome["result"] = type(exc).__name__ + ": " + str(exc)[:300]
        finally:
            api.end_jobs("strata-test-interrupt")

    try:
        worker = threading.Thread(target=query, daemon=True)
        started = time.monotonic()
        worker.start()
        deadline = started + 60
        # Cancel until the query ends: the first interrupt may come before the query reached the server.
        while worker.is_alive() and time.monotonic() < deadline:
            api.cancel_jobs("strata-test-interrupt")
            worker.join(timeout=1)
        worker.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not worker.is_alive(), "the tagged query was not interrupted within 60 s"
        assert outcome["result"] != "finished" and time.monotonic() - started < 60
        assert "interrupt" in outcome["result"].lower() or "cancel" in outcome["result"].lower(), outcome
    finally:
        spark.stop()


class _CountingPublisher:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.published = 0

    def allocate(self, *args, **kwargs):
        return self.inner.allocate(*args, **kwargs)

    def publish(self, descriptors, replace_intervals):
        self.published += 1
        return self.inner.publish(descriptors, replace_intervals)


def test_a_cancelled_run_on_spark_connect_publishes_nothing_and_leaves_no_upload(connect, cluster, tmp_path):
    """Cancelled once its first segment reached the S3 server (one segment per hour: many builder
    tasks), through interruptTag; the run's upload folder is emptied and stays empty."""
    import threading
    import time

    from services.deep_storage import deep_storage_from_url
    from services.ingestion.ingestion_report import IngestionCancelled
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from common.ingest.statement import parse_ingestion
    from services.deep_storage.upload_folder import ingest_root

    _json_lines(tmp_path / "events.json")
    storage = deep_storage_from_url(cluster.deep_storage_url, cluster.deep_storage_endpoint)
    root = ingest_root("connect_cancelled")
    cancel = threading.Event()
    seen: dict = {}

    def cancel_on_first_upload() -> None:
        deadline = time.monotonic() + 120
        while not cancel.is_set() and time.monotonic() < deadline:
            if storage.list(root, partial=True):
                seen["mid_build"] = True
                cancel.set()
                return
            time.sleep(0.05)

    def progress(phase, details) -> None:
        if phase == "building":
            threading.Thread(target=cancel_on_first_upload, daemon=True).start()
        elif phase == "publishing":
            cancel.set()  # the build outran the watcher: still a cancel before anything is published

    publisher = _CountingPublisher(_publisher(cluster, "connect-cancel", "connect_cancelled"))
    sql = _insert("connect_cancelled", tmp_path / "events.json", "SET maxParseExceptions = 5;\n")
    spark = connect.session()
    try:
        with pytest.raises(IngestionCancelled) as err:
            run_ingestion(spark, IngestionJob("connect-cancel", parse_ingestion(sql.replace("BY DAY", "BY HOUR"))),
                          cluster.deep_storage_url, cluster.deep_storage_endpoint, publisher, progress=progress,
                          cancel_event=cancel)
        # The session is still usable after the interrupt (the tag was removed).
        assert spark.range(3).count() == 3
    finally:
        spark.stop()
    assert err.value.report.status == "CANCELLED" and err.value.report.segments == ()
    assert publisher.published == 0
    assert storage.list(root, partial=True) == []


def test_parquet_through_the_arrow_scan_on_spark_connect(connect, cluster, tmp_path, monkeypatch):
    """A SELECT that only picks Parquet columns: the server's tasks read the files with pyarrow,
    split by the server's default parallelism (asked of it through the Connect session)."""
    import pyarrow.parquet as pq

    from services.ingestion import arrow_scan, spark_job
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from common.ingest.statement import parse_ingestion

    t0 = datetime(2021, 3, 1, tzinfo=timezone.utc)
    n = 50
    table = pa.table({"ts": pa.array([t0.timestamp() * 1000 + i * 3_600_000 for i in range(n)], pa.int64())
                      .cast(pa.timestamp("ms", tz="UTC")),
                      "name": [f"n{i % 7}" for i in range(n)], "value": pa.array([i * 0.5 for i in range(n)])})
    pq.write_table(table.slice(0, 25), tmp_path / "a.parquet")
    pq.write_table(table.slice(25), tmp_path / "b.parquet")
    scans: list = []
    original = spark_job.plan_scan
    monkeypatch.setattr(spark_job, "plan_scan", lambda *a: scans.append(original(*a)) or scans[-1])
    spark = connect.session()
    try:
        job = IngestionJob("connect-parquet", parse_ingestion(f"""
            INSERT INTO connect_pq SELECT ts AS __time, name, "value"
            FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.parquet', format => 'parquet'))
                 EXTEND (ts TIMESTAMP, name VARCHAR, "value" DOUBLE)
            PARTITIONED BY DAY"""))
        report = run_ingestion(spark, job, cluster.deep_storage_url, cluster.deep_storage_endpoint,
                               _publisher(cluster, "connect-parquet", "connect_pq"))
    finally:
        spark.stop()
    assert report.status == "SUCCESS", report.error
    assert scans and isinstance(scans[0], arrow_scan.ArrowScan)  # the pyarrow path, not Spark's rows
    assert report.rows_written == n
    days = len({(t0.timestamp() * 1000 + i * 3_600_000) // 86_400_000 for i in range(n)})
    cluster.wait_queryable("connect_pq", days, timeout_s=60)
    got = rows(cluster, "SELECT name, COUNT(*) AS c, SUM(\"value\") AS s FROM connect_pq GROUP BY name ORDER BY name")
    want: dict = {}
    for name, value in zip(table.column("name").to_pylist(), table.column("value").to_pylist()):
        c, s = want.get(name, (0, 0.0))
        want[name] = (c + 1, s + value)
    assert got == [{"name": k, "c": c, "s": s} for k, (c, s) in sorted(want.items())]


def test_a_cluster_task_runs_on_the_connect_server(connect, cluster, s3_server, tmp_path, monkeypatch):  # noqa: F811
    """With STRATA_SPARK_REMOTE set, the coordinator's task process is a Connect client: the SQL
    INSERT submitted to the cluster runs on the Connect server (no JVM of the task's own), its
    workers push the segments to S3, and the broker answers the rows."""
    events = _json_lines(tmp_path / "events.json")
    monkeypatch.setenv("STRATA_SPARK_REMOTE", connect.url)
    task = run(cluster, "SET maxParseExceptions = 5;\n" + _insert("connect_task", tmp_path / "events.json"))
    assert task.state == "SUCCESS", task.error
    log_path = cluster.coordinator.task_runner.log_path(task.id)
    with open(log_path, errors="replace") as f:
        log_text = f.read()
    assert "SparkSubmit" not in log_text and "Java gateway" not in log_text  # no driver JVM of its own
    cluster.wait_queryable("connect_task", 3, timeout_s=60)
    got = rows(cluster, "SELECT COUNT(*) AS c, SUM(added) AS s FROM connect_task")
    assert got == [{"c": len(events), "s": sum(e["added"] for e in events)}]


def test_an_unreachable_connect_server_fails_the_task_with_its_address(cluster, tmp_path, monkeypatch):
    """A wrong STRATA_SPARK_REMOTE is the task's clear failure naming the server, not a hang."""
    _json_lines(tmp_path / "events.json")
    monkeypatch.setenv("STRATA_SPARK_REMOTE", "sc://127.0.0.1:1")
    task = run(cluster, _insert("connect_nowhere", tmp_path / "events.json"), timeout_s=180)
    assert task.state == "FAILED"
    assert "sc://127.0.0.1:1" in task.error and "STRATA_SPARK_REMOTE" in task.error


def test_json_through_the_text_scan_on_spark_connect(connect, cluster, tmp_path, monkeypatch):
    """A SELECT that picks columns of a JSON source: the server's workers parse, time, count and
    cut the rows (text_scan.py); a day over rowsPerSegment is split by sampled keys."""
    from services.ingestion import text_scan
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from common.ingest.statement import parse_ingestion

    events = _json_lines(tmp_path / "events.json")
    reads: list = []
    original = text_scan.read_text
    monkeypatch.setattr(text_scan, "read_text", lambda *a, **k: reads.append(a[1]) or original(*a, **k))
    spark = connect.session()
    try:
        job = IngestionJob("connect-text", parse_ingestion(f"""SET maxParseExceptions = 1;
            INSERT INTO connect_text SELECT ts AS __time, channel, added
            FROM TABLE(localfiles(files => ARRAY['{tmp_path / "events.json"}'], format => 'json'))
                 EXTEND (ts TIMESTAMP, channel VARCHAR, added BIGINT)
            PARTITIONED BY DAY CLUSTERED BY channel"""), context={"rowsPerSegment": 12})
        report = run_ingestion(spark, job, cluster.deep_storage_url, cluster.deep_storage_endpoint,
                               _publisher(cluster, "connect-text", "connect_text"))
    finally:
        spark.stop()
    assert report.status == "SUCCESS", report.error
    assert len(reads) == 1  # the text scan, not Spark's rows
    assert (report.rows_read, report.parse_exceptions, report.rows_written) == (61, 1, 60)
    assert report.parse_exception_samples[0].line == 18
    assert len(report.segments) > 3  # 20 rows a day, at most 12 a segment
    cluster.wait_queryable("connect_text", len(report.segments), timeout_s=60)
    got = rows(cluster, "SELECT channel, COUNT(*) AS c, SUM(added) AS s FROM connect_text GROUP BY channel "
                        "ORDER BY channel")
    want: dict = {}
    for e in events:
        c, s = want.get(e["channel"], (0, 0))
        want[e["channel"]] = (c + 1, s + e["added"])
    assert got == [{"channel": ch, "c": c, "s": s} for ch, (c, s) in sorted(want.items())]
