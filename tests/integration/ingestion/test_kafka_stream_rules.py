"""A supervisor's rules on the real path (Tansu + Spark micro-batches + segments): rollup with
metrics, transformSpec (expression transforms and a filter), late and early message rejection,
csv input, and the catalog's table definition (projections, sealed) applied to streamed segments.

Expected results are computed by DuckDB from the messages as produced; the stored rows must
equal them exactly (sums of quarter fractions are exact in binary, so doubles compare equal)."""

from __future__ import annotations

import json
import os
import random
import time
from datetime import datetime, timezone

import duckdb
import pytest

from common.ingest.stream_insert import catalog_job_options
from common.ingest.supervisor_spec import parse_supervisor_spec
from common.query import execute
from common.segment import Segment
from services.ingestion.ingestion_report import IngestionFailed
from services.ingestion.stream_task import StreamTask
from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_kafka_stream_task import (DEADLINE_S, StorePublisher, deep, drain,  # noqa: F401
                                                                store)

pytestmark = pytest.mark.integration
TASK_START = 1_714_557_600_000  # 2024-05-01T10:00:00Z: when the supervisor created the task
HOUR = 3_600_000
QUARTER = 900_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def segments_of(store, deep, ds: str) -> list[Segment]:
    return [Segment.open(os.path.join(deep.root, *r.location.split("/"))) for r in store.list(ds)]


def scan(segments: list[Segment], ds: str, columns: list[str]) -> list[dict]:
    """Every stored row, ``__time`` as epoch millis."""
    table = execute({"queryType": "scan", "dataSource": ds, "intervals": ["0001-01-01/9999-12-31"],
                     "columns": columns}, segments).table
    rows = table.to_pylist()
    for r in rows:
        if "__time" in r:
            r["__time"] = int(r["__time"].timestamp() * 1000)
    return rows


def mean_events(n: int, seed: int) -> list[dict]:
    """Times from 4h before to 4h after the task's start (ISO text or epoch millis), NULL and
    missing pages, non-ASCII pages, ints next to quarter fractions, -0.0, NULL and missing values."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = TASK_START + rng.randint(-4 * HOUR, 4 * HOUR)
        if i % 17 == 0:
            t = TASK_START - 2 * HOUR  # exactly on the late bound: kept
        if i % 19 == 0:
            t = TASK_START + 2 * HOUR + 1  # a millisecond past the early bound: thrown away
        e = {"ts": iso(t) if i % 2 else t, "i": i, "user": f"u{rng.randint(0, 3)}"}
        page = rng.choice([None, "p1", "p2", "p3", "ü", "missing"])
        if page != "missing":
            e["page"] = page
        added = rng.choice([None, 0, -0.0, rng.randint(-50, 50), rng.randint(-200, 200) / 4, "missing"])
        if added != "missing":
            e["added"] = added
        out.append(e)
    return out


def rollup_spec(topic: str, bootstrap: str, ds: str) -> dict:
    return {"type": "kafka", "spec": {
        "dataSchema": {
            "dataSource": ds, "timestampSpec": {"column": "ts", "format": "auto"},
            "dimensionsSpec": {"dimensions": ["page"]},
            "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "FIFTEEN_MINUTE", "rollup": True},
            "metricsSpec": [{"type": "count", "name": "n"},
                            {"type": "longSum", "name": "added_l", "fieldName": "added"},
                            {"type": "doubleSum", "name": "added_d", "fieldName": "added"},
                            {"type": "doubleMax", "name": "big_max", "fieldName": "big"},
                            {"type": "longMin", "name": "added_min", "fieldName": "added"}],
            "transformSpec": {
                "transforms": [{"type": "expression", "name": "page", "expression": "upper(page)"},
                               {"type": "expression", "name": "big", "expression": "added * 2"}],
                "filter": {"type": "or", "fields": [{"type": "null", "column": "page"},
                                                    {"type": "not", "field": {"type": "in", "dimension": "page",
                                                                              "values": ["P3"]}}]}}},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H",
                     "lateMessageRejectionPeriod": "PT2H", "earlyMessageRejectionPeriod": "PT1H"},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 400}}}


def test_rollup_transforms_filter_and_rejection_match_duckdb(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("rules-a", 3)
    events = mean_events(1000, seed=26)
    sent = [(e["i"] % 3, json.dumps(e).encode()) for e in events]
    bad = [(0, b"{not json"), (1, json.dumps({"ts": 253402300800000, "page": "p1"}).encode()),
           (2, json.dumps({"ts": "noon", "page": "p1"}).encode())]
    kafka_broker.produce("rules-a", sent + bad)
    counts = {p: sum(1 for q, _ in sent + bad if q == p) for p in range(3)}
    spec = parse_supervisor_spec(rollup_spec("rules-a", kafka_broker.bootstrap, "rules_a"))
    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-r1", publisher, deep.root, task_start_ms=TASK_START)
    batches = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        offsets = {0: 0, 1: 0, 2: 0}
        while offsets != counts:
            assert time.monotonic() < deadline, f"offsets stuck at {offsets}"
            batches.append(task.run_micro_batch(offsets))
            offsets = batches[-1].end
    finally:
        task.close()
    assert publisher.supervisors.offsets("rules_a").offsets == counts

    # The oracle: every message with where it was, parsed as produced.
    db = duckdb.connect()
    db.execute("CREATE TABLE m (p INT, o BIGINT, t BIGINT, page VARCHAR, added DOUBLE, is_int BOOLEAN)")
    position = {p: 0 for p in range(3)}
    records = []
    for p, raw in sent:
        e = json.loads(raw)
        t = e["ts"] if isinstance(e["ts"], int) else int(datetime.fromisoformat(
            e["ts"].replace("Z", "+00:00")).timestamp() * 1000)
        added = e.get("added")
        records.append((p, position[p], t, e.get("page"), added, isinstance(added, int)))
        position[p] += 1
    db.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)", records)
    lo, hi = TASK_START - 2 * HOUR, TASK_START + HOUR + HOUR
    kept = f"(page IS NULL OR upper(page) <> 'P3') AND t BETWEEN {lo} AND {hi}"
    want = db.execute(f"""
        SELECT t // {QUARTER} * {QUARTER} AS bucket, upper(page) AS page, COUNT(*) AS n,
               SUM(CAST(trunc(added) AS BIGINT)) AS added_l, SUM(added) AS added_d,
               MAX(added * 2) AS big_max, MIN(CAST(trunc(added) AS BIGINT)) AS added_min
        FROM m WHERE {kept} GROUP BY ALL ORDER BY ALL""").fetchall()
    thrown = db.execute(f"SELECT COUNT(*) FROM m WHERE NOT ({kept})").fetchone()[0]
    assert task.thrown_away == thrown > 0

    # Each micro-batch rolled its rows up: one stored row per (15-minute bucket, page) it held.
    per_batch = 0
    for b in batches:
        ranges = " OR ".join(f"(p = {p} AND o >= {b.start[p]} AND o < {b.end[p]})" for p in b.start)
        per_batch += db.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT t // {QUARTER}, upper(page) FROM m "
                                f"WHERE ({ranges}) AND {kept})").fetchone()[0]
    segments = segments_of(store, deep, "rules_a")
    stored = scan(segments, "rules_a", ["__time", "page", "n", "added_l", "added_d", "big_max", "added_min"])
    assert len(stored) == per_batch < len(events)
    # Rows of the same key from different micro-batches merge at query time, as Druid's do.
    got: dict = {}
    for r in stored:
        key = (r["__time"], r["page"])
        if key not in got:
            got[key] = [0, None, None, None, None]
        g = got[key]
        g[0] += r["n"]
        for j, (name, fn) in enumerate((("added_l", sum), ("added_d", sum), ("big_max", max), ("added_min", min))):
            if r[name] is not None:
                g[j + 1] = r[name] if g[j + 1] is None else fn((g[j + 1], r[name]))
    got_rows = sorted(((k[0], k[1], *v) for k, v in got.items()), key=repr)
    want_rows = sorted(((b, p, n, al, ad, bm, am) for b, p, n, al, ad, bm, am in want), key=repr)
    assert got_rows == want_rows

    # Metrics are recorded as a batch rollup INSERT records them.
    for s in segments:
        assert s.manifest.metrics == {"n": "count", "added_l": "longSum", "added_d": "doubleSum",
                                      "big_max": "doubleMax", "added_min": "longMin"}
    bad_at = sorted((e.partition, e.offset) for b in batches for e in b.parse_exceptions)
    assert bad_at == [(0, counts[0] - 1), (1, counts[1] - 1), (2, counts[2] - 1)]
    assert task.status()["thrownAway"] == thrown and task.status()["parseExceptions"] == 3


HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
          "aggregators": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}


def csv_spec(topic: str, bootstrap: str, ds: str, columns: list[str]) -> dict:
    return {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": ds, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "HOUR"}},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "useEarliestOffset": True, "inputFormat": {"type": "csv", "columns": columns,
                                                                "skipHeaderRows": 1}}}}


def test_csv_messages_with_the_catalogs_projections_and_sealed_table(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("rules-b", 1)
    lines = [f"2024-05-01T0{h}:{m:02d}:00Z,#c{m % 3},{m}" for h in range(3) for m in range(0, 60, 7)]
    # Several lines per message, each message with a header line to skip; one bad line.
    messages = ["ts,channel,added\n" + "\n".join(lines[i:i + 4]) + "\n" for i in range(0, len(lines), 4)]
    messages.append("ts,channel,added\n2024-05-01T01:00:00Z,#c1,5,surplus\n")
    kafka_broker.produce("rules-b", [(0, m.encode()) for m in messages])
    table = {"type": "datasource", "properties": {"projections": [HOURLY]},
             "columns": [{"name": "channel", "sqlType": "VARCHAR"}, {"name": "added", "sqlType": "BIGINT"}]}
    spec = parse_supervisor_spec(csv_spec("rules-b", kafka_broker.bootstrap, "rules_b", ["ts", "channel", "added"]))
    options = catalog_job_options(spec, table)
    import dataclasses

    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-r2", publisher, deep.root,
                      job_defaults=lambda job: dataclasses.replace(job, **options))
    try:
        drain(task, {0: 0}, lambda o: o == {0: len(messages)})
    finally:
        task.close()
    [bad] = task.samples
    assert (bad.partition, bad.offset) == (0, len(messages) - 1) and bad.reason.startswith("line 2: 4 values")
    segments = segments_of(store, deep, "rules_b")
    assert len(segments) == 3 and all([p.name for p in s.manifest.projections] == ["hourly"] for s in segments)
    stored = scan(segments, "rules_b", ["__time", "channel", "added"])
    want = sorted((int(datetime.fromisoformat(x.split(",")[0].replace("Z", "+00:00")).timestamp() * 1000),
                   x.split(",")[1], int(x.split(",")[2])) for x in lines)
    assert sorted((r["__time"], r["channel"], r["added"]) for r in stored) == want  # added declared BIGINT

    # Sealed: a column the catalog does not declare fails the micro-batch, naming it; nothing moves.
    kafka_broker.produce("rules-b", [(0, b"ts,channel,added,extra\n2024-05-01T02:00:00Z,#c9,1,x\n")])
    sealed = {**table, "properties": {**table["properties"], "sealed": True}}
    spec2 = parse_supervisor_spec(csv_spec("rules-b", kafka_broker.bootstrap, "rules_b",
                                           ["ts", "channel", "added", "extra"]))
    options2 = catalog_job_options(spec2, sealed)
    strict = StreamTask(spark, spec2, "task-r3", publisher, deep.root,
                        job_defaults=lambda job: dataclasses.replace(job, **options2))
    try:
        with pytest.raises(IngestionFailed, match="sealed and does not declare extra"):
            strict.run_micro_batch({0: len(messages)})
    finally:
        strict.close()
    assert publisher.supervisors.offsets("rules_b").offsets == {0: len(messages)}


def test_rollup_with_schema_discovery(spark, kafka_broker, store, deep):  # noqa: F811
    """Discovered dimensions roll up too: every field but the timestamp and the metrics' inputs is
    a dimension (GROUP BY ALL over *)."""
    kafka_broker.create_topic("rules-c", 1)
    rng = random.Random(7)
    events = [{"ts": iso(TASK_START + rng.randint(0, HOUR - 1)), "page": rng.choice(["a", "b", None]),
               "lang": rng.choice(["en", "de"]), "v": rng.choice([1, 2.25, -0.0, None])} for _ in range(300)]
    kafka_broker.produce("rules-c", [(0, json.dumps(e).encode()) for e in events])
    spec = parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "rules_c", "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR"},
                       "metricsSpec": [{"type": "count", "name": "n"}, {"type": "doubleSum", "name": "v_sum",
                                                                         "fieldName": "v"}]},
        "ioConfig": {"topic": "rules-c", "consumerProperties": {"bootstrap.servers": kafka_broker.bootstrap},
                     "useEarliestOffset": True},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 1000}}})
    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-r4", publisher, deep.root, task_start_ms=TASK_START)
    try:
        batches = []
        deadline = time.monotonic() + DEADLINE_S
        offsets = {0: 0}
        while offsets != {0: len(events)}:
            assert time.monotonic() < deadline, f"offsets stuck at {offsets}"
            batches.append(task.run_micro_batch(offsets))
            offsets = batches[-1].end
    finally:
        task.close()
    segments = segments_of(store, deep, "rules_c")
    columns = set().union(*({c.name for c in s.manifest.columns} for s in segments))
    assert columns == {"__time", "page", "lang", "n", "v_sum"}
    stored = scan(segments, "rules_c", ["__time", "page", "lang", "n", "v_sum"])
    db = duckdb.connect()
    db.execute("CREATE TABLE m (o BIGINT, t BIGINT, page VARCHAR, lang VARCHAR, v DOUBLE)")
    db.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?)",  # all in the task's first hour
                   [(o, TASK_START, e["page"], e["lang"], e["v"]) for o, e in enumerate(events)])
    want = db.execute("SELECT t, page, lang, COUNT(*), SUM(v) FROM m GROUP BY ALL").fetchall()
    per_batch = sum(db.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT page, lang FROM m WHERE o >= {b.start[0]} "
                               f"AND o < {b.end[0]})").fetchone()[0] for b in batches)
    assert len(stored) == per_batch
    got: dict = {}
    for r in stored:
        key = (r["__time"], r["page"], r["lang"])
        n, v = got.get(key, (0, None))
        got[key] = (n + r["n"], v if r["v_sum"] is None else (r["v_sum"] if v is None else v + r["v_sum"]))
    assert sorted(((*k, *v) for k, v in got.items()), key=repr) == sorted(want, key=repr)
