"""A table defined in the catalog over REST and loaded at once, end to end through Spark tasks:
every segment the INSERT writes has the table's projections (the broker prepares the INSERT from
the coordinator's catalog at submission, not from its synced copy)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.harness.waiting import wait_until
from tests.integration.ingestion.sql_tasks import rows, run

HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}
LINES = "\\n".join(f"2015-09-12T0{h}:{m:02d}:00Z,#c{m % 3},{m}" for h in range(3) for m in range(0, 60, 7))
EXTERN = f"""TABLE(EXTERN('{{"type": "inline", "data": "{LINES}\\n"}}',
    '{{"type": "csv", "columns": ["ts", "channel", "added"]}}',
    '[{{"name": "ts", "type": "string"}}, {{"name": "channel", "type": "string"}}, {{"name": "added", "type": "long"}}]'))"""
ROWS = 3 * len(range(0, 60, 7))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("at_submission")), historicals=1,
                        coordinator={"warm_task_drivers": 1})  # one Spark session for the module's tasks
    yield c
    c.stop()


def define(cluster, name: str) -> None:
    spec = {"type": "datasource", "properties": {"projections": [HOURLY]},
            "columns": [{"name": "channel", "sqlType": "VARCHAR"}, {"name": "added", "sqlType": "BIGINT"}]}
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1/catalog/tables/druid/{name}"
    request = urllib.request.Request(url, data=json.dumps(spec).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


@pytest.mark.parametrize("attempt", range(3))
def test_every_segment_of_a_table_loaded_right_after_its_definition_has_its_projections(cluster, attempt):
    name = f"defined_{attempt}"
    define(cluster, name)
    task = run(cluster, f"INSERT INTO {name} SELECT TIME_PARSE(ts) AS __time, channel, added FROM {EXTERN} "
                        "PARTITIONED BY HOUR")
    assert task.state == "SUCCESS", task.error
    segments = wait_until(lambda: (got := rows(cluster, f"SELECT segment_id, num_rows, projections FROM sys.segments "
                                                        f"WHERE datasource = '{name}'"))
                          and sum(r["num_rows"] for r in got) == ROWS and got, 60, f"{name}'s segments")
    assert len(segments) == 3  # one per hour
    for segment in segments:
        names = [p["name"] if isinstance(p, dict) else p for p in json.loads(segment["projections"])]
        assert names == ["hourly"], segment
