// A supervisor's lag per partition over time, as the Supervisors view saw it: the page keeps the
// history (the status only says "now"), one point per broker read (offsetsLastUpdated, so a
// refresh that found no newer read adds nothing), at most MAX_POINTS of them per supervisor.
import { loadUPlot } from "./chart_library.js";
import { el, replace } from "./dom.js";

export const MAX_POINTS = 300;
const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d"];

// Lag per partition: the status's minimumLag (Druid's per-partition lag: the coordinator's
// reading), else a legacy top-level lag, else the active tasks' lag, else latest - current.
export function partitionLag(payload) {
  const latest = payload.latestOffsets || {};
  const current = payload.currentOffsets || payload.committedOffsets || {};
  const lag = payload.minimumLag || payload.lag || tasksLag(payload.activeTasks) || {};
  const parts = new Set([...Object.keys(latest), ...Object.keys(current), ...Object.keys(lag)]);
  return [...parts].sort((a, b) => Number(a) - Number(b)).map((p) => ({
    partition: p, committed: payload.committedOffsets ? payload.committedOffsets[p] : undefined,
    lag: p in lag ? lag[p] : p in latest && p in current ? latest[p] - current[p] : undefined }));
}

function tasksLag(tasks) {
  const out = {};
  for (const t of tasks || []) Object.assign(out, t.lag || {});
  return Object.keys(out).length ? out : undefined;
}

// Druid's ISO-8601 periods as the status uses them (PT1S, PT30S, PT5M, P1D) in milliseconds.
export function periodMs(text, fallback) {
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(String(text || ""));
  if (!m || text === "P" || text === "PT") return fallback;
  return (((Number(m[1] || 0) * 24 + Number(m[2] || 0)) * 60 + Number(m[3] || 0)) * 60 + Number(m[4] || 0)) * 1000;
}

export class LagHistory {
  constructor(maxPoints = MAX_POINTS) {
    this.maxPoints = maxPoints;
    this.times = [];              // seconds (uPlot's time unit)
    this.series = new Map();      // partition -> lag per time (null before the partition was seen)
    this.lastRead = null;
  }

  // Adds the payload's reading if it is a new one; true when it did.
  record(payload) {
    const read = payload && payload.offsetsLastUpdated;
    const t = Date.parse(read) / 1000;
    if (!read || read === this.lastRead || Number.isNaN(t)) return false;
    const known = partitionLag(payload).filter((o) => o.lag !== undefined && o.lag !== null);
    if (!known.length) return false;
    this.lastRead = read;
    for (const { partition } of known) {
      if (!this.series.has(partition)) this.series.set(partition, this.times.map(() => null));
    }
    const now = new Map(known.map((o) => [o.partition, Number(o.lag)]));
    this.times.push(t);
    for (const [p, values] of this.series) values.push(now.has(p) ? now.get(p) : null);
    while (this.times.length > this.maxPoints) {
      this.times.shift();
      for (const values of this.series.values()) values.shift();
    }
    return true;
  }

  partitions() {
    return [...this.series.keys()].sort((a, b) => Number(a) - Number(b));
  }

  data() {
    return [this.times.slice(), ...this.partitions().map((p) => this.series.get(p).slice())];
  }
}

// Draws (or updates) the chart of ``history`` in ``host``. The uPlot instance stays on the host as
// ``lagChart`` (its series and data are what the page shows; the browser tests read them there).
export async function drawLagChart(host, supervisorId, history) {
  const uPlot = await loadUPlot();
  if (!uPlot) {
    replace(host, el("p", { class: "status" }, "(no chart: the console's npm dependencies are not installed)"));
    return;
  }
  const parts = history ? history.partitions() : [];
  const key = JSON.stringify([supervisorId, parts]);
  if (host.lagChart && host.lagChartKey === key) {
    host.lagChart.setData(history.data());
    return;
  }
  if (host.lagChart) host.lagChart.destroy();
  host.lagChart = null;
  host.lagChartKey = null;
  if (!parts.length) {
    replace(host, el("p", { class: "status" }, supervisorId ? `no lag reported yet for ${supervisorId}` : "no supervisor"));
    return;
  }
  replace(host);
  host.lagChart = new uPlot({
    width: Math.min(900, Math.max(400, host.clientWidth || 600)), height: 220,
    series: [{}, ...parts.map((p, i) => ({ label: `partition ${p}`, stroke: COLORS[i % COLORS.length], width: 2 }))],
    scales: {
      // One reading has no width: a minute around it.
      x: { time: true, range: (u, min, max) => (min === max ? [min - 30, max + 30] : [min, max]) },
      y: { range: (u, min, max) => [Math.min(0, min), Math.max(1, Math.ceil(max * 1.1))] },  // headroom over the top line
    },
    axes: [{}, { size: 70, label: "messages behind" }],
  }, history.data(), host);
  host.lagChartKey = key;
}
