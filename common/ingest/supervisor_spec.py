"""SupervisorSpec: Druid's Kafka supervisor spec, parsed and checked (pure).

The accepted JSON is Druid's: ``{"type": "kafka", "spec": {"dataSchema": ..., "ioConfig": ...,
"tuningConfig": ...}}`` (the older form with the three sections at the top level is accepted too).
Every object is read with the keys it may hold: an unknown key is an error that names it with
its path (``spec.ioConfig.topik``) and the keys allowed there, so a typo never silently becomes a
default. Keys Druid defines that strata does not implement yet (topicPattern, sketch metrics,
flattenSpec) are refused naming the key, rather than ignored: an ignored setting would load rows
the user meant to keep out or store values the user did not ask for.

Rollup (``metricsSpec``, ``queryGranularity``), ``transformSpec`` (Druid filters and expression
transforms), message rejection periods and csv/tsv input are checked here; what they do to each
message is ``common/ingest/stream_rows.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.expr import parse as parse_expression
from common.query.filters import filter_from_json
from common.types.granularity import Granularity, Period
from common.types.interval import parse_instant

# Druid's supervisor ids become deep-storage folder names and URL path parts.
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}$")
_TIMESTAMP_FORMATS = ("auto", "iso", "millis", "posix")
_DIMENSION_TYPES = ("string", "long", "float", "double", "json", "auto")
# Druid's metric aggregators strata rolls up: type -> (SQL aggregate, the field's SQL type). Each one
# merges partial results exactly (a sum of sums), so micro-batches and segments compose.
METRIC_TYPES = {
    "count": ("COUNT", None),
    "longSum": ("SUM", "BIGINT"), "doubleSum": ("SUM", "DOUBLE"), "floatSum": ("SUM", "DOUBLE"),
    "longMin": ("MIN", "BIGINT"), "doubleMin": ("MIN", "DOUBLE"), "floatMin": ("MIN", "DOUBLE"),
    "longMax": ("MAX", "BIGINT"), "doubleMax": ("MAX", "DOUBLE"), "floatMax": ("MAX", "DOUBLE"),
}
# Batch INSERT stores approximate distinct counts finalized (a number, not a sketch), and numbers
# of distinct values of two micro-batches cannot be added: these would give wrong answers.
_SKETCH_METRICS = ("hyperUnique", "HLLSketchBuild", "HLLSketchMerge", "thetaSketch", "quantilesDoublesSketch",
                   "cardinality")
_INPUT_FORMATS = ("json", "csv", "tsv")
_SECRET = re.compile(r"password|secret|jaas|\.key$|token|credential", re.IGNORECASE)


class SupervisorSpecError(ValidationError):
    """The supervisor spec is invalid; the message names the key at fault."""


@dataclass(frozen=True)
class Dimension:
    name: str
    type: str = "string"


@dataclass(frozen=True)
class Metric:
    type: str  # a METRIC_TYPES key
    name: str
    field_name: str | None = None  # None for count


@dataclass(frozen=True)
class Transform:
    name: str
    expression: str


@dataclass(frozen=True)
class InputFormat:
    type: str = "json"  # json, csv or tsv
    columns: tuple[str, ...] = ()  # csv/tsv: the fields of each line, in order
    delimiter: str = "\t"  # tsv
    list_delimiter: str = "\u0001"  # csv/tsv: a value holding it is a multi-value (list) value
    skip_header_rows: int = 0  # csv/tsv: lines skipped at the start of each message


@dataclass(frozen=True)
class SupervisorSpec:
    datasource: str
    topic: str
    bootstrap_servers: str
    consumer_properties: Mapping[str, str]
    timestamp_column: str = "timestamp"
    timestamp_format: str = "auto"
    dimensions: tuple[Dimension, ...] = ()
    dimension_exclusions: tuple[str, ...] = ()
    schema_discovery: bool = False  # dimensions empty or useSchemaDiscovery: every field is a column
    segment_granularity: str = "HOUR"
    query_granularity: str = "NONE"
    rollup: bool = False
    metrics: tuple[Metric, ...] = ()
    transforms: tuple[Transform, ...] = ()
    filter: Mapping | None = None  # transformSpec.filter, Druid's native filter JSON
    input_format: InputFormat = InputFormat()
    late_rejection_period_ms: int | None = None
    late_rejection_start_ms: int | None = None
    early_rejection_period_ms: int | None = None
    task_count: int = 1  # task groups: partition p is read by group p % task_count
    replicas: int = 1  # identical tasks per group; the first to publish a range wins (exactly once)
    task_duration_ms: int = 3_600_000
    use_earliest_offset: bool = False
    max_rows_in_memory: int = 150_000
    max_rows_per_segment: int = 5_000_000
    max_parse_exceptions: int = 2**31 - 1
    offset_fetch_period_ms: int = 30_000  # how often the leader asks the broker for latest offsets (lag)
    raw: Mapping = field(default_factory=dict, compare=False)  # the spec as given, for GET and sys

    @property
    def id(self) -> str:
        """As Druid: a Kafka supervisor's id is its datasource."""
        return self.datasource

    def to_json(self) -> dict:
        return json.loads(json.dumps(self.raw))

    def redacted_json(self) -> dict:
        """The spec with secret-looking consumer properties (passwords, JAAS configs, keys)
        masked, for places read by more people than may change it (sys.supervisors)."""
        out = self.to_json()
        io = (out.get("spec") or out).get("ioConfig") or {}
        props = io.get("consumerProperties") or {}
        for key in props:
            if _SECRET.search(key):
                props[key] = "<redacted>"
        return out


def _object(value, path: str) -> dict:
    if not isinstance(value, dict):
        raise SupervisorSpecError(f"{path} must be a JSON object, got {type(value).__name__}")
    return value


def _check_keys(obj: dict, path: str, allowed: tuple[str, ...], unsupported: Mapping[str, str] = {}) -> None:
    for key in obj:
        if key in unsupported:
            raise SupervisorSpecError(f"{path}.{key} is not supported yet: {unsupported[key]}")
        if key not in allowed:
            raise SupervisorSpecError(
                f"unknown key '{key}' in {path}; allowed keys there: {', '.join(allowed)}")


def _string(obj: dict, key: str, path: str, default: str | None = None, required: bool = False) -> str | None:
    if key not in obj:
        if required:
            raise SupervisorSpecError(f"{path}.{key} is required")
        return default
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        raise SupervisorSpecError(f"{path}.{key} must be a non-empty string, got {json.dumps(value)}")
    return value


def _int(obj: dict, key: str, path: str, default: int, minimum: int = 1) -> int:
    if key not in obj:
        return default
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SupervisorSpecError(f"{path}.{key} must be an integer >= {minimum}, got {json.dumps(value)}")
    return value


def _bool(obj: dict, key: str, path: str, default: bool) -> bool:
    if key not in obj:
        return default
    value = obj[key]
    if not isinstance(value, bool):
        raise SupervisorSpecError(f"{path}.{key} must be true or false, got {json.dumps(value)}")
    return value


def _period_ms(obj: dict, key: str, path: str, default: int) -> int:
    text = _string(obj, key, path)
    if text is None:
        return default
    try:
        period = Period.parse(text)
    except ValueError as e:
        raise SupervisorSpecError(f"{path}.{key} must be an ISO-8601 period such as PT1H, got '{text}' ({e})") from None
    if period.has_calendar_part or period.is_zero:
        raise SupervisorSpecError(f"{path}.{key} must be a positive fixed period (days, hours, minutes, seconds), "
                                  f"got '{text}'")
    return period.fixed_millis


def _granularity(obj: dict, key: str, path: str, default: str) -> str:
    if key not in obj:
        return default
    try:
        Granularity.parse(obj[key])
    except (ValueError, TypeError) as e:
        raise SupervisorSpecError(f"{path}.{key} is not a granularity: {e}") from None
    if not isinstance(obj[key], str):
        raise SupervisorSpecError(f"{path}.{key} must be a granularity name such as HOUR or DAY")
    return obj[key].upper()


def parse_supervisor_spec(value) -> SupervisorSpec:
    """The spec of ``POST /druid/indexer/v1/supervisor``, checked; raises SupervisorSpecError."""
    top = _object(value, "the supervisor spec")
    kind = top.get("type")
    if kind != "kafka":
        raise SupervisorSpecError(f"type must be \"kafka\" (the only supervisor type strata runs), got {json.dumps(kind)}")
    if "spec" in top:
        _check_keys(top, "the supervisor spec", ("type", "spec", "context", "suspended"))
        spec, base = _object(top["spec"], "spec"), "spec"
        _check_keys(spec, base, ("dataSchema", "ioConfig", "tuningConfig"))
    else:
        _check_keys(top, "the supervisor spec", ("type", "dataSchema", "ioConfig", "tuningConfig", "context",
                                                 "suspended"))
        spec, base = top, "the supervisor spec"
    if "dataSchema" not in spec or "ioConfig" not in spec:
        raise SupervisorSpecError(f"{base} needs dataSchema and ioConfig")
    schema = _data_schema(_object(spec["dataSchema"], f"{base}.dataSchema"), f"{base}.dataSchema")
    io = _io_config(_object(spec["ioConfig"], f"{base}.ioConfig"), f"{base}.ioConfig")
    tuning = _tuning_config(_object(spec.get("tuningConfig", {}), f"{base}.tuningConfig"), f"{base}.tuningConfig")
    return SupervisorSpec(**schema, **io, **tuning, raw=top)


def _data_schema(obj: dict, path: str) -> dict:
    _check_keys(obj, path, ("dataSource", "timestampSpec", "dimensionsSpec", "granularitySpec", "metricsSpec",
                            "transformSpec"))
    datasource = _string(obj, "dataSource", path, required=True)
    if not _ID.match(datasource):
        raise SupervisorSpecError(f"{path}.dataSource '{datasource}' may hold letters, digits, '_', '-' and '.' "
                                  "and must not start with '.' or '-'")
    out: dict = {"datasource": datasource}
    ts = _object(obj.get("timestampSpec", {}), f"{path}.timestampSpec")
    _check_keys(ts, f"{path}.timestampSpec", ("column", "format"),
                {"missingValue": "every row must carry its timestamp"})
    out["timestamp_column"] = _string(ts, "column", f"{path}.timestampSpec", "timestamp")
    fmt = _string(ts, "format", f"{path}.timestampSpec", "auto")
    if fmt.lower() not in _TIMESTAMP_FORMATS:
        raise SupervisorSpecError(f"{path}.timestampSpec.format must be one of {', '.join(_TIMESTAMP_FORMATS)}, "
                                  f"got '{fmt}'")
    out["timestamp_format"] = fmt.lower()
    out.update(_dimensions(_object(obj.get("dimensionsSpec", {}), f"{path}.dimensionsSpec"), f"{path}.dimensionsSpec",
                           out["timestamp_column"]))
    gran = _object(obj.get("granularitySpec", {}), f"{path}.granularitySpec")
    _check_keys(gran, f"{path}.granularitySpec", ("type", "segmentGranularity", "queryGranularity", "rollup"))
    if gran.get("type", "uniform") != "uniform":
        raise SupervisorSpecError(f"{path}.granularitySpec.type must be \"uniform\", got {json.dumps(gran['type'])}")
    out["segment_granularity"] = _granularity(gran, "segmentGranularity", f"{path}.granularitySpec", "HOUR")
    out["query_granularity"] = _granularity(gran, "queryGranularity", f"{path}.granularitySpec", "NONE")
    if out["query_granularity"] == "ALL":
        raise SupervisorSpecError(f"{path}.granularitySpec.queryGranularity ALL would give every row one timestamp; "
                                  "use NONE or a period such as MINUTE or HOUR")
    # Druid's default for rollup is true, but without metrics there is nothing to roll up into:
    # rollup applies when it is true and metricsSpec is given (or rollup is said explicitly).
    out["metrics"] = _metrics(obj.get("metricsSpec", []), f"{path}.metricsSpec")
    out["rollup"] = _bool(gran, "rollup", f"{path}.granularitySpec", bool(out["metrics"]))
    if out["rollup"] and not out["metrics"]:
        raise SupervisorSpecError(f"{path}.granularitySpec.rollup is true but {path}.metricsSpec is empty; add "
                                  "metrics (e.g. {\"type\": \"count\", \"name\": \"count\"}) or set rollup false")
    names = {d.name for d in out["dimensions"]}
    for m in out["metrics"]:
        if m.name in names:
            raise SupervisorSpecError(f"{path}.metricsSpec: '{m.name}' is both a dimension and a metric; rename one")
        if m.name in ("__time", out["timestamp_column"]):
            raise SupervisorSpecError(f"{path}.metricsSpec: a metric cannot be named '{m.name}' (the time column)")
    out.update(_transform_spec(_object(obj.get("transformSpec", {}), f"{path}.transformSpec"),
                               f"{path}.transformSpec"))
    return out


def _metrics(listed, path: str) -> tuple[Metric, ...]:
    if not isinstance(listed, list):
        raise SupervisorSpecError(f"{path} must be a list of aggregators")
    out: list[Metric] = []
    for i, m in enumerate(listed):
        where = f"{path}[{i}]"
        m = _object(m, where)
        kind = _string(m, "type", where, required=True)
        if kind in _SKETCH_METRICS:
            raise SupervisorSpecError(f"{where}.type '{kind}' is not supported for streaming: strata stores approximate "
                                      "distinct counts finalized, and those of two micro-batches cannot be merged; "
                                      "keep the column as a dimension and count distinct values at query time")
        if kind not in METRIC_TYPES:
            raise SupervisorSpecError(f"{where}.type must be one of {', '.join(METRIC_TYPES)}, got '{kind}'")
        if kind == "count":
            _check_keys(m, where, ("type", "name"))
            out.append(Metric(kind, _string(m, "name", where, required=True)))
            continue
        _check_keys(m, where, ("type", "name", "fieldName"), {"expression": "use a transformSpec transform and name "
                                                                            "it in fieldName"})
        out.append(Metric(kind, _string(m, "name", where, required=True), _string(m, "fieldName", where,
                                                                                   required=True)))
    names = [m.name for m in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SupervisorSpecError(f"{path} names {', '.join(dup)} more than once")
    return tuple(out)


def _transform_spec(obj: dict, path: str) -> dict:

    _check_keys(obj, path, ("transforms", "filter"))
    listed = obj.get("transforms", [])
    if not isinstance(listed, list):
        raise SupervisorSpecError(f"{path}.transforms must be a list of {{\"type\": \"expression\", \"name\", "
                                  "\"expression\"}} objects")
    transforms: list[Transform] = []
    for i, t in enumerate(listed):
        where = f"{path}.transforms[{i}]"
        t = _object(t, where)
        _check_keys(t, where, ("type", "name", "expression"))
        if t.get("type", "expression") != "expression":
            raise SupervisorSpecError(f"{where}.type must be \"expression\", got {json.dumps(t.get('type'))}")
        name = _string(t, "name", where, required=True)
        text = _string(t, "expression", where, required=True)
        try:
            parse_expression(text)
        except ValidationError as e:
            raise SupervisorSpecError(f"{where}.expression: {e}") from None
        transforms.append(Transform(name, text))
    names = [t.name for t in transforms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SupervisorSpecError(f"{path}.transforms names {', '.join(dup)} more than once")
    flt = obj.get("filter")
    if flt is not None:
        try:
            filter_from_json(_object(flt, f"{path}.filter"))
        except SupervisorSpecError:
            raise
        except (ValidationError, KeyError, TypeError) as e:
            raise SupervisorSpecError(f"{path}.filter: {e}") from None
    return {"transforms": tuple(transforms), "filter": flt}


def _input_format(obj: dict, path: str) -> InputFormat:
    kind = obj.get("type")
    if kind not in _INPUT_FORMATS:
        raise SupervisorSpecError(f"{path}.type must be one of {', '.join(_INPUT_FORMATS)}, got {json.dumps(kind)}")
    if kind == "json":
        _check_keys(obj, path, ("type", "keepNullColumns", "flattenSpec"))
        if obj.get("flattenSpec"):
            raise SupervisorSpecError(f"{path}.flattenSpec is not supported yet; nested objects are stored "
                                      "as JSON columns")
        return InputFormat()
    _check_keys(obj, path, ("type", "columns", "findColumnsFromHeader", "listDelimiter", "skipHeaderRows")
                + (("delimiter",) if kind == "tsv" else ()))
    if _bool(obj, "findColumnsFromHeader", path, False):
        raise SupervisorSpecError(f"{path}.findColumnsFromHeader true is not supported for streaming (each message "
                                  "would need its own header); list the fields in columns")
    columns = obj.get("columns")
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise SupervisorSpecError(f"{path}.columns must be a non-empty list of column names (the fields of each line)")
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise SupervisorSpecError(f"{path}.columns lists {', '.join(dup)} more than once")
    delimiter = obj.get("delimiter", "\t")
    list_delimiter = obj.get("listDelimiter", "\u0001")
    for key, value in (("delimiter", delimiter), ("listDelimiter", list_delimiter)):
        if not isinstance(value, str) or not value or "\n" in value or "\r" in value:
            raise SupervisorSpecError(f"{path}.{key} must be a non-empty string without line breaks, got "
                                      f"{json.dumps(value)}")
    if kind == "tsv" and delimiter == list_delimiter:
        raise SupervisorSpecError(f"{path}.delimiter and listDelimiter must differ")
    return InputFormat(kind, tuple(columns), delimiter, list_delimiter,
                       _int(obj, "skipHeaderRows", path, 0, minimum=0))


def _dimensions(obj: dict, path: str, timestamp_column: str) -> dict:
    _check_keys(obj, path, ("dimensions", "dimensionExclusions", "useSchemaDiscovery", "includeAllDimensions"))
    listed = obj.get("dimensions", [])
    if not isinstance(listed, list):
        raise SupervisorSpecError(f"{path}.dimensions must be a list of names or {{\"type\", \"name\"}} objects")
    dims: list[Dimension] = []
    for i, d in enumerate(listed):
        where = f"{path}.dimensions[{i}]"
        if isinstance(d, str):
            dims.append(Dimension(d))
            continue
        d = _object(d, where)
        _check_keys(d, where, ("type", "name", "createBitmapIndex", "multiValueHandling"))
        name = _string(d, "name", where, required=True)
        kind = (_string(d, "type", where, "string") or "string").lower()
        if kind not in _DIMENSION_TYPES:
            raise SupervisorSpecError(f"{where}.type must be one of {', '.join(_DIMENSION_TYPES)}, got '{kind}'")
        dims.append(Dimension(name, kind))
    names = [d.name for d in dims]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SupervisorSpecError(f"{path}.dimensions lists {', '.join(dup)} more than once")
    if timestamp_column in names:
        raise SupervisorSpecError(f"{path}.dimensions lists the timestamp column '{timestamp_column}'; remove it")
    exclusions = obj.get("dimensionExclusions", [])
    if not isinstance(exclusions, list) or not all(isinstance(x, str) for x in exclusions):
        raise SupervisorSpecError(f"{path}.dimensionExclusions must be a list of column names")
    discovery = _bool(obj, "useSchemaDiscovery", path, False) or not dims
    return {"dimensions": tuple(dims), "dimension_exclusions": tuple(exclusions), "schema_discovery": discovery}


def _io_config(obj: dict, path: str) -> dict:
    _check_keys(obj, path, ("type", "topic", "consumerProperties", "inputFormat", "taskCount", "replicas",
                            "taskDuration", "useEarliestOffset", "startDelay", "period", "completionTimeout",
                            "pollTimeout", "lateMessageRejectionPeriod", "earlyMessageRejectionPeriod",
                            "lateMessageRejectionStartDateTime"),
                {"topicPattern": "name one topic in ioConfig.topic"})
    if obj.get("type", "kafka") != "kafka":
        raise SupervisorSpecError(f"{path}.type must be \"kafka\", got {json.dumps(obj['type'])}")
    topic = _string(obj, "topic", path, required=True)
    props = _object(obj.get("consumerProperties", {}), f"{path}.consumerProperties")
    for key, value in props.items():
        if not isinstance(value, (str, int, bool)):
            raise SupervisorSpecError(f"{path}.consumerProperties.{key} must be a string, number or boolean")
    servers = _string(props, "bootstrap.servers", f"{path}.consumerProperties", required=True)
    for key in ("group.id", "enable.auto.commit", "auto.offset.reset"):
        if key in props:
            # Offsets are strata's to track (in the metadata DB, with the segments): a consumer
            # group's committed offsets would be a second truth that can disagree.
            raise SupervisorSpecError(f"{path}.consumerProperties.{key} is managed by strata (tasks assign and seek "
                                      "to the offsets stored with the published segments); remove it")
    input_format = _input_format(_object(obj.get("inputFormat", {"type": "json"}), f"{path}.inputFormat"),
                                 f"{path}.inputFormat")
    if "lateMessageRejectionPeriod" in obj and "lateMessageRejectionStartDateTime" in obj:
        raise SupervisorSpecError(f"{path}: give only one of lateMessageRejectionPeriod and "
                                  "lateMessageRejectionStartDateTime (as in Druid)")
    late_start = None
    if "lateMessageRejectionStartDateTime" in obj:
        text = _string(obj, "lateMessageRejectionStartDateTime", path)
        try:
            late_start = parse_instant(text)
        except ValidationError as e:
            raise SupervisorSpecError(f"{path}.lateMessageRejectionStartDateTime: {e}") from None
    return {"topic": topic, "bootstrap_servers": servers,
            "consumer_properties": {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in props.items()},
            "task_count": _int(obj, "taskCount", path, 1), "replicas": _int(obj, "replicas", path, 1),
            "task_duration_ms": _period_ms(obj, "taskDuration", path, 3_600_000),
            "use_earliest_offset": _bool(obj, "useEarliestOffset", path, False), "input_format": input_format,
            "late_rejection_period_ms": _optional_period_ms(obj, "lateMessageRejectionPeriod", path),
            "early_rejection_period_ms": _optional_period_ms(obj, "earlyMessageRejectionPeriod", path),
            "late_rejection_start_ms": late_start}


def _optional_period_ms(obj: dict, key: str, path: str) -> int | None:
    return _period_ms(obj, key, path, 0) if key in obj else None


def _tuning_config(obj: dict, path: str) -> dict:
    _check_keys(obj, path, ("type", "maxRowsInMemory", "maxRowsPerSegment", "maxParseExceptions",
                            "intermediatePersistPeriod", "handoffConditionTimeout", "maxSavedParseExceptions",
                            "logParseExceptions", "resetOffsetAutomatically", "offsetFetchPeriod"))
    if obj.get("type", "kafka") != "kafka":
        raise SupervisorSpecError(f"{path}.type must be \"kafka\", got {json.dumps(obj['type'])}")
    _period_ms(obj, "intermediatePersistPeriod", path, 600_000)
    return {"max_rows_in_memory": _int(obj, "maxRowsInMemory", path, 150_000),
            "max_rows_per_segment": _int(obj, "maxRowsPerSegment", path, 5_000_000),
            "max_parse_exceptions": _int(obj, "maxParseExceptions", path, 2**31 - 1, minimum=0),
            # Druid raises a period under PT5S to PT5S; strata allows down to PT1S (tests, small
            # clusters) and raises anything shorter to that, as Druid does to its floor.
            "offset_fetch_period_ms": max(_period_ms(obj, "offsetFetchPeriod", path, 30_000), 1_000)}
