// The Catalog view: a datasource's catalog definition as a form (columns and their declared types,
// segment granularity, cluster keys, sealed, projections), saved through the coordinator's catalog
// REST API (/druid/coordinator/v1/catalog). Beside each column: the type SQL sees now
// (INFORMATION_SCHEMA.COLUMNS) and the schema decisions that chose it (sys.schema_decisions).
// A save replaces the whole definition at the version it was read at, so a concurrent edit is
// refused (409) rather than silently overwritten; the coordinator's message says what was wrong.
import { request, sqlObjects } from "./api.js";
import { el, errorBox, replace, table } from "./dom.js";

const BASE = "/druid/coordinator/v1/catalog";
// What the catalog accepts (common/catalog/validation.py); "" leaves the column's type to the segments.
export const SQL_TYPES = ["VARCHAR", "BIGINT", "DOUBLE", "FLOAT", "TIMESTAMP", "COMPLEX<json>", "ARRAY<VARCHAR>",
  "ARRAY<BIGINT>", "ARRAY<DOUBLE>"];
const GRANULARITIES = ["PT1S", "PT1M", "PT5M", "PT10M", "PT15M", "PT30M", "PT1H", "PT6H", "PT8H", "P1D", "P1W",
  "P1M", "P3M", "P1Y", "ALL"];
const PROJECTION_TEMPLATE = { type: "aggregate", name: "", groupingColumns: [{ type: "auto", name: "" }],
  aggregators: [{ type: "count", name: "count" }] };

export function tablePath(name) {
  return `${BASE}/tables/druid/${encodeURIComponent(name)}`;
}

// The catalog entries of schema druid (TableMetadata) by name; {} when the user may see none.
export async function catalogEntries() {
  const { value } = await request("GET", `${BASE}/schemas/druid/tables`);
  return Object.fromEntries((value || []).map((m) => [m.id.name, m]));
}

function sqlText(value) {
  return "'" + String(value).replace(/'/g, "''") + "'";
}

export function catalogView(initial) {
  const list = el("div", { id: "catalog-list" }, "loading…");
  const editor = el("div", { id: "catalog-editor" });
  // Outside the form, so "saved" stays while the form opens again at the new version.
  const message = el("div", { id: "catalog-message" });

  async function load() {
    try {
      const [entries, tables] = await Promise.all([catalogEntries(), sqlObjects(
        "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' ORDER BY TABLE_NAME")]);
      const names = [...new Set([...Object.keys(entries), ...tables.map((t) => t.TABLE_NAME)])].sort();
      const grid = table(["datasource", "catalog definition", "version"], names.map((n) => [n,
        entries[n] ? `${(entries[n].spec.columns || []).length} columns declared` : "none (schemaless)",
        entries[n] ? entries[n].updateTime : ""]));
      grid.querySelectorAll("tbody tr").forEach((tr, i) => {
        tr.firstChild.classList.add("link");
        tr.firstChild.addEventListener("click", () => open(names[i]));
      });
      replace(list, names.length ? grid : el("p", {}, "no datasources or catalog entries"));
    } catch (error) {
      replace(list, errorBox(error));
    }
  }

  async function open(name, keepMessage = false) {
    if (!keepMessage) replace(message);
    replace(editor, "loading…");
    try {
      const entries = await catalogEntries();
      const [columns, decisions] = name ? await Promise.all([
        sqlObjects(`SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid'
          AND TABLE_NAME = ${sqlText(name)} ORDER BY ORDINAL_POSITION`),
        sqlObjects(`SELECT column_name, scope, types_seen, type_chosen, rule FROM sys.schema_decisions
          WHERE datasource = ${sqlText(name)}`)]) : [[], []];
      replace(editor, tableForm(name, entries[name] || null, columns, decisions, message, () => {
        load();
        open(name, true);
      }));
    } catch (error) {
      replace(editor, errorBox(error));
    }
  }

  load();
  if (initial) open(initial);
  return el("section", { id: "catalog-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Catalog"), el("button", { onclick: load }, "Refresh"),
      el("button", { id: "catalog-new", onclick: () => {
        replace(message);
        replace(editor, tableForm(null, null, [], [], message, (n) => { load(); open(n, true); }));
      } }, "New table")),
    el("div", { class: "catalog-layout" }, list, el("div", {}, editor, message)));
}

// The form for one datasource: ``entry`` its TableMetadata (null: none yet), ``discovered`` its
// INFORMATION_SCHEMA columns, ``decisions`` its sys.schema_decisions rows; ``message`` shows the
// outcome of a save; ``saved(name)`` after a save.
function tableForm(name, entry, discovered, decisions, message, saved) {
  const spec = entry ? entry.spec : { type: "datasource", properties: {}, columns: [] };
  const props = spec.properties || {};
  const sqlType = Object.fromEntries(discovered.map((c) => [c.COLUMN_NAME, c.DATA_TYPE]));
  const decided = {};
  for (const d of decisions) (decided[d.column_name] ||= []).push(d);
  // The declared columns first, then the discovered ones not declared (a schemaless datasource's
  // form starts from what its segments hold).
  const declared = spec.columns || [];
  const rowsOf = [...declared.map((c) => ({ ...c, declared: true })),
    ...discovered.filter((c) => !declared.some((d) => d.name === c.COLUMN_NAME))
      .map((c) => ({ name: c.COLUMN_NAME, declared: false }))];

  const nameInput = el("input", { id: "catalog-name", value: name || "", disabled: name ? true : undefined,
    placeholder: "datasource name", required: true });
  const description = el("input", { id: "catalog-description", value: props.description || "" });
  const granularity = el("select", { id: "catalog-granularity" }, el("option", { value: "" }, "(not set)"),
    GRANULARITIES.map((g) => el("option", { value: g }, g)));
  granularity.value = props.segmentGranularity ? String(props.segmentGranularity).toUpperCase() : "";
  if (props.segmentGranularity && !granularity.value) {  // a name such as "day": show it as stored
    granularity.append(el("option", { value: props.segmentGranularity }, props.segmentGranularity));
    granularity.value = props.segmentGranularity;
  }
  const targetRows = el("input", { id: "catalog-target-rows", type: "number", min: 1,
    value: props.targetSegmentRows ?? "" });
  const clusterKeys = el("input", { id: "catalog-cluster-keys", placeholder: "channel, page DESC",
    value: (props.clusterKeys || []).map((k) => k.column + (k.desc ? " DESC" : "")).join(", ") });
  const sealed = el("input", { id: "catalog-sealed", type: "checkbox", checked: props.sealed ? true : undefined });

  const columnRows = el("tbody", { id: "catalog-columns" });
  function addColumn(col) {
    const type = el("select", { class: "col-sqltype" }, el("option", { value: "" }, "(discovered)"),
      SQL_TYPES.map((t) => el("option", { value: t }, t)));
    type.value = col.sqlType && SQL_TYPES.includes(col.sqlType) ? col.sqlType : "";
    if (col.sqlType && !type.value) {
      type.append(el("option", { value: col.sqlType }, col.sqlType));
      type.value = col.sqlType;
    }
    const colName = el("input", { class: "col-name", value: col.name || "", placeholder: "column" });
    // Only ticked rows are saved: a discovered column stays undeclared unless ticked.
    const isDeclared = el("input", { type: "checkbox", class: "col-declared", checked: col.declared !== false || undefined,
      title: "declared in the catalog" });
    type.addEventListener("change", () => { if (type.value) isDeclared.checked = true; });
    const tr = el("tr", { "data-properties": JSON.stringify(col.properties || {}) },
      el("td", {}, isDeclared), el("td", {}, colName), el("td", {}, type),
      el("td", { class: "col-query-type" }, col.name && sqlType[col.name] ? sqlType[col.name] : "—"),
      el("td", { class: "col-decisions" }, (decided[col.name] || []).map((d) =>
        el("div", {}, `${d.types_seen} → ${d.type_chosen} (${d.rule}; ${d.scope})`))),
      el("td", {}, el("button", { type: "button", class: "remove-column", onclick: () => tr.remove() }, "Remove")));
    columnRows.append(tr);
  }
  rowsOf.forEach(addColumn);

  const projections = el("div", { id: "catalog-projections" });
  function addProjection(p) {
    const text = el("textarea", { class: "projection-json", rows: 6, spellcheck: "false" });
    text.value = JSON.stringify(p, null, 2);
    const box = el("div", { class: "projection-box" }, text,
      el("button", { type: "button", class: "remove-projection", onclick: () => box.remove() }, "Remove"));
    projections.append(box);
  }
  (props.projections || []).forEach(addProjection);

  async function save(e) {
    e.preventDefault();
    replace(message);
    let body;
    try {
      body = specFromForm();
    } catch (error) {
      replace(message, errorBox(error));
      return;
    }
    const target = name || nameInput.value.trim();
    const query = entry ? `?action=Replace&version=${entry.updateTime}` : "?action=New";
    try {
      const { value } = await request("POST", tablePath(target) + query, body);
      replace(message, el("p", { class: "ok" }, `saved (version ${value.version})`));
      saved(target);
    } catch (error) {
      replace(message, errorBox(error));
    }
  }

  function specFromForm() {
    const out = { ...props };
    for (const key of ["description", "segmentGranularity", "targetSegmentRows", "clusterKeys", "sealed", "projections"]) {
      delete out[key];
    }
    if (description.value.trim()) out.description = description.value.trim();
    if (granularity.value) out.segmentGranularity = granularity.value;
    if (targetRows.value !== "") out.targetSegmentRows = Number(targetRows.value);
    const keys = clusterKeys.value.split(",").map((k) => k.trim()).filter(Boolean).map((k) => {
      const m = k.match(/^(.+?)(?:\s+(ASC|DESC))?$/i);
      return m[2] && m[2].toUpperCase() === "DESC" ? { column: m[1], desc: true } : { column: m[1] };
    });
    if (keys.length) out.clusterKeys = keys;
    if (sealed.checked) out.sealed = true;
    const projs = Array.from(projections.querySelectorAll(".projection-json"), (t, i) => {
      try { return JSON.parse(t.value); } catch (error) {
        throw new Error(`projection ${i + 1} is not valid JSON: ${error.message}`);
      }
    });
    if (projs.length) out.projections = projs;
    const columns = Array.from(columnRows.querySelectorAll("tr"), (tr) => {
      if (!tr.querySelector(".col-declared").checked) return {};
      const col = { name: tr.querySelector(".col-name").value.trim() };
      const type = tr.querySelector(".col-sqltype").value;
      if (type) col.sqlType = type;
      const colProps = JSON.parse(tr.getAttribute("data-properties") || "{}");
      if (Object.keys(colProps).length) col.properties = colProps;
      return col;
    }).filter((c) => c.name);
    return { type: "datasource", properties: out, columns };
  }

  const field = (label, input) => el("label", {}, label, " ", input);
  return el("form", { id: "catalog-form", class: "catalog-form", onsubmit: save },
    el("h3", {}, name ? `Definition of ${name}` : "New table", entry ? ` (version ${entry.updateTime})` : name
      ? " (no catalog entry yet: saving creates one)" : ""),
    el("div", { class: "form-grid" }, field("Name", nameInput), field("Description", description),
      field("Segment granularity", granularity), field("Target rows per segment", targetRows),
      field("Cluster keys", clusterKeys), field("Sealed (only declared columns are ingested)", sealed)),
    el("h4", {}, "Columns"),
    el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["declared", "column", "declared type", "type in SQL now",
      "schema decisions", ""].map((h) => el("th", {}, h)))), columnRows),
    el("button", { type: "button", id: "catalog-add-column", onclick: () => addColumn({}) }, "Add column"),
    el("h4", {}, "Projections"), projections,
    el("button", { type: "button", id: "catalog-add-projection",
      onclick: () => addProjection(PROJECTION_TEMPLATE) }, "Add projection"),
    el("div", { class: "toolbar" }, el("button", { type: "submit", id: "catalog-save" }, "Save definition")));
}
