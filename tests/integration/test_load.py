"""64 concurrent Flight SQL clients (the ADBC driver) against a real local cluster (``strata up``:
coordinator, broker, two historicals as processes) for 10 s: no query fails and every answer equals
DuckDB's over the same rows (bench/load.py runs the same mix for 60 s on the benchmark data)."""

from __future__ import annotations

import pytest

from bench.load import QUERIES, expected_answers, pick_user, run_load, start_cluster
from common.demo import table as demo_table

ROWS = 20_000


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    data = demo_table(ROWS)
    cluster, endpoints = start_cluster(str(tmp_path_factory.mktemp("load")), data)
    try:
        yield endpoints, expected_answers(data, pick_user(data))
    finally:
        cluster.down()


def test_64_clients_for_10_seconds_get_only_correct_answers(loaded):
    endpoints, answers = loaded
    assert all(want for _, _, want in answers), "every query of the mix has rows to compare"
    result = run_load(endpoints["flight"], answers, clients=64, seconds=10)
    assert not result.errors, f"{sum(result.errors.values())} errors, first: {result.first_error}"
    assert not result.wrong, f"wrong answers: {dict(result.wrong)}"
    # Every client ran the whole time (all 64 at once), and every query of the mix was answered
    # (and checked), not only the fast ones.
    assert len(result.answered_by) == 64, f"only {len(result.answered_by)} of 64 clients got an answer"
    assert {name for name, _, _ in QUERIES} == {name for name, samples in result.latencies_ms.items() if samples}
