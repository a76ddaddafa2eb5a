"""Prometheus metrics of every strata role, defined in one place (names documented in docs/metrics.md).

Each process builds one ``Metrics`` on its own registry, so in-process test clusters with several
nodes keep their numbers apart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Ingestion tasks run for seconds to hours (a Spark job per task).
_TASK_BUCKETS = (1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240, 300, 600, 900, 1800, 3600, 7200, 21600)


class Metrics:
    def __init__(self, role: str) -> None:
        self.role = role
        r = self.registry = CollectorRegistry()
        # process_start_time_seconds (a restart, i.e. a deploy, for the alert rules), memory and CPU.
        ProcessCollector(registry=r)
        self.queries = Counter("strata_queries", "Queries handled", ["datasource", "query_type", "status"], registry=r)
        self.query_seconds = Histogram("strata_query_seconds", "Query latency", ["datasource", "query_type"],
                                       buckets=_LATENCY_BUCKETS, registry=r)
        self.segment_query_seconds = Histogram("strata_segment_query_seconds", "Time to run a query on one segment",
                                               ["datasource", "projection"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rows_scanned = Counter("strata_rows_scanned", "Rows read by queries (projection: its name, or base)",
                                    ["datasource", "projection"], registry=r)
        self.segments_queried = Counter("strata_segments_queried", "Segments a query ran on, by the table read",
                                        ["datasource", "projection"], registry=r)
        self.projection_misses = Counter("strata_projection_misses",
                                         "Projections a segment had but could not use for a query, by reason",
                                         ["datasource", "projection", "reason"], registry=r)
        self.projection_base_rows = Counter("strata_projection_base_rows",
                                            "Base rows of the segments a projection served (what the query "
                                            "would have read without it, before filters)",
                                            ["datasource", "projection"], registry=r)
        self.bytes_read = Counter("strata_query_bytes_read", "Segment bytes touched by queries", ["datasource"], registry=r)
        self.segments_served = Gauge("strata_segments_served", "Segments this historical serves", registry=r)
        self.cache_bytes = Gauge("strata_cache_bytes", "Bytes in the local segment cache", registry=r)
        self.cache_max_bytes = Gauge("strata_cache_max_bytes", "Capacity of the local segment cache", registry=r)
        self.segment_loads = Counter("strata_segment_loads", "Segment loads on historicals", ["result"], registry=r)
        self.segment_drops = Counter("strata_segment_drops", "Segment drops on historicals", registry=r)
        self.published_segments = Counter("strata_published_segments", "Segments published", registry=r)
        self.publishes = Counter("strata_publishes", "Publish transactions", ["result"], registry=r)
        self.duty_seconds = Histogram("strata_coordinator_duty_seconds", "One run of the coordinator duties",
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.coordinator_commands = Counter("strata_coordinator_commands", "Load/drop commands issued", ["type"],
                                            registry=r)
        self.used_segments = Gauge("strata_used_segments", "Used segments in the metadata store", registry=r)
        self.servers = Gauge("strata_servers", "Nodes announced in discovery, by role (the leader's view)",
                             ["node_role"], registry=r)
        self.segments_unavailable = Gauge("strata_segments_unavailable",
                                          "Used segments no historical serves (the leader's view)",
                                          ["datasource"], registry=r)
        self.segments_under_replicated = Gauge("strata_segments_under_replicated",
                                               "Used segments served by fewer historicals than the replication "
                                               "factor, unavailable ones included (the leader's view)",
                                               ["datasource"], registry=r)
        self.segments_unmatched = Gauge("strata_segments_unmatched",
                                        "Used segments no retention rule applies to (the leader's view; alert)",
                                        ["datasource"], registry=r)
        # Retention by tier (the leader's view): Druid's segment/assigned, segment/dropped per tier.
        self.tier_segments_loaded = Gauge("strata_tier_segments_loaded",
                                          "Segment replicas the historicals of a tier serve (the leader's view)",
                                          ["tier"], registry=r)
        self.tier_bytes_loaded = Gauge("strata_tier_bytes_loaded",
                                       "Bytes of the segment replicas a tier serves (the leader's view)",
                                       ["tier"], registry=r)
        self.tier_segments_assigned = Counter("strata_tier_segments_assigned",
                                              "Segment loads the coordinator assigned to a tier's historicals",
                                              ["tier"], registry=r)
        self.tier_segments_dropped = Counter("strata_tier_segments_dropped",
                                             "Segment replicas the coordinator dropped from a tier's historicals",
                                             ["tier"], registry=r)
        self.segments_unused = Gauge("strata_segments_unused",
                                     "Unused segments still in the metadata store and deep storage (not killed)",
                                     ["datasource"], registry=r)
        self.deep_storage_bytes = Gauge("strata_deep_storage_bytes",
                                        "Bytes of a datasource's segments in deep storage, used and unused "
                                        "(the metadata store's sizes; the leader's view)", ["datasource"], registry=r)
        self.tasks = Gauge("strata_tasks", "Ingestion tasks in the metadata store, by state (the leader's view)",
                           ["state"], registry=r)
        self.tasks_finished = Counter("strata_tasks_finished", "Ingestion tasks that reached a final state",
                                      ["datasource", "type", "state"], registry=r)
        self.task_seconds = Histogram("strata_task_seconds", "Ingestion task run time, start to final state",
                                      ["type", "state"], buckets=_TASK_BUCKETS, registry=r)
        self.ingested_rows = Counter("strata_ingested_rows", "Rows written by finished ingestion tasks",
                                     ["datasource", "type"], registry=r)
        self.parse_exceptions = Counter("strata_ingest_parse_exceptions",
                                        "Input rows finished ingestion tasks could not parse",
                                        ["datasource"], registry=r)
        # Kafka supervisors' lag (the leader's view, every offsetFetchPeriod): Druid's ingest/kafka/lag,
        # maxLag, avgLag and partitionLag, in messages.
        stream = ["supervisor", "datasource", "topic"]
        self.kafka_lag = Gauge("strata_ingest_kafka_lag", "Messages a Kafka supervisor has still to read, summed over "
                               "the topic's partitions (latest offset minus committed)", stream, registry=r)
        self.kafka_max_lag = Gauge("strata_ingest_kafka_max_lag", "The largest lag of one partition of a Kafka "
                                   "supervisor's topic, in messages", stream, registry=r)
        self.kafka_avg_lag = Gauge("strata_ingest_kafka_avg_lag", "The mean lag over a Kafka supervisor's partitions, "
                                   "in messages", stream, registry=r)
        self.kafka_partition_lag = Gauge("strata_ingest_kafka_partition_lag", "Messages a Kafka supervisor has still "
                                         "to read in one partition", stream + ["partition"], registry=r)
        # Lag in time (Druid's ingest/kafka/maxLag/time): the age of the oldest message not read yet.
        self.kafka_max_lag_seconds = Gauge("strata_ingest_kafka_max_lag_seconds", "Age of the oldest message a "
                                           "Kafka supervisor has not read, over its partitions (0: caught up)",
                                           stream, registry=r)
        self.kafka_partition_lag_seconds = Gauge("strata_ingest_kafka_partition_lag_seconds", "Age of the oldest "
                                                 "unread message of one partition", stream + ["partition"], registry=r)
        self.replica_retries = Counter("strata_broker_replica_retries", "Queries retried on another replica",
                                       registry=r)
        # Druid's missingSegments that were not retried: segments a historical no longer served
        # and that were no longer meant to be (services/broker/core/missing_segment.py).
        self.segments_left_out = Counter("strata_broker_segments_left_out", "Segments a query answered without "
                                         "because a historical had just dropped them and they were no longer meant "
                                         "to be served (unused, overshadowed, no replicas by rule, unannounced)",
                                         ["reason"], registry=r)
        self.partial_rows = Counter("strata_broker_partial_rows", "Result rows historicals sent the broker",
                                    ["query_type"], registry=r)
        self.partial_bytes = Counter("strata_broker_partial_bytes",
                                     "Arrow bytes of the partial results historicals sent the broker",
                                     ["query_type"], registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
