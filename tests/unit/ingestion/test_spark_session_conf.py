"""What a task's Spark session is configured with: STRATA_SPARK_CONF's settings for any master
(how executors of a spark:// or k8s:// cluster learn where strata and deep storage are), its
errors, and which tasks need a local master of their own (so no warm driver can run them)."""

from __future__ import annotations

import pytest

from common.errors import StrataError
from common.ingest.task_master import task_master
from services.ingestion.spark_session import CONF_ENV, session_conf


def test_configured_settings_reach_every_master_and_explicit_conf_wins(monkeypatch):
    monkeypatch.setenv(CONF_ENV, '{"spark.executorEnv.PYTHONPATH": "/opt/strata", "spark.executor.memory": "2g", '
                                 '"spark.sql.shuffle.partitions": 7}')
    standalone = session_conf("spark://10.0.0.1:7077")
    assert standalone["spark.executorEnv.PYTHONPATH"] == "/opt/strata"
    assert standalone["spark.sql.shuffle.partitions"] == "7"
    assert "spark.pyspark.python" not in standalone  # a cluster's Python is its own unless configured
    local = session_conf("local[2]", {"spark.executor.memory": "1g"})
    assert local["spark.executor.memory"] == "1g" and local["spark.sql.shuffle.partitions"] == "7"
    assert local["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.parametrize("text, says", [("{spark.x: 1}", "is not JSON"), ('["spark.x"]', "must be a JSON object")])
def test_bad_configured_settings_name_the_variable(monkeypatch, text, says):
    monkeypatch.setenv(CONF_ENV, text)
    with pytest.raises(StrataError, match=f"{CONF_ENV} {says}"):
        session_conf("local[*]")


def test_only_max_num_tasks_on_a_local_master_needs_its_own_master():
    assert task_master({"context": {"maxNumTasks": 3}}, "local[*]") == "local[2]"
    assert task_master({"context": {"maxNumTasks": 1}}, "local[*]") == "local[1]"
    assert task_master({"context": {"maxNumTasks": 3}}, "spark://h:7077") is None
    assert task_master({"context": {}}, "local[*]") is None
    assert task_master({}, "local[4]") is None


def test_one_shot_drivers_compile_with_c1_only_and_warm_ones_keep_the_tiered_jit():
    one_shot = session_conf("local[2]")["spark.driver.extraJavaOptions"].split()
    assert one_shot == ["-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1"]
    warm = session_conf("local[2]", long_lived=True)["spark.driver.extraJavaOptions"].split()
    assert warm == ["-Duser.timezone=UTC"]
    assert session_conf("spark://h:7077")["spark.executor.extraJavaOptions"] == "-Duser.timezone=UTC"
    # Explicit settings still win (STRATA_SPARK_CONF or the caller's).
    assert session_conf("local[2]", {"spark.driver.extraJavaOptions": "-Xss4m"})["spark.driver.extraJavaOptions"] == "-Xss4m"
