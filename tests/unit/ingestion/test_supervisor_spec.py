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
    ("spec.ioConfig.lateMessageRejectionPeriod", "P1M", "lateMessageRejectionPeriod must be a positive fixed period"),
    ("spec.ioConfig.earlyMessageRejectionPeriod", "soon", "earlyMessageRejectionPeriod must be an ISO-8601 period"),
    ("spec.ioConfig.lateMessageRejectionStartDateTime", "yesterday",
     "lateMessageRejectionStartDateTime: cannot parse 'yesterday'"),
    ("spec.ioConfig.consumerProperties", {}, "spec.ioConfig.consumerProperties.bootstrap.servers is required"),
    ("spec.ioConfig.consumerProperties", {"bootstrap.servers": "h:1", "group.id": "g"}, "group.id is managed"),
    ("spec.ioConfig.inputFormat", {"type": "avro"}, "inputFormat.type must be one of json, csv, tsv"),
    ("spec.ioConfig.inputFormat", {"type": "csv"}, "inputFormat.columns must be a non-empty list"),
    ("spec.ioConfig.inputFormat", {"type": "csv", "columns": ["a"], "findColumnsFromHeader": True},
     "findColumnsFromHeader true is not supported for streaming"),
    ("spec.ioConfig.inputFormat", {"type": "csv", "columns": ["a"], "delimiter": "|"},
     "unknown key 'delimiter' in spec.ioConfig.inputFormat"),
    ("spec.ioConfig.inputFormat", {"type": "tsv", "columns": ["a", "a"]}, "columns lists a more than once"),
    ("spec.ioConfig.inputFormat", {"type": "tsv", "columns": ["a"], "delimiter": "|", "listDelimiter": "|"},
     "delimiter and listDelimiter must differ"),
    ("spec.ioConfig.inputFormat", {"type": "csv", "columns": ["a"], "skipHeaderRows": -1},
     "skipHeaderRows must be an integer >= 0"),
    ("spec.ioConfig.inputFormat", {"type": "json", "flattenSpec": {"fields": []}}, "flattenSpec is not supported"),
    ("spec.ioConfig.taskDuration", "P1M", "positive fixed period"),
    ("spec.ioConfig.taskDuration", "ten minutes", "ISO-8601 period"),
    ("spec.ioConfig.taskCount", 0, "taskCount must be an integer >= 1"),
    ("spec.ioConfig.replicas", 0, "replicas must be an integer >= 1"),
    ("spec.ioConfig.useEarliestOffset", "yes", "useEarliestOffset must be true or false"),
    ("spec.dataSchema.dataSource", "../x", "dataSource '../x'"),
    ("spec.dataSchema.metricsSpec", [{"type": "hyperUnique", "name": "u", "fieldName": "user"}],
     "metricsSpec[0].type 'hyperUnique' is not supported for streaming"),
    # Rollup INSERT stores sketches finalized (common/ingest/rollup_metrics.py), so micro-batches'
    # could not be merged: refused, naming the key.
    ("spec.dataSchema.metricsSpec", [{"type": "count", "name": "n"}, {"type": "HLLSketchBuild", "name": "u",
                                                                      "fieldName": "user"}],
     "spec.dataSchema.metricsSpec[1].type 'HLLSketchBuild' is not supported for streaming"),
    ("spec.dataSchema.metricsSpec", [{"type": "thetaSketch", "name": "u", "fieldName": "user"}],
     "spec.dataSchema.metricsSpec[0].type 'thetaSketch' is not supported for streaming"),
    ("spec.dataSchema.metricsSpec", [{"type": "quantilesDoublesSketch", "name": "q", "fieldName": "added"}],
     "spec.dataSchema.metricsSpec[0].type 'quantilesDoublesSketch' is not supported for streaming"),
    ("spec.dataSchema.metricsSpec", [{"type": "longAvg", "name": "n", "fieldName": "x"}],
     "metricsSpec[0].type must be one of count, longSum"),
    ("spec.dataSchema.metricsSpec", [{"type": "longSum", "name": "n"}], "metricsSpec[0].fieldName is required"),
    ("spec.dataSchema.metricsSpec", [{"type": "longSum", "name": "n", "fieldName": "x", "expression": "x*2"}],
     "metricsSpec[0].expression is not supported yet"),
    ("spec.dataSchema.metricsSpec", [{"type": "count", "name": "n"}, {"type": "longSum", "name": "n", "fieldName": "x"}],
     "names n more than once"),
    ("spec.dataSchema.metricsSpec", [{"type": "count", "name": "page"}], "'page' is both a dimension and a metric"),
    ("spec.dataSchema.granularitySpec", {"rollup": True}, "rollup is true but spec.dataSchema.metricsSpec is empty"),
    ("spec.dataSchema.granularitySpec", {"queryGranularity": "all"}, "queryGranularity ALL"),
    ("spec.dataSchema.transformSpec", {"transforms": [{"type": "expression", "name": "x", "expression": "a +"}]},
     "transformSpec.transforms[0].expression"),
    ("spec.dataSchema.transformSpec", {"transforms": [{"type": "lookup", "name": "x", "expression": "a"}]},
     "transforms[0].type must be \"expression\""),
    ("spec.dataSchema.transformSpec", {"transforms": [{"name": "x", "expression": "a"}, {"name": "x",
                                                                                        "expression": "b"}]},
     "transforms names x more than once"),
    ("spec.dataSchema.transformSpec", {"filter": {"type": "nonsense"}}, "transformSpec.filter: unknown filter type"),
    ("spec.dataSchema.transformSpec", {"filter": {"type": "in", "dimension": "a"}}, "transformSpec.filter: 'in' filter"),
    ("spec.dataSchema.transformSpec", {"filtre": {}}, "unknown key 'filtre' in spec.dataSchema.transformSpec"),
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


def test_rollup_transforms_rejection_and_csv():
    spec = copy.deepcopy(SPEC)
    schema, io = spec["spec"]["dataSchema"], spec["spec"]["ioConfig"]
    schema["granularitySpec"] = {"segmentGranularity": "day", "queryGranularity": "minute"}
    schema["metricsSpec"] = [{"type": "count", "name": "n"}, {"type": "doubleSum", "name": "s", "fieldName": "x"}]
    schema["transformSpec"] = {"transforms": [{"type": "expression", "name": "page", "expression": "upper(page)"}],
                               "filter": {"type": "selector", "dimension": "page", "value": "A"}}
    io.update({"lateMessageRejectionPeriod": "PT1H", "earlyMessageRejectionPeriod": "PT30M",
               "inputFormat": {"type": "tsv", "columns": ["ts", "page", "added", "x"], "delimiter": "|",
                               "listDelimiter": ";", "skipHeaderRows": 1}})
    s = parse_supervisor_spec(spec)
    assert s.rollup and s.query_granularity == "MINUTE"  # rollup defaults to true with metrics, as in Druid
    assert [(m.type, m.name, m.field_name) for m in s.metrics] == [("count", "n", None), ("doubleSum", "s", "x")]
    assert [(t.name, t.expression) for t in s.transforms] == [("page", "upper(page)")]
    assert s.filter == {"type": "selector", "dimension": "page", "value": "A"}
    assert (s.late_rejection_period_ms, s.early_rejection_period_ms, s.late_rejection_start_ms) == (
        3_600_000, 1_800_000, None)
    assert (s.input_format.type, s.input_format.columns, s.input_format.delimiter, s.input_format.list_delimiter,
            s.input_format.skip_header_rows) == ("tsv", ("ts", "page", "added", "x"), "|", ";", 1)
    assert s.to_json() == spec

    schema["granularitySpec"]["rollup"] = False
    io.pop("lateMessageRejectionPeriod")
    io["lateMessageRejectionStartDateTime"] = "2024-05-01T10:00:00Z"
    io["inputFormat"] = {"type": "csv", "columns": ["ts", "page"]}
    s = parse_supervisor_spec(spec)
    assert not s.rollup and s.late_rejection_start_ms == 1714557600000
    assert (s.input_format.delimiter, s.input_format.list_delimiter) == ("\t", "\u0001")  # Druid's defaults
    io["lateMessageRejectionPeriod"] = "PT1H"
    with pytest.raises(SupervisorSpecError, match="only one of lateMessageRejectionPeriod and "
                                                  "lateMessageRejectionStartDateTime"):
        parse_supervisor_spec(spec)
