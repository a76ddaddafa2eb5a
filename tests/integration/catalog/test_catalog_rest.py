"""The catalog REST API through a real coordinator's HTTP port: every endpoint, version conflicts,
concurrent writers, 400/404/405/409, the sync endpoints, flush and the discovery version key."""

from __future__ import annotations

import threading
import time

from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.store import SegmentRecord
from services.discovery.keys import CATALOG_VERSION_KEY
from tests.integration.catalog.conftest import basic

THREAD_DEADLINE_S = 30
DS_SPEC = {
    "type": "datasource",
    "properties": {"description": "edits", "segmentGranularity": "PT1H", "targetSegmentRows": 4000000,
                   "clusterKeys": [{"column": "channel"}, {"column": "added", "desc": True}],
                   "hiddenColumns": ["old"], "sealed": True},
    "columns": [{"name": "__time", "sqlType": "TIMESTAMP"}, {"name": "channel", "sqlType": "VARCHAR"},
                {"name": "added", "sqlType": "BIGINT", "properties": {"description": "bytes"}},
                {"name": "tags", "sqlType": "ARRAY<VARCHAR>"}, {"name": "payload", "sqlType": "COMPLEX<json>"},
                {"name": "page"}],
}
INLINE_SPEC = {"type": "inline", "properties": {"format": "csv", "data": ["a,b,1", "c,d,2"]},
               "columns": [{"name": "x", "sqlType": "VARCHAR"}, {"name": "y", "sqlType": "VARCHAR"},
                           {"name": "z", "sqlType": "BIGINT"}]}
LOCAL_SPEC = {"type": "local", "properties": {"format": "tsv", "delimiter": "|", "baseDir": "/data",
                                              "filePattern": "*.tsv", "skipHeaderRows": 1}}
HTTP_SPEC = {"type": "http", "properties": {"format": "json", "uris": ["https://example.com/a.json"]},
             "columns": [{"name": "a"}]}


def version_key(coordinator) -> int:
    return int(coordinator.discovery.get_prefix(CATALOG_VERSION_KEY)[CATALOG_VERSION_KEY])


def create(rest, name, spec=None, schema="druid", **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return rest("POST", f"tables/{schema}/{name}" + (f"?{q}" if q else ""), spec or DS_SPEC)


# ---- create, read, identity ------------------------------------------------------------------------


def test_post_then_get_returns_the_same_spec(rest, coordinator, name):
    for schema, spec in (("druid", DS_SPEC), ("ext", INLINE_SPEC), ("ext", LOCAL_SPEC), ("ext", HTTP_SPEC)):
        table = f"{name}_{spec['type']}"
        status, out = create(rest, table, spec, schema)
        assert status == 200, out
        assert rest("GET", f"tables/{schema}/{table}") == (200, spec)
        status, meta = rest("GET", f"schemas/{schema}/table/{table}")
        assert status == 200 and meta["spec"] == spec and meta["state"] == "ACTIVE"
        assert meta["id"] == {"schema": schema, "name": table}
        assert meta["updateTime"] == out["version"] == meta["creationTime"]
        assert version_key(coordinator) == out["version"]  # every change bumps the discovery key


def test_names_with_spaces_and_dots_travel_in_the_path(rest, name):
    table = f"{name} my.table"
    assert create(rest, table.replace(" ", "%20"))[0] == 200
    status, meta = rest("GET", f"schemas/druid/table/{table.replace(' ', '%20')}")
    assert status == 200 and meta["id"]["name"] == table


def test_actions_and_versions(rest, name):
    _, first = create(rest, name)
    status, out = create(rest, name)
    assert status == 409 and out["currentVersion"] == first["version"] and "already has a catalog entry" in out["error"]
    assert create(rest, name, {"type": "datasource"}, action="IfNew") == (200, {"version": first["version"]})
    assert rest("GET", f"tables/druid/{name}")[1] == DS_SPEC  # IfNew left it alone
    status, out = create(rest, f"{name}_missing", action="Replace")
    assert status == 404 and f"druid.{name}_missing" in out["error"]
    small = {"type": "datasource", "properties": {"segmentGranularity": "DAY"}}
    status, second = create(rest, name, small, action="Replace", version=first["version"])
    assert status == 200 and second["version"] > first["version"]
    status, out = create(rest, name, DS_SPEC, action="Replace", version=first["version"])
    assert status == 409 and out["currentVersion"] == second["version"]
    assert str(second["version"]) in out["error"]
    assert create(rest, name, DS_SPEC, action="Force")[0] == 200
    assert create(rest, f"{name}_forced", DS_SPEC, action="force")[0] == 200
    status, meta = rest("GET", f"schemas/druid/table/{name}")
    assert meta["spec"] == DS_SPEC and meta["creationTime"] == first["version"] < meta["updateTime"]
    status, out = create(rest, name, DS_SPEC, action="Upsert")
    assert status == 400 and "valid actions: New, IfNew, Replace, Force" in out["error"]
    status, out = create(rest, f"{name}_v", DS_SPEC, version=5)
    assert status == 400 and "'version'" in out["error"]


# ---- PUT merge -------------------------------------------------------------------------------------


def test_put_merges(rest, coordinator, name):
    _, v1 = create(rest, name)
    update = {"properties": {"description": None, "hiddenColumns": ["older"], "targetSegmentRows": 10},
              "columns": [{"name": "page", "sqlType": "VARCHAR"}, {"name": "delta", "sqlType": "DOUBLE"}]}
    status, v2 = rest("PUT", f"tables/druid/{name}?version={v1['version']}", update)
    assert status == 200 and v2["version"] > v1["version"] and version_key(coordinator) == v2["version"]
    spec = rest("GET", f"tables/druid/{name}")[1]
    assert "description" not in spec["properties"]
    assert spec["properties"]["hiddenColumns"] == ["old", "older"] and spec["properties"]["targetSegmentRows"] == 10
    assert [c["name"] for c in spec["columns"]][-2:] == ["page", "delta"]
    assert spec["columns"][-2] == {"name": "page", "sqlType": "VARCHAR"}
    status, out = rest("PUT", f"tables/druid/{name}?version={v1['version']}", update)
    assert status == 409 and out["currentVersion"] == v2["version"]
    status, out = rest("PUT", f"tables/druid/{name}", {"type": "inline"})
    assert status == 400 and "cannot change the table type" in out["error"]
    status, out = rest("PUT", f"tables/druid/{name}_nope", update)
    assert status == 404
    status, out = rest("PUT", f"tables/druid/{name}", {"properties": {"segmentGranularity": "P3D"}})
    assert status == 400 and "segmentGranularity" in out["error"] and "P1D" in out["error"]


def test_concurrent_writers_with_the_same_version_exactly_one_wins(rest, name):
    _, base = create(rest, name)
    results = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def writer(i):
        barrier.wait(THREAD_DEADLINE_S)
        out = rest("PUT", f"tables/druid/{name}?version={base['version']}",
                   {"properties": {"targetSegmentRows": i + 1}})
        with lock:
            results.append(out)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_DEADLINE_S)
        assert not t.is_alive()
    wins = [body for status, body in results if status == 200]
    losses = [body for status, body in results if status == 409]
    assert len(wins) == 1 and len(losses) == 7
    assert all(body["currentVersion"] == wins[0]["version"] for body in losses)
    assert rest("GET", f"schemas/druid/table/{name}")[1]["updateTime"] == wins[0]["version"]


# ---- column endpoints ------------------------------------------------------------------------------


def test_move_drop_and_hide_columns(rest, name):
    _, v1 = create(rest, name)
    status, v2 = rest("POST", f"tables/druid/{name}/moveColumn", {"column": "page", "where": "after",
                                                                  "anchor": "__time"})
    assert status == 200 and v2["version"] > v1["version"]
    status, _ = rest("POST", f"tables/druid/{name}/moveColumn", {"column": "tags", "where": "first"})
    cols = [c["name"] for c in rest("GET", f"tables/druid/{name}")[1]["columns"]]
    assert cols == ["tags", "__time", "page", "channel", "added", "payload"]
    status, out = rest("POST", f"tables/druid/{name}/moveColumn", {"column": "nope", "where": "last"})
    assert status == 400 and "'nope' is not a declared column" in out["error"] and "channel" in out["error"]
    status, out = rest("POST", f"tables/druid/{name}/moveColumn", {"column": "page", "where": "after",
                                                                   "anchor": "gone"})
    assert status == 400 and "anchor column 'gone'" in out["error"]
    status, out = rest("POST", f"tables/druid/{name}/moveColumn", {"column": "page", "where": "up"})
    assert status == 400 and "first, last, before, after" in out["error"]
    status, out = rest("POST", f"tables/druid/{name}/moveColumn?version={v1['version']}",
                       {"column": "page", "where": "last"})
    assert status == 409 and out["currentVersion"] > v2["version"]

    assert rest("POST", f"tables/druid/{name}/dropColumn", ["tags", "payload"])[0] == 200
    cols = [c["name"] for c in rest("GET", f"tables/druid/{name}")[1]["columns"]]
    assert cols == ["__time", "page", "channel", "added"]
    status, out = rest("POST", f"tables/druid/{name}/dropColumn", ["tags"])
    assert status == 400 and "'tags' is not a declared column" in out["error"]
    status, out = rest("POST", f"tables/druid/{name}/dropColumn", {"columns": ["a"]})
    assert status == 400 and "JSON list" in out["error"]

    assert rest("POST", f"tables/druid/{name}/hideColumns", {"hide": ["tags", "x"], "unhide": ["old"]})[0] == 200
    assert rest("GET", f"tables/druid/{name}")[1]["properties"]["hiddenColumns"] == ["tags", "x"]
    status, out = rest("POST", f"tables/druid/{name}/hideColumns", {"hide": ["channel"]})
    assert status == 400 and "both declared and hidden" in out["error"]
    status, out = rest("POST", f"tables/druid/{name}/hideColumns", {"show": ["x"]})
    assert status == 400 and "hideColumns takes" in out["error"]
    assert rest("POST", f"tables/ext/{name}_in", INLINE_SPEC)[0] == 200
    status, out = rest("POST", f"tables/ext/{name}_in/hideColumns", {"hide": ["x"]})
    assert status == 400 and "only datasources hide columns" in out["error"]
    assert rest("POST", f"tables/druid/{name}_missing/dropColumn", ["a"])[0] == 404


# ---- delete ----------------------------------------------------------------------------------------


def test_delete(rest, coordinator, name):
    create(rest, name)
    status, out = rest("DELETE", f"tables/druid/{name}")
    assert status == 200 and out["dropped"] is True and version_key(coordinator) == out["version"]
    assert rest("GET", f"tables/druid/{name}")[0] == 404
    status, out = rest("DELETE", f"tables/druid/{name}")
    assert status == 404 and f"druid.{name}" in out["error"]
    assert rest("DELETE", f"tables/druid/{name}?ifExists=true")[1]["dropped"] is False
    status, out = rest("DELETE", f"tables/druid/{name}?ifExists=maybe")
    assert status == 400 and "'ifExists' must be true or false" in out["error"]
    # Dropped tables can be created again.
    assert create(rest, name)[0] == 200


def test_delete_with_purge_marks_segments_unused(rest, coordinator, name):
    day = 86_400_000
    records = [SegmentRecord(SegmentId(name, Interval(i * day, (i + 1) * day), "v1", 0), 10, 1, f"{name}/{i}", "{}")
               for i in range(3)]
    coordinator.store.publish(records)
    create(rest, name)
    status, out = rest("DELETE", f"tables/druid/{name}?purge=true")
    assert status == 200 and out == {"dropped": True, "segmentsMarkedUnused": 3, "version": out["version"]}
    assert coordinator.store.list(name) == [] and len(coordinator.store.list(name, include_unused=True)) == 3
    status, out = rest("DELETE", f"tables/ext/{name}?purge=true")
    assert status == 400 and "purge applies to datasources" in out["error"]


# ---- listings and sync -----------------------------------------------------------------------------


def test_listings(rest, name):
    create(rest, f"{name}_b")
    create(rest, f"{name}_a")
    rest("POST", f"tables/ext/{name}_in", INLINE_SPEC)
    assert rest("GET", "list/schemas/names") == (200, ["druid", "ext"])
    status, ids = rest("GET", "list/tables/names")
    mine = [i for i in ids if i["name"].startswith(name)]
    assert status == 200 and mine == [{"schema": "druid", "name": f"{name}_a"}, {"schema": "druid", "name": f"{name}_b"},
                                      {"schema": "ext", "name": f"{name}_in"}]
    status, names = rest("GET", "schemas/druid/names")
    assert status == 200 and [n for n in names if n.startswith(name)] == [f"{name}_a", f"{name}_b"]
    assert names == sorted(names)
    status, tables = rest("GET", "schemas/ext/tables")
    ours = [t for t in tables if t["id"]["name"] == f"{name}_in"]
    assert status == 200 and ours[0]["spec"] == INLINE_SPEC and ours[0]["updateTime"] > 0
    status, out = rest("GET", "schemas/nope/names")
    assert status == 404 and "valid schemas: druid, ext" in out["error"]


def test_sync_endpoints(rest, name):
    status, mark = rest("POST", "flush")
    assert status == 200
    _, v = create(rest, name)
    rest("POST", f"tables/ext/{name}_in", INLINE_SPEC)
    status, meta = rest("GET", f"tables/druid/{name}/sync")
    assert status == 200 and meta["updateTime"] == v["version"] and meta["spec"] == DS_SPEC
    status, tables = rest("GET", "schemas/druid/sync")
    assert status == 200 and any(t["id"]["name"] == name for t in tables)
    assert all(t["id"]["schema"] == "druid" for t in tables)
    rest("DELETE", f"tables/ext/{name}_in")
    status, delta = rest("GET", f"sync?since={mark['version']}")
    assert status == 200
    changed = [t["id"]["name"] for t in delta["tables"]]
    assert name in changed and f"{name}_in" not in changed
    assert {"schema": "ext", "name": f"{name}_in"} in delta["deleted"]
    status, again = rest("GET", f"sync?since={delta['version']}")
    assert again == {"tables": [], "deleted": [], "version": delta["version"]}
    assert rest("GET", "sync?since=abc")[0] == 400
    assert rest("GET", f"tables/druid/{name}_missing/sync")[0] == 404


def _wait_for(events: list, predicate, deadline_s: float = 1.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not any(predicate(e) for e in list(events)):
        assert time.monotonic() < deadline, f"no matching watch event within {deadline_s}s: {events}"
        time.sleep(0.01)


def test_watchers_see_every_change_and_flush_within_a_second(rest, coordinator, name):
    events: list = []
    watch = coordinator.discovery.watch_prefix(CATALOG_VERSION_KEY, events.append)
    try:
        assert watch.wait_synced(5)
        _, out = create(rest, name)
        _wait_for(events, lambda e: e.value == str(out["version"]).encode())
        seen = len(events)
        status, flushed = rest("POST", "flush")
        assert status == 200 and flushed["version"] == out["version"] == version_key(coordinator)
        # Flush writes the key again with the same value: still an event, so brokers reload.
        deadline = time.monotonic() + 1.0
        while len(events) <= seen:
            assert time.monotonic() < deadline, "flush produced no watch event"
            time.sleep(0.01)
        assert events[-1].value == str(out["version"]).encode()
    finally:
        watch.cancel()


# ---- errors ----------------------------------------------------------------------------------------


def test_bad_requests_say_why(rest, name):
    cases = [
        (create(rest, name, {"type": "datasource", "properties": {"rollup": True}}),
         ["unknown datasource property rollup", "segmentGranularity"]),
        (create(rest, name, {"type": "datasource", "columns": [{"name": "a", "sqlType": "LONG"}]}),
         ["column 'a'", "BIGINT"]),
        (create(rest, name, {"type": "view"}), ["table type 'view'", "datasource, inline, local, http"]),
        (create(rest, name, {"type": "inline", "properties": {"format": "csv", "data": "x"}}),
         ["belongs in schema 'ext'"]),
        (rest("POST", f"tables/druid/{name}", raw=b"{not json"), ["not valid JSON"]),
        (rest("POST", f"tables/druid/{name}"), ["needs a JSON body"]),
        (rest("PUT", f"tables/druid/{name}?version=abc", {}), ["'version' must be an integer"]),
        (rest("POST", "tables/druid/.hidden", DS_SPEC), ["starts with '.'"]),
    ]
    for (status, out), words in cases:
        assert status == 400, out
        for w in words:
            assert w in out["error"], out
    assert rest("GET", f"tables/druid/{name}")[0] == 404  # nothing was stored


def test_unknown_routes_and_methods(rest, name):
    status, out = rest("GET", "nothing/here")
    assert status == 404 and "no catalog route" in out["error"]
    assert rest("GET", f"tables/sys/{name}")[0] == 404
    status, out = rest("GET", "flush")
    assert status == 405 and "use POST" in out["error"]
    assert rest("PUT", f"tables/druid/{name}/moveColumn", {})[0] == 405


# ---- security --------------------------------------------------------------------------------------


def test_authentication_and_permissions(secured):
    from tests.integration.catalog.conftest import Rest

    rest = Rest(secured.http.port)
    status, out = rest("GET", "list/schemas/names")
    assert status == 401 and "authentication required" in out["error"], out
    assert rest("GET", "list/schemas/names", headers={"Authorization": "Basic eDp5"})[0] == 401
    admin, reader, writer = basic("admin"), basic("reader"), basic("writer")
    for table in ("pub_a", "w_b", "secret"):
        assert rest("POST", f"tables/druid/{table}", DS_SPEC, headers=admin)[0] == 200
    status, out = rest("POST", "tables/druid/pub_c", DS_SPEC, headers=reader)
    assert status == 403 and "WRITE" in out["error"]
    assert rest("POST", "tables/druid/w_c", DS_SPEC, headers=writer)[0] == 200
    assert rest("POST", "tables/ext/w_in", INLINE_SPEC, headers=writer)[0] == 200
    assert rest("GET", "tables/ext/w_in", headers=writer)[0] == 403  # WRITE on EXTERNAL, but no READ
    assert rest("GET", "tables/druid/pub_a", headers=reader)[0] == 200
    assert rest("GET", "tables/druid/secret", headers=reader)[0] == 403
    assert rest("GET", "tables/druid/never_created", headers=reader)[0] == 403  # existence does not leak
    assert rest("GET", "schemas/druid/names", headers=reader)[1] == ["pub_a"]
    assert rest("GET", "schemas/druid/names", headers=writer)[1] == ["w_b", "w_c"]
    assert [t["name"] for t in rest("GET", "list/tables/names", headers=reader)[1]] == ["pub_a"]
    assert [t["id"]["name"] for t in rest("GET", "schemas/druid/sync", headers=reader)[1]] == ["pub_a"]
    assert rest("GET", "list/schemas/names", headers=reader) == (200, ["druid", "ext"])
    assert rest("DELETE", "tables/druid/pub_a", headers=reader)[0] == 403
    assert rest("POST", "tables/druid/pub_a/dropColumn", ["page"], headers=reader)[0] == 403
    assert rest("DELETE", "tables/druid/w_b", headers=writer)[0] == 200
    status, delta = rest("GET", "sync?since=1", headers=reader)
    assert [t["id"]["name"] for t in delta["tables"]] == ["pub_a"] and delta["deleted"] == []
