// The Retention view: the load/drop rules of each datasource (GET /druid/coordinator/v1/rules),
// and an editor that sets one datasource's rules (POST .../rules/{ds}); errors show the
// coordinator's message naming the rule and field at fault. Partial load rules (loadPartial*)
// show their projection matcher and onCannotMatch; the editor has a form that builds one (and
// one already in the list can be loaded into it, changed, and put back in its place).
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
          el("td", {}, el("ol", { class: "rules" }, value[name].map((rule) => el("li", {}, describe(rule), partialParts(rule))))),
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
    replace(editorHost, el("h3", {}, "Rules of ", name), text, el("div", { class: "toolbar" }, save),
      partialRuleForm(text, message), message);
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

const PARTIAL_TYPES = ["loadPartialForever", "loadPartialByPeriod", "loadPartialByInterval"];

// A partial rule's projection matcher and onCannotMatch, each in its own element.
function partialParts(rule) {
  if (!rule.matcher) return null;
  const m = rule.matcher;
  const what = m.type === "globProjection"
    ? `${(m.patterns || []).join(", ")}${m.excludes && m.excludes.length ? ` except ${m.excludes.join(", ")}` : ""}`
    : (m.names || []).join(", ");
  return [" ", el("span", { class: "rule-matcher" }, `projections (${m.type}): ${what}`),
    " ", el("span", { class: "rule-on-cannot-match" }, `onCannotMatch ${rule.onCannotMatch || "fullLoad"}`)];
}

function splitNames(text) {
  return text.split(",").map((s) => s.trim()).filter((s) => s !== "");
}

// The form that builds a partial load rule into the JSON being edited: added as the first rule
// (rules apply first match first, and a partial rule is usually narrower than the rest), or, once
// "Load" took rule N of the JSON into it, put back at N.
function partialRuleForm(text, message) {
  const type = el("select", { id: "partial-type" }, PARTIAL_TYPES.map((t) => el("option", { value: t }, t)));
  const span = el("input", { id: "partial-span", placeholder: "P1Y or 2024-01-01/2025-01-01" });
  const includeFuture = el("input", { id: "partial-include-future", type: "checkbox", checked: true });
  const tier = el("input", { id: "partial-tier", value: "_default_tier" });
  const replicas = el("input", { id: "partial-replicas", type: "number", min: "0", value: "1" });
  const matcher = el("select", { id: "partial-matcher" },
    el("option", { value: "exactProjection" }, "exactProjection (names)"),
    el("option", { value: "globProjection" }, "globProjection (patterns)"));
  const names = el("input", { id: "partial-names", placeholder: "by_page_daily, by_user_daily or *_daily" });
  const excludes = el("input", { id: "partial-excludes", placeholder: "names left out (globProjection)" });
  const onCannotMatch = el("select", { id: "partial-on-cannot-match" },
    el("option", { value: "fullLoad" }, "fullLoad (load the whole segment)"),
    el("option", { value: "fallThrough" }, "fallThrough (try the next rule)"));
  const index = el("input", { id: "partial-index", type: "number", min: "0", value: "0" });
  let editing = null; // the index "Load" took the rule from, put back there by "Save to rule N"
  let original = {}; // that rule as it was: fields the form does not show (useDefaultTierForNull) stay

  function rules() {
    const parsed = JSON.parse(text.value);
    if (!Array.isArray(parsed)) throw new Error("the rules must be a JSON list");
    return parsed;
  }

  function sync() {
    span.disabled = type.value === "loadPartialForever";
    includeFuture.disabled = type.value !== "loadPartialByPeriod";
    excludes.disabled = matcher.value !== "globProjection";
  }
  type.addEventListener("change", sync);
  matcher.addEventListener("change", sync);

  function built() {
    const listed = splitNames(names.value);
    if (listed.length === 0) throw new Error("give at least one projection name or pattern");
    const rule = { type: type.value };
    if (type.value === "loadPartialByPeriod") {
      rule.period = span.value.trim();
      rule.includeFuture = includeFuture.checked;
    }
    if (type.value === "loadPartialByInterval") rule.interval = span.value.trim();
    rule.tieredReplicants = { [tier.value.trim()]: Number(replicas.value) };
    rule.matcher = matcher.value === "globProjection"
      ? { type: "globProjection", patterns: listed, ...(splitNames(excludes.value).length ? { excludes: splitNames(excludes.value) } : {}) }
      : { type: "exactProjection", names: listed };
    rule.onCannotMatch = onCannotMatch.value;
    return rule;
  }

  function fail(error) {
    replace(message, errorBox(new Error(`partial rule: ${error.message}`)));
  }

  const add = el("button", { id: "add-partial-rule", type: "button", onclick: () => {
    try {
      const list = rules();
      const rule = built();
      if (editing !== null && editing < list.length) {
        const merged = { ...original, ...rule };
        if (rule.type !== "loadPartialByPeriod") { delete merged.period; delete merged.includeFuture; }
        if (rule.type !== "loadPartialByInterval") delete merged.interval;
        if (rule.matcher.type !== "globProjection") delete merged.matcher.excludes;
        list[editing] = merged;
      } else {
        list.unshift(rule);
      }
      editing = null;
      original = {};
      text.value = JSON.stringify(list, null, 2);
      replace(message);
      add.textContent = "Add as the first rule";
    } catch (error) { fail(error); }
  } }, "Add as the first rule");

  const loadRule = el("button", { id: "load-partial-rule", type: "button", onclick: () => {
    try {
      const n = Number(index.value);
      const rule = rules()[n];
      if (!rule || !PARTIAL_TYPES.includes(rule.type)) throw new Error(`rule ${n} is not a partial load rule`);
      type.value = rule.type;
      span.value = rule.period || rule.interval || "";
      includeFuture.checked = rule.includeFuture !== false;
      const [[t, r] = ["_default_tier", 1]] = Object.entries(rule.tieredReplicants || {});
      tier.value = t;
      replicas.value = String(r);
      matcher.value = rule.matcher.type;
      names.value = (rule.matcher.names || rule.matcher.patterns || []).join(", ");
      excludes.value = (rule.matcher.excludes || []).join(", ");
      onCannotMatch.value = rule.onCannotMatch || "fullLoad";
      editing = n;
      original = rule;
      add.textContent = `Save to rule ${n}`;
      sync();
      replace(message);
    } catch (error) { fail(error); }
  } }, "Load");

  sync();
  const field = (label, input) => el("label", {}, label, " ", input);
  return el("fieldset", { id: "partial-rule-form", class: "form-grid" },
    el("legend", {}, "Partial load rule (only some projections of each segment)"),
    field("Type", type), field("Period or interval", span), field("Include future", includeFuture),
    field("Tier", tier), field("Replicas", replicas), field("Matcher", matcher),
    field("Names or patterns (comma-separated)", names), field("Excludes", excludes),
    field("onCannotMatch", onCannotMatch),
    el("div", { class: "toolbar" }, add, " ", field("rule #", index), loadRule));
}
