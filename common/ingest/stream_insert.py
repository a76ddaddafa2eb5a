"""The INSERT a Kafka supervisor's micro-batch stands for (pure: spec -> SQL text).

The rows ``StreamRowRules`` kept, each with ``__time`` in epoch millis (already truncated to
queryGranularity), are typed and selected in the executors as this statement would type and
select them over those rows as JSON lines (services/ingestion/stream_segments.py reads its source's
declarations, ``*``, GROUP BY and aggregates), so streamed segments are typed and described as
batch ones:

- dimensions: the spec's (``EXTEND`` with their types), or discovered (``*`` with ``PARTIAL`` for
  the declared ones); the timestamp field itself is not a column (it became ``__time``);
- rollup: ``GROUP BY`` the time and the dimensions with one aggregate per metric (``COUNT(*)``,
  ``SUM``/``MIN``/``MAX`` of the field cast to BIGINT or DOUBLE), which is how a batch rollup
  INSERT is written, so the segments record their metrics (aggregator types in the manifest) the
  same way; without rollup each metric is the row's own value.
"""

from __future__ import annotations

from common.errors import ValidationError
from common.ingest.external_source import extend_column_type
from common.ingest.supervisor_spec import METRIC_TYPES, Metric, SupervisorSpec
from common.types.column_properties import storage_options
from common.types.column_type import ColumnType

_SQL_TYPES = {"string": "VARCHAR", "long": "BIGINT", "float": "DOUBLE", "double": "DOUBLE",
              "json": "TYPE('COMPLEX<json>')"}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _field_types(spec: SupervisorSpec) -> dict[str, str]:
    """Metric input fields -> the SQL type they are read as: BIGINT when only long metrics read
    them (Druid truncates fractions for those), else DOUBLE."""
    out: dict[str, str] = {}
    for m in spec.metrics:
        kind = METRIC_TYPES[m.type][1]
        if m.field_name is None:
            continue
        out[m.field_name] = "DOUBLE" if "DOUBLE" in (kind, out.get(m.field_name)) else "BIGINT"
    return out


def _metric_sql(m: Metric, rollup: bool) -> str:
    function, kind = METRIC_TYPES[m.type]
    if function == "COUNT":
        return f"COUNT(*) AS {_quote(m.name)}" if rollup else f"CAST(1 AS BIGINT) AS {_quote(m.name)}"
    value = f"CAST({_quote(m.field_name)} AS {kind})"
    return f"{function}({value}) AS {_quote(m.name)}" if rollup else f"{value} AS {_quote(m.name)}"


def micro_batch_sql(spec: SupervisorSpec, path: str) -> str:
    """The INSERT a micro-batch runs over its JSON lines file."""
    exclude = [spec.timestamp_column] + [c for c in spec.dimension_exclusions if c != spec.timestamp_column]
    args = [f"files => ARRAY[{_literal(path)}]", "format => 'json'"]
    fields = _field_types(spec)
    metrics = [_metric_sql(m, spec.rollup) for m in spec.metrics]
    dims = {d.name: d for d in spec.dimensions}
    if spec.schema_discovery:
        declared = [f'"__time" TIMESTAMP']
        declared += [f"{_quote(d.name)} {_SQL_TYPES[d.type]}" for d in spec.dimensions if d.type in _SQL_TYPES]
        declared += [f"{_quote(f)} {t}" for f, t in fields.items() if f not in dims]
        # Declared columns cannot be excluded as well; the timestamp field may be a metric's input.
        exclude = [c for c in exclude if c not in dims and c not in fields]
        if exclude:
            args.append(f"exclude => ARRAY[{', '.join(_literal(c) for c in exclude)}]")
        source = f"TABLE(localfiles({', '.join(args)})) PARTIAL ({', '.join(declared)})"
        select = ", ".join(['"__time"', "*", *metrics])
        group = " GROUP BY ALL" if spec.rollup else ""
    else:
        extend = ['"__time" TIMESTAMP']
        extend += [f"{_quote(d.name)} {_SQL_TYPES.get(d.type, 'VARCHAR')}" for d in spec.dimensions]
        extend += [f"{_quote(f)} {t}" for f, t in fields.items() if f not in dims]
        source = f"TABLE(localfiles({', '.join(args)})) EXTEND ({', '.join(extend)})"
        keys = ['"__time"'] + [_quote(d.name) for d in spec.dimensions]
        select = ", ".join(keys + metrics)
        group = f" GROUP BY {', '.join(keys)}" if spec.rollup else ""
    return f"INSERT INTO {_quote(spec.datasource)} SELECT {select} FROM {source}{group} " \
           f"PARTITIONED BY {spec.segment_granularity}"


def catalog_job_options(spec: SupervisorSpec, table: dict | None) -> dict:
    """What the catalog's definition of the supervisor's datasource adds to each micro-batch's
    job, as the broker adds it to an INSERT (services/broker/ingestion_submit.py): projections
    built into every segment, nested storage options of declared JSON columns, declared types as
    the provided schema of discovered columns, and for a sealed table its declared columns (the
    job refuses any other, naming it). ``IngestionJob`` field -> value; empty without an entry."""

    if not table:
        return {}
    props = table.get("properties") or {}
    columns = table.get("columns") or []
    out: dict = {}
    if props.get("projections"):
        out["projections"] = tuple(props["projections"])
    options = {c["name"]: storage_options(c) for c in columns}
    options = {name: opts for name, opts in options.items() if opts}
    if options:
        out["column_options"] = options
    if spec.schema_discovery:
        declared = {}
        for c in columns:
            if not c.get("sqlType"):
                continue
            try:
                declared[c["name"]] = extend_column_type(c["sqlType"], c["name"], "catalog")
            except ValidationError:
                declared[c["name"]] = ColumnType.parse(c["sqlType"])
        if declared:
            out["declared_types"] = declared
    if props.get("sealed"):
        declared = {c["name"] for c in columns}
        if not spec.schema_discovery:
            # The spec names every column: refuse before reading anything, as the broker refuses such an INSERT.
            undeclared = [n for n in [d.name for d in spec.dimensions] + [m.name for m in spec.metrics]
                          if n not in declared]
            if undeclared:
                raise ValidationError(
                    f"datasource {spec.datasource} is sealed and does not declare {', '.join(undeclared)}; add "
                    f"them to its catalog entry (ALTER TABLE {spec.datasource} ADD COLUMN ...) or drop them from "
                    "the supervisor spec's dimensionsSpec/metricsSpec")
        out["sealed_columns"] = tuple(sorted(declared))
    return out


__all__ = ["catalog_job_options", "micro_batch_sql"]
