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

from services.coordinator.core.supervisor_status import (LagStats, StreamContact, next_offsets, partition_lag,
                                                         time_lag_ms)
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
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     # It reads one message per lagging partition (for its timestamp): small
                     # fetches, so a large backlog is not pulled into the coordinator for that.
                     "max.partition.fetch.bytes": 65_536, "fetch.max.bytes": 1_048_576,
                     "queued.max.messages.kbytes": 1_024})
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

    def oldest_unread_ms(self, topic: str, offsets: Mapping[int, int]) -> dict[int, int]:
        """partition -> the timestamp of the message at ``offsets[partition]`` (assign + seek;
        nothing is committed). Partitions whose message does not come in time are left out."""
        from confluent_kafka import TopicPartition  # noqa: PLC0415 - as in __init__

        if not offsets:
            return {}
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in offsets.items()])
        out: dict[int, int] = {}
        stop_at = time.monotonic() + _REQUEST_TIMEOUT_S
        try:
            while len(out) < len(offsets) and time.monotonic() < stop_at:
                for m in self._consumer.consume(len(offsets), timeout=0.5):
                    p = m.partition()
                    if m.error() is None and p not in out and m.offset() >= offsets.get(p, 0):
                        kind, ts = m.timestamp()
                        if kind and ts >= 0:  # 0: TIMESTAMP_NOT_AVAILABLE
                            out[p] = ts
        finally:
            self._consumer.unassign()
        return out

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
    lag_ms: dict[int, int] = field(default_factory=dict)  # the age of each partition's oldest unread message


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

    def partitions(self, supervisor_id: str, topic: str) -> list[int] | None:
        """The topic's partitions as the broker last reported them for the supervisor (the
        supervisor splits them among its task groups), or None before a first answer."""
        snap = self.snapshot(supervisor_id)
        if snap is None or snap.topic != topic or not snap.latest:
            return None
        return sorted(snap.latest)

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
            committed = self.supervisors.offsets(spec.datasource)
            done = committed.offsets if committed is not None and committed.topic == spec.topic else {}
            try:
                client = self._client(sid, spec)
                earliest, latest = client.offsets(spec.topic)
                lag = partition_lag(latest, done, earliest, spec.use_earliest_offset)
                start = next_offsets(latest, done, earliest, spec.use_earliest_offset)
                oldest = client.oldest_unread_ms(spec.topic, {p: start[p] for p, n in lag.items() if n > 0})
            except Exception as exc:  # noqa: BLE001 - any failure to reach the broker is a contact failure
                self._failed(sid, spec.topic, previous, f"cannot read the offsets of topic '{spec.topic}' from "
                                                        f"{spec.bootstrap_servers}: {exc}")
                continue
            fetched = self._clock()
            snap = LagSnapshot(spec.topic, latest, lag, LagStats.of(lag), fetched, StreamContact(0, True, "", 0),
                               time_lag_ms(lag, oldest, fetched))
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
            self._snapshots[sid] = LagSnapshot(base.topic, base.latest, base.lag, base.stats, base.fetched_ms, contact,
                                               base.lag_ms)

    def _export(self, sid: str, datasource: str, snap: LagSnapshot) -> None:
        m = self.metrics
        whole = (sid, datasource, snap.topic)
        m.kafka_lag.labels(*whole).set(snap.stats.aggregate)
        m.kafka_max_lag.labels(*whole).set(snap.stats.maximum)
        m.kafka_avg_lag.labels(*whole).set(snap.stats.average)
        m.kafka_max_lag_seconds.labels(*whole).set(max(snap.lag_ms.values(), default=0) / 1000)
        parts = {(*whole, str(p)) for p in snap.lag}  # lag_ms has a subset of these partitions
        _, before = self._exported.get(sid, (whole, set()))
        for stale in before - parts:  # partitions are never removed from a topic, but a reset may shrink the view
            m.kafka_partition_lag.remove(*stale)
        for stale in before - {(*whole, str(p)) for p in snap.lag_ms}:
            try:
                m.kafka_partition_lag_seconds.remove(*stale)
            except KeyError:
                pass  # it had no time lag either
        for p, value in snap.lag.items():
            m.kafka_partition_lag.labels(*whole, str(p)).set(value)
        for p, value in snap.lag_ms.items():
            m.kafka_partition_lag_seconds.labels(*whole, str(p)).set(value / 1000)
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
            for gauge in (m.kafka_lag, m.kafka_max_lag, m.kafka_avg_lag, m.kafka_max_lag_seconds):
                gauge.remove(*whole)
            for labels in parts:
                m.kafka_partition_lag.remove(*labels)
                try:
                    m.kafka_partition_lag_seconds.remove(*labels)
                except KeyError:
                    pass  # a partition whose message timestamp was not read

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
