// The console's one door to the cluster: Druid's HTTP API through this router, with the session's
// credential (kept in sessionStorage, gone when the tab closes) and the X-Requested-With header
// that marks the console's own requests (the router then drops the browser's login challenge).

const CREDENTIAL_KEY = "strata.console.credential";

export class ApiError extends Error {
  constructor(status, message, queryId) {
    super(message);
    this.status = status;
    this.queryId = queryId;
  }
}

export function setCredential(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  sessionStorage.setItem(CREDENTIAL_KEY, "Basic " + btoa(binary));
}

export function clearCredential() {
  sessionStorage.removeItem(CREDENTIAL_KEY);
}

export function newQueryId() {
  // crypto.randomUUID needs a secure context; getRandomValues does not (a plain-http router).
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function sessionHeaders(extraHeaders = {}) {
  const headers = { "X-Requested-With": "XMLHttpRequest", ...extraHeaders };
  const credential = sessionStorage.getItem(CREDENTIAL_KEY);
  if (credential) headers["Authorization"] = credential;
  return headers;
}

export async function request(method, path, body, extraHeaders = {}, signal = undefined) {
  const headers = sessionHeaders(extraHeaders);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, credentials: "omit",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch { value = text; }
  if (!response.ok) {
    throw new ApiError(response.status, errorMessage(response.status, value),
                       response.headers.get("X-Druid-SQL-Query-Id") || (value && value.context && value.context.sqlQueryId));
  }
  return { value, headers: response.headers };
}

export function errorMessage(status, value) {
  // Druid's error shapes: {"errorMessage", "error"} (DruidException and legacy), {"error"}.
  if (value && typeof value === "object") {
    const parts = [value.errorMessage, value.error].filter((p) => typeof p === "string" && p);
    if (value.errorMessage && value.error === "druidException") parts.splice(1);
    if (parts.length) return parts.join(" — ");
  }
  if (typeof value === "string" && value) return `HTTP ${status}: ${value.slice(0, 500)}`;
  return `HTTP ${status}`;
}

// A task's log (Druid's GET /druid/indexer/v1/task/{id}/log: plain text), its last ``tailBytes``.
export async function taskLog(taskId, tailBytes) {
  const response = await fetch(`/druid/indexer/v1/task/${encodeURIComponent(taskId)}/log?offset=${-tailBytes}`,
    { headers: sessionHeaders(), credentials: "omit" });
  const text = await response.text();
  if (!response.ok) {
    let value = text;
    try { value = JSON.parse(text); } catch { /* the message is the text */ }
    throw new ApiError(response.status, errorMessage(response.status, value));
  }
  return text;
}

// SQL through /druid/v2/sql: {columns, rows} (rows as arrays), the header row split off.
export async function sql(query, context = {}, signal = undefined) {
  const { value, headers } = await request("POST", "/druid/v2/sql",
    { query, resultFormat: "array", header: true, context }, {}, signal);
  const queryId = headers.get("X-Druid-SQL-Query-Id");
  if (value && !Array.isArray(value) && value.taskId) {
    // INSERT/REPLACE: Druid's answer is the ingestion task it started, not rows.
    return { columns: ["taskId", "state"], rows: [[value.taskId, value.state]], queryId, task: value.taskId };
  }
  const [columns, ...rows] = value || [[]];
  return { columns: columns || [], rows, queryId };
}

export async function cancelSql(queryId) {
  return request("DELETE", "/druid/v2/sql/" + encodeURIComponent(queryId));
}

// Rows as objects, for the views reading sys tables.
// Their ids start console-meta-, which the history leaves out.
export async function sqlObjects(query) {
  const { columns, rows } = await sql(query, { sqlQueryId: newQueryId().replace("console-", "console-meta-") });
  return rows.map((row) => Object.fromEntries(columns.map((c, i) => [c, row[i]])));
}

// Asynchronous SQL (Druid's /druid/v2/sql/statements): the result stays on the broker and the
// page reads it one page (rowsPerPage rows) at a time, so a large result never lives here whole.
const STATEMENTS = "/druid/v2/sql/statements";

export async function submitStatement(query, context) {
  return (await request("POST", STATEMENTS, { query, context })).value;
}

export async function statementStatus(id) {
  return (await request("GET", `${STATEMENTS}/${encodeURIComponent(id)}`)).value;
}

// One page's rows, as arrays in the order of the statement's schema.
export async function statementPage(id, page) {
  return (await request("GET", `${STATEMENTS}/${encodeURIComponent(id)}/results?page=${page}&resultFormat=array`)).value;
}

export async function deleteStatement(id) {
  return request("DELETE", `${STATEMENTS}/${encodeURIComponent(id)}`);
}

// The whole result in a result format, as a Blob: the browser keeps it as bytes (no rows, no DOM).
export async function statementBlob(id, resultFormat) {
  const response = await fetch(`${STATEMENTS}/${encodeURIComponent(id)}/results?resultFormat=${resultFormat}`,
    { headers: sessionHeaders(), credentials: "omit" });
  if (!response.ok) {
    const text = await response.text();
    let value = text;
    try { value = JSON.parse(text); } catch { /* the message is the text */ }
    throw new ApiError(response.status, errorMessage(response.status, value), id);
  }
  return response.blob();
}
