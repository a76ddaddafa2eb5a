// The Supervisors view: each Kafka supervisor (GET /druid/indexer/v1/supervisor?full) with its
// state, its status payload's committed offsets per partition and lag where the payload carries
// it, and suspend / resume / terminate; a spec can be submitted (POST .../supervisor). Terminate
// asks for a second click rather than a dialog (no window.confirm in the console).
import { request } from "./api.js";
import { el, errorBox, replace } from "./dom.js";

const BASE = "/druid/indexer/v1/supervisor";
const REFRESH_MS = 5000;

// Lag per partition when the payload has Druid's latestOffsets beside offsets consumed or committed.
export function partitionLag(payload) {
  const latest = payload.latestOffsets || {};
  const current = payload.currentOffsets || payload.committedOffsets || {};
  const lag = payload.lag || {};
  const parts = new Set([...Object.keys(latest), ...Object.keys(current), ...Object.keys(lag)]);
  return [...parts].sort((a, b) => Number(a) - Number(b)).map((p) => ({
    partition: p, committed: payload.committedOffsets ? payload.committedOffsets[p] : undefined,
    lag: p in lag ? lag[p] : p in latest && p in current ? latest[p] - current[p] : undefined }));
}

export function supervisorsView() {
  const body = el("div", { id: "supervisors-table" }, "loading…");
  const message = el("div", { id: "supervisors-message" });
  const specText = el("textarea", { id: "supervisor-spec", rows: 8, spellcheck: "false",
    placeholder: '{"type": "kafka", "spec": {"dataSchema": {...}, "ioConfig": {"topic": ..., ...}}}' });
  let timer = null;

  async function load() {
    try {
      const { value: supervisors } = await request("GET", `${BASE}?full`);
      const statuses = await Promise.all(supervisors.map((s) =>
        request("GET", `${BASE}/${encodeURIComponent(s.id)}/status`).then((r) => r.value.payload, (e) => ({ error: e }))));
      if (body.querySelector(".armed")) return;  // a terminate waits for its second click: keep its button
      if (!supervisors.length) { replace(body, el("p", {}, "no supervisors")); return; }
      replace(body, el("div", { class: "table-wrap" }, el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["supervisor", "", "datasource", "topic", "state", "detailed state", "healthy",
          "committed offsets", "lag", "aggregate lag", "active tasks"].map((h) => el("th", {}, h)))),
        el("tbody", {}, supervisors.map((s, i) => row(s, statuses[i]))))));
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  function row(s, payload) {
    const spec = s.spec && s.spec.spec ? s.spec.spec : s.spec || {};
    const io = spec.ioConfig || {};
    const offsets = payload.error ? [] : partitionLag(payload);
    const lagKnown = offsets.some((o) => o.lag !== undefined);
    return el("tr", { "data-supervisor": s.id, class: String(s.state || "").toLowerCase() },
      el("td", {}, s.id),
      el("td", { class: "actions" },
        s.suspended ? action(s.id, "resume", "Resume") : action(s.id, "suspend", "Suspend"),
        terminateButton(s.id)),
      el("td", {}, (spec.dataSchema || {}).dataSource || payload.dataSource || ""),
      el("td", { class: "supervisor-topic" }, io.topic || payload.stream || ""),
      el("td", { class: "supervisor-state" }, s.state),
      el("td", {}, s.detailedState), el("td", {}, s.healthy ? "yes" : "no"),
      el("td", { class: "committed-offsets" }, offsets.filter((o) => o.committed !== undefined)
        .map((o) => el("div", {}, `partition ${o.partition}: ${o.committed}`))),
      el("td", { class: "lag" }, lagKnown ? offsets.filter((o) => o.lag !== undefined)
        .map((o) => el("div", {}, `partition ${o.partition}: ${o.lag}`)) : "not reported"),
      el("td", {}, payload.aggregateLag ?? ""),
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

  function terminateButton(id) {
    const button = el("button", { class: "supervisor-terminate", onclick: async () => {
      if (!button.classList.contains("armed")) {
        button.classList.add("armed");
        button.textContent = "Confirm terminate";
        return;
      }
      button.classList.remove("armed");
      button.disabled = true;
      try {
        await request("POST", `${BASE}/${encodeURIComponent(id)}/terminate`);
        replace(message, el("p", { class: "ok" }, `${id}: terminated`));
      } catch (error) {
        replace(message, errorBox(error));
      }
      load();
    } }, "Terminate");
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

  load();
  const section = el("section", { id: "supervisors-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Supervisors"), el("button", { onclick: load }, "Refresh")),
    body, message,
    el("details", { id: "supervisor-submit" }, el("summary", {}, "Submit a supervisor spec"), specText,
      el("div", { class: "toolbar" }, el("button", { id: "submit-supervisor", onclick: submit }, "Submit"))));
  // Polls only while the view is in the page, and not while a terminate waits for its second click.
  timer = setInterval(() => {
    if (!section.isConnected) clearInterval(timer);
    else if (!body.querySelector(".armed")) load();
  }, REFRESH_MS);
  return section;
}
