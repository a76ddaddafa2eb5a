"""KafkaLagMonitor over a real SupervisorStore (SQLite file) and real Prometheus gauges, with a
scripted offsets client standing in for the broker (the real one is tested against Tansu in
tests/integration/ingestion/test_kafka_supervisor.py). No sockets."""

from __future__ import annotations

import pytest

from common.ingest.supervisor_spec import parse_supervisor_spec
from services.coordinator.kafka_lag_monitor import KafkaLagMonitor
from services.coordinator.store import SegmentStore
from services.coordinator.supervisor_store import SUSPENDED, TERMINATED, SupervisorStore
from services.metrics import Metrics
from tests.fixtures.manual_clock import ManualClock


def spec(datasource: str = "wiki", topic: str = "edits", period: str = "PT10S", earliest: bool = True):
    return parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": {"dataSource": datasource},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": "h:1"}, "useEarliestOffset": earliest},
        "tuningConfig": {"type": "kafka", "offsetFetchPeriod": period}}})


class Broker:
    """topic -> (earliest, latest); ``down`` makes every request fail."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[dict, dict]] = {}
        self.stamps: dict[tuple[str, int, int], int] = {}  # (topic, partition, offset) -> record timestamp
        self.seeks: list[dict] = []
        self.down = False
        self.asked = 0
        self.clients: list[Client] = []

    def client(self, bootstrap, props):
        c = Client(self)
        self.clients.append(c)
        return c


class Client:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.closed = False

    def offsets(self, topic):
        self.broker.asked += 1
        if self.broker.down:
            raise RuntimeError("Local: Broker transport failure")
        if topic not in self.broker.topics:
            raise LookupError(f"topic '{topic}' cannot be read (it does not exist)")
        earliest, latest = self.broker.topics[topic]
        return dict(earliest), dict(latest)

    def oldest_unread_ms(self, topic, offsets):
        self.broker.seeks.append(dict(offsets))
        return {p: self.broker.stamps[(topic, p, o)] for p, o in offsets.items() if (topic, p, o) in self.broker.stamps}

    def close(self):
        self.closed = True


@pytest.fixture
def parts(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    supervisors, metrics, broker, clock = SupervisorStore(store), Metrics("coordinator"), Broker(), ManualClock(10_000)
    monitor = KafkaLagMonitor(supervisors, metrics, lambda: True, clock, broker.client)
    yield supervisors, metrics, broker, clock, monitor
    store.close()


def gauge(metrics, name: str) -> dict:
    return {tuple(sorted(s.labels.items())): s.value for f in metrics.registry.collect() for s in f.samples
            if s.name == name}


def test_lag_per_partition_in_the_snapshot_and_the_gauges(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec())
    supervisors.reset_offsets("wiki", {0: 40, 1: 50}, topic="edits")
    broker.topics["edits"] = ({0: 0, 1: 0, 2: 5}, {0: 100, 1: 50, 2: 25})
    monitor.run_once()
    snap = monitor.snapshot("wiki")
    assert (snap.topic, snap.latest, snap.lag, snap.fetched_ms) == ("edits", {0: 100, 1: 50, 2: 25},
                                                                     {0: 60, 1: 0, 2: 20}, 10_000)
    assert (snap.stats.aggregate, snap.stats.maximum, snap.stats.average) == (80, 60, pytest.approx(80 / 3))
    labels = (("datasource", "wiki"), ("supervisor", "wiki"), ("topic", "edits"))
    assert gauge(metrics, "strata_ingest_kafka_lag") == {labels: 80}
    assert gauge(metrics, "strata_ingest_kafka_max_lag") == {labels: 60}
    assert gauge(metrics, "strata_ingest_kafka_avg_lag") == {labels: pytest.approx(80 / 3)}
    assert gauge(metrics, "strata_ingest_kafka_partition_lag") == {
        tuple(sorted((*labels, ("partition", str(p))))): v for p, v in {0: 60, 1: 0, 2: 20}.items()}

    # Within offsetFetchPeriod nothing is asked; after it, the new committed offsets count.
    supervisors.reset_offsets("wiki", {0: 100, 2: 25}, topic="edits")
    clock.now += 9_999
    monitor.run_once()
    assert broker.asked == 1 and monitor.snapshot("wiki").stats.aggregate == 80
    clock.now += 1
    monitor.run_once()
    assert broker.asked == 2 and monitor.snapshot("wiki").lag == {0: 0, 1: 0, 2: 0}
    assert gauge(metrics, "strata_ingest_kafka_lag") == {labels: 0}


def test_lag_in_time_is_the_age_of_the_oldest_unread_message(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec())
    supervisors.reset_offsets("wiki", {0: 40, 1: 50}, topic="edits")
    broker.topics["edits"] = ({0: 0, 1: 0, 2: 5}, {0: 100, 1: 50, 2: 25})
    # Partition 2 was never committed and reads from the earliest (5); 1 has nothing to read.
    broker.stamps.update({("edits", 0, 40): 4_000, ("edits", 2, 5): 9_500, ("edits", 1, 50): 1})
    monitor.run_once()
    assert broker.seeks == [{0: 40, 2: 5}]  # only lagging partitions, at the offset reading resumes
    snap = monitor.snapshot("wiki")
    assert snap.lag_ms == {0: 6_000, 1: 0, 2: 500}
    labels = (("datasource", "wiki"), ("supervisor", "wiki"), ("topic", "edits"))
    assert gauge(metrics, "strata_ingest_kafka_max_lag_seconds") == {labels: 6.0}
    assert gauge(metrics, "strata_ingest_kafka_partition_lag_seconds") == {
        tuple(sorted((*labels, ("partition", str(p))))): v for p, v in {0: 6.0, 1: 0.0, 2: 0.5}.items()}
    # A message whose timestamp does not come back leaves its partition out (not 0: not caught up).
    broker.stamps.pop(("edits", 2, 5))
    clock.now += 10_000
    monitor.run_once()
    assert monitor.snapshot("wiki").lag_ms == {0: 16_000, 1: 0}
    assert {dict(k)["partition"] for k in gauge(metrics, "strata_ingest_kafka_partition_lag_seconds")} == {"0", "1"}
    monitor.clear()
    assert gauge(metrics, "strata_ingest_kafka_max_lag_seconds") == {}
    assert gauge(metrics, "strata_ingest_kafka_partition_lag_seconds") == {}


def test_suspended_supervisors_are_watched_terminated_ones_forgotten(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec())
    supervisors.upsert(spec("other", "o", earliest=False))
    broker.topics.update({"edits": ({0: 0}, {0: 7}), "o": ({0: 0}, {0: 9})})
    supervisors.set_state("wiki", SUSPENDED)
    monitor.run_once()
    # wiki never committed and reads from the earliest: all 7 are lag; other starts at the latest.
    assert monitor.snapshot("wiki").stats.aggregate == 7 and monitor.snapshot("other").stats.aggregate == 0
    supervisors.set_state("other", TERMINATED)
    monitor.run_once()
    assert monitor.snapshot("other") is None
    assert {dict(k)["supervisor"] for k in gauge(metrics, "strata_ingest_kafka_lag")} == {"wiki"}
    assert {dict(k)["supervisor"] for k in gauge(metrics, "strata_ingest_kafka_partition_lag")} == {"wiki"}
    assert sorted(c.closed for c in broker.clients) == [False, True]  # other's connection closed
    monitor.clear()  # leadership lost: the new leader reports
    assert gauge(metrics, "strata_ingest_kafka_lag") == {} and gauge(metrics, "strata_ingest_kafka_partition_lag") == {}
    assert monitor.snapshot("wiki") is None and all(c.closed for c in broker.clients)


def test_broker_failures_are_counted_and_keep_the_last_answer(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec())
    broker.topics["edits"] = ({0: 0}, {0: 4})
    monitor.run_once()
    broker.down = True
    for i in range(3):
        clock.now += 10_000
        monitor.run_once()
        contact = monitor.snapshot("wiki").contact
        assert contact.failures == i + 1 and contact.ever_connected and contact.error_ms == clock.now
    snap = monitor.snapshot("wiki")
    assert "cannot read the offsets of topic 'edits' from h:1" in snap.contact.error
    assert "Broker transport failure" in snap.contact.error
    assert snap.latest == {0: 4} and snap.fetched_ms == 10_000  # the last answer, and when it came
    broker.down = False
    clock.now += 10_000
    monitor.run_once()
    assert monitor.snapshot("wiki").contact.failures == 0


def test_a_missing_topic_is_a_failure_that_never_connected(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec(topic="nope"))
    monitor.run_once()
    snap = monitor.snapshot("wiki")
    assert snap.contact.failures == 1 and not snap.contact.ever_connected and "does not exist" in snap.contact.error
    assert snap.latest == {} and gauge(metrics, "strata_ingest_kafka_lag") == {}


def test_a_changed_topic_starts_over(parts):
    supervisors, metrics, broker, clock, monitor = parts
    supervisors.upsert(spec())
    broker.topics.update({"edits": ({0: 0, 1: 0}, {0: 3, 1: 3}), "edits2": ({0: 0}, {0: 5})})
    monitor.run_once()
    supervisors.upsert(spec(topic="edits2"))
    clock.now += 10_000
    monitor.run_once()
    assert monitor.snapshot("wiki").topic == "edits2"
    assert {dict(k)["topic"] for k in gauge(metrics, "strata_ingest_kafka_partition_lag")} == {"edits2"}
    assert {dict(k)["topic"] for k in gauge(metrics, "strata_ingest_kafka_lag")} == {"edits2"}


def test_offset_fetch_period_is_parsed_with_a_floor():
    assert spec(period="PT5S").offset_fetch_period_ms == 5_000
    assert spec(period="PT0.1S").offset_fetch_period_ms == 1_000
    assert parse_supervisor_spec({"type": "kafka", "dataSchema": {"dataSource": "w"}, "ioConfig": {
        "topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"}}}).offset_fetch_period_ms == 30_000
