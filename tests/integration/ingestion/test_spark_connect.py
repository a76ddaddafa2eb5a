"""Segment building through a real Spark Connect server (pyspark's start-connect-server.sh, the
bundled spark-connect jar, local[2] inside it): this process is only a Connect client, the
server's Python workers import strata, cut the rows into per-segment blobs and build and push the
segments to an S3 server with the same functions the ingestion driver uses (DataFrame.mapInArrow,
which Connect supports); the coordinator allocates and publishes them and the broker answers.

What does not run through Connect yet is the ingestion driver itself (spark_job.run_ingestion):
it uses the SparkContext, which a Connect session does not have (job groups and their
cancellation, the status tracker, parallelize for file listings, plan inspection through the
JVM). docs/operations.md lists each use and its Connect counterpart."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from tests.fixtures.s3_server import s3_server  # noqa: F401 - a fixture
from tests.fixtures.spark_standalone import start_connect
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows

pytest.importorskip("pyspark.sql.connect.session")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")


@pytest.fixture(scope="module")
def connect(tmp_path_factory, s3_server):  # noqa: F811 - a fixture; its credentials are in the env
    # The server's Python workers: this interpreter, this checkout, the S3 credentials.
    env = {"PYTHONPATH": ROOT, "PYSPARK_PYTHON": sys.executable, **{k: os.environ[k] for k in AWS if k in os.environ}}
    server = start_connect(str(tmp_path_factory.mktemp("spark-connect")), env,
                           {"spark.sql.shuffle.partitions": "2"})
    try:
        yield server
    finally:
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
    from services.ingestion.upload_folder import ingest_root, new_run_token
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
