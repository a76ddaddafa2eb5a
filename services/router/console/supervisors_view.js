// The Supervisors view: each Kafka supervisor (GET /druid/indexer/v1/supervisor?full) with its
// state, its status payload's committed offsets and lag per partition, and suspend / resume /
// reset / terminate; a spec can be submitted (POST .../supervisor). Beside the table, the lag per
// partition of one chosen supervisor over time (supervisor_lag_chart.js), its status read as often
// as the coordinator refreshes it (tuningConfig.offsetFetchPeriod, at least PT1S). Reset and
// terminate ask for a second click rather than a dialog (no window.confirm in the console). A row's
// click charts that supervisor; under the chart, chosen partitions of the charted supervisor are
// set to typed offsets (POST .../resetOffsets, Druid's body: the other partitions keep theirs).
import { request } from "./api.js";
import { el, errorBox, replace } from "./dom.js";
import { LagHistory, drawLagChart, partitionLag, periodMs } from "./supervisor_lag_chart.js";

export { partitionLag };

const BASE = "/druid/indexer/v1/supervisor";
const REFRESH_MS = 5000;
const TICK_MS = 1000;
const DEFAULT_FETCH_PERIOD_MS = 30_000;  // Druid's offsetFetchPeriod default

export function supervisorsView() {
  const body = el("div", { id: "supervisors-table" }, "loading…");
  const message = el("div", { id: "supervisors-message" });
  const specText = el("textarea", { id: "supervisor-spec", rows: 8, spellcheck: "false",
    placeholder: '{"type": "kafka", "spec": {"dataSchema": {...}, "ioConfig": {"topic": ..., ...}}}' });
  const chartPicker = el("select", { id: "supervisor-lag-select", "aria-label": "supervisor to chart" });
  const chart = el("div", { id: "supervisor-lag-chart" });
  const offsetsForm = el("div", { id: "supervisor-offsets" });
  let offsetsKey = null;
  const payloads = new Map();  // supervisor id -> its last status payload
  const topics = new Map();  // supervisor id -> its topic
  const histories = new Map();  // supervisor id -> LagHistory (only the listed ones are kept)
  const fetchPeriods = new Map();  // supervisor id -> its offsetFetchPeriod in ms
  let lastLoad = 0;
  let lastChartRead = 0;
  let timer = null;

  function historyOf(id) {
    if (!histories.has(id)) histories.set(id, new LagHistory());
    return histories.get(id);
  }

  async function load() {
    lastLoad = Date.now();
    try {
      const { value: supervisors } = await request("GET", `${BASE}?full`);
      const statuses = await Promise.all(supervisors.map((s) =>
        request("GET", `${BASE}/${encodeURIComponent(s.id)}/status`).then((r) => r.value.payload, (e) => ({ error: e }))));
      const ids = supervisors.map((s) => s.id);
      for (const gone of [...histories.keys()].filter((id) => !ids.includes(id))) histories.delete(gone);
      supervisors.forEach((s, i) => {
        fetchPeriods.set(s.id, fetchPeriodMs(s.spec));
        topics.set(s.id, (((s.spec && s.spec.spec) || s.spec || {}).ioConfig || {}).topic || statuses[i].stream);
        if (!statuses[i].error) { historyOf(s.id).record(statuses[i]); payloads.set(s.id, statuses[i]); }
      });
      updatePicker(ids);
      drawChart();
      drawOffsetsForm();
      if (body.querySelector(".armed")) return;  // a reset/terminate waits for its second click: keep its button
      if (!supervisors.length) { replace(body, el("p", {}, "no supervisors")); return; }
      replace(body, el("div", { class: "table-wrap" }, el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["supervisor", "", "datasource", "topic", "state", "detailed state", "healthy",
          "committed offsets", "lag", "aggregate lag", "active tasks"].map((h) => el("th", {}, h)))),
        el("tbody", {}, supervisors.map((s, i) => row(s, statuses[i]))))));
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  function updatePicker(ids) {
    const chosen = ids.includes(chartPicker.value) ? chartPicker.value : ids[0];
    const current = [...chartPicker.options].map((o) => o.value);
    if (JSON.stringify(current) !== JSON.stringify(ids)) {
      replace(chartPicker, ids.map((id) => el("option", { value: id }, id)));
    }
    if (chosen !== undefined) chartPicker.value = chosen;
  }

  function drawChart() {
    const id = chartPicker.value || null;
    body.querySelectorAll("tr[data-supervisor]").forEach((tr) => tr.classList.toggle("charted", tr.dataset.supervisor === id));
    return drawLagChart(chart, id, id ? histories.get(id) : null);
  }

  // The charted supervisor's partitions, each with a tick box and the offset to set; built again
  // only when the supervisor or its partitions change, so a refresh keeps what is being typed.
  function drawOffsetsForm() {
    const id = chartPicker.value || null;
    const payload = id ? payloads.get(id) : null;
    const parts = payload ? partitionLag(payload) : [];
    const key = JSON.stringify([id, parts.map((o) => o.partition)]);
    if (key === offsetsKey) return;
    offsetsKey = key;
    if (!id || !parts.length) {
      replace(offsetsForm, id ? el("p", { class: "status" }, `no partitions known yet for ${id}`) : null);
      return;
    }
    const latest = payload.latestOffsets || {};
    const rows = parts.map((o) => el("tr", { "data-partition": o.partition },
      el("td", {}, el("input", { type: "checkbox", class: "offset-chosen", "aria-label": `partition ${o.partition}` })),
      el("td", {}, `partition ${o.partition}`),
      el("td", {}, o.committed ?? "none"), el("td", {}, latest[o.partition] ?? "?"),
      el("td", {}, el("input", { type: "number", min: 0, step: 1, class: "offset-value",
        value: o.committed ?? latest[o.partition] ?? 0 }))));
    replace(offsetsForm, el("h3", {}, "Set offsets of ", id),
      el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["", "partition", "committed", "latest", "new offset"]
        .map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
      el("button", { id: "reset-offsets", onclick: () => resetOffsets(id, rows) }, "Set chosen partitions' offsets"));
  }

  async function resetOffsets(id, rows) {
    const chosen = rows.filter((tr) => tr.querySelector(".offset-chosen").checked);
    if (!chosen.length) {
      replace(message, errorBox(new Error("tick the partitions whose offsets to set")));
      return;
    }
    const map = {};
    for (const tr of chosen) {
      const text = tr.querySelector(".offset-value").value.trim();
      if (!/^\d+$/.test(text)) {
        replace(message, errorBox(new Error(`partition ${tr.dataset.partition}: the offset must be a whole number `
          + `of 0 or more, got '${text}'`)));
        return;
      }
      map[tr.dataset.partition] = Number(text);
    }
    try {
      await request("POST", `${BASE}/${encodeURIComponent(id)}/resetOffsets`, { type: "kafka", partitions: {
        type: "end", stream: topics.get(id), partitionOffsetMap: map } });
      replace(message, el("p", { class: "ok" }, `${id}: offsets set: `
        + Object.entries(map).map(([p, o]) => `partition ${p} at ${o}`).join(", ")));
      offsetsKey = null;  // built again with the new committed offsets
    } catch (error) {
      replace(message, errorBox(error));
    }
    load();
  }

  function chartSupervisor(id) {
    if (chartPicker.value === id) return;
    chartPicker.value = id;
    drawChart();
    drawOffsetsForm();
    readCharted();
  }

  // Between the table's refreshes, the charted supervisor's status as often as its offsets are read.
  async function readCharted() {
    const id = chartPicker.value;
    if (!id) return;
    lastChartRead = Date.now();
    try {
      const { value } = await request("GET", `${BASE}/${encodeURIComponent(id)}/status`);
      payloads.set(id, value.payload);
      if (id === chartPicker.value && historyOf(id).record(value.payload)) drawChart();
    } catch {
      // the table's next refresh shows the error
    }
  }

  function row(s, payload) {
    const spec = s.spec && s.spec.spec ? s.spec.spec : s.spec || {};
    const io = spec.ioConfig || {};
    const offsets = payload.error ? [] : partitionLag(payload);
    const lagKnown = offsets.some((o) => o.lag !== undefined);
    // A click on the row (not on its buttons) charts this supervisor.
    return el("tr", { "data-supervisor": s.id, title: "click to chart its lag",
      class: [String(s.state || "").toLowerCase(), s.id === chartPicker.value ? "charted" : ""].join(" ").trim(),
      onclick: (e) => { if (!e.target.closest("button")) chartSupervisor(s.id); } },
      el("td", {}, s.id),
      el("td", { class: "actions" },
        s.suspended ? action(s.id, "resume", "Resume") : action(s.id, "suspend", "Suspend"),
        confirmedAction(s.id, "reset", "Reset", "reset: committed offsets forgotten"),
        confirmedAction(s.id, "terminate", "Terminate", "terminated")),
      el("td", {}, (spec.dataSchema || {}).dataSource || payload.dataSource || ""),
      el("td", { class: "supervisor-topic" }, io.topic || payload.stream || ""),
      el("td", { class: "supervisor-state" }, s.state),
      el("td", {}, s.detailedState), el("td", {}, s.healthy ? "yes" : "no"),
      el("td", { class: "committed-offsets" }, offsets.filter((o) => o.committed !== undefined)
        .map((o) => el("div", {}, `partition ${o.partition}: ${o.committed}`))),
      el("td", { class: "lag" }, lagKnown ? offsets.filter((o) => o.lag !== undefined)
        .map((o) => el("div", { "data-partition": o.partition }, `partition ${o.partition}: ${o.lag}`)) : "not reported"),
      el("td", { class: "aggregate-lag" }, payload.aggregateLag ?? ""),
      el("td", { class: "active-tasks" },
        payload.error ? errorBox(payload.error) : (payload.activeTasks || []).map((t) => t.id).join(", ")));
  }

  function action(id, verb, label) {
    return el("button", { class: `supervisor-${verb}`, onclick: async (e) => {
      e.target.disabled = true;
      try {
        await request("POST", `${BASE}/${encodeURIComponent(id)}/${verb}`);
        replace(message, el("p", { class: "ok" }, `${id}: ${verb} done`));
      } catch (error) {
        replace(message, errorBox(error));
      }
      load();
    } }, label);
  }

  // The first click arms the button (its label asks to confirm); the second one sends the request.
  function confirmedAction(id, verb, label, done) {
    const button = el("button", { class: `supervisor-${verb}`, onclick: async () => {
      if (!button.classList.contains("armed")) {
        button.classList.add("armed");
        button.textContent = `Confirm ${verb}`;
        return;
      }
      button.classList.remove("armed");
      button.disabled = true;
      try {
        await request("POST", `${BASE}/${encodeURIComponent(id)}/${verb}`);
        replace(message, el("p", { class: "ok" }, `${id}: ${done}`));
      } catch (error) {
        replace(message, errorBox(error));
      }
      load();
    } }, label);
    return button;
  }

  async function submit() {
    let spec;
    try { spec = JSON.parse(specText.value); } catch (error) {
      replace(message, errorBox(new Error(`the supervisor spec is not valid JSON: ${error.message}`)));
      return;
    }
    try {
      const { value } = await request("POST", BASE, spec);
      replace(message, el("p", { class: "ok" }, `supervisor ${value.id} submitted`));
      load();
    } catch (error) {
      replace(message, errorBox(error));
    }
  }

  chartPicker.addEventListener("change", () => { drawChart(); drawOffsetsForm(); readCharted(); });
  load();
  const section = el("section", { id: "supervisors-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Supervisors"), el("button", { onclick: load }, "Refresh")),
    el("div", { class: "supervisors-layout" }, body,
      el("div", { id: "supervisor-lag", class: "chart-panel" },
        el("div", { class: "toolbar" }, el("h3", {}, "Lag per partition"), chartPicker), chart, offsetsForm)),
    message,
    el("details", { id: "supervisor-submit" }, el("summary", {}, "Submit a supervisor spec"), specText,
      el("div", { class: "toolbar" }, el("button", { id: "submit-supervisor", onclick: submit }, "Submit"))));
  // Polls only while the view is in the page; the table not while a reset or terminate waits for its
  // second click.
  timer = setInterval(() => {
    if (!section.isConnected) { clearInterval(timer); return; }
    const now = Date.now();
    if (now - lastLoad >= REFRESH_MS && !body.querySelector(".armed")) load();
    else if (now - lastChartRead >= (fetchPeriods.get(chartPicker.value) ?? REFRESH_MS)) readCharted();
  }, TICK_MS);
  return section;
}

// The supervisor's offsetFetchPeriod (tuningConfig, in the spec or its "spec"), at least 1 s as the
// coordinator reads it.
function fetchPeriodMs(spec) {
  const tuning = ((spec && spec.spec) || spec || {}).tuningConfig || (spec && spec.tuningConfig) || {};
  return Math.max(1000, periodMs(tuning.offsetFetchPeriod, DEFAULT_FETCH_PERIOD_MS));
}
