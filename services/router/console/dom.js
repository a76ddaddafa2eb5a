// Building the page. Every value from the cluster becomes a text node (textContent), never markup:
// a datasource value like <img src=x onerror=...> shows as those characters.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function cellText(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// A table of rows (arrays), one page of them; ``rowClass(row)`` marks rows (overshadowed, ...).
export function table(columns, rows, rowClass = () => "") {
  return el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, rows.map((row) => el("tr", { class: rowClass(row) || undefined },
      row.map((v) => el("td", { class: v === null ? "null" : undefined }, cellText(v)))))));
}

export function errorBox(error) {
  return el("div", { class: "error", role: "alert" },
    el("strong", {}, "Error: "), el("span", { class: "error-message" }, error.message),
    error.queryId ? el("div", { class: "query-id" }, "query id: ", el("code", {}, error.queryId)) : null);
}

export function formatBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function replace(container, ...children) {
  container.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}
