"""The JSON functions of an ingestion SELECT, run in Spark with strata's own semantics.

Spark's built-ins disagree with Druid's JSON functions in ways that change stored data (its
parse_json turns 955.00 into 955, its to_json drops null members), so PARSE_JSON, TRY_PARSE_JSON,
JSON_VALUE, JSON_QUERY, JSON_OBJECT and TO_JSON_STRING become Arrow UDFs over ``common/json``, the
functions queries use. Inside Spark a COMPLEX<json> value is its compact JSON text; the builder
stores such output columns as nested columns (``IngestionStatement.json_columns``).

The UDF bodies take and return Arrow arrays and carry no type hints: arrow_udf reads hints to pick
its calling convention, and this module's postponed (string) annotations would confuse it.
"""

from __future__ import annotations

import json

import pyarrow as pa

UDF_PREFIX = "strata_"
# JSON_VALUE's RETURNING type -> (UDF suffix, Spark type, strata type name)
VALUE_TYPES = {"VARCHAR": ("string", "string", "STRING"), "BIGINT": ("bigint", "bigint", "LONG"),
               "DOUBLE": ("double", "double", "DOUBLE")}


def _path(p: pa.Array) -> str:
    """The path argument: a literal, so every row holds the same text."""
    return p[0].as_py() if len(p) else "$"


def parse_json_text(s):
    from common.errors import ValidationError
    from common.json.json_functions import parse_json

    out = parse_json(s, strict=False)
    bad = [t for t, v in zip(s.to_pylist(), out.to_pylist()) if t is not None and v is None]
    if bad:  # a row of a Spark batch means nothing to the user: quote the text instead
        try:
            json.loads(bad[0])
            reason = "nested too deeply"
        except ValueError as exc:
            reason = getattr(exc, "msg", str(exc))
        except RecursionError:
            reason = "nested too deeply"
        raise ValidationError(f"PARSE_JSON: {bad[0][:80]!r} is not valid JSON ({reason}); use TRY_PARSE_JSON to "
                              f"get NULL for such values ({len(bad)} in this batch)")
    return out


def try_parse_json_text(s):
    from common.json.json_functions import parse_json

    return parse_json(s, strict=False)


def json_query_text(j, p):
    from common.json.json_functions import json_query

    return json_query(j, _path(p))


def to_json_string_text(v, kind):
    """``kind`` is 'json' when ``v`` holds COMPLEX<json> text, else ``v`` is a plain value."""
    from common.json.json_functions import to_json_string

    return to_json_string(v, _path(kind) == "json")


def _json_value(type_name: str):
    def run(j, p):
        from common.json.path_steps import json_values
        from common.types.column_type import ColumnType

        return json_values(j, _path(p), ColumnType.parse(type_name))

    return run


def json_object_text(values, json_keys):
    """An object per row from a struct of the pairs; members named in ``json_keys`` (a JSON list)
    hold COMPLEX<json> text and are parsed, the rest are plain values. Null members stay null."""
    from common.json.json_functions import dumps

    parsed_keys = set(json.loads(_path(json_keys)))
    names = [values.type.field(i).name for i in range(values.type.num_fields)]
    columns = [values.field(i).to_pylist() for i in range(len(names))]
    out = []
    for row in range(len(values)):
        obj = {}
        for name, col in zip(names, columns):
            v = col[row]
            obj[name] = json.loads(v) if name in parsed_keys and isinstance(v, str) else v
        out.append(dumps(obj))
    return pa.array(out, pa.string())


def register(spark) -> None:
    """Register the UDFs on ``spark`` under the names ``spark_sql`` rewrites the functions to."""
    from pyspark.sql.functions import arrow_udf

    spark.udf.register(f"{UDF_PREFIX}parse_json", arrow_udf(parse_json_text, "string"))
    spark.udf.register(f"{UDF_PREFIX}try_parse_json", arrow_udf(try_parse_json_text, "string"))
    spark.udf.register(f"{UDF_PREFIX}json_query", arrow_udf(json_query_text, "string"))
    spark.udf.register(f"{UDF_PREFIX}to_json_string", arrow_udf(to_json_string_text, "string"))
    spark.udf.register(f"{UDF_PREFIX}json_object", arrow_udf(json_object_text, "string"))
    for suffix, spark_type, type_name in VALUE_TYPES.values():
        spark.udf.register(f"{UDF_PREFIX}json_value_{suffix}", arrow_udf(_json_value(type_name), spark_type))


__all__ = ["UDF_PREFIX", "VALUE_TYPES", "register"]
