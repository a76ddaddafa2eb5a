"""The console's Catalog, Projections and Supervisors views in a real browser (Debian's chromium via
Playwright) against a cluster with authentication on, through the router:

- Catalog: a table definition made in the form is what the catalog REST API and SQL then show; a
  column's type in SQL and its schema decisions are shown beside it; a bad definition shows the
  coordinator's message.
- Projections: the hit and refusal counts shown equal those computed here from sys.queries; the
  advisor's proposal is added to the catalog definition from the page.
- Supervisors: a spec submitted from the page is listed with its state and committed offsets, and
  suspended, resumed and terminated from the page (no Kafka broker: its task stays PENDING); against
  a real Kafka-protocol broker (Tansu), the lag per partition in the table and in the chart equals
  what was produced, and Reset (two clicks) makes the coordinator forget the committed offsets.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import pyarrow as pa
import pytest
import requests

from common.query.projection import ProjectionSpec, projection_rows
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.deep_storage.deep_storage import deep_storage_key
from tests.conftest import day_interval, make_events_table
from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401
from tests.harness.auth_cluster import ADMIN, READER
from tests.harness.console_page import CHROMIUM, flight_sql, shot, signed_in
from tests.harness.waiting import wait_until

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed "
                                "(scripts/test.sh installs it: apt-get install chromium)")

CATALOG = "/druid/coordinator/v1/catalog/tables/druid/"
SUPERVISORS = "/druid/indexer/v1/supervisor"
DAYS = 4
NO_PROJECTION_DAY = 2  # its segment holds no projection: those reads are base rows
BY_CHANNEL = ProjectionSpec.from_json({
    "type": "aggregate", "name": "by_channel", "groupingColumns": [{"type": "string", "name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}]})
WORKLOAD = ["SELECT channel, COUNT(*) AS n FROM events GROUP BY 1",
            "SELECT code, COUNT(*) AS n FROM events GROUP BY 1"]  # by_channel cannot serve this one
SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "stream_edits", "timestampSpec": {"column": "ts"}},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}


def rest(cluster, method: str, path: str, **kwargs) -> requests.Response:
    """The router's Druid API as a client other than the console calls it (basic auth, no Origin)."""
    return requests.request(method, cluster.url.rstrip("/") + path, auth=ADMIN, timeout=60, **kwargs)


@pytest.fixture(scope="module")
def views_cluster(cluster, tmp_path_factory):
    """The console cluster plus: 'mixed' (column v BIGINT in one segment, VARCHAR in the other),
    'events' (daily segments, all but one holding the by_channel projection) with a catalog entry."""
    c = cluster
    c.publish(pa.table({"__time": pa.array([1_600_000_000_000], pa.timestamp("ms")), "v": [1]}), "mixed")
    c.publish(pa.table({"__time": pa.array([1_600_100_000_000], pa.timestamp("ms")), "v": ["x"]}), "mixed")
    c.wait_queryable("mixed", 2)
    directory = tmp_path_factory.mktemp("events")
    table = make_events_table(rows_per_day=1500, days=DAYS, seed=5)
    times = table.column("__time").cast(pa.int64()).to_numpy()
    descriptors = []
    for d in range(DAYS):
        iv = day_interval(d)
        part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
        path = str(directory / f"day{d}.sseg")
        manifest = build_segment(part, path, SegmentId("events", iv, "v1", 0),
                                 projections=[] if d == NO_PROJECTION_DAY else [projection_rows(BY_CHANNEL, part)])
        key = deep_storage_key(manifest.segment_id)
        size = c.storage().push(path, key)
        descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
    c.client.publish(descriptors)
    c.wait_queryable("events", DAYS)
    assert rest(c, "POST", CATALOG + "events", json={"type": "datasource", "properties": {
        "segmentGranularity": "P1D", "projections": [BY_CHANNEL.to_json()]}}).status_code == 200
    return c


# ---- Catalog ------------------------------------------------------------------------------------------


def test_a_definition_made_in_the_form_is_what_rest_and_sql_show(browser, views_cluster):
    c = views_cluster
    page = signed_in(browser, c, ADMIN)
    page.click("#nav-catalog")
    page.wait_for_selector("#catalog-list tbody tr")
    page.click("#catalog-new")
    page.fill("#catalog-name", "defined")
    page.fill("#catalog-description", "made in the console")
    page.select_option("#catalog-granularity", "PT1H")
    page.fill("#catalog-target-rows", "500000")
    page.fill("#catalog-cluster-keys", "channel, page DESC")
    page.check("#catalog-sealed")
    for name, sql_type in (("channel", "VARCHAR"), ("page", "VARCHAR"), ("added", "BIGINT"), ("price", "")):
        page.click("#catalog-add-column")
        row = page.locator("#catalog-columns tr").last
        row.locator(".col-name").fill(name)
        if sql_type:
            row.locator(".col-sqltype").select_option(sql_type)
    page.click("#catalog-add-projection")
    page.fill("#catalog-projections .projection-json", json.dumps({
        "type": "aggregate", "name": "hourly", "groupingColumns": [{"type": "auto", "name": "channel"}],
        "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"}]}))
    page.click("#catalog-save")
    page.wait_for_selector("#catalog-message .ok")
    assert page.text_content("#catalog-message").startswith("saved (version ")

    got = rest(c, "GET", CATALOG + "defined")
    assert got.status_code == 200
    assert got.json() == {"type": "datasource", "properties": {
        "description": "made in the console", "segmentGranularity": "PT1H", "targetSegmentRows": 500000,
        "clusterKeys": [{"column": "channel"}, {"column": "page", "desc": True}], "sealed": True,
        "projections": [{"type": "aggregate", "name": "hourly", "groupingColumns": [{"type": "auto", "name": "channel"}],
                         "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"}]}]},
        "columns": [{"name": "channel", "sqlType": "VARCHAR"}, {"name": "page", "sqlType": "VARCHAR"},
                    {"name": "added", "sqlType": "BIGINT"}, {"name": "price"}]}
    declared = flight_sql(c, ADMIN, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                                    "WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'defined' ORDER BY ORDINAL_POSITION")
    assert [name for name, _ in declared if name != "__time"] == ["channel", "page", "added", "price"]
    assert dict(declared)["added"] == "BIGINT"
    # The saved entry opens again with what was saved; a second save replaces it at its version.
    page.wait_for_selector("#catalog-form h3:has-text('version')")
    assert page.input_value("#catalog-cluster-keys") == "channel, page DESC"
    page.locator("#catalog-columns tr", has=page.locator(".col-name[value=price]")).locator(".col-sqltype") \
        .select_option("DOUBLE")
    page.click("#catalog-save")
    page.wait_for_selector("#catalog-message .ok")
    assert {"name": "price", "sqlType": "DOUBLE"} in rest(c, "GET", CATALOG + "defined").json()["columns"]
    version = page.text_content("#catalog-message .ok").removeprefix("saved (version ").removesuffix(")")
    page.wait_for_selector(f"#catalog-form h3:has-text('(version {version})')")  # open again at the new version
    shot(page, "catalog")
    assert page.dialogs == [] and page.faults == []
    page.close()


def test_a_bad_definition_shows_the_coordinators_message(browser, views_cluster):
    page = signed_in(browser, views_cluster, ADMIN)
    page.goto(views_cluster.url + "#catalog")
    page.click("#catalog-new")
    page.fill("#catalog-name", "broken")
    page.click("#catalog-add-column")
    page.locator("#catalog-columns tr .col-name").fill("v")
    page.click("#catalog-add-projection")
    page.fill("#catalog-projections .projection-json", json.dumps({
        "type": "aggregate", "name": "p", "groupingColumns": ["v"], "aggregators": [{"type": "nope", "name": "x"}]}))
    page.click("#catalog-save")
    error = page.text_content("#catalog-message .error")
    assert "projection 'p'" in error and "nope" in error and "Traceback" not in error
    assert rest(views_cluster, "GET", CATALOG + "broken").status_code == 404
    page.fill("#catalog-projections .projection-json", "{not json")
    page.click("#catalog-save")
    assert "projection 1 is not valid JSON" in page.text_content("#catalog-message .error")
    # Creating a table that exists already: the coordinator's 409 message.
    page.fill("#catalog-name", "events")
    page.click("#catalog-projections .remove-projection")
    page.click("#catalog-save")
    error = page.text_content("#catalog-message .error")
    assert "druid.events already has a catalog entry" in error
    # Another writer changes the entry after the form read it: the save is refused, not merged over.
    page.goto(views_cluster.url + "#catalog/events")
    page.wait_for_selector("#catalog-form h3:has-text('events')")
    assert rest(views_cluster, "PUT", CATALOG + "events", json={"properties": {"description": "changed"}}) \
        .status_code == 200
    page.fill("#catalog-description", "mine")
    page.click("#catalog-save")
    error = page.text_content("#catalog-message .error")
    assert "another writer changed it since it was read" in error
    assert rest(views_cluster, "GET", CATALOG + "events").json()["properties"]["description"] == "changed"
    assert page.faults == []
    page.close()


def test_columns_show_their_sql_type_and_schema_decisions(browser, views_cluster):
    c = views_cluster
    page = signed_in(browser, c, ADMIN)
    page.goto(c.url + "#catalog/mixed")
    page.wait_for_selector("#catalog-form #catalog-columns tr")
    rows = {r[1]: r for r in page.eval_on_selector_all(
        "#catalog-columns tr", "rs => rs.map(r => Array.from(r.cells, c => c.querySelector('input.col-name') "
        "? c.querySelector('input.col-name').value : c.textContent))")}
    types = dict(flight_sql(c, ADMIN, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                                      "WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'mixed'"))
    assert {name: row[3] for name, row in rows.items()} == types
    [(seen, chosen, rule)] = flight_sql(c, ADMIN, "SELECT types_seen, type_chosen, rule FROM sys.schema_decisions "
                                                  "WHERE datasource = 'mixed' AND column_name = 'v'")
    assert rows["v"][4].startswith(f"{seen} → {chosen} ({rule}")
    # A schemaless datasource's discovered columns are offered undeclared; ticking one declares it.
    assert page.eval_on_selector_all("#catalog-columns .col-declared", "cs => cs.map(c => c.checked)") == \
        [False] * len(rows)
    page.locator("#catalog-columns tr", has=page.locator(".col-name[value=v]")).locator(".col-sqltype") \
        .select_option("VARCHAR")
    page.click("#catalog-save")
    page.wait_for_selector("#catalog-message .ok")
    assert rest(c, "GET", CATALOG + "mixed").json()["columns"] == [{"name": "v", "sqlType": "VARCHAR"}]
    page.wait_for_selector("#catalog-form h3:has-text('version')")
    assert page.faults == []
    page.close()


def test_reader_sees_only_the_catalog_entries_it_may_read(browser, views_cluster):
    page = signed_in(browser, views_cluster, READER)
    page.click("#nav-catalog")
    page.wait_for_selector("#catalog-list tbody tr, #catalog-list p, #catalog-list .error")
    assert page.eval_on_selector_all("#catalog-list tbody tr td:first-child", "cs => cs.map(c => c.textContent)") \
        == ["wiki"]
    page.click("#nav-projections")
    page.wait_for_selector("#projections-summary")
    assert page.eval_on_selector_all("#projections-datasource option", "os => os.map(o => o.value)") == ["wiki"]
    assert page.faults == []
    page.close()


# ---- Projections --------------------------------------------------------------------------------------


def usage_from_sys_queries(cluster, datasource: str) -> tuple[Counter, Counter, int, int]:
    """(segments served per projection, segments refused per projection, base reads, all reads)."""
    hits, misses, base, total = Counter(), Counter(), 0, 0
    for (tables,) in flight_sql(cluster, ADMIN, "SELECT tables FROM sys.queries WHERE status = 'ok'"):
        for group in json.loads(tables or "[]"):
            if group["datasource"] != datasource:
                continue
            total += group["segments"]
            if group["projection"] == "base":
                base += group["segments"]
            else:
                hits[group["projection"]] += group["segments"]
            for name in group["rejected"]:
                misses[name] += group["segments"]
    return hits, misses, base, total


def test_projection_use_and_advice_then_add_it_to_the_catalog(browser, views_cluster):
    c = views_cluster
    for _ in range(2):  # the advisor proposes for a workload seen more than once
        for sql in WORKLOAD:
            flight_sql(c, ADMIN, sql)
    hits, misses, base, total = usage_from_sys_queries(c, "events")
    assert hits["by_channel"] > 0 and misses["by_channel"] > 0  # the workload both used and missed it
    advice = flight_sql(c, ADMIN, "SELECT projection, grouping_columns, statement FROM sys.projection_advice "
                                  "WHERE datasource = 'events' ORDER BY rank")
    assert advice and advice[0][1] == "code"

    page = signed_in(browser, c, ADMIN)
    page.goto(c.url + "#projections/events")
    page.wait_for_selector("#projections-table tbody tr")
    assert page.input_value("#projections-datasource") == "events"
    rows = {r[0]: r for r in page.eval_on_selector_all(
        "#projections-table tbody tr", "rs => rs.map(r => Array.from(r.cells, c => c.textContent))")}
    [(with_it, segments, prows, brows)] = flight_sql(
        c, ADMIN, "SELECT segments_with, segments_total, projection_rows, base_rows FROM sys.projections "
                  "WHERE datasource = 'events' AND name = 'by_channel'")
    row = rows["by_channel"]
    assert row[1:5] == ["yes", f"{with_it} of {segments}", f"{prows} / {brows}", str(hits["by_channel"])]
    assert row[5] == str(misses["by_channel"])
    assert row[6] == f"{100 * hits['by_channel'] / (hits['by_channel'] + misses['by_channel']):.1f}%"
    assert f"{total - base} of {total} segment reads" in page.text_content("#projections-summary")
    proposals = page.eval_on_selector_all("#advice-table tbody tr",
                                          "rs => rs.map(r => Array.from(r.cells, c => c.textContent))")
    assert [(p[2], p[3], p[11]) for p in proposals] == [(a[0], a[1], a[2]) for a in advice]
    shot(page, "projections")

    page.click("#advice-table tbody tr:first-child button.add-projection")
    page.wait_for_selector("#advice-message .ok")
    assert f"projection {advice[0][0]} added" in page.text_content("#advice-message")
    names = [p["name"] for p in rest(c, "GET", CATALOG + "events").json()["properties"]["projections"]]
    assert names == ["by_channel", advice[0][0]]
    # Now defined in the catalog (no segment holds it yet), and no longer proposed.
    page.wait_for_selector(f"#projections-table td:text-is('{advice[0][0]}')")
    added = page.eval_on_selector(f"#projections-table tr:has(td:text-is('{advice[0][0]}'))",
                                  "r => Array.from(r.cells, c => c.textContent)")
    assert added[1:3] == ["yes", f"0 of {segments}"]
    assert advice[0][0] not in page.text_content("#advice-table")

    # Then compaction, so existing segments get it: Druid's compact task over the interval the
    # segments cover (it stays PENDING here: no task may run in this cluster).
    assert advice[0][0] in page.text_content("#compaction-offer")
    page.click("#advice-message button.compact-now")
    page.wait_for_selector("#advice-message .compaction-submitted")
    task_id = page.text_content("#advice-message a.compaction-task")
    task = c.client.task(task_id)
    assert (task.type, task.datasource, task.state) == ("compact", "events", "PENDING")
    assert Interval.parse(json.loads(task.spec_json)["interval"]) == \
        Interval(day_interval(0).start, day_interval(DAYS - 1).end)
    assert f"over {json.loads(task.spec_json)['interval'].split('/')[0][:10]}" in \
        page.text_content("#advice-message .compaction-submitted")
    # The link opens the task in the Ingestion view.
    page.click("#advice-message a.compaction-task")
    page.wait_for_selector("#task-report h3")
    assert task_id in page.text_content("#task-report h3")
    assert page.text_content("#task-log") == f"task {task_id} has not started yet: no log\n"
    assert '"ingestionState": "PENDING"' in page.text_content("#task-report-json")
    # The log through the router is the coordinator's, with the same grants: a reader of wiki only
    # is told no such task exists.
    assert rest(c, "GET", f"/druid/indexer/v1/task/{task_id}/log").text == \
        f"task {task_id} has not started yet: no log\n"
    hidden = requests.get(f"{c.url}druid/indexer/v1/task/{task_id}/log", auth=READER, timeout=60)
    assert hidden.status_code == 404 and hidden.json() == {"error": f"no task '{task_id}'"}
    c.client.cancel_task(task_id)
    assert page.dialogs == [] and page.faults == []
    page.close()


# ---- Supervisors --------------------------------------------------------------------------------------


def supervisor_cell(page, sid: str, css: str) -> str:
    return page.text_content(f"#supervisors-table tr[data-supervisor='{sid}'] {css}")


def test_supervisor_submitted_listed_suspended_resumed_and_terminated(browser, views_cluster):
    c = views_cluster
    page = signed_in(browser, c, ADMIN)
    page.click("#nav-supervisors")
    page.wait_for_selector("#supervisors-table p, #supervisors-table table")
    page.click("#supervisor-submit summary")
    page.fill("#supervisor-spec", json.dumps({**SPEC, "spec": {**SPEC["spec"], "tuningConfig": {"maxRowz": 1}}}))
    page.click("#submit-supervisor")
    assert "unknown key 'maxRowz' in spec.tuningConfig" in page.text_content("#supervisors-message .error")
    page.fill("#supervisor-spec", json.dumps(SPEC))
    page.click("#submit-supervisor")
    page.wait_for_selector("#supervisors-table tr[data-supervisor='stream_edits']")
    # Offsets as a published segment would commit them (no Kafka here): the status shows them.
    reset = rest(c, "POST", f"{SUPERVISORS}/stream_edits/resetOffsets", json={"type": "kafka", "partitions": {
        "type": "end", "stream": "edits", "partitionOffsetMap": {"0": 42, "1": 7}}})
    assert reset.status_code == 200, reset.text
    # The coordinator's duty gives it a task (PENDING: no task may run here), so it is RUNNING.
    wait_until(lambda: [t.type for t in c.client.tasks("stream_edits")] == ["kafka"], timeout_s=30,
               what="the supervisor's task")
    page.click("#supervisors-view .toolbar button")
    page.wait_for_function("() => (document.querySelector(\"tr[data-supervisor='stream_edits'] .committed-offsets\")"
                           " || {}).textContent === 'partition 0: 42partition 1: 7'")
    [(state, source)] = flight_sql(c, ADMIN, "SELECT state, source FROM sys.supervisors "
                                             "WHERE supervisor_id = 'stream_edits'")
    assert supervisor_cell(page, "stream_edits", ".supervisor-state") == state == "RUNNING"
    assert supervisor_cell(page, "stream_edits", ".supervisor-topic") == source == "edits"
    assert supervisor_cell(page, "stream_edits", ".lag") == "not reported"  # strata's payload has no lag
    active = rest(c, "GET", f"{SUPERVISORS}/stream_edits/status").json()["payload"]["activeTasks"]
    assert active and supervisor_cell(page, "stream_edits", ".active-tasks") == ", ".join(t["id"] for t in active)

    page.click("tr[data-supervisor='stream_edits'] button.supervisor-suspend")
    page.wait_for_function("() => document.querySelector(\"tr[data-supervisor='stream_edits'] .supervisor-state\")"
                           ".textContent === 'SUSPENDED'")
    assert flight_sql(c, ADMIN, "SELECT state, suspended FROM sys.supervisors") == [("SUSPENDED", 1)]
    page.click("tr[data-supervisor='stream_edits'] button.supervisor-resume")
    page.wait_for_selector("tr[data-supervisor='stream_edits'] button.supervisor-suspend")
    assert flight_sql(c, ADMIN, "SELECT suspended FROM sys.supervisors") == [(0,)]
    page.click("tr[data-supervisor='stream_edits'] button.supervisor-terminate")
    assert page.text_content("tr[data-supervisor='stream_edits'] button.supervisor-terminate") == "Confirm terminate"
    assert rest(c, "GET", SUPERVISORS).json() == ["stream_edits"]  # one click terminates nothing
    page.click("tr[data-supervisor='stream_edits'] button.supervisor-terminate")
    page.wait_for_selector("#supervisors-table p:text-is('no supervisors')")
    assert flight_sql(c, ADMIN, "SELECT * FROM sys.supervisors") == []
    assert page.dialogs == [] and page.faults == []
    page.close()


def test_lag_is_shown_per_partition_when_the_payload_has_druids_offsets(browser, views_cluster):
    """The view's reading of a status payload, run in the page: minimumLag (what strata's coordinator
    and Druid's report) first, else a top-level or the active tasks' lag, else latest - current; the
    chart's history keeps one point per broker read, at most its bound."""
    page = signed_in(browser, views_cluster, ADMIN)
    got = page.evaluate("""async () => {
        const { partitionLag } = await import('/supervisors_view.js');
        return [partitionLag({latestOffsets: {"0": 100, "1": 50, "10": 5}, currentOffsets: {"0": 90, "1": 50, "10": 0},
                              committedOffsets: {"0": 80}}),
                partitionLag({lag: {"2": 7}}), partitionLag({committedOffsets: {"0": 3}}),
                partitionLag({latestOffsets: {"0": 9, "1": 4}, committedOffsets: {}, minimumLag: {"0": 9, "1": 0}}),
                partitionLag({activeTasks: [{lag: {"0": 1}}, {lag: {"1": 2}}], minimumLag: null})];
    }""")
    # (undefined comes back as None)
    assert got == [
        [{"partition": "0", "committed": 80, "lag": 10}, {"partition": "1", "committed": None, "lag": 0},
         {"partition": "10", "committed": None, "lag": 5}],
        [{"partition": "2", "committed": None, "lag": 7}],
        [{"partition": "0", "committed": 3, "lag": None}],
        [{"partition": "0", "committed": None, "lag": 9}, {"partition": "1", "committed": None, "lag": 0}],
        [{"partition": "0", "committed": None, "lag": 1}, {"partition": "1", "committed": None, "lag": 2}]]
    history = page.evaluate("""async () => {
        const { LagHistory, periodMs } = await import('/supervisor_lag_chart.js');
        const h = new LagHistory(3);
        const at = (s) => `2026-01-01T00:00:0${s}.000Z`;
        const added = [h.record({offsetsLastUpdated: at(1), minimumLag: {"0": 5}}),
                       h.record({offsetsLastUpdated: at(1), minimumLag: {"0": 6}}),  // the same read again
                       h.record({offsetsLastUpdated: null, minimumLag: {"0": 6}}),
                       h.record({offsetsLastUpdated: at(2), minimumLag: {"0": 4, "1": 2}}),
                       h.record({offsetsLastUpdated: at(3), minimumLag: {"1": 1}}),
                       h.record({offsetsLastUpdated: at(4), minimumLag: {"0": 0, "1": 0}})];
        return {added, partitions: h.partitions(), data: h.data(),
                periods: ["PT1S", "PT30S", "PT5M", "PT0.5S", "P1D", "PT", "30s", null].map((p) => periodMs(p, -1))};
    }""")
    assert history["added"] == [True, False, False, True, True, True]
    assert history["partitions"] == ["0", "1"]
    epoch = 1_767_225_600  # 2026-01-01T00:00:00Z
    assert history["data"] == [[epoch + 2, epoch + 3, epoch + 4], [4, None, 0], [2, 1, 0]]  # the oldest dropped
    assert history["periods"] == [1000, 30_000, 300_000, 500, 86_400_000, -1, -1, -1]
    assert page.faults == []
    page.close()


def test_reader_may_not_change_a_supervisor(browser, views_cluster):
    c = views_cluster
    spec = {**SPEC, "spec": {**SPEC["spec"], "dataSchema": {**SPEC["spec"]["dataSchema"], "dataSource": "wiki"}}}
    assert rest(c, "POST", SUPERVISORS, json=spec).status_code == 200
    try:
        page = signed_in(browser, c, READER)
        page.click("#nav-supervisors")
        page.wait_for_selector("#supervisors-table tr[data-supervisor='wiki']")
        page.click("tr[data-supervisor='wiki'] button.supervisor-suspend")
        error = page.text_content("#supervisors-message .error")
        assert "wiki" in error and "Traceback" not in error
        assert rest(c, "GET", SUPERVISORS + "?state=true").json()[0]["suspended"] is False
        # Reset (two clicks) is refused too, with the server's message (a new one: the old box goes).
        before = page.query_selector("#supervisors-message .error")
        page.click("tr[data-supervisor='wiki'] button.supervisor-reset")
        assert page.text_content("tr[data-supervisor='wiki'] button.supervisor-reset") == "Confirm reset"
        page.click("tr[data-supervisor='wiki'] button.supervisor-reset")
        page.wait_for_function("e => !e.isConnected", arg=before)
        error = page.text_content("#supervisors-message .error")
        assert "wiki" in error and "Traceback" not in error
        assert page.faults == []
        page.close()
    finally:
        rest(c, "POST", f"{SUPERVISORS}/wiki/terminate")


LAG_TOPIC = "console-lag"
PRODUCED = {"0": 7, "1": 4, "2": 0}  # messages per partition; partition 2 stays empty


def lag_cell(page, sid: str) -> dict[str, int]:
    """The page's lag column for one supervisor, partition -> lag."""
    return page.evaluate("""sid => Object.fromEntries([...document.querySelectorAll(
        `#supervisors-table tr[data-supervisor='${sid}'] .lag div`)].map((d) => [d.dataset.partition,
        Number(d.textContent.split(': ')[1])]))""", sid)


def chart_of(page) -> dict:
    """What the lag chart draws: its series' labels, its number of points, each series' last point."""
    return page.evaluate("""() => {
        const u = document.querySelector('#supervisor-lag-chart').lagChart;
        if (!u) return null;
        const n = u.data[0].length;
        return {labels: u.series.slice(1).map((s) => s.label), points: n,
                ascending: u.data[0].every((t, i) => i === 0 || t > u.data[0][i - 1]),
                last: u.data.slice(1).map((values) => values[n - 1])};
    }""")


def test_lag_per_partition_from_a_kafka_broker_in_table_and_chart_then_reset(  # noqa: F811
        browser, views_cluster, kafka_broker):
    """A real Kafka-protocol broker (Tansu) with 7, 4 and 0 messages in three partitions, one record
    per batch (so its latest offsets are the log ends); the supervisor submitted from the page reads
    from the earliest offset and its task never runs (PENDING), so its lag is what was produced."""
    c = views_cluster
    kafka_broker.create_topic(LAG_TOPIC, len(PRODUCED))
    kafka_broker.produce(LAG_TOPIC, [(int(p), json.dumps({"ts": "2026-01-01T00:00:00Z", "i": i}).encode())
                                     for p, n in PRODUCED.items() for i in range(n)], one_per_batch=True)
    spec = {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "lagged", "timestampSpec": {"column": "ts", "format": "iso"}},
        "ioConfig": {"topic": LAG_TOPIC, "consumerProperties": {"bootstrap.servers": kafka_broker.bootstrap},
                     "useEarliestOffset": True},
        "tuningConfig": {"type": "kafka", "offsetFetchPeriod": "PT1S"}}}
    # Another supervisor, listed first, so the chart starts on it: a click on lagged's row charts lagged.
    idle = {**SPEC, "spec": {**SPEC["spec"], "dataSchema": {**SPEC["spec"]["dataSchema"], "dataSource": "idle_edits"}}}
    assert rest(c, "POST", SUPERVISORS, json=idle).status_code == 200
    page = signed_in(browser, c, ADMIN)
    try:
        page.click("#nav-supervisors")
        page.wait_for_selector("#supervisors-table p, #supervisors-table table")
        page.click("#supervisor-submit summary")
        page.fill("#supervisor-spec", json.dumps(spec))
        page.click("#submit-supervisor")
        page.wait_for_selector("#supervisors-table tr[data-supervisor='lagged']")
        assert page.input_value("#supervisor-lag-select") == "idle_edits"
        page.click("#supervisors-table tr[data-supervisor='lagged'] .supervisor-topic")
        assert page.input_value("#supervisor-lag-select") == "lagged"
        page.wait_for_selector("#supervisors-table tr[data-supervisor='lagged'].charted")

        wait_until(lambda: lag_cell(page, "lagged") == PRODUCED, timeout_s=30, what="the page's lag per partition")
        status = rest(c, "GET", f"{SUPERVISORS}/lagged/status").json()["payload"]
        assert status["minimumLag"] == PRODUCED and status["latestOffsets"] == PRODUCED
        assert status["aggregateLag"] == sum(PRODUCED.values())
        wait_until(lambda: supervisor_cell(page, "lagged", ".aggregate-lag") == str(sum(PRODUCED.values())),
                   timeout_s=30, what="the page's aggregate lag")
        # The chart: one series per partition; its points come from the page's reads every
        # offsetFetchPeriod (PT1S), so a second one comes within seconds.
        charts = c.router.files.has_charts  # uPlot from npm (scripts/bootstrap.sh ensure_console_deps)
        if not charts:
            page.wait_for_selector("#supervisor-lag-chart p:has-text('no chart')")
        labels = [f"partition {p}" for p in PRODUCED]
        want = {"labels": labels, "ascending": True, "last": list(PRODUCED.values())}
        if charts:
            wait_until(lambda: (chart_of(page) or {}).get("points", 0) >= 2, timeout_s=30,
                       what="two points in the chart")
            got = chart_of(page)
            assert {k: got[k] for k in want} == want, got
        shot(page, "supervisors")

        # Offsets as published segments would commit them; the lag shrinks by them in table and chart.
        committed = {"0": 5, "1": 1}
        assert rest(c, "POST", f"{SUPERVISORS}/lagged/resetOffsets", json={"type": "kafka", "partitions": {
            "type": "end", "stream": LAG_TOPIC, "partitionOffsetMap": committed}}).status_code == 200
        behind = {"0": 2, "1": 3, "2": 0}
        wait_until(lambda: lag_cell(page, "lagged") == behind, timeout_s=30, what="the lag after the commit")
        wait_until(lambda: not charts or (chart_of(page) or {}).get("last") == list(behind.values()), timeout_s=30,
                   what="the chart's last point after the commit")

        # Offsets of chosen partitions set from the page (resetOffsets): only partition 1 ticked, set to
        # 3; partition 0 keeps its offset though its box shows another number.
        page.wait_for_selector("#supervisor-offsets tr[data-partition='2']")
        page.click("#reset-offsets")
        assert page.text_content("#supervisors-message .error") == "Error: tick the partitions whose offsets to set"
        page.fill("#supervisor-offsets tr[data-partition='0'] .offset-value", "6")
        page.check("#supervisor-offsets tr[data-partition='1'] .offset-chosen")
        page.fill("#supervisor-offsets tr[data-partition='1'] .offset-value", "-1")
        page.click("#reset-offsets")
        assert "partition 1: the offset must be a whole number" in page.text_content("#supervisors-message .error")
        page.fill("#supervisor-offsets tr[data-partition='1'] .offset-value", "3")
        page.click("#reset-offsets")
        page.wait_for_selector("#supervisors-message .ok")
        assert page.text_content("#supervisors-message") == "lagged: offsets set: partition 1 at 3"
        committed = {"0": 5, "1": 3}
        assert rest(c, "GET", f"{SUPERVISORS}/lagged/status").json()["payload"]["committedOffsets"] == committed
        wait_until(lambda: lag_cell(page, "lagged") == {"0": 2, "1": 1, "2": 0}, timeout_s=30,
                   what="the lag after the offsets were set")

        # Reset: one click arms it and does nothing; the second makes the coordinator forget the offsets.
        page.click("tr[data-supervisor='lagged'] button.supervisor-reset")
        assert page.text_content("tr[data-supervisor='lagged'] button.supervisor-reset") == "Confirm reset"
        assert rest(c, "GET", f"{SUPERVISORS}/lagged/status").json()["payload"]["committedOffsets"] == committed
        page.click("tr[data-supervisor='lagged'] button.supervisor-reset")
        wait_until(lambda: page.text_content("#supervisors-message") == "lagged: reset: committed offsets forgotten",
                   timeout_s=30, what="the reset's answer")
        assert rest(c, "GET", f"{SUPERVISORS}/lagged/status").json()["payload"]["committedOffsets"] == {}
        wait_until(lambda: lag_cell(page, "lagged") == PRODUCED, timeout_s=30, what="the lag after the reset")
        wait_until(lambda: not charts or (chart_of(page) or {}).get("last") == list(PRODUCED.values()),
                   timeout_s=30, what="the chart's last point after the reset")
        assert page.dialogs == [] and page.faults == []
    finally:
        page.close()
        rest(c, "POST", f"{SUPERVISORS}/lagged/terminate")
        rest(c, "POST", f"{SUPERVISORS}/idle_edits/terminate")
