// The Segments view: one datasource's segments as a filterable table; overshadowed and
// unavailable segments are marked (a row class and a status column saying which). Above it, a time
// line: rows per time chunk (uPlot, when scripts/bootstrap.sh installed it from npm).
import { sqlObjects } from "./api.js";
import { loadUPlot } from "./chart_library.js";
import { el, errorBox, formatBytes, replace, table } from "./dom.js";

const PAGE_ROWS = 200;

export function segmentsView(initialDatasource) {
  const picker = el("select", { id: "segments-datasource", "aria-label": "datasource" });
  const filter = el("input", { id: "segments-filter", placeholder: "filter (segment id, interval, version)" });
  const body = el("div", { id: "segments-table" }, "loading…");
  const chart = el("div", { id: "segments-chart" });
  let segments = [];

  function render() {
    const needle = filter.value.trim().toLowerCase();
    const shown = segments.filter((s) => !needle || [s.segment_id, s.start, s.end, s.version]
      .some((v) => String(v).toLowerCase().includes(needle)));
    const rows = shown.slice(0, PAGE_ROWS).map((s) => [
      s.segment_id, s.start, s.end, s.version, s.partition_num, formatBytes(s.size), s.num_rows, s.num_replicas,
      s.is_overshadowed === 1 ? "overshadowed" : s.is_available === 1 ? "available" : "unavailable"]);
    const grid = table(["segment", "start", "end", "version", "partition", "size", "rows", "replicas", "status"], rows,
      (row) => row[8] === "available" ? "" : row[8]);
    replace(body, el("p", { class: "status" }, shown.length > PAGE_ROWS
      ? `first ${PAGE_ROWS} of ${shown.length} segments (narrow the filter)` : `${shown.length} segments`),
      el("div", { class: "table-wrap" }, grid));
  }

  async function load(datasource) {
    replace(body, "loading…");
    try {
      segments = await sqlObjects(`SELECT segment_id, "start", "end", version, partition_num, "size", num_rows,
        num_replicas, is_available, is_overshadowed FROM sys.segments
        WHERE datasource = '${datasource.replace(/'/g, "''")}' AND is_published = 1 ORDER BY "start", partition_num`);
      render();
      drawTimeline(chart, segments);
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  async function init() {
    try {
      const names = (await sqlObjects("SELECT DISTINCT datasource FROM sys.segments ORDER BY datasource"))
        .map((r) => r.datasource);
      replace(picker, names.map((n) => el("option", { value: n }, n)));
      if (!names.length) { replace(body, el("p", {}, "no datasources")); return; }
      picker.value = names.includes(initialDatasource) ? initialDatasource : names[0];
      load(picker.value);
    } catch (error) {
      replace(body, errorBox(error));
    }
  }
  picker.addEventListener("change", () => load(picker.value));
  filter.addEventListener("input", render);
  init();
  return el("section", { id: "segments-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Segments"), picker, filter), chart, body);
}

async function drawTimeline(host, segments) {
  const uPlot = await loadUPlot();
  if (!uPlot) {
    replace(host, el("p", { class: "status" }, "(no chart: the console's npm dependencies are not installed)"));
    return;
  }
  // Rows of the active segments per time chunk (a chunk's partitions summed), as bars.
  const perChunk = new Map();
  for (const s of segments) {
    if (s.is_overshadowed === 1) continue;
    const t = Date.parse(s.start) / 1000;
    perChunk.set(t, (perChunk.get(t) || 0) + (s.num_rows || 0));
  }
  const times = [...perChunk.keys()].sort((a, b) => a - b);
  const last = Math.max(...segments.map((s) => Date.parse(s.end) / 1000));
  const data = [times, times.map((t) => perChunk.get(t))];
  replace(host);
  new uPlot({
    width: Math.min(1200, Math.max(400, host.clientWidth || 1000)), height: 180,
    series: [{}, { label: "rows", stroke: "#2f6fde", fill: "rgba(47,111,222,0.25)",
                   paths: uPlot.paths.bars({ size: [0.8, 60] }) }],
    scales: { x: { time: true, range: () => [times[0], Math.max(last, times[0] + 1)] } },
    axes: [{}, { size: 70 }],
  }, data, host);
}
