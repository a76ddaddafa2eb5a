"""Druid's nested-columns documentation, reproduced through the cluster: the example data is
ingested by a Spark task with the doc's own SQL-based ingestion statement (an EXTERN whose
signature types shipTo and details as COMPLEX<json>), and every example query of the doc runs
through the broker with the ADBC Flight SQL driver, its result checked against the result the doc
publishes (``nested_columns_doc.json`` holds the doc's queries and results verbatim).

Where strata's answer differs from the published one on purpose, the test says so and checks
the documented reason, never a weaker assertion:
- Druid 24 listed a table's columns sorted by name; strata keeps the ingestion order. The same
  columns with the same types are checked, and the order separately.
- The doc ran with Druid's legacy null handling, which prints NULL strings as ''; JSON_VALUE of an
  object is NULL (the doc's text says so), which is what SQL-compatible Druid and strata return.
- Calcite numbered the doc's PARSE_JSON columns EXPR$0, EXPR$2, EXPR$3; strata numbers them in order.
- The result published for the JSON_KEYS / JSON_PATHS query is a copy of the previous query's
  table (four columns of {"x":"y"}), so that query is checked against the data file itself.
- JSON_OBJECT's key order in Druid comes from a Java HashMap; objects are compared as JSON values.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pyarrow as pa
import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
EXAMPLE = os.path.join(DATA, "nested-example-data.json")
with open(os.path.join(os.path.dirname(__file__), "nested_columns_doc.json"), encoding="utf-8") as _f:
    DOC = json.load(_f)["queries"]

# Twelve Spark tasks are submitted at once (two run at a time); the first test waits for them all.
pytestmark = [pytest.mark.skipif(not os.path.isfile(EXAMPLE), reason="shared test data not found"),
              pytest.mark.timeout(1800)]

# The doc's SQL-based ingestion, reading the local copy of the file instead of static.imply.io.
SIGNATURE = ('[{"name":"time","type":"string"},{"name":"product","type":"string"},'
             '{"name":"department","type":"string"},{"name":"shipTo","type":"COMPLEX<json>"},'
             '{"name":"details","type":"COMPLEX<json>"}]')
INGEST = f"""REPLACE INTO nested_data_example OVERWRITE ALL
SELECT
  TIME_PARSE("time") as __time,
  product,
  department,
  shipTo,
  details
FROM (
  SELECT * FROM
  TABLE(
    EXTERN(
      '{{"type":"local","files":["{EXAMPLE}"]}}',
      '{{"type":"json"}}',
      '{SIGNATURE}'
    )
  )
)
PARTITIONED BY ALL"""


def wait_count(cluster, datasource: str, want: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, f"SELECT COUNT(*) AS c FROM {datasource}")
            if got == [{"c": want}]:
                return
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        time.sleep(0.2)
    raise AssertionError(f"{datasource}: wanted {want} rows, last got {got}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Two warm task drivers (the runner starts two tasks at a time): each Spark session starts once
    # for the module's ten INSERTs, not once per task.
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("nested-docs")), historicals=1,
                        coordinator={"warm_task_drivers": 2})
    yield c
    c.stop()


def submit(cluster, sql: str) -> str:
    table, _ = cluster.client.sql(sql)
    return table.column("task_id")[0].as_py()


def wait_task(cluster, task_id: str, timeout_s: float = 1500.0):
    deadline = time.monotonic() + timeout_s
    while True:
        task = cluster.client.task(task_id)
        if task.state in ("SUCCESS", "FAILED", "CANCELED"):
            return task
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {task.state} after {timeout_s}s")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def ingested(cluster, tmp_path_factory):
    """Every ingestion of this module, submitted at once (the coordinator runs two at a time):
    datasource -> finished task."""
    statements = {"nested_data_example": INGEST}
    statements.update(_file_statements())
    statements.update(_json_expression_statements(str(tmp_path_factory.mktemp("parquet"))))
    ids = {ds: submit(cluster, sql) for ds, sql in statements.items()}
    return {ds: wait_task(cluster, task_id) for ds, task_id in ids.items()}


@pytest.fixture(scope="module")
def example(cluster, ingested):
    task = ingested["nested_data_example"]
    assert task.state == "SUCCESS", task.error
    wait_count(cluster, "nested_data_example", 5)


@pytest.fixture(scope="module")
def flight(cluster, example):
    import adbc_driver_flightsql.dbapi as adbc

    conn = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    yield conn
    conn.close()


def query(flight, sql: str) -> tuple[list[str], list[str], list[list]]:
    """(column names, SQL type of each column as the doc names it, rows) of a query over Flight SQL."""
    with flight.cursor() as cur:
        cur.execute(sql)
        table = cur.fetch_arrow_table()
    kinds = [_sql_type(f.type) for f in table.schema]
    columns = []
    for f, col in zip(table.schema, table.columns):
        if getattr(f.type, "extension_name", None):
            col = pa.chunked_array([c.storage for c in col.chunks], f.type.storage_type)
        values = col.to_pylist()
        if pa.types.is_timestamp(col.type):
            values = [None if v is None else v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
                      + f"{v.microsecond // 1000:03d}Z" for v in values]
        columns.append(values)
    return table.column_names, kinds, [list(r) for r in zip(*columns)]


def _sql_type(t: pa.DataType) -> str:
    if getattr(t, "extension_name", None):
        return "OTHER" if t.extension_name == "arrow.json" else t.extension_name  # COMPLEX<json>
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    return str(t)


def published(name: str) -> tuple[str, list[str], list[str], list[list]]:
    doc = DOC[name]
    result = doc["result"]
    return doc["sql"], result[0], result[2], result[3:]


def test_display_data_types(flight):
    sql, names, types, want = published("display_data_types")
    got_names, got_types, got = query(flight, sql)
    assert (got_names, got_types) == (names, types)
    assert sorted(got, key=lambda r: (r[1] != "__time", r[1])) == want  # Druid 24 sorted columns by name
    assert [r[1] for r in got] == ["__time", "product", "department", "shipTo", "details"]  # ingestion order


def test_retrieve_json_data(flight):
    sql, names, types, want = published("retrieve_json_data")
    got_names, got_types, got = query(flight, sql)
    order = [got_names.index(n) for n in names]  # Druid 24 sorted columns by name
    assert [got_names[i] for i in order] == names and [got_types[i] for i in order] == types
    assert [[r[i] for i in order] for r in got] == want  # the JSON text byte for byte, 955.00 stored as 955.0


def test_extract_nested_data_elements(flight):
    sql, names, types, want = published("extract_nested_data_elements")
    assert query(flight, sql) == (names, types, want)


def test_extract_nested_data_elements_as_suggested_types(flight):
    sql, names, types, want = published("extract_as_suggested_types")
    got_names, got_types, got = query(flight, sql)
    # RETURNING DECIMAL is planned as DOUBLE (Druid's native type row says DOUBLE too).
    assert (got_names, got_types) == (names, [t.replace("DECIMAL", "DOUBLE") for t in types])
    assert got == want


def test_grouping_and_filtering(flight):
    sql, names, types, want = published("grouping_and_filtering")
    assert query(flight, sql) == (names, types, want)


def test_json_value_and_json_query_of_objects_and_arrays(flight):
    sql, names, types, want = published("json_value_vs_json_query")
    got_names, got_types, got = query(flight, sql)
    assert (got_names, got_types) == (names, types)
    # Legacy null handling printed the NULL of JSON_VALUE over an object or array as ''.
    assert [r[0] for r in want] == [""] * 5 and [r[2] for r in want] == [""] * 5
    assert got == [[None, r[1], None, r[3]] for r in want]


def test_combine_json_inputs_into_one_object(flight):
    sql, names, types, want = published("combine_json_inputs")
    got_names, got_types, got = query(flight, sql)
    assert (got_names, got_types) == (names, types)
    assert [[json.loads(v) for v in r] for r in got] == [[json.loads(v) for v in r] for r in want]
    # Inside each object the stored documents keep their own key order, as in the doc.
    assert [json.dumps(json.loads(r[0])["shipTo"], separators=(",", ":")) for r in got] == \
        [json.dumps(json.loads(r[0])["shipTo"], separators=(",", ":")) for r in want]


def test_parse_and_deserialize(flight):
    sql, names, types, want = published("parse_and_deserialize")
    got_names, got_types, got = query(flight, sql)
    assert got_names == ["EXPR$0", "EXPR$1", "EXPR$2"] and len(names) == 3  # Calcite skipped EXPR$1
    assert got_types == types and got == want


def test_examine_json_object_schema(flight):
    sql, _, _, published_rows = published("examine_json_object_schema")
    assert published_rows == DOC["parse_and_deserialize"]["result"][3:] or \
        published_rows[0][0] == '{"x":"y"}'  # the doc shows the previous query's table here
    got_names, got_types, got = query(flight, sql)
    with open(EXAMPLE, encoding="utf-8") as f:
        ship_to = [json.loads(line)["shipTo"] for line in f if line.strip()]
    paths = set()
    for doc in ship_to:
        paths |= {f"$.{k}" for k, v in doc.items() if isinstance(v, str)}
        paths |= {f"$.address.{k}" for k in doc["address"]}
        paths |= {f"$.phoneNumbers[{i}].{k}" for i, p in enumerate(doc["phoneNumbers"]) for k in p}
    assert got_names == ["EXPR$0", "EXPR$1", "EXPR$2"]
    assert got == [[sorted({k for d in ship_to for k in d}), sorted({k for d in ship_to for k in d["address"]}),
                    sorted(paths)]]


# ---- Druid's other nested test files, each ingested through the cluster and queried ------------

FILES = {
    "nested_simple": "nested-simple-test-data.json",
    "nested_types": "nested-types-test-data.json",
    "nested_array": "nested-array-test-data.json",
    "nested_numeric": "nested-numeric-test-data.json",
    "nested_all_types": "nested-all-types-test-data.json",
}


def _documents(name: str) -> list[dict]:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _key_path(path: str, key: str) -> str:
    plain = key.isidentifier() and key.isascii()
    return f"{path}.{key}" if plain else path + "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _scalar_paths(value, path: str = "$"):
    """Every path of a literal, including elements of arrays (an independent walk, not strata's)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _scalar_paths(v, _key_path(path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _scalar_paths(v, f"{path}[{i}]")
    elif value is not None:
        yield path


def _at(value, path_steps: list):
    for step in path_steps:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and step < len(value) else None
        else:
            value = value.get(step) if isinstance(value, dict) else None
    return value


def _steps(path: str) -> list:
    import re

    out = []
    for name, index, quoted in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]", path):
        out.append(name if name else int(index) if index else re.sub(r"\\(.)", r"\1", quoted))
    return out


def _as_varchar(v):
    """JSON_VALUE's VARCHAR of a literal (booleans are 1/0 in nested columns, as in Druid)."""
    if v is None or isinstance(v, (dict, list)):
        return None
    if isinstance(v, bool):
        return "1" if v else "0"
    return v if isinstance(v, str) else v


def _same(got, want) -> bool:
    if want is None or got is None or isinstance(want, str):
        return got == want
    return float(got) == float(want)  # numbers print as Druid prints them (3.0, 1e+20); compare values


def _file_statements() -> dict[str, str]:
    """Each file through a Spark task: every key but the timestamp as COMPLEX<json>."""
    out = {}
    for ds, name in FILES.items():
        keys = _keys(name)
        extend = ", ".join(['"timestamp" VARCHAR'] + [f'"{k}" TYPE(\'COMPLEX<json>\')' for k in keys])
        select = ", ".join(f'"{k}"' for k in keys)
        out[ds] = f"""INSERT INTO {ds}
            SELECT TIME_PARSE("timestamp") AS __time, {select}
            FROM TABLE(localfiles(files => ARRAY['{os.path.join(DATA, name)}'], format => 'json'))
                 EXTEND ({extend})
            PARTITIONED BY DAY"""
    return out


def _keys(name: str) -> list[str]:
    return list(dict.fromkeys(k for d in _documents(name) for k in d if k != "timestamp"))


@pytest.fixture(scope="module")
def nested_files(cluster, ingested):
    out = {}
    for ds, name in FILES.items():
        assert ingested[ds].state == "SUCCESS", f"{name}: {ingested[ds].error}"
        out[ds] = (_documents(name), _keys(name))
        wait_count(cluster, ds, len(out[ds][0]))
    return out


@pytest.mark.parametrize("ds", list(FILES))
def test_nested_file_documents_come_back_as_they_went_in(flight, nested_files, ds):
    docs, keys = nested_files[ds]
    names, types, got = query(flight, "SELECT " + ", ".join(f'"{k}"' for k in keys) + f" FROM {ds}")
    assert names == keys and set(types) == {"OTHER"}  # every column is COMPLEX<json>

    def canonical(row):
        return json.dumps(row, sort_keys=True)

    got_docs = sorted(canonical([None if v is None else json.loads(v) for v in r]) for r in got)
    assert got_docs == sorted(canonical([d.get(k) for k in keys]) for d in docs)


@pytest.mark.parametrize("ds", list(FILES))
def test_nested_file_every_literal_path_reads_as_json_value(flight, nested_files, ds):
    docs, keys = nested_files[ds]
    for key in keys:
        paths = list(dict.fromkeys(p for d in docs for p in _scalar_paths(d.get(key))))
        if not paths:
            continue
        sql = "SELECT __time, " + ", ".join(f"JSON_VALUE(\"{key}\", '{p}') AS \"p{i}\"" for i, p in enumerate(paths)) \
            + f", TO_JSON_STRING(\"{key}\") AS doc FROM {ds}"
        _, _, got = query(flight, sql)
        assert len(got) == len(docs)
        for row in got:
            doc = None if row[-1] is None else json.loads(row[-1])
            for p, value in zip(paths, row[1:-1]):
                want = _as_varchar(_at(doc, _steps(p)))
                assert _same(value, want), f"{ds}.{key} {p}: got {value!r}, want {want!r} in {doc}"


def test_nested_simple_group_by_and_filters_on_paths(flight, nested_files):
    docs, _ = nested_files["nested_simple"]
    _, _, got = query(flight, "SELECT JSON_VALUE(nest, '$.x') AS x, COUNT(*) AS n FROM nested_simple "
                              "GROUP BY 1 ORDER BY 1")
    from collections import Counter

    want = Counter(None if (d.get("nest") or {}).get("x") is None else str(d["nest"]["x"]) for d in docs)
    assert sorted(got, key=lambda r: (r[0] is not None, r[0] or "")) == \
        sorted([[k, v] for k, v in want.items()], key=lambda r: (r[0] is not None, r[0] or ""))
    _, _, got = query(flight, "SELECT COUNT(*) FROM nested_simple WHERE JSON_VALUE(nest, '$.x' RETURNING BIGINT) > 100")
    assert got == [[sum(1 for d in docs if isinstance((d.get("nest") or {}).get("x"), int) and d["nest"]["x"] > 100)]]
    _, _, got = query(flight, "SELECT COUNT(*) FROM nested_simple WHERE JSON_VALUE(nester, '$.y.c[1]' RETURNING BIGINT) = 2")
    assert got == [[sum(1 for d in docs if isinstance(d.get("nester"), dict)
                        and (d["nester"].get("y") or {}).get("c", [None, None])[1] == 2)]]


def test_nested_numeric_sums_and_mixed_paths(flight, nested_files):
    docs, _ = nested_files["nested_numeric"]
    nests = [d.get("nest") or {} for d in docs]
    _, _, got = query(flight, "SELECT SUM(JSON_VALUE(nest, '$.long' RETURNING BIGINT)), "
                              "SUM(JSON_VALUE(nest, '$.double' RETURNING DOUBLE)), "
                              "SUM(JSON_VALUE(nest, '$.mixed' RETURNING DOUBLE)) FROM nested_numeric")

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    assert got[0][0] == sum(n["long"] for n in nests if "long" in n)
    assert got[0][1] == pytest.approx(sum(n["double"] for n in nests if "double" in n))
    assert got[0][2] == pytest.approx(sum(num(n.get("mixed")) or 0 for n in nests))  # '200' counts, 'foo' does not


# ---- JSON made by the SELECT, text formats and Parquet into JSON columns ---------------------------

TSV = os.path.join(DATA, "nested-simple-test-data.tsv")
TSV_COLUMNS = ["timestamp", "dim", "nest", "nester", "variant", "list"]
# The doc's "Ingest a JSON string as COMPLEX<json>" row: shipTo and details as serialized JSON text.
DESERIALIZED_ROW = json.dumps({
    "time": "2022-06-13T10:10:35Z", "product": "Bike", "department": "Sports",
    "shipTo": json.dumps({"firstName": "Henry", "lastName": "Wuckert", "address": {
        "street": "5643 Jan Walk", "city": "Lake Bridget", "state": "HI", "country": "ME", "postalCode": "70204-2939"},
        "phoneNumbers": [{"type": "primary", "number": "593.475.0449 x86733"},
                         {"type": "secondary", "number": "638-372-1210"}]}),
    "details": '{"color":"ivory", "price":955.00}'})
MALFORMED = '2023-01-01\t{"a": 1}\n2023-01-01\t{"a": oops}\n2023-01-02\t[1, 2]\n'


def _extern(files_or_inline: dict, fmt: dict, signature: list[tuple[str, str]]) -> str:
    sig = json.dumps([{"name": n, "type": t} for n, t in signature]).replace("'", "''")
    return (f"TABLE(EXTERN('{json.dumps(files_or_inline)}', '{json.dumps(fmt)}', '{sig}'))")


def _json_expression_statements(tmp: str) -> dict[str, str]:
    import pyarrow.parquet as pq

    tsv = _extern({"type": "local", "files": [TSV]}, {"type": "tsv", "columns": TSV_COLUMNS},
                  [(c, "string") for c in TSV_COLUMNS])
    parquet_path = os.path.join(tmp, "structs.parquet")
    pq.write_table(_parquet_table(), parquet_path)
    malformed = _extern({"type": "inline", "data": MALFORMED}, {"type": "tsv", "columns": ["ts", "doc"]},
                        [("ts", "string"), ("doc", "COMPLEX<json>")])
    inline = _extern({"type": "inline", "data": DESERIALIZED_ROW + "\n"}, {"type": "json"},
                     [("time", "string"), ("product", "string"), ("department", "string"), ("shipTo", "string"),
                      ("details", "string")])
    return {
        # Druid's own tests turn the TSV's JSON text into JSON columns with parse_json transforms.
        "nested_simple_tsv": f"""INSERT INTO nested_simple_tsv
            SELECT TIME_PARSE("timestamp") AS __time, dim, PARSE_JSON(nest) AS nest, PARSE_JSON(nester) AS nester,
                   PARSE_JSON(variant) AS variant, PARSE_JSON(list) AS list
            FROM {tsv} PARTITIONED BY DAY""",
        # The doc's "Transform data during SQL-based ingestion" statement.
        "msq_nested_data_transform_example": INGEST.replace("REPLACE INTO nested_data_example", "REPLACE INTO "
                                                            "msq_nested_data_transform_example").replace(
            """  product,
  department,
  shipTo,
  details""", """  JSON_VALUE(shipTo, '$.firstName') as firstName,
  JSON_VALUE(shipTo, '$.lastName') as lastName,
  JSON_QUERY(shipTo, '$.address') as address,
  JSON_OBJECT('product':product,'details':details, 'department':department) as productDetails"""),
        # The doc's "Ingest a JSON string as COMPLEX<json>" statement, with its inline row.
        "deserialized_example": f"""REPLACE INTO deserialized_example OVERWRITE ALL
            WITH source AS (SELECT * FROM {inline})
            SELECT TIME_PARSE("time") AS __time, "product", "department", "shipTo", "details",
                   PARSE_JSON("shipTo") as "shipTo_parsed", PARSE_JSON("details") as "details_parsed"
            FROM source PARTITIONED BY DAY""",
        "parquet_structs": f"""INSERT INTO parquet_structs
            SELECT MILLIS_TO_TIMESTAMP(t) AS __time, s, l, m
            FROM TABLE(localfiles(files => ARRAY['{parquet_path}'], format => 'parquet'))
                 EXTEND (t BIGINT, s TYPE('COMPLEX<json>'), l TYPE('COMPLEX<json>'), m TYPE('COMPLEX<json>'))
            PARTITIONED BY DAY""",
        "malformed_json": f"""SET maxParseExceptions = 1; INSERT INTO malformed_json
            SELECT TIME_PARSE(ts) AS __time, doc FROM {malformed} PARTITIONED BY DAY""",
        "malformed_json_strict": f"""INSERT INTO malformed_json_strict
            SELECT TIME_PARSE(ts) AS __time, doc FROM {malformed} PARTITIONED BY DAY""",
    }


def _parquet_table() -> pa.Table:
    return pa.table({
        "t": pa.array([1672531200000, 1672617600000], pa.int64()),
        "s": pa.array([{"a": 1, "b": {"c": [1, 2]}}, {"a": None, "b": None}],
                      pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.list_(pa.int64()))]))])),
        "l": pa.array([[{"x": "p"}, {"x": "q"}], []], pa.list_(pa.struct([("x", pa.string())]))),
        "m": pa.array([[("k1", 1.5), ("k2", None)], None], pa.map_(pa.string(), pa.float64())),
    })


def _ready(cluster, ingested, ds: str, count: int) -> None:
    assert ingested[ds].state == "SUCCESS", f"{ds}: {ingested[ds].error}"
    wait_count(cluster, ds, count)


def test_tsv_json_text_through_parse_json(cluster, ingested, flight):
    with open(TSV, encoding="utf-8") as f:
        records = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    _ready(cluster, ingested, "nested_simple_tsv", len(records))
    names, types, got = query(flight, "SELECT dim, nest, nester, variant, list FROM nested_simple_tsv")
    assert types == ["VARCHAR", "OTHER", "OTHER", "OTHER", "OTHER"]
    want = [[r[1]] + [json.loads(v) if v else None for v in (r[2:] + [""] * 6)[:4]] for r in records]
    assert sorted(json.dumps([r[0]] + [None if v is None else json.loads(v) for v in r[1:]], sort_keys=True)
                  for r in got) == sorted(json.dumps(w, sort_keys=True) for w in want)
    # The parsed columns are nested columns: paths read as fields, group and filter.
    _, _, got = query(flight, "SELECT JSON_VALUE(nester, '$.y.c[2]' RETURNING BIGINT) AS c, COUNT(*) AS n "
                              "FROM nested_simple_tsv WHERE JSON_VALUE(nest, '$.x') IS NOT NULL GROUP BY 1 ORDER BY 1")
    from collections import Counter

    counts = Counter()
    for r in want:
        if r[1] is not None and isinstance(r[1], dict) and r[1].get("x") is not None:
            nester = r[2] if isinstance(r[2], dict) else {}
            c = (nester.get("y") or {}).get("c")
            counts[c[2] if isinstance(c, list) and len(c) > 2 else None] += 1
    assert got == sorted([[k, v] for k, v in counts.items()], key=lambda x: (x[0] is not None, x[0] or 0))
    seg = rows(cluster, "SELECT json_columns FROM sys.segments WHERE datasource = 'nested_simple_tsv'")
    assert all(json.loads(s["json_columns"])["nest"]["fields"] >= 1 for s in seg)


def test_doc_transform_during_sql_ingestion(cluster, ingested, flight):
    _ready(cluster, ingested, "msq_nested_data_transform_example", 5)
    names, types, got = query(flight, "SELECT firstName, lastName, address, productDetails "
                                      "FROM msq_nested_data_transform_example ORDER BY __time")
    assert types == ["VARCHAR", "VARCHAR", "OTHER", "OTHER"]
    with open(EXAMPLE, encoding="utf-8") as f:
        docs = sorted((json.loads(line) for line in f if line.strip()),
                      key=lambda d: d["time"].replace("2022-6-14", "2022-06-14"))
    assert [[r[0], r[1], json.loads(r[2]), json.loads(r[3])] for r in got] == [
        [d["shipTo"]["firstName"], d["shipTo"]["lastName"], d["shipTo"]["address"],
         {"product": d["product"], "details": d["details"], "department": d["department"]}] for d in docs]
    _, _, got = query(flight, "SELECT JSON_VALUE(productDetails, '$.details.price' RETURNING DOUBLE) AS p, "
                              "JSON_VALUE(address, '$.city') AS city FROM msq_nested_data_transform_example "
                              "WHERE JSON_VALUE(productDetails, '$.department') = 'Sports' ORDER BY 1")
    assert got == sorted([[float(d["details"]["price"]), d["shipTo"]["address"]["city"]] for d in docs
                          if d["department"] == "Sports"])


def test_doc_json_string_parsed_at_ingestion(cluster, ingested, flight):
    _ready(cluster, ingested, "deserialized_example", 1)
    names, types, got = query(flight, "SELECT shipTo, details, shipTo_parsed, details_parsed, "
                                      "JSON_VALUE(shipTo_parsed, '$.address.city') AS city, "
                                      "JSON_VALUE(details_parsed, '$.price') AS price FROM deserialized_example")
    row = json.loads(DESERIALIZED_ROW)
    assert types == ["VARCHAR", "VARCHAR", "OTHER", "OTHER", "VARCHAR", "VARCHAR"]
    assert got == [[row["shipTo"], row["details"], json.dumps(json.loads(row["shipTo"]), separators=(",", ":")),
                    '{"color":"ivory","price":955.0}', "Lake Bridget", "955.0"]]


def test_parquet_structs_lists_and_maps_into_json_columns(cluster, ingested, flight):
    _ready(cluster, ingested, "parquet_structs", 2)
    _, types, got = query(flight, "SELECT s, l, m, JSON_VALUE(s, '$.b.c[1]' RETURNING BIGINT) AS c, "
                                  "JSON_VALUE(l, '$[1].x') AS x, JSON_VALUE(m, '$.k1' RETURNING DOUBLE) AS k1 "
                                  "FROM parquet_structs ORDER BY __time")
    assert types[:3] == ["OTHER"] * 3
    assert [[None if v is None else json.loads(v) for v in r[:3]] + r[3:] for r in got] == [
        [{"a": 1, "b": {"c": [1, 2]}}, [{"x": "p"}, {"x": "q"}], {"k1": 1.5, "k2": None}, 2, "q", 1.5],
        [{"a": None, "b": None}, [], None, None, None, None]]


def test_malformed_json_is_a_parse_exception_with_line_and_reason(cluster, ingested, flight):
    _ready(cluster, ingested, "malformed_json", 2)
    report = json.loads(ingested["malformed_json"].report_json)
    assert report["parseExceptions"] == 1 and report["rowsWritten"] == 2
    text = json.dumps(report)
    assert "line 2" in text or '"line": 2' in text
    assert "invalid JSON" in text
    _, _, got = query(flight, "SELECT TO_JSON_STRING(doc) FROM malformed_json ORDER BY __time")
    assert got == [['{"a":1}'], ["[1,2]"]]
    strict = ingested["malformed_json_strict"]  # maxParseExceptions defaults to 0
    assert strict.state == "FAILED"
    assert "column 'doc' is COMPLEX<json> but holds invalid JSON" in strict.error and "maxParseExceptions" in strict.error


def test_json_value_without_returning_reads_the_stored_type_where_a_number_is_used(flight, nested_files):
    docs, _ = nested_files["nested_numeric"]
    nests = [d.get("nest") or {} for d in docs]
    names, types, got = query(flight, "SELECT SUM(JSON_VALUE(nest, '$.long')) AS l, SUM(JSON_VALUE(nest, '$.double')) AS d, "
                                      "COUNT(*) FILTER (WHERE JSON_VALUE(nest, '$.long') > 200) AS n, "
                                      "MIN(JSON_VALUE(nest, '$.long')) AS lo FROM nested_numeric")
    # The broker sees the segments' field types: $.long held only whole numbers, $.double fractions.
    assert types == ["BIGINT", "DOUBLE", "BIGINT", "BIGINT"]
    longs = [n["long"] for n in nests if "long" in n]
    assert got == [[sum(longs), pytest.approx(sum(n["double"] for n in nests if "double" in n)),
                    sum(1 for v in longs if v > 200), min(longs)]]
    _, types, _ = query(flight, "SELECT JSON_VALUE(nest, '$.long') AS l FROM nested_numeric LIMIT 1")
    assert types == ["VARCHAR"]  # no number asked for: Druid's VARCHAR
