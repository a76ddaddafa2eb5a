// The query context as a form: the context keys strata reads (SET key = value does the same), each
// with an input of its type, and a JSON object for any other key. Leaving an input empty leaves
// the key out, so the broker's default applies. tests/unit/router/test_console_context_keys.py
// checks every key listed here is one the broker or the engine reads.
import { el } from "./dom.js";

export const CONTEXT_KEYS = [
  { key: "timeout", type: "integer", min: 1, help: "milliseconds before the query is cancelled (the broker's timeout without it)" },
  { key: "sqlQueryId", type: "string", help: "the query's id in sys.queries and for KILL QUERY (the console picks one without it)" },
  { key: "sqlTimeZone", type: "string", help: "time zone of time literals, TIME_FLOOR and the result's times, e.g. America/Los_Angeles" },
  { key: "sqlCurrentTimestamp", type: "string", help: "what CURRENT_TIMESTAMP is for this query (ISO 8601 time)" },
  { key: "maxBytesInMemory", type: "integer", min: 1, help: "lowers this query's memory limit on each node (bytes)" },
  { key: "maxJoinRows", type: "integer", min: 0, help: "the most rows a join's smaller side may have" },
  { key: "noProjections", type: "boolean", help: "read base rows, never a projection" },
  { key: "useProjection", type: "string", help: "the projection every segment must use (fails with the reason where it cannot)" },
  { key: "forceProjections", type: "boolean", help: "every segment must use some projection" },
  { key: "brokerTier", type: "string", help: "the historical tier(s) to prefer, comma-separated" },
  { key: "columnTypeMergePolicy", type: "choice", choices: ["leastRestrictive", "latestInterval", "fail"],
    help: "a column's type when segments disagree" },
  { key: "skipEmptyBuckets", type: "boolean", help: "time buckets without rows are left out" },
  { key: "maxNumTasks", type: "integer", min: 2, help: "INSERT/REPLACE: the most tasks (controller and workers)" },
  { key: "rowsPerSegment", type: "integer", min: 1, help: "INSERT/REPLACE: target rows per segment" },
  { key: "maxParseExceptions", type: "integer", min: 0, help: "INSERT/REPLACE: input rows that may fail to parse" },
];

// ``contextForm()``: {element, value()} where value() is the context object or throws an Error
// naming the key and what is wrong with it.
export function contextForm() {
  const inputs = new Map();
  const rows = CONTEXT_KEYS.map((spec) => {
    const id = "ctx-" + spec.key;
    let input;
    if (spec.type === "boolean" || spec.type === "choice") {
      const options = spec.type === "boolean" ? ["true", "false"] : spec.choices;
      input = el("select", { id }, el("option", { value: "" }, "(default)"),
        options.map((o) => el("option", { value: o }, o)));
    } else {
      input = el("input", { id, type: spec.type === "integer" ? "number" : "text",
        step: spec.type === "integer" ? 1 : undefined, min: spec.min, placeholder: "(default)" });
    }
    inputs.set(spec.key, input);
    return el("label", { class: "context-key", title: spec.help },
      el("code", {}, spec.key), input, el("small", {}, spec.help));
  });
  const raw = el("textarea", { id: "query-context", rows: 2, spellcheck: "false",
    placeholder: '{"otherKey": "value"}', "aria-label": "other context keys (JSON)" });
  const summary = el("summary", { id: "context-summary" }, "Query context");
  const element = el("details", { id: "context-form", class: "context-form" }, summary,
    el("div", { class: "context-grid" }, rows),
    el("label", { class: "context-raw" }, "Other keys (a JSON object) ", raw));

  element.addEventListener("change", () => { try { value(); } catch { /* shown when the query runs */ } });

  function value() {
    const context = {};
    const text = raw.value.trim();
    if (text) {
      let parsed;
      try { parsed = JSON.parse(text); } catch (e) {
        throw new Error(`the other context keys are not valid JSON (${e.message}); write an object like {"key": "value"}`);
      }
      if (typeof parsed !== "object" || Array.isArray(parsed) || parsed === null) {
        throw new Error('the other context keys must be a JSON object, e.g. {"key": "value"}');
      }
      Object.assign(context, parsed);
    }
    for (const spec of CONTEXT_KEYS) {
      const input = inputs.get(spec.key);
      const entered = input.value.trim();
      if (input.validity && input.validity.badInput) {
        throw new Error(`context ${spec.key}: not a number; enter a whole number or leave it empty`);
      }
      if (!entered) continue;
      if (spec.key in context) {
        throw new Error(`context ${spec.key} is both in the form and in the JSON; keep one`);
      }
      if (spec.type === "integer") {
        const n = Number(entered);
        if (!Number.isInteger(n) || (spec.min !== undefined && n < spec.min)) {
          throw new Error(`context ${spec.key} must be a whole number >= ${spec.min ?? 0}, got ${entered}`);
        }
        context[spec.key] = n;
      } else if (spec.type === "boolean") {
        context[spec.key] = entered === "true";
      } else {
        context[spec.key] = entered;
      }
    }
    const set = Object.keys(context).length;
    summary.textContent = set ? `Query context (${set} set)` : "Query context";
    return context;
  }

  return { element, value };
}
