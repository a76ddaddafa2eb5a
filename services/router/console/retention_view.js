// The Retention view: the load/drop rules of each datasource (GET /druid/coordinator/v1/rules),
// and an editor that sets one datasource's rules (POST .../rules/{ds}); errors show the
// coordinator's message naming the rule and field at fault.
import { request } from "./api.js";
import { el, errorBox, replace } from "./dom.js";

export function retentionView() {
  const body = el("div", { id: "rules-list" }, "loading…");
  const editorHost = el("div", { id: "rules-editor" });

  async function load() {
    try {
      const { value } = await request("GET", "/druid/coordinator/v1/rules");
      const names = Object.keys(value).sort((a, b) => (a === "_default") - (b === "_default") || a.localeCompare(b));
      replace(body, el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, el("th", {}, "datasource"), el("th", {}, "rules"), el("th", {}, ""))),
        el("tbody", {}, names.map((name) => el("tr", {},
          el("td", {}, name),
          el("td", {}, el("ol", { class: "rules" }, value[name].map((rule) => el("li", {}, describe(rule))))),
          el("td", {}, el("button", { class: "edit-rules", onclick: () => edit(name, value[name]) }, "Edit")))))));
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  function edit(name, rules) {
    const text = el("textarea", { id: "rules-json", rows: 10, spellcheck: "false" });
    text.value = JSON.stringify(rules, null, 2);
    const message = el("div", { id: "rules-message" });
    const save = el("button", { id: "save-rules", onclick: async () => {
      let parsed;
      try { parsed = JSON.parse(text.value); } catch (error) {
        replace(message, errorBox(new Error(`the rules are not valid JSON: ${error.message}`)));
        return;
      }
      try {
        const { value } = await request("POST", `/druid/coordinator/v1/rules/${encodeURIComponent(name)}`, parsed,
          { "X-Druid-Author": "console", "X-Druid-Comment": "edited in the web console" });
        const warnings = value && value.warnings ? value.warnings : [];
        replace(message, el("p", { class: "ok" }, "saved"), warnings.map((w) => el("p", { class: "warning" }, w)));
        load();
      } catch (error) {
        replace(message, errorBox(error));
      }
    } }, "Save");
    replace(editorHost, el("h3", {}, "Rules of ", name), text, el("div", { class: "toolbar" }, save), message);
  }

  load();
  return el("section", { id: "retention-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Retention rules"), el("button", { onclick: load }, "Refresh")),
    body, editorHost);
}

function describe(rule) {
  const where = rule.tieredReplicants ? " " + Object.entries(rule.tieredReplicants)
    .map(([tier, n]) => `${tier}×${n}`).join(", ") : "";
  const span = rule.period ? ` period ${rule.period}` : rule.interval ? ` interval ${rule.interval}` : "";
  return `${rule.type}${span}${where}`;
}
