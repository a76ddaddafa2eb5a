"""Ingestion on a real Spark standalone cluster: a master and two workers on 127.0.0.1 (pyspark's
own spark-class), the coordinator's warm task driver connected to it (``STRATA_SPARK_MASTER =
spark://...``), executors on both workers parsing the input and building segments with strata's
code, pushing them to an S3 server, then the rows queried through the broker. The Spark daemons
run with a clean environment: where the code is and the S3 credentials reach the executors only
through ``STRATA_SPARK_CONF`` (``spark.executorEnv.*``)."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from tests.fixtures.s3_server import s3_server  # noqa: F401 - a fixture
from tests.fixtures.spark_standalone import spark_standalone  # noqa: F401 - a fixture
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows, run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")


def _executor_conf() -> dict[str, str]:
    conf = {
        "spark.pyspark.python": sys.executable,  # the workers' Python: pyarrow and strata's dependencies
        "spark.executorEnv.PYTHONPATH": ROOT,  # strata's code, as this checkout has it
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
    }
    conf.update({f"spark.executorEnv.{k}": os.environ[k] for k in AWS if k in os.environ})
    return conf


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, spark_standalone, s3_server):  # noqa: F811 - fixtures
    saved = {k: os.environ.get(k) for k in ("STRATA_SPARK_MASTER", "STRATA_SPARK_CONF")}
    os.environ["STRATA_SPARK_MASTER"] = spark_standalone.master_url  # task drivers inherit the coordinator's env
    os.environ["STRATA_SPARK_CONF"] = json.dumps(_executor_conf())
    c = None
    try:
        c = EmbeddedCluster(str(tmp_path_factory.mktemp("standalone")), historicals=1,
                            deep_storage=s3_server.url, deep_storage_endpoint=s3_server.endpoint,
                            coordinator={"warm_task_drivers": 1})
        yield c
    finally:
        if c is not None:
            c.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _app(spark_standalone) -> dict | None:  # noqa: F811
    apps = spark_standalone.status().get("activeapps", [])
    return next((a for a in apps if a.get("name") == "strata-task-driver"), None)


def test_insert_runs_on_the_standalone_cluster_and_lands_in_s3(cluster, spark_standalone, s3_server):  # noqa: F811
    sql = f"""INSERT INTO animals SELECT TIME_PARSE("timestamp") AS __time, animal, "number"
              FROM TABLE(localfiles(files => ARRAY['{os.path.join(DATA, "updates-data.json")}'], format => 'json'))
                   EXTEND ("timestamp" VARCHAR, animal VARCHAR, "number" BIGINT)
              PARTITIONED BY DAY"""
    task = run(cluster, sql, timeout_s=300)
    assert task.state == "SUCCESS", task.error
    with open(cluster.coordinator.task_runner.log_path(task.id)) as f:
        assert "started in warm driver" in f.read()

    # The warm driver is an application of the standalone master with an executor on each worker.
    app = _app(spark_standalone)
    assert app is not None, spark_standalone.status()
    assert app["cores"] == 2
    assert [w["coresused"] for w in spark_standalone.status()["workers"]] == [1, 1]

    # Segments were pushed by the executors to the S3 server, then published and served.
    report = json.loads(task.report_json)
    assert report["rowsWritten"] == 3 and report["segments"]
    fs = s3_server.filesystem()
    for segment in report["segments"]:
        info = fs.get_file_info(f"{s3_server.bucket}/{s3_server.prefix}/{segment['location']}")
        assert info.size == segment["bytes"], segment
    cluster.wait_queryable("animals", len(report["segments"]), timeout_s=60)
    with open(os.path.join(DATA, "updates-data.json")) as f:
        want = sorted(({"animal": r["animal"], "number": r["number"]} for r in map(json.loads, f)),
                      key=lambda r: r["animal"])
    assert rows(cluster, 'SELECT animal, "number" FROM animals ORDER BY animal') == want


def test_a_second_insert_reuses_the_standalone_application(cluster, spark_standalone):  # noqa: F811
    app = _app(spark_standalone)
    assert app is not None
    sql = """INSERT INTO animals SELECT TIME_PARSE(t) AS __time, animal, n AS "number"
             FROM TABLE(inline(data => ARRAY['2018-01-02T00:00:00Z,zebra,7'], format => 'csv'))
                  EXTEND (t VARCHAR, animal VARCHAR, n BIGINT)
             PARTITIONED BY DAY"""
    started = time.monotonic()
    task = run(cluster, sql, timeout_s=120)
    assert task.state == "SUCCESS", task.error
    assert _app(spark_standalone)["id"] == app["id"]  # no new application: the driver stayed warm
    deadline = started + 120
    while rows(cluster, "SELECT COUNT(*) AS c FROM animals") != [{"c": 4}]:
        assert time.monotonic() < deadline, "the fourth row not queryable within 120s"
        time.sleep(0.1)
