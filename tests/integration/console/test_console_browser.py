"""The web console in a real browser (Debian's chromium driven by Playwright) against a cluster
with authentication on, through the router: every view renders; a query's rendered rows equal
the Flight SQL (ADBC) answer; a running query is cancelled from the page; EXPLAIN opens; a value
that is markup shows as text and runs nothing; a user without READ on a datasource never sees it.

STRATA_SCREENSHOTS=1 saves a 1280x800 screenshot of each view into docs/images/ (the README's).
"""

from __future__ import annotations

import json
import shutil

import pytest
import requests

from common.demo import table as demo_table
from tests.harness.auth_cluster import ADMIN, READER
from tests.harness.busy_historical import BusyHistorical
from tests.harness.console_page import CHROMIUM, TIMEOUT_MS, XSS, flight_sql, shot, signed_in

pytest.importorskip("playwright.sync_api")

EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2015-09-12T00:00:00Z,a\\n"}',
    '{"type": "csv", "columns": ["ts", "s"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}]'))"""

# Two rows, the second one's n not a number: a parse exception the task is allowed (maxParseExceptions).
EXTERN_WITH_A_BAD_ROW = """TABLE(EXTERN('{"type": "inline", "data": "2015-09-12T00:00:00Z,a,1\\n2015-09-12T00:00:01Z,b,oops\\n"}',
    '{"type": "csv", "columns": ["ts", "s", "n"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}, {"name": "n", "type": "long"}]'))"""

TASK_TIMEOUT_MS = 240_000

pytestmark = pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed "
                                "(scripts/test.sh installs it: apt-get install chromium)")


def run_query(page, sql: str) -> None:
    page.fill("#sql-editor", sql)
    page.click("#run-query")
    page.wait_for_function("() => !document.querySelector('#run-query').disabled")


def wait_text(page, selector: str, text: str) -> None:
    page.wait_for_function("([s, t]) => document.querySelector(s)?.textContent === t", arg=[selector, text])


def rendered_rows(page) -> list[list[str]]:
    return page.eval_on_selector_all("#query-output tbody tr",
                                     "rows => rows.map(r => Array.from(r.cells, c => c.textContent))")


def test_wrong_password_is_refused_on_the_form(browser, cluster):
    page = browser.new_page()
    page.goto(cluster.url)
    page.fill("#login-user", "admin")
    page.fill("#login-password", "nope")
    page.click("#login button[type=submit]")
    assert "wrong user name or password" in page.text_content("#login .error", timeout=TIMEOUT_MS)
    page.close()


def test_query_rows_equal_the_flight_sql_answer(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    sql = "SELECT channel, COUNT(*) AS n, SUM(added) AS added FROM wiki GROUP BY channel ORDER BY channel"
    page.wait_for_selector("#schema-tree .tree-name")
    run_query(page, sql)
    expected = flight_sql(cluster, ADMIN, sql)
    assert [[c.textContent if False else c for c in row] for row in rendered_rows(page)] == \
        [[str(v) for v in row] for row in expected]
    assert page.text_content("#query-output thead").replace(" ", "") == "channelnadded"
    assert f"{len(expected)} rows" in page.text_content("#query-status")
    page.click("#schema-tree summary")  # the tree shows the datasource's columns
    assert "channel" in page.text_content("#schema-tree")
    shot(page, "query")
    page.close()


def test_results_are_paged(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    run_query(page, "SELECT __time, page, added FROM wiki ORDER BY __time")
    assert len(rendered_rows(page)) == 100
    assert page.text_content("#page-info") == f"rows 1–100 of {cluster.wiki.num_rows}"
    page.click("#page-next")  # the next page comes from the broker
    wait_text(page, "#page-info", f"rows 101–200 of {cluster.wiki.num_rows}")
    expected = flight_sql(cluster, ADMIN, "SELECT page FROM wiki ORDER BY __time LIMIT 100 OFFSET 100")
    assert [r[1] for r in rendered_rows(page)] == [r[0] for r in expected]
    page.close()


def test_error_shows_the_server_message_and_query_id(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    run_query(page, "SELECT no_such_column FROM wiki")
    error = page.text_content("#query-output .error")
    assert "no_such_column" in error and "query id: console-" in error
    assert "Traceback" not in error
    page.close()


def test_explain_opens(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    page.fill("#sql-editor", "SELECT channel, COUNT(*) FROM wiki GROUP BY channel")
    page.click("#explain-query")
    page.wait_for_selector("#explain-output")
    assert "wiki" in page.text_content("#explain-output")
    shot(page, "explain")
    page.close()


def test_cancel_a_running_query(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    with BusyHistorical(cluster.historicals[0]):  # the query waits on the historical until cancelled
        page.fill("#sql-editor", "SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1")
        page.click("#run-query")
        page.wait_for_selector("#cancel-query:not([disabled])")
        page.click("#cancel-query")
        page.wait_for_function("() => document.querySelector('#query-status').textContent === 'cancelled'")
    assert "Query cancelled" in page.text_content("#query-output .error")
    page.close()


def test_markup_in_data_is_text(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    run_query(page, "SELECT label FROM secret ORDER BY __time")
    assert [r[0] for r in rendered_rows(page)] == [XSS, "plain"]
    assert page.query_selector("#query-output img") is None
    page.goto(cluster.url + "#segments/secret")  # a hash change: no reload, the session stays
    page.wait_for_selector("#segments-table tbody tr")
    assert page.dialogs == [] and page.faults == []
    page.close()


def test_each_view_renders(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    page.click("#nav-data")
    page.wait_for_selector("#data-table tbody tr, #data-table .error")
    assert page.query_selector("#data-table .error") is None, page.text_content("#data-table")
    rows = {r[0]: r for r in page.eval_on_selector_all(
        "#data-table tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.textContent))")}
    assert {"wiki", "secret"} <= set(rows)  # "big" too once the 100k-row test ran
    expected = flight_sql(cluster, ADMIN, "SELECT COUNT(*), SUM(num_rows) FROM sys.segments "
                                          "WHERE datasource = 'wiki' AND is_overshadowed = 0")
    assert (rows["wiki"][1], rows["wiki"][2]) == tuple(str(v) for v in expected[0])
    assert rows["wiki"][2] == str(cluster.wiki.num_rows) and rows["wiki"][5] == "fully available"
    shot(page, "data")
    # Each datasource links to its catalog definition's form.
    page.click("#data-table tr:has(td:text-is('wiki')) a.catalog-link")
    page.wait_for_selector("#catalog-form h3:has-text('wiki')")
    assert page.url.endswith("#catalog/wiki")
    page.click("#nav-data")
    page.wait_for_selector("#data-table tbody tr")
    page.click("#data-table tbody tr td.link >> text=wiki")
    page.wait_for_selector("#segments-table tbody tr")
    assert page.input_value("#segments-datasource") == "wiki"
    statuses = page.eval_on_selector_all("#segments-table tbody tr td:last-child", "cs => cs.map(c => c.textContent)")
    assert statuses and set(statuses) == {"available"}
    if cluster.router.files.has_charts:  # uPlot from npm (scripts/bootstrap.sh ensure_console_deps)
        page.wait_for_selector("#segments-chart canvas")
        assert "rows" in page.text_content("#segments-chart .u-legend")
    else:
        assert "no chart" in page.text_content("#segments-chart")
    shot(page, "segments")
    page.click("#nav-ingestion")
    page.wait_for_selector("#tasks-table p, #tasks-table table")
    shot(page, "ingestion")
    page.click("#nav-services")
    page.wait_for_selector("#services-table tbody tr")
    types = page.eval_on_selector_all("#services-table tbody tr td:nth-child(2)", "cs => cs.map(c => c.textContent)")
    assert {"broker", "coordinator", "historical"} <= set(types)
    shot(page, "services")
    page.click("#nav-retention")
    page.wait_for_selector("#rules-list tbody tr")
    assert "_default" in page.text_content("#rules-list")
    page.click("#rules-list tr:has(td:text-is('_default')) button.edit-rules")
    page.wait_for_selector("#rules-json")
    shot(page, "retention")
    assert page.dialogs == [] and page.faults == []
    page.close()


def test_retention_edit_saves_through_the_router(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    page.click("#nav-retention")
    page.wait_for_selector("#rules-list tbody tr")
    page.click("#rules-list tr:has(td:text-is('_default')) button.edit-rules")
    page.fill("#rules-json", '[{"type": "loadForever", "tieredReplicants": {"nowhere": 1}}]')
    page.click("#save-rules")
    # Only the admin sets _default; a bad tier is accepted with a warning (Druid's behaviour).
    page.wait_for_selector("#rules-message p, #rules-message .error")
    message = page.text_content("#rules-message")
    assert "saved" in message and "nowhere" in message
    page.fill("#rules-json", '[{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]')
    page.click("#save-rules")
    page.wait_for_function("() => document.querySelector('#rules-message').textContent === 'saved'")
    page.fill("#rules-json", '[{"type": "loadSometimes"}]')
    page.click("#save-rules")
    assert "loadSometimes" in page.text_content("#rules-message .error")

    # A partial load rule made in the form goes first, in Druid's JSON; saved, the list shows its
    # matcher and onCannotMatch.
    page.fill("#rules-json", '[{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]')
    page.click("#add-partial-rule")
    assert "at least one projection name" in page.text_content("#rules-message .error")
    page.select_option("#partial-type", "loadPartialByPeriod")
    page.fill("#partial-span", "P3650D")
    page.select_option("#partial-matcher", "globProjection")
    page.fill("#partial-names", "*_daily, by_?")
    page.fill("#partial-excludes", "secret_daily")
    page.select_option("#partial-on-cannot-match", "fallThrough")
    page.click("#add-partial-rule")
    partial = {"type": "loadPartialByPeriod", "period": "P3650D", "includeFuture": True,
               "tieredReplicants": {"_default_tier": 1},
               "matcher": {"type": "globProjection", "patterns": ["*_daily", "by_?"], "excludes": ["secret_daily"]},
               "onCannotMatch": "fallThrough"}
    whole = {"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}
    assert json.loads(page.input_value("#rules-json")) == [partial, whole]
    page.click("#save-rules")
    page.wait_for_function("() => document.querySelector('#rules-message').textContent === 'saved'")
    page.wait_for_selector("#rules-list tr:has(td:text-is('_default')) .rule-matcher")
    row = "#rules-list tr:has(td:text-is('_default'))"
    assert page.text_content(f"{row} .rule-matcher") == "projections (globProjection): *_daily, by_? except secret_daily"
    assert page.text_content(f"{row} .rule-on-cannot-match") == "onCannotMatch fallThrough"
    assert "loadPartialByPeriod period P3650D _default_tier×1" in page.text_content(f"{row} li")
    # Edited again: rule 0 loaded into the form, its matcher and onCannotMatch changed, put back in place.
    page.click(f"{row} button.edit-rules")
    page.fill("#partial-index", "0")
    page.click("#load-partial-rule")
    assert page.input_value("#partial-names") == "*_daily, by_?" and page.input_value("#partial-span") == "P3650D"
    page.select_option("#partial-matcher", "exactProjection")
    page.fill("#partial-names", "by_page_daily")
    page.select_option("#partial-on-cannot-match", "fullLoad")
    page.click("#add-partial-rule")
    # As stored (the coordinator fills in useDefaultTierForNull, which the form keeps).
    edited = {**partial, "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}, "onCannotMatch": "fullLoad",
              "useDefaultTierForNull": True}
    assert json.loads(page.input_value("#rules-json")) == [edited, {**whole, "useDefaultTierForNull": True}]
    page.click("#save-rules")
    page.wait_for_function("() => document.querySelector('#rules-message').textContent === 'saved'")
    page.wait_for_selector(f"{row} .rule-on-cannot-match:text-is('onCannotMatch fullLoad')")
    assert page.text_content(f"{row} .rule-matcher") == "projections (exactProjection): by_page_daily"
    page.fill("#partial-index", "1")
    page.click("#load-partial-rule")
    assert "rule 1 is not a partial load rule" in page.text_content("#rules-message .error")
    # A matcher the coordinator refuses shows its message naming the rule and field.
    page.fill("#rules-json", '[{"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": []}}]')
    page.click("#save-rules")
    message = page.text_content("#rules-message .error:has-text('matcher.names')")
    assert "rule 0 (loadPartialForever): field 'matcher.names' must be a non-empty list" in message
    page.fill("#rules-json", json.dumps([whole]))
    page.click("#save-rules")
    page.wait_for_function("() => document.querySelector('#rules-message').textContent === 'saved'")
    page.close()


def test_reader_never_sees_the_datasource_it_may_not_read(browser, cluster):
    page = signed_in(browser, cluster, READER)
    page.wait_for_selector("#schema-tree .tree-name")
    assert page.eval_on_selector_all("#schema-tree .tree-name", "ns => ns.map(n => n.textContent)") == ["wiki"]
    run_query(page, "SELECT COUNT(*) FROM secret")
    assert "secret" in page.text_content("#query-output .error")
    page.click("#nav-data")
    page.wait_for_selector("#data-table tbody tr")
    assert "secret" not in page.text_content("#data-table")
    page.click("#nav-segments")
    page.wait_for_selector("#segments-table tbody tr")
    assert page.eval_on_selector_all("#segments-datasource option", "os => os.map(o => o.value)") == ["wiki"]
    page.click("#nav-retention")
    page.wait_for_selector("#rules-list tbody tr, #rules-list .error")
    assert "secret" not in page.text_content("#rules-list")
    page.close()


def test_insert_from_the_query_view_runs_its_task_to_success_in_ingestion(browser, cluster):
    """The task is held PENDING (the module's runner starts none) until the page shows it, then
    released to a real Spark driver: the Ingestion view's refresh follows it to SUCCESS, and the
    inserted row answers SQL."""
    page = signed_in(browser, cluster, ADMIN)
    run_query(page, "SET maxParseExceptions = 1;\n"
                    f"INSERT INTO fresh SELECT TIME_PARSE(ts) AS __time, s, n FROM {EXTERN_WITH_A_BAD_ROW} "
                    "PARTITIONED BY DAY")
    task_id = page.text_content("#submitted-task a")
    assert task_id and task_id in page.text_content("#query-status")
    page.click("#submitted-task a")
    page.wait_for_selector(f"#tasks-table td:text-is('{task_id}')")
    row = page.eval_on_selector(f"#tasks-table tr:has(td:text-is('{task_id}'))",
                                "r => Array.from(r.cells, c => c.textContent)")
    expected = flight_sql(cluster, ADMIN, f"SELECT type, datasource, status FROM sys.tasks WHERE task_id = '{task_id}'")
    assert tuple(row[1:4]) == expected[0] and expected[0][1:] == ("fresh", "PENDING")
    runner = cluster.coordinator.task_runner
    runner.max_running = 1
    runner.wake()
    try:
        # A Spark driver's cold start on a loaded machine: the deadline is the task's, not the page's.
        page.wait_for_function("id => Array.from(document.querySelectorAll('#tasks-table tr')).some(r => "
                               "r.cells[0]?.textContent === id && r.cells[3]?.textContent === 'SUCCESS')",
                               arg=task_id, timeout=TASK_TIMEOUT_MS)
    finally:
        runner.max_running = 0
    page.click(f"#tasks-table td:text-is('{task_id}')")
    page.wait_for_selector("#task-report pre")
    assert task_id in page.text_content("#task-report pre")
    # Its report: Druid's row stats and the parse exception (the input row and where it was), and its log.
    report = requests.get(f"{cluster.url}druid/indexer/v1/task/{task_id}/reports", auth=ADMIN, timeout=60).json()
    payload = report["ingestionStatsAndErrors"]["payload"]
    assert payload["rowStats"]["buildSegments"]["unparseable"] == 1
    [event] = payload["unparseableEvents"]["buildSegments"]
    page.wait_for_selector("#task-parse-exceptions tbody tr")
    assert page.eval_on_selector_all("#task-parse-exceptions tbody tr",
                                     "rs => rs.map(r => Array.from(r.cells, c => c.textContent))") == [
        ["buildSegments", event["input"], "; ".join(event["details"])]]
    assert "oops" in event["input"] and "line 2" in event["details"][0]
    assert page.eval_on_selector("#task-row-stats tbody tr", "r => Array.from(r.cells, c => c.textContent)") == [
        "buildSegments", "1", "0", "0", "1"]
    log = requests.get(f"{cluster.url}druid/indexer/v1/task/{task_id}/log", auth=ADMIN, timeout=60)
    assert log.status_code == 200 and log.text.strip() and "no log" not in log.text
    shown = page.text_content("#task-log")  # read when the page opened it: the log may have grown since
    assert shown.strip() and shown[:200] in log.text
    shot(page, "ingestion")
    cluster.wait_queryable("fresh", 1)
    assert flight_sql(cluster, ADMIN, "SELECT s FROM fresh") == [("a",)]
    page.close()


def test_history_lists_the_users_queries_not_the_consoles_own(browser, cluster):
    page = signed_in(browser, cluster, READER)
    run_query(page, "SELECT COUNT(*) AS history_probe FROM wiki")
    page.click("#query-history")
    page.wait_for_selector("#history-table")
    sqls = page.eval_on_selector_all("#history-table tbody tr td:last-child", "cs => cs.map(c => c.textContent)")
    assert sqls[0] == "SELECT COUNT(*) AS history_probe FROM wiki"
    assert not any("INFORMATION_SCHEMA" in s or "sys.queries" in s for s in sqls)
    page.click("#history-table tbody tr td:last-child")
    assert page.input_value("#sql-editor") == sqls[0]
    page.close()


def test_a_100k_row_result_keeps_one_page_in_the_dom(browser, cluster):
    """The result stays on the broker (an asynchronous statement): the page fetches one page of
    rows per request and holds one page in the DOM."""
    big = demo_table(100_000, days=1)
    cluster.wait_queryable("big", len(cluster.publish(big, "big")))
    page = signed_in(browser, cluster, ADMIN)
    fetched = []
    page.on("request", lambda r: fetched.append((r.url, r.post_data)) if "/druid/v2/sql" in r.url else None)
    run_query(page, 'SELECT __time, page, "user", added FROM big')
    assert page.text_content("#query-status").startswith("100000 rows in ")
    assert page.eval_on_selector_all("#query-output tbody tr", "rs => rs.length") == 100
    assert page.text_content("#page-info") == "rows 1–100 of 100000"
    page.click("#page-next")
    wait_text(page, "#page-info", "rows 101–200 of 100000")
    assert page.eval_on_selector_all("#query-output tbody tr", "rs => rs.length") == 100
    assert page.eval_on_selector_all("table", "ts => ts.length") == 1
    results = [u for u, _ in fetched if "/results" in u]
    assert [u.split("?")[1] for u in results] == ["page=0&resultFormat=array", "page=1&resultFormat=array"]
    # The query itself went to the statements API only (the view's own reads of sys tables use /druid/v2/sql).
    assert [u.rsplit("/", 1)[1] for u, body in fetched if body and "FROM big" in body] == ["statements"]
    page.close()


def test_context_form_keys_reach_the_query(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    page.click("#context-summary")
    page.fill("#ctx-sqlTimeZone", "Asia/Kolkata")  # a typed key of the form
    page.fill("#query-context", '{"sqlCurrentTimestamp": "2000-01-01T00:00:00Z"}')  # and the JSON of others
    run_query(page, "SELECT CURRENT_TIMESTAMP AS now, TIMESTAMP '2015-09-12 00:00:00' AS t")
    assert rendered_rows(page) == [["2000-01-01T05:30:00.000+05:30", "2015-09-12T00:00:00.000+05:30"]]
    assert page.text_content("#context-summary") == "Query context (2 set)"
    page.fill("#ctx-sqlTimeZone", "")
    run_query(page, "SELECT CURRENT_TIMESTAMP AS now, TIMESTAMP '2015-09-12 00:00:00' AS t")
    assert rendered_rows(page) == [["2000-01-01T00:00:00.000Z", "2015-09-12T00:00:00.000Z"]]
    page.fill("#ctx-maxJoinRows", "-3")
    run_query(page, "SELECT 1")
    assert "maxJoinRows must be a whole number >= 0" in page.text_content("#query-output .error")
    page.fill("#ctx-maxJoinRows", "")
    page.fill("#query-context", '{"sqlCurrentTimestamp": 1')
    run_query(page, "SELECT 1")
    assert "not valid JSON" in page.text_content("#query-output .error")
    page.fill("#query-context", "")
    page.select_option("#ctx-forceProjections", "true")  # wiki has no projections: the engine refuses
    run_query(page, "SELECT channel, COUNT(*) FROM wiki GROUP BY channel")
    assert "forceProjections" in page.text_content("#query-output .error")
    assert page.faults == []
    page.close()


def test_download_comes_from_the_statement(browser, cluster):
    page = signed_in(browser, cluster, ADMIN)
    sql = "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY channel ORDER BY channel"
    run_query(page, sql)
    expected = flight_sql(cluster, ADMIN, sql)
    with page.expect_download() as csv_download:
        page.click("#download-csv")
    lines = open(csv_download.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0] == "channel,n" and lines[-1] == ""  # Druid's csv ends with a blank line
    assert lines[1:-1] == [f"{c if c is not None else ''},{n}" for c, n in expected]
    with page.expect_download() as json_download:
        page.click("#download-json")
    import json  # noqa: PLC0415 - only this test reads JSON

    assert json.load(open(json_download.value.path(), encoding="utf-8")) == [
        {"channel": c, "n": n} for c, n in expected]
    page.close()
