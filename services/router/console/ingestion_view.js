// The Ingestion view: tasks from sys.tasks (the task API's view), refreshed every few seconds while
// open so a running task's status moves; a task's report opens from its id.
import { request, sqlObjects } from "./api.js";
import { el, errorBox, replace, table } from "./dom.js";

const COLUMNS = ["task_id", "type", "datasource", "status", "runner_status", "created_time", "duration", "error_msg"];
const REFRESH_MS = 3000;

export function ingestionView(initialTask) {
  const body = el("div", { id: "tasks-table" }, "loading…");
  const report = el("div", { id: "task-report" });
  let timer = null;

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
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  async function openReport(taskId) {
    try {
      const { value } = await request("GET", `/druid/indexer/v1/task/${encodeURIComponent(taskId)}/reports`);
      replace(report, el("h3", {}, "Report of ", taskId), el("pre", {}, JSON.stringify(value, null, 2)));
    } catch (error) {
      replace(report, errorBox(error));
    }
  }

  load();
  if (initialTask) openReport(initialTask);  // #ingestion/<task id>: that task's report opens
  const section = el("section", { id: "ingestion-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Tasks"), el("button", { onclick: load }, "Refresh")), body, report);
  // Polls only while the view is in the page.
  timer = setInterval(() => { if (!section.isConnected) clearInterval(timer); else load(); }, REFRESH_MS);
  return section;
}
