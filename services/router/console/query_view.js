// The Query view: SQL editor, datasource/column tree (INFORMATION_SCHEMA), run and cancel by
// sqlQueryId, EXPLAIN, a paged result table (only one page is ever in the DOM), CSV/JSON download.
import { ApiError, cancelSql, newQueryId, sql, sqlObjects } from "./api.js";
import { el, errorBox, replace, table, cellText } from "./dom.js";

const PAGE_ROWS = 100;

export function queryView() {
  const state = { result: null, page: 0, running: null };
  const editor = el("textarea", { id: "sql-editor", spellcheck: "false", rows: 8,
    "aria-label": "SQL" });
  editor.value = sessionStorage.getItem("strata.console.sql") || "SELECT 1";
  const contextInput = el("input", { id: "query-context", placeholder: '{"timeout": 60000}',
    "aria-label": "query context (JSON)" });
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

  function context() {
    const text = contextInput.value.trim();
    if (!text) return {};
    const parsed = JSON.parse(text);  // a SyntaxError is shown like a server error
    if (typeof parsed !== "object" || Array.isArray(parsed) || parsed === null) {
      throw new Error("the query context must be a JSON object, e.g. {\"timeout\": 60000}");
    }
    return parsed;
  }

  async function run(explain) {
    if (state.running) return;
    sessionStorage.setItem("strata.console.sql", editor.value);
    const queryId = newQueryId();
    const query = explain ? "EXPLAIN PLAN FOR " + editor.value.trim().replace(/;\s*$/, "") : editor.value;
    state.running = queryId;
    runButton.disabled = explainButton.disabled = true;
    cancelButton.disabled = false;
    status.textContent = `running… (query id ${queryId})`;
    replace(output);
    const started = performance.now();
    try {
      const result = await sql(query, { ...context(), sqlQueryId: queryId });
      const ms = Math.round(performance.now() - started);
      state.result = { ...result, explain };
      state.page = 0;
      if (result.task) {
        status.textContent = `submitted ingestion task ${result.task} in ${ms} ms`;
        replace(output, el("p", { id: "submitted-task" }, "Task ", el("a", { href: "#ingestion" }, result.task),
          " started; the Ingestion view follows it."));
        return;
      }
      status.textContent = `${result.rows.length} rows in ${ms} ms · query id ${result.queryId || queryId}`;
      render();
      if (!explain) scanned(result.queryId || queryId, status.textContent);
    } catch (error) {
      state.result = null;
      const failure = error instanceof ApiError ? error : new ApiError(0, error.message, queryId);
      if (!failure.queryId) failure.queryId = queryId;
      status.textContent = state.running === "cancelled" ? "cancelled" : "failed";
      replace(output, errorBox(failure));
    } finally {
      state.running = null;
      runButton.disabled = explainButton.disabled = false;
      cancelButton.disabled = true;
      csvButton.disabled = jsonButton.disabled = !state.result;
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
      await cancelSql(queryId);
    } catch (error) {
      replace(output, errorBox(error));
    }
  }

  function render() {
    const { columns, rows, explain } = state.result;
    if (explain) {
      replace(output, el("div", { id: "explain-output" }, rows.map((row) =>
        el("div", { class: "explain-row" }, columns.map((c, i) => el("div", {},
          el("h4", {}, c), el("pre", {}, pretty(row[i]))))))));
      return;
    }
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
    const first = state.page * PAGE_ROWS;
    const pageRows = rows.slice(first, first + PAGE_ROWS);
    const pager = el("div", { class: "pager" },
      el("button", { id: "page-prev", disabled: state.page === 0, onclick: () => { state.page--; render(); } }, "‹ Prev"),
      el("span", { id: "page-info" }, rows.length ? `rows ${first + 1}–${first + pageRows.length} of ${rows.length}` : "no rows"),
      el("button", { id: "page-next", disabled: state.page >= pages - 1, onclick: () => { state.page++; render(); } }, "Next ›"));
    replace(output, pager, el("div", { class: "table-wrap" }, table(columns, pageRows)));
  }

  function download(kind) {
    const { columns, rows } = state.result;
    let text;
    if (kind === "csv") {
      const quote = (v) => {
        const s = v === null || v === undefined ? "" : cellText(v);
        return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
      };
      text = [columns, ...rows].map((r) => r.map(quote).join(",")).join("\r\n") + "\r\n";
    } else {
      text = JSON.stringify(rows.map((r) => Object.fromEntries(columns.map((c, i) => [c, r[i]]))));
    }
    const url = URL.createObjectURL(new Blob([text], { type: kind === "csv" ? "text/csv" : "application/json" }));
    const link = el("a", { href: url, download: `result.${kind}` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
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
        el("label", {}, "context ", contextInput), el("span", { class: "spacer" }), "Download ", csvButton, jsonButton),
      status, output));
}

function pretty(value) {
  if (typeof value !== "string") return cellText(value);
  try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
}
