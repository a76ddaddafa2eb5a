"""Per-query memory limits in the engines: a groupBy whose groups pass the limit is refused before
its aggregators allocate, with an error naming the limit, the bytes needed and the query id; the
same query under a large enough limit gives the unlimited answer; merges and scans count too; a
query may lower the node's limit with maxBytesInMemory but never raise it."""

import re

import pyarrow as pa
import pytest

from common.demo import table as demo_table
from common.errors import ValidationError
from common.query import engine, query_from_json
from common.query.memory_budget import MemoryBudget, MemoryLimitError, limit_for
from common.query.row_source import TableRowSource

DATA = demo_table(20_000, days=1)
GROUP_BY = {"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2015-09-01/2015-10-01"],
            "granularity": "none", "dimensions": ["page", "user"],
            "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}


def run_and_merge(query: dict, budget: MemoryBudget, parts: int = 2) -> pa.Table:
    q = query_from_json(query)
    step = DATA.num_rows // parts
    partials = [engine.run(q, TableRowSource(DATA.slice(i * step, step), f"part {i}"), None, budget)
                for i in range(parts)]
    return engine.finalize(q, engine.merge(q, partials, budget))


def test_group_by_over_the_limit_names_limit_bytes_and_query_id():
    budget = MemoryBudget(100_000, "q-123", "historical h1")
    with pytest.raises(MemoryLimitError) as err:
        run_and_merge(GROUP_BY, budget)
    message = str(err.value)
    assert "query q-123" in message and "historical h1" in message
    assert "maxBytesInMemory = 100,000 bytes" in message
    needed = int(re.search(r"needs ([\d,]+) bytes", message).group(1).replace(",", ""))
    assert needed > 100_000 and err.value.needed == needed
    assert "groups" in message
    assert isinstance(err.value, ValidationError)  # the user's to fix: never retried on a replica


def test_under_the_limit_the_answer_is_the_unlimited_one():
    unlimited = run_and_merge(GROUP_BY, MemoryBudget(None))
    budget = MemoryBudget(1 << 30, "q", "broker")
    limited = run_and_merge(GROUP_BY, budget)
    assert limited.equals(unlimited)
    assert unlimited.num_rows > 10_000  # page x user: many groups
    assert 0 < budget.peak <= 1 << 30


def test_the_merge_is_counted_after_the_segments():
    q = query_from_json(GROUP_BY)
    partials = [engine.run(q, TableRowSource(DATA.slice(i * 10_000, 10_000)), None) for i in range(2)]
    per_part = MemoryBudget(None)
    engine.run(q, TableRowSource(DATA.slice(0, 10_000)), None, per_part)
    # Room for the segments' groups but not for the merged ones as well.
    budget = MemoryBudget(per_part.used * 2 + 1_000, "q-merge", "broker")
    budget.charge(per_part.used * 2, "the partials")
    with pytest.raises(MemoryLimitError, match="merging 2 partials into"):
        engine.merge(q, partials, budget)


def test_scanned_rows_count():
    scan = {"queryType": "scan", "dataSource": "wiki", "intervals": ["2015-09-01/2015-10-01"],
            "columns": ["__time", "page", "comment"]}
    with pytest.raises(MemoryLimitError, match="rows a scan took from one segment"):
        run_and_merge(scan, MemoryBudget(50_000, "q-scan", "historical h2"))
    assert run_and_merge(scan, MemoryBudget(1 << 30)).num_rows == DATA.num_rows


def test_concurrent_charges_never_pass_the_limit():
    import threading

    budget = MemoryBudget(10_000, "q", "broker")
    refused = []

    def charge():
        for _ in range(100):
            try:
                budget.charge(7, "x")
            except MemoryLimitError:
                refused.append(1)

    threads = [threading.Thread(target=charge) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.used <= 10_000 and budget.used == 7 * (800 - len(refused))


@pytest.mark.parametrize("context, node, want", [
    ({}, 1000, 1000), (None, None, None), ({"maxBytesInMemory": 10}, 1000, 10),
    ({"maxBytesInMemory": 10_000}, 1000, 1000),  # never above the node's
    ({"maxBytesInMemory": "500"}, 1000, 500), ({"maxBytesInMemory": 10}, None, 10)])
def test_limit_for(context, node, want):
    assert limit_for(context, node) == want


@pytest.mark.parametrize("value", [0, -5, "lots", 1.5, True])
def test_a_bad_limit_is_a_clear_error(value):
    with pytest.raises(ValidationError, match="maxBytesInMemory must be a positive number of bytes"):
        limit_for({"maxBytesInMemory": value}, 1000)
