// uPlot, the console's one chart library, when scripts/bootstrap.sh installed it from npm (the
// router serves it under /vendor/). Loaded once, on the first chart; undefined when not installed.
import { el } from "./dom.js";

let uPlotModule = null;

export async function loadUPlot() {
  if (uPlotModule === null) {
    uPlotModule = import("/vendor/uPlot.esm.js").then((m) => {
      document.head.append(el("link", { rel: "stylesheet", href: "/vendor/uPlot.min.css" }));
      return m.default;
    }, () => undefined);
  }
  return uPlotModule;
}
