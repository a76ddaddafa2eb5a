// The console's shell: login (the cluster's users; the credential lives in sessionStorage),
// navigation between views by the URL's hash, and each view built fresh when opened.
import { ApiError, clearCredential, request, setCredential } from "./api.js";
import { el, errorBox, replace } from "./dom.js";
import { catalogView } from "./catalog_view.js";
import { dataView } from "./data_view.js";
import { ingestionView } from "./ingestion_view.js";
import { projectionsView } from "./projections_view.js";
import { queryView } from "./query_view.js";
import { retentionView } from "./retention_view.js";
import { segmentsView } from "./segments_view.js";
import { servicesView } from "./services_view.js";
import { supervisorsView } from "./supervisors_view.js";

const app = document.getElementById("app");
const VIEWS = {
  query: ["Query", () => queryView()],
  data: ["Data", () => dataView((ds) => { location.hash = "segments/" + encodeURIComponent(ds); })],
  segments: ["Segments", (arg) => segmentsView(arg)],
  ingestion: ["Ingestion", (arg) => ingestionView(arg)],
  services: ["Services", () => servicesView()],
  retention: ["Retention", () => retentionView()],
  catalog: ["Catalog", (arg) => catalogView(arg)],
  projections: ["Projections", (arg) => projectionsView(arg)],
  supervisors: ["Supervisors", () => supervisorsView()],
};

async function signedIn() {
  // Any read the cluster authenticates: 401 means a login is needed.
  try {
    await request("GET", "/druid/v2/datasources");
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return false;
    throw error;
  }
}

function loginForm(message) {
  const user = el("input", { id: "login-user", autocomplete: "username", required: true });
  const password = el("input", { id: "login-password", type: "password", autocomplete: "current-password" });
  const form = el("form", { id: "login", class: "login", onsubmit: async (e) => {
    e.preventDefault();
    setCredential(user.value, password.value);
    try {
      if (await signedIn()) { show(); return; }
      clearCredential();
      replace(app, loginForm("wrong user name or password"));
    } catch (error) {
      clearCredential();
      replace(app, loginForm(error.message));
    }
  } },
  el("h1", {}, "strata"), el("label", {}, "User ", user), el("label", {}, "Password ", password),
  el("button", { type: "submit" }, "Sign in"), message ? el("p", { class: "error", role: "alert" }, message) : null);
  return form;
}

function show() {
  const [name, ...rest] = (location.hash.slice(1) || "query").split("/");
  const key = name in VIEWS ? name : "query";
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : undefined;
  const nav = el("nav", {}, el("span", { class: "brand" }, "strata"),
    Object.entries(VIEWS).map(([k, [label]]) => el("a", { href: "#" + k, id: "nav-" + k,
      class: k === key ? "active" : undefined }, label)),
    el("span", { class: "spacer" }),
    el("button", { id: "sign-out", onclick: () => { clearCredential(); replace(app, loginForm()); } }, "Sign out"));
  replace(app, nav, el("main", {}, VIEWS[key][1](arg)));
}

window.addEventListener("hashchange", () => { if (app.querySelector("nav")) show(); });

(async () => {
  try {
    if (await signedIn()) show(); else replace(app, loginForm());
  } catch (error) {
    replace(app, errorBox(error));
  }
})();
