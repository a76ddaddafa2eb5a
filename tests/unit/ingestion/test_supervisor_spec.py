"""Druid's Kafka supervisor spec: parsing, defaults, and errors that name the key at fault."""

from __future__ import annotations

import copy

import pytest

from common.ingest.supervisor_spec import Dimension, SupervisorSpecError, parse_supervisor_spec

SPEC = {
    "type": "kafka",
    "spec": {
        "dataSchema": {
            "dataSource": "wiki",
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "added"}]},
            "granularitySpec": {"segmentGranularity": "day", "rollup": False},
        },
        "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9092"},
                     "inputFormat": {"type": "json"}, "taskDuration": "PT10M", "useEarliestOffset": True},
        "tuningConfig": {"type": "kafka", "maxRowsPerSegment": 1000, "maxParseExceptions": 0},
    },
}


def _with(path: str, value):
    spec = copy.deepcopy(SPEC)
    *parents, last = path.split(".")
    obj = spec
    for p in parents:
        obj = obj[p]
    obj[last] = value
    return spec


def test_parses_druid_spec():
    s = parse_supervisor_spec(SPEC)
    assert (s.id, s.datasource, s.topic, s.bootstrap_servers) == ("wiki", "wiki", "edits", "127.0.0.1:9092")
    assert s.dimensions == (Dimension("page"), Dimension("added", "long"))
    assert not s.schema_discovery
    assert (s.timestamp_column, s.timestamp_format, s.segment_granularity) == ("ts", "iso", "DAY")
    assert s.task_duration_ms == 600_000 and s.use_earliest_offset
    assert (s.max_rows_per_segment, s.max_parse_exceptions) == (1000, 0)
    assert s.to_json() == SPEC


def test_flat_form_and_defaults():
    flat = {"type": "kafka", **copy.deepcopy(SPEC["spec"])}
    del flat["tuningConfig"]
    flat["dataSchema"] = {"dataSource": "d"}
    flat["ioConfig"] = {"topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"}}
    s = parse_supervisor_spec(flat)
    assert s.schema_discovery and s.dimensions == ()
    assert (s.timestamp_column, s.segment_granularity, s.task_duration_ms) == ("timestamp", "HOUR", 3_600_000)
    assert not s.use_earliest_offset


@pytest.mark.parametrize("path, value, message", [
    ("spec.ioConfig.topik", "x", "unknown key 'topik' in spec.ioConfig"),
    ("spec.dataSchema.dimensionSpec", {}, "unknown key 'dimensionSpec' in spec.dataSchema"),
    ("spec.tuningConfig.maxRowsPerSegmnt", 5, "unknown key 'maxRowsPerSegmnt' in spec.tuningConfig"),
    ("spec.dataSchema.timestampSpec.colum", "t", "unknown key 'colum' in spec.dataSchema.timestampSpec"),
    ("spec.extra", 1, "unknown key 'extra' in spec"),
    ("spec.ioConfig.topicPattern", "a.*", "spec.ioConfig.topicPattern is not supported yet"),
    ("spec.ioConfig.lateMessageRejectionPeriod", "PT1H", "lateMessageRejectionPeriod is not supported yet"),
    ("spec.ioConfig.consumerProperties", {}, "spec.ioConfig.consumerProperties.bootstrap.servers is required"),
    ("spec.ioConfig.consumerProperties", {"bootstrap.servers": "h:1", "group.id": "g"}, "group.id is managed"),
    ("spec.ioConfig.inputFormat", {"type": "csv"}, "inputFormat.type must be \"json\""),
    ("spec.ioConfig.taskDuration", "P1M", "positive fixed period"),
    ("spec.ioConfig.taskDuration", "ten minutes", "ISO-8601 period"),
    ("spec.ioConfig.taskCount", 0, "taskCount must be an integer >= 1"),
    ("spec.ioConfig.replicas", 0, "replicas must be an integer >= 1"),
    ("spec.ioConfig.useEarliestOffset", "yes", "useEarliestOffset must be true or false"),
    ("spec.dataSchema.dataSource", "../x", "dataSource '../x'"),
    ("spec.dataSchema.metricsSpec", [{"type": "count", "name": "n"}], "metricsSpec is not supported yet"),
    ("spec.dataSchema.granularitySpec", {"segmentGranularity": "fortnight"}, "segmentGranularity is not a granularity"),
    ("spec.dataSchema.dimensionsSpec", {"dimensions": ["a", "a"]}, "lists a more than once"),
    ("spec.dataSchema.dimensionsSpec", {"dimensions": [{"name": "a", "type": "blob"}]}, "dimensions[0].type"),
    ("spec.dataSchema.dimensionsSpec", {"dimensions": ["ts"]}, "timestamp column 'ts'"),
    ("type", "kinesis", "type must be \"kafka\""),
])
def test_errors_name_the_key(path, value, message):
    with pytest.raises(SupervisorSpecError) as exc:
        parse_supervisor_spec(_with(path, value))
    assert message in str(exc.value)


def test_missing_sections():
    with pytest.raises(SupervisorSpecError, match="needs dataSchema and ioConfig"):
        parse_supervisor_spec({"type": "kafka", "spec": {"dataSchema": {"dataSource": "d"}}})
    with pytest.raises(SupervisorSpecError, match="must be a JSON object"):
        parse_supervisor_spec([1])


def test_redacted_json_masks_secrets_only():
    spec = _with("spec.ioConfig.consumerProperties", {
        "bootstrap.servers": "h:1", "sasl.password": "hunter2", "sasl.jaas.config": "x required password=y;",
        "ssl.key.password": "k", "security.protocol": "SASL_SSL"})
    props = parse_supervisor_spec(spec).redacted_json()["spec"]["ioConfig"]["consumerProperties"]
    assert props == {"bootstrap.servers": "h:1", "sasl.password": "<redacted>", "sasl.jaas.config": "<redacted>",
                     "ssl.key.password": "<redacted>", "security.protocol": "SASL_SSL"}
    assert parse_supervisor_spec(spec).to_json() == spec  # the stored spec keeps them
