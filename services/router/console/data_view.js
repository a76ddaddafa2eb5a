// The Data view: each datasource with its size, rows, segments, time range, availability and
// replicas: the coordinator's datasource summary (segments, size, time range) beside sys.segments
// (rows, availability, replicas). Both list only what the user may read. Each links to its segments
// and to its catalog definition's form.
import { request, sqlObjects } from "./api.js";
import { el, errorBox, formatBytes, replace, table } from "./dom.js";

const DATASOURCES_SQL = `SELECT datasource,
  COUNT(*) AS segments,
  SUM(num_rows) AS "rows",
  SUM(CASE WHEN is_available = 1 THEN 1 ELSE 0 END) AS available_segments,
  MIN(num_replicas) AS min_replicas
FROM sys.segments
WHERE is_published = 1 AND is_overshadowed = 0
GROUP BY datasource
ORDER BY datasource`;

export function dataView(openSegments) {
  const body = el("div", { id: "data-table" }, "loading…");
  async function load() {
    try {
      const [{ value: summaries }, counts] = await Promise.all([
        request("GET", "/druid/coordinator/v1/datasources?simple"), sqlObjects(DATASOURCES_SQL)]);
      const byName = new Map(counts.map((r) => [r.datasource, r]));
      const rows = summaries.map((d) => ({ datasource: d.name, ...d.properties.segments, ...(byName.get(d.name) || {}) }));
      if (!rows.length) { replace(body, el("p", {}, "no datasources")); return; }
      const columns = ["datasource", "segments", "rows", "size", "time range", "availability", "replicas", "catalog"];
      const grid = table(columns, rows.map((r) => [
        r.datasource, r.count, r.rows, formatBytes(r.size), `${r.minTime} / ${r.maxTime}`,
        r.segments === undefined ? "not served" : r.available_segments === r.segments ? "fully available"
          : `${(100 * r.available_segments / r.segments).toFixed(1)}% available`,
        r.min_replicas, ""]));
      // The datasource cell opens its segments; the last one links to its catalog definition's form.
      grid.querySelectorAll("tbody tr").forEach((tr, i) => {
        const cell = tr.firstChild;
        cell.classList.add("link");
        cell.addEventListener("click", () => openSegments(rows[i].datasource));
        tr.lastChild.append(el("a", { class: "catalog-link", href: "#catalog/" + encodeURIComponent(rows[i].datasource) },
          "definition"));
      });
      replace(body, grid);
    } catch (error) {
      replace(body, errorBox(error));
    }
  }
  load();
  return el("section", { id: "data-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Datasources"), el("button", { onclick: load }, "Refresh")), body);
}
