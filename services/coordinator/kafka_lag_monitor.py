"""KafkaLagMonitor: the leading coordinator's view of how far each Kafka supervisor is behind.

Every ``tuningConfig.offsetFetchPeriod`` (Druid's name; default PT30S) it asks the supervisor's
broker for the earliest and latest offset of every partition of the topic (confluent-kafka's
watermark offsets; nothing is consumed and no consumer group is joined) and compares them with
the offsets committed with the published segments (core/supervisor_status.py). The result feeds
the supervisor status (``latestOffsets``, ``minimumLag``, ``aggregateLag``) and the lag gauges on
``/metrics`` (Druid's ingest/kafka/lag, maxLag, avgLag and partitionLag). Suspended supervisors
are watched too: that is when lag builds up.

It runs on its own thread rather than as a coordinator duty: a broker that does not answer holds a
request for up to its timeout, and the segment duties must not wait for that. Failed requests are
counted (StreamContact) and make the supervisor unhealthy after Druid's threshold.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from services.coordinator.core.supervisor_status import LagStats, StreamContact, partition_lag
from services.coordinator.supervisor_store import SupervisorStore

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT_S = 5.0  # bounds how long a dead broker holds the thread (and a stop)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaOffsetsClient:
    """The earliest and latest offsets of a topic's partitions, from one broker connection."""

    def __init__(self, bootstrap_servers: str, consumer_properties: Mapping[str, str]) -> None:
        from confluent_kafka import Consumer  # noqa: PLC0415 - the coordinator loads librdkafka only with a supervisor

        conf = dict(consumer_properties)
        conf.update({"bootstrap.servers": bootstrap_servers, "group.id": f"strata-lag-{uuid.uuid4().hex}",
                     "enable.auto.commit": False})
        self._consumer = Consumer(conf)

    def offsets(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        from confluent_kafka import TopicPartition  # noqa: PLC0415 - as above

        meta = self._consumer.list_topics(topic, timeout=_REQUEST_TIMEOUT_S)
        t = meta.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            reason = t.error if t is not None and t.error is not None else "it does not exist"
            raise LookupError(f"topic '{topic}' cannot be read ({reason})")
        earliest, latest = {}, {}
        for p in sorted(t.partitions):
            earliest[p], latest[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                                          timeout=_REQUEST_TIMEOUT_S)
        return earliest, latest

    def close(self) -> None:
        self._consumer.close()


@dataclass(frozen=True)
class LagSnapshot:
    topic: str
    latest: dict[int, int] = field(default_factory=dict)  # the last answer (kept through failures)
    lag: dict[int, int] = field(default_factory=dict)
    stats: LagStats = LagStats(0, 0, 0.0)
    fetched_ms: int = 0  # when ``latest`` was read; 0: never
    contact: StreamContact = StreamContact()


class KafkaLagMonitor:
    def __init__(self, supervisors: SupervisorStore, metrics, is_leader: Callable[[], bool],
                 clock: Callable[[], int] = _now_ms, client_factory=KafkaOffsetsClient, tick_s: float = 1.0) -> None:
        self.supervisors = supervisors
        self.metrics = metrics
        self.is_leader = is_leader
        self._clock = clock
        self._client_factory = client_factory
        self._tick_s = tick_s
        self._lock = threading.Lock()
        self._snapshots: dict[str, LagSnapshot] = {}
        self._asked_ms: dict[str, int] = {}
        self._clients: dict[str, tuple[tuple, object]] = {}
        # supervisor -> (its whole-topic gauge labels, its partition gauge label sets)
        self._exported: dict[str, tuple[tuple, set[tuple]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def snapshot(self, supervisor_id: str) -> LagSnapshot | None:
        with self._lock:
            return self._snapshots.get(supervisor_id)

    def run_once(self) -> None:
        """Asks the broker of every supervisor whose offsetFetchPeriod has passed."""
        records = {r.id: r for r in self.supervisors.list()}  # terminated ones are left out
        for gone in set(self._snapshots) - set(records):
            self._forget(gone)
        now = self._clock()
        for sid, record in records.items():
            spec = record.spec
            if now - self._asked_ms.get(sid, -10**15) < spec.offset_fetch_period_ms:
                continue
            self._asked_ms[sid] = now
            previous = self.snapshot(sid)
            if previous is not None and previous.topic != spec.topic:
                self._forget(sid)
                previous = None
            try:
                earliest, latest = self._client(sid, spec).offsets(spec.topic)
            except Exception as exc:  # noqa: BLE001 - any failure to reach the broker is a contact failure
                self._failed(sid, spec.topic, previous, f"cannot read the offsets of topic '{spec.topic}' from "
                                                        f"{spec.bootstrap_servers}: {exc}")
                continue
            committed = self.supervisors.offsets(spec.datasource)
            done = committed.offsets if committed is not None and committed.topic == spec.topic else {}
            lag = partition_lag(latest, done, earliest, spec.use_earliest_offset)
            snap = LagSnapshot(spec.topic, latest, lag, LagStats.of(lag), self._clock(),
                               StreamContact(0, True, "", 0))
            with self._lock:
                self._snapshots[sid] = snap
            self._export(sid, spec.datasource, snap)

    def _client(self, sid: str, spec):
        key = (spec.bootstrap_servers, tuple(sorted(spec.consumer_properties.items())))
        cached = self._clients.get(sid)
        if cached is not None and cached[0] == key:
            return cached[1]
        if cached is not None:
            cached[1].close()
            del self._clients[sid]
        client = self._client_factory(spec.bootstrap_servers, spec.consumer_properties)
        self._clients[sid] = (key, client)
        return client

    def _failed(self, sid: str, topic: str, previous: LagSnapshot | None, error: str) -> None:
        was = previous.contact if previous is not None else StreamContact()
        contact = StreamContact(was.failures + 1, was.ever_connected, error, self._clock())
        if contact.failures == 1:
            log.warning("supervisor %s: %s", sid, error)
        base = previous if previous is not None else LagSnapshot(topic)
        with self._lock:
            self._snapshots[sid] = LagSnapshot(base.topic, base.latest, base.lag, base.stats, base.fetched_ms, contact)

    def _export(self, sid: str, datasource: str, snap: LagSnapshot) -> None:
        m = self.metrics
        whole = (sid, datasource, snap.topic)
        m.kafka_lag.labels(*whole).set(snap.stats.aggregate)
        m.kafka_max_lag.labels(*whole).set(snap.stats.maximum)
        m.kafka_avg_lag.labels(*whole).set(snap.stats.average)
        parts = {(*whole, str(p)) for p in snap.lag}
        _, before = self._exported.get(sid, (whole, set()))
        for stale in before - parts:  # partitions are never removed from a topic, but a reset may shrink the view
            m.kafka_partition_lag.remove(*stale)
        for p, value in snap.lag.items():
            m.kafka_partition_lag.labels(*whole, str(p)).set(value)
        self._exported[sid] = (whole, parts)

    def _forget(self, sid: str) -> None:
        with self._lock:
            self._snapshots.pop(sid, None)
        self._asked_ms.pop(sid, None)
        cached = self._clients.pop(sid, None)
        if cached is not None:
            cached[1].close()
        exported = self._exported.pop(sid, None)
        if exported is not None:
            whole, parts = exported
            m = self.metrics
            for gauge in (m.kafka_lag, m.kafka_max_lag, m.kafka_avg_lag):
                gauge.remove(*whole)
            for labels in parts:
                m.kafka_partition_lag.remove(*labels)

    def clear(self) -> None:
        """Leadership lost (or stopping): the new leader reports lag."""
        for sid in list(set(self._snapshots) | set(self._clients) | set(self._exported)):
            self._forget(sid)

    # --- the thread -------------------------------------------------------------------------

    def start(self) -> KafkaLagMonitor:
        self._thread = threading.Thread(target=self._loop, name="kafka-lag-monitor", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                if self.is_leader():
                    self.run_once()
                elif self._snapshots or self._clients:
                    self.clear()
            except Exception:  # noqa: BLE001 - a metadata DB hiccup must not end the thread
                log.warning("kafka lag monitor run failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_REQUEST_TIMEOUT_S * 3)
        self.clear()


__all__ = ["KafkaLagMonitor", "KafkaOffsetsClient", "LagSnapshot"]
