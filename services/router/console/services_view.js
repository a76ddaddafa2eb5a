// The Services view: every node from sys.servers with its type, tier, size, and the leader marked.
import { sqlObjects } from "./api.js";
import { el, errorBox, formatBytes, replace, table } from "./dom.js";

export function servicesView() {
  const body = el("div", { id: "services-table" }, "loading…");
  async function load() {
    try {
      const servers = await sqlObjects(`SELECT server, server_type, tier, host, plaintext_port, curr_size, max_size,
        is_leader, start_time FROM sys.servers ORDER BY server_type, server`);
      replace(body, table(["server", "type", "tier", "host", "port", "used", "capacity", "leader", "started"],
        servers.map((s) => [s.server, s.server_type, s.tier, s.host, s.plaintext_port,
          s.server_type === "historical" ? formatBytes(s.curr_size) : "", s.server_type === "historical"
            ? formatBytes(s.max_size) : "", s.is_leader === 1 ? "leader" : s.is_leader === 0 ? "" : "", s.start_time])));
    } catch (error) {
      replace(body, errorBox(error));
    }
  }
  load();
  return el("section", { id: "services-view", class: "view" },
    el("div", { class: "toolbar" }, el("h2", {}, "Services"), el("button", { onclick: load }, "Refresh")), body);
}
