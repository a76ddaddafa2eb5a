// The Query view: SQL editor, datasource/column tree (INFORMATION_SCHEMA), run and cancel, EXPLAIN,
// the query context as a form, and the result paged on the broker: a SELECT runs as an
// asynchronous statement (/druid/v2/sql/statements) and the page fetches one page of PAGE_ROWS
// rows at a time, so a large result is never in the browser whole (nor more than a page in the
// DOM); CSV/JSON downloads come from the statement's results as bytes.
import { ApiError, cancelSql, deleteStatement, errorMessage, newQueryId, sql, sqlObjects, statementBlob, statementPage,
  statementStatus, submitStatement } from "./api.js";
import { el, errorBox, replace, table, cellText } from "./dom.js";
import { contextForm } from "./query_context.js";

const PAGE_ROWS = 100;
const POLL_FIRST_MS = 10;
const POLL_MAX_MS = 250;

export function queryView() {
  // result: {id, columns, total, pages, explain, rows (explain only)}; running: the query id, or
  // "cancelled" once Cancel was pressed (the statement is deleted as soon as its id is known).
  const state = { result: null, page: 0, rows: [], running: null, statement: null };
  const editor = el("textarea", { id: "sql-editor", spellcheck: "false", rows: 8,
    "aria-label": "SQL" });
  editor.value = sessionStorage.getItem("strata.console.sql") || "SELECT 1";
  const context = contextForm();
  const status = el("div", { id: "query-status", class: "status" });
  const output = el("div", { id: "query-output" });
  const tree = el("div", { id: "schema-tree", class: "tree" }, "loading tables…");
  const runButton = el("button", { id: "run-query", onclick: () => run(false) }, "Run");
  const explainButton = el("button", { id: "explain-query", onclick: () => run(true) }, "Explain");
  const cancelButton = el("button", { id: "cancel-query", disabled: true, onclick: cancel }, "Cancel");
  const csvButton = el("button", { id: "download-csv", disabled: true, onclick: () => download("csv") }, "CSV");
  const jsonButton = el("button", { id: "download-json", disabled: true, onclick: () => download("json") }, "JSON");

  editor.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(false); }
  });

  function forget() {
    // The broker keeps a finished statement's rows for an hour: the page lets go of the last one.
    if (state.result && state.result.id && !state.result.explain) deleteStatement(state.result.id).catch(() => {});
    state.result = null;
  }

  async function run(explain) {
    if (state.running) return;
    sessionStorage.setItem("strata.console.sql", editor.value);
    let queryId = newQueryId();
    state.running = queryId;
    runButton.disabled = explainButton.disabled = true;
    cancelButton.disabled = false;
    replace(output);
    forget();
    const started = performance.now();
    try {
      const ctx = context.value();
      if (ctx.sqlQueryId !== undefined) queryId = state.running = String(ctx.sqlQueryId);
      status.textContent = `running… (query id ${queryId})`;
      if (explain) {
        const query = "EXPLAIN PLAN FOR " + editor.value.trim().replace(/;\s*$/, "");
        const result = await sql(query, { ...ctx, sqlQueryId: queryId });
        state.result = { ...result, explain: true };
        status.textContent = `plan in ${Math.round(performance.now() - started)} ms · query id ${queryId}`;
        render();
        return;
      }
      const submitted = await submitStatement(editor.value, { rowsPerPage: PAGE_ROWS, ...ctx, sqlQueryId: queryId });
      if (submitted.state === "ACCEPTED") {
        // INSERT/REPLACE: the statement is the ingestion task it started (SELECTs start RUNNING).
        const task = submitted.queryId;
        status.textContent = `submitted ingestion task ${task} in ${Math.round(performance.now() - started)} ms`;
        replace(output, el("p", { id: "submitted-task" }, "Task ", el("a", { href: "#ingestion" }, task),
          " started; the Ingestion view follows it."));
        return;
      }
      const id = submitted.queryId;
      state.statement = id;
      if (state.running === "cancelled") await deleteStatement(id);  // Cancel came before the id
      const done = await finished(id);
      if (done.state !== "SUCCESS") {
        throw new ApiError(0, errorMessage(0, done.errorDetails) || `the statement ended ${done.state}`, id);
      }
      const info = done.result || { numTotalRows: 0, pages: [] };
      state.result = { id, explain: false, columns: done.schema.map((c) => c.name), total: info.numTotalRows,
        pages: info.pages };
      await show(0);
      const ms = Math.round(performance.now() - started);
      status.textContent = `${info.numTotalRows} rows in ${ms} ms · query id ${id}`;
      scanned(id, status.textContent);
    } catch (error) {
      state.result = null;
      const failure = error instanceof ApiError ? error : new ApiError(0, error.message, queryId);
      if (!failure.queryId) failure.queryId = queryId;
      status.textContent = state.running === "cancelled" ? "cancelled" : "failed";
      replace(output, errorBox(failure));
    } finally {
      state.running = state.statement = null;
      runButton.disabled = explainButton.disabled = false;
      cancelButton.disabled = true;
      csvButton.disabled = jsonButton.disabled = !state.result || state.result.explain;
    }
  }

  async function finished(id) {
    // Polled until it is no longer RUNNING; the broker's timeout bounds how long that is.
    let wait = POLL_FIRST_MS;
    for (;;) {
      const current = await statementStatus(id);
      if (current.state !== "RUNNING" && current.state !== "ACCEPTED") return current;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, POLL_MAX_MS);
    }
  }

  async function show(page) {
    // One page from the broker replaces the last one: only it is held, only it is in the DOM.
    const { id, pages } = state.result;
    state.rows = pages.length ? await statementPage(id, page) : [];
    state.page = page;
    render();
  }

  async function turn(page) {
    try {
      await show(page);
    } catch (error) {
      replace(output, errorBox(error));
    }
  }

  async function scanned(queryId, line) {
    // Rows scanned come from the query log (sys.queries) once the query is recorded there.
    try {
      const [row] = await sqlObjects(
        `SELECT rows_scanned FROM sys.queries WHERE query_id = '${queryId.replace(/'/g, "''")}'`);
      if (row && row.rows_scanned !== null && status.textContent === line) {
        status.textContent = `${line} · ${row.rows_scanned} rows scanned`;
      }
    } catch { /* the log may not be readable by this user: the line stays as it is */ }
  }

  async function cancel() {
    const queryId = state.running;
    if (!queryId || queryId === "cancelled") return;
    state.running = "cancelled";
    status.textContent = `cancelling ${queryId}…`;
    try {
      if (state.statement) await deleteStatement(state.statement);
      else await cancelSql(queryId);  // EXPLAIN, or a statement still being planned (then deleted once known)
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) replace(output, errorBox(error));
    }
  }

  function render() {
    const { columns, explain } = state.result;
    if (explain) {
      replace(output, el("div", { id: "explain-output" }, state.result.rows.map((row) =>
        el("div", { class: "explain-row" }, columns.map((c, i) => el("div", {},
          el("h4", {}, c), el("pre", {}, pretty(row[i]))))))));
      return;
    }
    const { total, pages } = state.result;
    const first = pages.slice(0, state.page).reduce((n, p) => n + p.numRows, 0);
    const rows = state.rows;
    const pager = el("div", { class: "pager" },
      el("button", { id: "page-prev", disabled: state.page === 0, onclick: () => turn(state.page - 1) }, "‹ Prev"),
      el("span", { id: "page-info" }, total ? `rows ${first + 1}–${first + rows.length} of ${total}` : "no rows"),
      el("button", { id: "page-next", disabled: state.page >= pages.length - 1, onclick: () => turn(state.page + 1) },
        "Next ›"));
    replace(output, pager, el("div", { class: "table-wrap" }, table(columns, rows)));
  }

  async function download(kind) {
    // The broker writes the file (Druid's csv / object formats); the CSV gets the header row here.
    const { id, columns } = state.result;
    try {
      const body = await statementBlob(id, kind === "csv" ? "csv" : "object");
      const quote = (s) => /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
      const blob = kind === "csv"
        ? new Blob([columns.map(quote).join(",") + "\n", body], { type: "text/csv" })
        : new Blob([body], { type: "application/json" });
      const url = URL.createObjectURL(blob);
      const link = el("a", { href: url, download: `result.${kind}` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (error) {
      replace(output, errorBox(error));
    }
  }

  async function showHistory() {
    // The query log (sys.queries): the admin sees everyone's, other users their own.
    try {
      const entries = await sqlObjects("SELECT query_id, start_time, status, duration_ms, rows_scanned, \"sql\" " +
        "FROM sys.queries WHERE kind = 'sql' AND query_id NOT LIKE 'console-meta-%' ORDER BY start_time DESC LIMIT 50");
      const grid = table(["started", "status", "ms", "rows scanned", "sql"], entries.map((q) =>
        [q.start_time, q.status, q.duration_ms, q.rows_scanned, q.sql]));
      grid.id = "history-table";
      grid.querySelectorAll("tbody tr").forEach((tr, i) => {
        tr.lastChild.classList.add("link");
        tr.lastChild.addEventListener("click", () => { editor.value = entries[i].sql; });
      });
      replace(output, el("h3", {}, "History"), el("div", { class: "table-wrap" }, grid));
      status.textContent = `${entries.length} recent queries (click one to edit it)`;
    } catch (error) {
      replace(output, errorBox(error));
    }
  }

  async function loadTree() {
    try {
      const columns = await sqlObjects("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS " +
        "WHERE TABLE_SCHEMA = 'druid' ORDER BY TABLE_NAME, ORDINAL_POSITION");
      const byTable = new Map();
      for (const c of columns) {
        if (!byTable.has(c.TABLE_NAME)) byTable.set(c.TABLE_NAME, []);
        byTable.get(c.TABLE_NAME).push(c);
      }
      replace(tree, byTable.size === 0 ? el("p", {}, "no datasources") : [...byTable].map(([name, cols]) =>
        el("details", { class: "tree-table" },
          el("summary", { class: "tree-name", ondblclick: () => {
            editor.value = `SELECT *\nFROM "${name.replace(/"/g, '""')}"\nLIMIT 100`;
          } }, name),
          el("ul", {}, cols.map((c) => el("li", {}, el("span", { class: "col-name" }, c.COLUMN_NAME), " ",
            el("span", { class: "col-type" }, c.DATA_TYPE)))))));
    } catch (error) {
      replace(tree, errorBox(error));
    }
  }
  loadTree();

  return el("section", { id: "query-view", class: "view query-layout" },
    el("aside", {}, el("h3", {}, "Datasources"), tree),
    el("div", { class: "query-main" }, editor,
      el("div", { class: "toolbar" }, runButton, cancelButton, explainButton,
        el("button", { id: "query-history", onclick: showHistory }, "History"),
        el("span", { class: "spacer" }), "Download ", csvButton, jsonButton),
      context.element, status, output));
}

function pretty(value) {
  if (typeof value !== "string") return cellText(value);
  try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
}
