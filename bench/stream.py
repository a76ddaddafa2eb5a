"""Streaming ingestion benchmark: a Kafka supervisor on the real path (Tansu, the Kafka-protocol
broker of the tests, produced to with confluent-kafka; an embedded cluster whose coordinator runs
the supervisor's task in a warm Spark task driver; queries through the broker).

    .venv/bin/python bench/stream.py [--events 200000] [--probes 20] [--markdown]

1. Throughput: wiki-like JSON events (page, user, language, namespace, a flag, added/deleted/delta,
   a NULL now and then) to a 3-partition topic; after a warm-up batch (the task's Spark session and
   first job not counted), ``--events`` more are produced and the clock runs from the first of them
   to the moment ``COUNT(*)`` through the broker says every one is queryable. The machine has 2
   cores: the figure is events/s with 2 cores (the producer, Tansu and the cluster share them).
2. Produce-to-queryable latency while queries run: a thread runs a GROUP BY through the broker
   ``--query-rate`` times a second (the cluster runs in this process, so an unthrottled loop would
   mostly measure contention for the interpreter); one probe message at a time, each with a
   unique id, is produced (delivery confirmed) and ``SELECT COUNT(*) ... WHERE probe = id`` is
   polled through the broker until it answers 1, with a deadline (a probe past it counts as the
   deadline and is reported).

Druid's published per-core figures are printed beside: the Druid paper (Yang et al., "Druid: A
Real-time Analytical Data Store", SIGMOD 2014, section 6.3 "Data Ingestion Performance"; text in
apache/druid publications/whitepaper/druid.tex): 800,000 events/s/core for events with only a
timestamp ("really just a measurement of how fast we can deserialize events") and a production
peak of 22,914 events/s/core for a datasource with 30 dimensions and 19 metrics. Those are Druid's
realtime nodes, whose indexing path (in-heap incremental index, periodic persist) Kafka indexing
tasks kept; Druid publishes no newer per-core Kafka task figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.process_cpu import load_average  # noqa: E402

PARTITIONS = 3
DRUID_PER_CORE = [  # (what, events/s per core, source)
    ("Druid realtime node, timestamp-only events (deserialization bound)", 800_000, "Druid paper 2014, sec. 6.3"),
    ("Druid realtime node, production peak, 30 dimensions + 19 metrics", 22_914, "Druid paper 2014, sec. 6.3"),
]
PAGES = [f"Page_{i}" for i in range(500)]
USERS = [f"user{i}" for i in range(2000)]
LANGUAGES = ["en", "de", "fr", "ja", "es", "ru", "zh", "it"]


def wiki_event(i: int, rng: random.Random, now_ms: int) -> dict:
    added = rng.randint(0, 5000)
    deleted = rng.randint(0, 500)
    return {"timestamp": now_ms - rng.randint(0, 3_600_000), "page": rng.choice(PAGES), "user": rng.choice(USERS),
            "language": rng.choice(LANGUAGES), "namespace": "Main" if i % 3 else "Talk",
            "isRobot": i % 11 == 0, "comment": None if i % 13 == 0 else f"edit {i}", "added": added,
            "deleted": deleted, "delta": added - deleted, "probe": None}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    """Produces (round-robin over the partitions, batched); returns the seconds it took."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    errors: list = []
    start = time.monotonic()
    for i, v in enumerate(values):
        while True:
            try:
                producer.produce(topic, value=v, partition=i % PARTITIONS,
                                 on_delivery=lambda err, _m: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"produce failed: {left} unsent, errors {errors[:3]}")
    return time.monotonic() - start


def count(client, sql: str) -> int:
    table, _ = client.sql(sql)
    return int(table.column(0)[0].as_py() or 0)


def wait_count(client, datasource: str, want: int, deadline_s: float) -> float:
    """Polls COUNT(*) through the broker until it is ``want``; returns when (monotonic)."""
    stop_at = time.monotonic() + deadline_s
    got = None
    while time.monotonic() < stop_at:
        try:
            got = count(client, f"SELECT COUNT(*) FROM {datasource}")
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        if got == want:
            return time.monotonic()
        if isinstance(got, int) and got > want:
            raise RuntimeError(f"{got} rows, more than the {want} produced")
        time.sleep(0.05)
    raise TimeoutError(f"{datasource}: {want} rows not queryable within {deadline_s:.0f}s (last {got})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=5_000)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--probe-deadline", type=float, default=60.0)
    ap.add_argument("--max-rows-in-memory", type=int, default=150_000)
    ap.add_argument("--duty-period-ms", type=int, default=100)
    ap.add_argument("--query-rate", type=float, default=20.0, help="GROUP BY queries a second during the probes")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    from tests.fixtures.kafka_broker import TansuProcess, tansu_binary
    from tests.harness.embedded_cluster import EmbeddedCluster

    work = tempfile.mkdtemp(prefix="strata-stream-bench-")
    broker = TansuProcess(os.path.join(work, "tansu.log"), tansu_binary())
    broker.start()
    cluster = None
    stop_queries = threading.Event()
    try:
        cluster = EmbeddedCluster(os.path.join(work, "cluster"), historicals=1, duty_period_ms=args.duty_period_ms,
                                  coordinator={"warm_task_drivers": 1})
        broker.create_topic("wiki", PARTITIONS)
        rng = random.Random(7)
        now_ms = int(time.time() * 1000)
        warm = [json.dumps(wiki_event(i, rng, now_ms)).encode() for i in range(args.warmup)]
        produce(broker.bootstrap, "wiki", warm)
        import requests

        url = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/indexer/v1/supervisor"
        spec = {"type": "kafka", "spec": {
            "dataSchema": {"dataSource": "wiki_stream", "timestampSpec": {"column": "timestamp", "format": "millis"},
                           "dimensionsSpec": {"useSchemaDiscovery": True},
                           "granularitySpec": {"segmentGranularity": "HOUR"}},
            "ioConfig": {"topic": "wiki", "consumerProperties": {"bootstrap.servers": broker.bootstrap},
                         "useEarliestOffset": True, "taskDuration": "PT4H"},
            "tuningConfig": {"type": "kafka", "maxRowsInMemory": args.max_rows_in_memory}}}
        response = requests.post(url, json=spec, timeout=30)
        response.raise_for_status()
        client = cluster.client
        t = time.monotonic()
        wait_count(client, "wiki_stream", args.warmup, 900)
        warmup_s = time.monotonic() - t

        # 1. Throughput.
        first = args.warmup
        values = [json.dumps(wiki_event(i, rng, now_ms)).encode() for i in range(first, first + args.events)]
        load_before = load_average()
        t0 = time.monotonic()
        produce_s = produce(broker.bootstrap, "wiki", values)
        t1 = wait_count(client, "wiki_stream", args.warmup + args.events, 1800)
        ingest_s = t1 - t0
        load_after = load_average()

        # 2. Latency under queries.
        queries = [0]

        def query_loop() -> None:
            gap = 1.0 / args.query_rate
            next_at = time.monotonic()
            while not stop_queries.is_set():
                try:
                    client.sql("SELECT language, COUNT(*), SUM(added) FROM wiki_stream GROUP BY language")
                    queries[0] += 1
                except Exception:  # noqa: BLE001 - the load is best effort
                    pass
                next_at += gap
                stop_queries.wait(max(0.0, next_at - time.monotonic()))

        loader = threading.Thread(target=query_loop, daemon=True)
        loader.start()
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        latencies, missed = [], 0
        probes_started = time.monotonic()
        for n in range(args.probes):
            probe = uuid.uuid4().hex
            event = {**wiki_event(n, rng, int(time.time() * 1000)), "probe": probe}
            event["timestamp"] = int(time.time() * 1000)
            sent = time.monotonic()
            producer.produce("wiki", value=json.dumps(event).encode(), partition=n % PARTITIONS)
            producer.flush(30)
            stop_at = sent + args.probe_deadline
            while True:
                try:
                    if count(client, f"SELECT COUNT(*) FROM wiki_stream WHERE probe = '{probe}'") == 1:
                        latencies.append(time.monotonic() - sent)
                        break
                except Exception:  # noqa: BLE001 - the column may not be discovered yet
                    pass
                if time.monotonic() > stop_at:
                    latencies.append(args.probe_deadline)
                    missed += 1
                    break
                time.sleep(0.02)
        stop_queries.set()
        loader.join(timeout=60)
        rate = args.events / ingest_s
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, int(round(0.99 * (len(latencies) - 1))))]
        print(f"warm-up: {args.warmup} events queryable {warmup_s:.1f}s after the supervisor was created "
              f"(task start, Spark session, first job)")
        print(f"produce: {args.events} events in {produce_s:.2f}s ({args.events / produce_s:,.0f}/s); "
              f"load average {load_before} before, {load_after} after")
        probing_s = time.monotonic() - probes_started
        print(f"probes: {len(latencies)} ({missed} past the {args.probe_deadline:.0f}s deadline), "
              f"{queries[0]} GROUP BY queries ran meanwhile ({queries[0] / probing_s:.1f}/s)")
        rows = [("strata, 1 Kafka task (Spark local, 2 cores shared with Tansu, producer, cluster)",
                 f"{rate:,.0f}", f"{rate / 2:,.0f}", f"{p50:.2f}", f"{p99:.2f}")]
        rows += [(what, "", f"{per_core:,}", "", "") for what, per_core, _ in DRUID_PER_CORE]
        header = ("ingesting", "events/s", "events/s per core", "latency p50 (s)", "latency p99 (s)")
        if args.markdown:
            print("| " + " | ".join(header) + " |")
            print("|" + "---|" * len(header))
            for r in rows:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
            print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
            for r in rows:
                print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        print("goal: >= 100,000 events/s and p50 <= 1 s: "
              + ("met" if rate >= 100_000 and p50 <= 1.0 else "NOT met"))
        return 0
    finally:
        stop_queries.set()
        if cluster is not None:
            cluster.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
