// The Ingestion view: tasks from sys.tasks (the task API's view) with their progress (rows read and
// written, parse exceptions, segments: a running task's latest progress report), refreshed every
// few seconds while open. A task opens from its id (or #ingestion/<task id>): its report from Druid's
// reports API (row stats and the parse exceptions, each naming its file and line, beside strata's
// report as JSON) and the tail of its log (Druid's task log API); an open task that is not finished
// is read again with each refresh.
import { request, sqlObjects, taskLog } from "./api.js";
import { el, errorBox, replace, table } from "./dom.js";

const COLUMNS = ["task_id", "type", "datasource", "status", "runner_status", "created_time", "duration",
  "rows_read", "rows_written", "parse_exceptions", "segments", "error_msg"];
const REFRESH_MS = 3000;
const LOG_TAIL_BYTES = 64 * 1024;
const FINAL = new Set(["SUCCESS", "FAILED", "CANCELED"]);

// Druid's unparseableEvents ({phase: [event]}; an event is a ParseExceptionReport or, from older
// Druid, a string) as rows: [phase, input, what went wrong].
export function parseExceptionRows(payload) {
  const rows = [];
  for (const [phase, events] of Object.entries((payload && payload.unparseableEvents) || {})) {
    for (const event of events || []) {
      if (typeof event === "string") rows.push([phase, "", event]);
      else rows.push([phase, event.input ?? "", (event.details || []).join("; ") || event.errorType || ""]);
    }
  }
  return rows;
}

function rowStats(payload) {
  const stats = (payload && payload.rowStats) || {};
  const phases = Object.entries(stats);
  if (!phases.length) return null;
  return table(["phase", "processed", "processed with error", "thrown away", "unparseable"],
    phases.map(([phase, s]) => [phase, s.processed, s.processedWithError, s.thrownAway, s.unparseable]));
}

export function ingestionView(initialTask) {
  const body = el("div", { id: "tasks-table" }, "loading…");
  const report = el("div", { id: "task-report" });
  let timer = null;
  let openTask = null;

  async function load() {
    try {
      const tasks = await sqlObjects("SELECT * FROM sys.tasks ORDER BY created_time DESC");
      const columns = COLUMNS.filter((c) => !tasks.length || c in tasks[0]);
      const grid = table(columns, tasks.map((t) => columns.map((c) => t[c])),
        (row) => String(row[columns.indexOf("status")] || "").toLowerCase());
      grid.querySelectorAll("tbody tr").forEach((tr, i) => {
        tr.firstChild.classList.add("link");
        tr.firstChild.addEventListener("click", () => openReport(tasks[i].task_id));
      });
      replace(body, tasks.length ? grid : el("p", {}, "no tasks"));
      const open = openTask && tasks.find((t) => t.task_id === openTask);
      if (open && !FINAL.has(open.status)) openReport(openTask);  // its progress, live
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  async function openReport(taskId) {
    openTask = taskId;
    const [reports, log] = await Promise.allSettled([
      request("GET", `/druid/indexer/v1/task/${encodeURIComponent(taskId)}/reports`), taskLog(taskId, LOG_TAIL_BYTES)]);
    if (openTask !== taskId) return;  // another task was opened meanwhile
    const parts = [el("h3", {}, "Task ", taskId)];
    if (reports.status === "fulfilled") {
      const value = reports.value.value;
      const payload = ((value || {}).ingestionStatsAndErrors || {}).payload;
      const stats = rowStats(payload);
      const exceptions = parseExceptionRows(payload);
      parts.push(el("pre", { id: "task-report-json" }, JSON.stringify(value, null, 2)));
      if (stats) parts.push(el("h4", {}, "Rows"), el("div", { id: "task-row-stats" }, stats));
      if (payload && payload.rowStats) {
        parts.push(el("h4", {}, "Parse exceptions"), el("div", { id: "task-parse-exceptions" }, exceptions.length
          ? table(["phase", "input", "error"], exceptions) : el("p", {}, "none")));
      }
    } else {
      parts.push(errorBox(reports.reason));
    }
    parts.push(el("h4", {}, `Log (its last ${LOG_TAIL_BYTES / 1024} KB)`),
      log.status === "fulfilled" ? el("pre", { id: "task-log" }, log.value || "(empty)") : errorBox(log.reason));
    replace(report, parts);
    const pre = report.querySelector("#task-log");
    if (pre) pre.scrollTop = pre.scrollHeight;  // the newest lines
  }

  load();
  if (initialTask) openReport(initialTask);  // #ingestion/<task id>: that task's report opens
  const section = el("section", { id: "ingestion-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Tasks"), el("button", { onclick: load }, "Refresh")), body, report);
  // Polls only while the view is in the page.
  timer = setInterval(() => { if (!section.isConnected) clearInterval(timer); else load(); }, REFRESH_MS);
  return section;
}
