// The Projections view, per datasource: the projections it has (sys.projections: the catalog's
// definitions and what segments hold), how often each served a query's segments or was refused
// and why (from the query log, sys.queries.tables), and the projection advisor's proposals
// (sys.projection_advice) with an action that adds one to the catalog definition (its ALTER TABLE
// .. ADD PROJECTION statement), then an offer to compact the datasource so its segments get it:
// Druid's compact task through the task API (POST /druid/indexer/v1/task) over the interval its
// segments cover, the same offer shown whenever a catalog projection is missing from segments.
import { request, sql, sqlObjects } from "./api.js";
import { el, errorBox, formatBytes, replace, table } from "./dom.js";

function sqlText(value) {
  return "'" + String(value).replace(/'/g, "''") + "'";
}

// Segment reads of ``datasource`` per projection, from sys.queries' ``tables`` (JSON lists of
// {datasource, projection, segments, rejected: {projection: why}}): {total, base, hits: {p: n},
// misses: {p: n}, reasons: {p: {why: n}}}.
export function usageOf(datasource, records) {
  const out = { total: 0, base: 0, queries: 0, hits: {}, misses: {}, reasons: {} };
  for (const record of records) {
    let groups;
    try { groups = JSON.parse(record.tables || "[]"); } catch { continue; }
    const mine = groups.filter((g) => g.datasource === datasource);
    if (mine.length) out.queries += 1;
    for (const g of mine) {
      out.total += g.segments;
      if (g.projection === "base") out.base += g.segments;
      else out.hits[g.projection] = (out.hits[g.projection] || 0) + g.segments;
      for (const [p, why] of Object.entries(g.rejected || {})) {
        out.misses[p] = (out.misses[p] || 0) + g.segments;
        const reasons = (out.reasons[p] ||= {});
        reasons[why] = (reasons[why] || 0) + g.segments;
      }
    }
  }
  return out;
}

function rate(n, d) {
  return d ? `${(100 * n / d).toFixed(1)}%` : "—";
}

export function projectionsView(initial) {
  const picker = el("select", { id: "projections-datasource", onchange: () => load() });
  const body = el("div", { id: "projections-body" }, "loading…");

  async function datasources() {
    try {
      const names = (await sqlObjects("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' "
        + "ORDER BY TABLE_NAME")).map((r) => r.TABLE_NAME);
      replace(picker, names.map((n) => el("option", { value: n }, n)));
      if (initial && names.includes(initial)) picker.value = initial;
      if (!names.length) { replace(body, el("p", {}, "no datasources")); return; }
      load();
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  async function load() {
    const ds = picker.value;
    if (!ds) return;
    try {
      const [defined, records, advice] = await Promise.all([
        sqlObjects(`SELECT name, defined_in_catalog, segments_with, segments_total, projection_rows, base_rows, spec
          FROM sys.projections WHERE datasource = ${sqlText(ds)} ORDER BY name`),
        sqlObjects("SELECT tables FROM sys.queries WHERE status = 'ok' AND tables <> '[]'"),
        sqlObjects(`SELECT * FROM sys.projection_advice WHERE datasource = ${sqlText(ds)} ORDER BY rank`)]);
      const usage = usageOf(ds, records);
      const names = [...new Set([...defined.map((d) => d.name), ...Object.keys(usage.hits), ...Object.keys(usage.misses)])];
      const byName = Object.fromEntries(defined.map((d) => [d.name, d]));
      const definedTable = names.length ? table(
        ["projection", "in catalog", "segments with it", "rows (projection / base)", "segments served", "refused",
          "hit rate", "why refused", "definition"],
        names.map((n) => {
          const d = byName[n] || {};
          const hits = usage.hits[n] || 0;
          const misses = usage.misses[n] || 0;
          const reasons = Object.entries(usage.reasons[n] || {}).sort((a, b) => b[1] - a[1])
            .map(([why, k]) => `${why} (${k})`).join("; ");
          return [n, d.defined_in_catalog === 1 ? "yes" : d.defined_in_catalog === 0 ? "no (segments only)" : "",
            d.segments_total !== undefined ? `${d.segments_with} of ${d.segments_total}` : "",
            d.base_rows !== undefined ? `${d.projection_rows} / ${d.base_rows}` : "",
            hits, misses, rate(hits, hits + misses), reasons, d.spec ?? ""];
        })) : el("p", {}, "no projections defined");
      const summary = el("p", { id: "projections-summary" }, usage.total
        ? `the query log holds ${usage.queries} queries on ${ds}: ${usage.total - usage.base} of ${usage.total} `
          + `segment reads served by a projection (${rate(usage.total - usage.base, usage.total)})`
        : `the query log holds no queries on ${ds}`);
      const missing = defined.filter((d) => d.defined_in_catalog === 1 && d.segments_with < d.segments_total)
        .map((d) => d.name);
      const offer = missing.length ? el("p", { id: "compaction-offer", class: "warning" },
        `${missing.join(", ")}: in the catalog, not yet in every segment of ${ds}. `, compactButton(ds)) : null;
      replace(body, el("h3", {}, "Projections"), summary, el("div", { id: "projections-table", class: "table-wrap" }, definedTable),
        offer,
        el("h3", {}, "Advisor's proposals"), el("div", { id: "advice-table" }, adviceTable(ds, advice, load)),
        el("div", { id: "advice-message" }));
    } catch (error) {
      replace(body, errorBox(error));
    }
  }

  datasources();
  return el("section", { id: "projections-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Projections"), picker, el("button", { onclick: load }, "Refresh")),
    body);
}

function adviceTable(ds, advice, reload) {
  if (!advice.length) {
    return el("p", {}, "no proposals: the query log holds no queries on this datasource that a new projection "
      + "would make at least twice as cheap");
  }
  const grid = table(["#", "", "projection", "columns", "time", "queries", "rows scanned now", "with it", "factor",
    "storage", "estimate", "statement"], advice.map((a) => [a.rank, "", a.projection, a.grouping_columns || "—",
    a.granularity, a.queries, a.rows_scanned_without, a.rows_scanned_with, `${Number(a.factor).toFixed(1)}×`,
    formatBytes(a.storage_bytes), a.estimate, a.statement]));
  grid.querySelectorAll("tbody tr").forEach((tr, i) => {
    const button = el("button", { class: "add-projection", onclick: async () => {
      const message = document.getElementById("advice-message");
      button.disabled = true;
      try {
        await sql(advice[i].statement);
        await reload();  // the view is built again: the new projection listed, the proposal gone
        replace(document.getElementById("advice-message"), el("p", { class: "ok" },
          `projection ${advice[i].projection} added to the catalog definition of ${ds}; segments get it when `
          + `${ds} is next compacted. `, compactButton(ds)));
      } catch (error) {
        button.disabled = false;
        replace(message, errorBox(error));
      }
    } }, "Add this projection");
    tr.cells[1].append(button);
    tr.lastChild.title = advice[i].statement;  // the whole statement on hover; the cell is cut
  });
  return el("div", { class: "table-wrap" }, grid);
}

// The interval the datasource's segments cover (published, not overshadowed), as Druid writes one.
async function segmentsInterval(ds) {
  const [span] = await sqlObjects(`SELECT MIN("start") AS s, MAX("end") AS e FROM sys.segments
    WHERE datasource = ${sqlText(ds)} AND is_published = 1 AND is_overshadowed = 0`);
  return span && span.s && span.e ? `${span.s}/${span.e}` : null;
}

// Submits Druid's compact task for all of ``ds``'s segments; the answer names the task, which the
// Ingestion view follows.
function compactButton(ds) {
  const button = el("button", { class: "compact-now", onclick: async () => {
    const host = button.parentNode;
    button.disabled = true;
    try {
      const interval = await segmentsInterval(ds);
      if (!interval) throw new Error(`${ds} has no published segments to compact`);
      const { value } = await request("POST", "/druid/indexer/v1/task", { type: "compact", dataSource: ds,
        ioConfig: { type: "compact", inputSpec: { type: "interval", interval } } });
      replace(host, el("p", { class: "ok compaction-submitted" }, `compaction task `,
        el("a", { href: "#ingestion/" + encodeURIComponent(value.task), class: "compaction-task" }, value.task),
        ` submitted for ${ds} over ${interval}; its segments get the catalog's projections when it succeeds`));
    } catch (error) {
      button.disabled = false;
      host.append(errorBox(error));
    }
  } }, `Compact ${ds} now`);
  return button;
}
