// Ridgeline dashboard: plain JS over the public API (catalog, estimates, workloads, charts);
// the request-rate slider of each card is in traffic.js (loaded first).
"use strict";

const MAX_ACCELERATORS = 4;
const DEFAULTS = {
  model: "llama-3.1-70b",
  accelerators: "h100-sxm",
  precision: "bf16,bf16,bf16",
  tp: "1",
  workload: "chat",
  phase: "decode",
  batch_sizes: "1,64,512",
  concurrency: "64",
};
// Used only when the server has no /v1/workloads endpoint.
const FALLBACK_WORKLOADS = [
  { id: "chat", input_tokens: 2048, output_tokens: 256, description: "Interactive chat" },
];
const MEMORY_PARTS = [
  ["weights", "weights_gb", "--weights"],
  ["kv_cache", "kv_cache_gb", "--kv"],
  ["activations", "activations_gb", "--activations"],
  ["runtime_overhead", "runtime_overhead_gb", "--overhead"],
];

const $ = (id) => document.getElementById(id);
const workloads = new Map();
let trafficPanels = [];
let generation = 0;
let pending = 0;
let timer = null;

class ApiError extends Error {}

async function request(url, options) {
  const response = await fetch(url, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(body.detail || `${response.status} ${response.statusText}`);
  }
  return body;
}

async function listAll(path) {
  const items = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const page = await request(`${path}?${query}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

function fillSelect(select, options, { blank = false } = {}) {
  select.replaceChildren();
  if (blank) select.append(new Option("—", ""));
  for (const [value, label] of options) select.append(new Option(label, value));
}

function initialState() {
  const params = new URLSearchParams(window.location.search);
  const state = { ...DEFAULTS };
  for (const key of Object.keys(DEFAULTS)) {
    if (params.has(key)) state[key] = params.get(key);
  }
  return state;
}

function applyState(state) {
  $("model").value = state.model;
  const chosen = state.accelerators.split(",").filter(Boolean);
  for (let i = 0; i < MAX_ACCELERATORS; i += 1) $(`accelerator-${i}`).value = chosen[i] || "";
  for (const key of ["precision", "tp", "workload", "phase"]) $(key).value = state[key];
  $("batch-sizes").value = state.batch_sizes;
  $("concurrency").value = state.concurrency;
}

function readState() {
  const accelerators = [];
  for (let i = 0; i < MAX_ACCELERATORS; i += 1) {
    const value = $(`accelerator-${i}`).value;
    if (value && !accelerators.includes(value)) accelerators.push(value);
  }
  return {
    model: $("model").value,
    accelerators: accelerators.join(","),
    precision: $("precision").value,
    tp: $("tp").value,
    workload: $("workload").value,
    phase: $("phase").value,
    batch_sizes: $("batch-sizes").value.replace(/\s+/g, ""),
    concurrency: String(Math.max(1, parseInt($("concurrency").value, 10) || 1)),
  };
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function begin() {
  pending += 1;
  document.body.dataset.state = "loading";
}

function done(gen) {
  if (gen !== generation) return;
  pending -= 1;
  if (pending === 0) {
    document.body.dataset.state = "ready";
    document.body.dataset.generation = String(gen);
  }
}

function format(value, digits, unit) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return `${value.toLocaleString("en-US", { maximumFractionDigits: digits })}${unit}`;
}

function chartUrl(kind, params) {
  return `/v1/charts/${kind}?${new URLSearchParams(params)}`;
}

function showMemory(card, point) {
  const memory = point.memory;
  const bar = card.querySelector(".memory");
  const legend = card.querySelector(".memory-legend");
  const scale = Math.max(memory.capacity_gb, memory.total_gb);
  bar.replaceChildren();
  legend.replaceChildren();
  for (const [name, field, colour] of MEMORY_PARTS) {
    const gb = memory[field] || 0;
    const part = document.createElement("span");
    part.className = name;
    part.style.width = `${(100 * gb) / scale}%`;
    part.title = `${name.replace("_", " ")}: ${format(gb, 1, " GB")}`;
    bar.append(part);
    const item = document.createElement("li");
    item.style.setProperty("--swatch", `var(${colour})`);
    item.textContent = `${name.replace("_", " ")} ${format(gb, 1, " GB")}`;
    legend.append(item);
  }
  const total = document.createElement("li");
  total.textContent = `total ${format(memory.total_gb, 1, " GB")} of ${format(
    memory.capacity_gb, 1, " GB")}${memory.fits ? "" : " (does not fit)"}`;
  legend.append(total);
  bar.classList.toggle("over", !memory.fits);
  bar.setAttribute("aria-label", total.textContent);
}

async function fillFigures(card, body, gen) {
  const note = card.querySelector(".card-note");
  try {
    const answer = await request("/v1/estimates", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (gen !== generation) return;
    const point = answer.points[0];
    card.querySelector(".cost").textContent = format(
      point.cost.usd_per_million_output_tokens, 2, " $/M out");
    card.querySelector(".ttft").textContent = format(point.ttft_ms, 1, " ms");
    card.querySelector(".tpot").textContent = format(point.tpot_ms, 2, " ms");
    card.querySelector(".throughput").textContent = format(point.output_tokens_per_s, 0, "");
    showMemory(card, point);
    note.textContent =
      `${answer.gpus_per_replica} GPU(s) per replica, ${body.batch_sizes[0]} concurrent ` +
      `requests of ${body.input_tokens}+${body.output_tokens} tokens; ` +
      `up to ${answer.max_batch_size} fit in memory.`;
  } catch (error) {
    if (gen !== generation) return;
    note.textContent = error.message;
    note.classList.add("error");
  } finally {
    done(gen);
  }
}

function loadChart(img, url, gen) {
  begin();
  img.classList.remove("failed");
  img.onload = () => done(gen);
  img.onerror = () => {
    img.classList.add("failed");
    img.alt = "chart unavailable for this choice (see the note above)";
    done(gen);
  };
  img.src = url;
}

function render() {
  const state = readState();
  window.history.replaceState(null, "", `?${new URLSearchParams(state)}`);
  generation += 1;
  pending = 0;
  const gen = generation;
  for (const panel of trafficPanels) panel.stop();
  trafficPanels = [];
  const [weights, activations, kvCache] = state.precision.split(",");
  const workload = workloads.get(state.workload) || FALLBACK_WORKLOADS[0];
  const accelerators = state.accelerators.split(",").filter(Boolean);
  const cards = $("cards");
  cards.replaceChildren();
  if (!state.model || accelerators.length === 0) {
    setStatus("Pick a model and at least one accelerator.");
    return;
  }
  setStatus(`${state.model}, ${workload.id}: ${workload.input_tokens} in / ` +
    `${workload.output_tokens} out, tp ${state.tp}, ${state.precision.replaceAll(",", "/")}`);
  const common = {
    model: state.model,
    weights,
    activations,
    kv_cache: kvCache,
    tp: state.tp,
  };
  begin();
  for (const accelerator of accelerators) {
    const card = $("card-template").content.firstElementChild.cloneNode(true);
    card.dataset.accelerator = accelerator;
    card.querySelector(".card-title").textContent = accelerator;
    cards.append(card);
    loadChart(card.querySelector(".chart-roofline"), chartUrl("roofline", {
      ...common, accelerator, phase: state.phase, batch_sizes: state.batch_sizes,
      context_tokens: workload.input_tokens, format: "svg",
    }), gen);
    loadChart(card.querySelector(".chart-sweep"), chartUrl("sweep", {
      ...common, accelerator, mode: "serving", input_tokens: workload.input_tokens,
      output_tokens: workload.output_tokens, format: "svg",
    }), gen);
    const body = {
      model: state.model,
      accelerator,
      precision: { weights, activations, kv_cache: kvCache },
      parallelism: { tp: Number(state.tp) },
      input_tokens: workload.input_tokens,
      output_tokens: workload.output_tokens,
      mode: "serving",
    };
    begin();
    fillFigures(card, { ...body, batch_sizes: [Number(state.concurrency)] }, gen);
    begin();
    // The traffic chart is drawn only where the first traffic answer says it can be.
    const traffic = RidgelineTraffic.attach(card, body, () => loadChart(
      card.querySelector(".chart-traffic"), chartUrl("traffic", {
        ...common, accelerator, input_tokens: workload.input_tokens,
        output_tokens: workload.output_tokens, format: "svg",
      }), gen));
    trafficPanels.push(traffic);
    traffic.ready.finally(() => done(gen));
  }
  done(gen);
}

function scheduleRender() {
  window.clearTimeout(timer);
  timer = window.setTimeout(render, 250);
}

async function loadWorkloads() {
  const schema = await request("/openapi.json");
  const items = "/v1/workloads" in (schema.paths || {})
    ? (await request("/v1/workloads")).items
    : FALLBACK_WORKLOADS;
  for (const item of items) workloads.set(item.id, item);
  fillSelect($("workload"), items.map((w) => [
    w.id, `${w.id} (${w.input_tokens} in / ${w.output_tokens} out)`,
  ]));
}

async function start() {
  document.body.dataset.state = "loading";
  try {
    const [models, accelerators] = await Promise.all([
      listAll("/v1/models"),
      listAll("/v1/accelerators"),
      loadWorkloads(),
    ]);
    fillSelect($("model"), models.map((m) => [m.id, m.name || m.id]));
    const acceleratorOptions = accelerators.map((a) => [a.id, a.name || a.id]);
    for (let i = 0; i < MAX_ACCELERATORS; i += 1) {
      fillSelect($(`accelerator-${i}`), acceleratorOptions, { blank: i > 0 });
    }
  } catch (error) {
    setStatus(`Could not load the catalog: ${error.message}`, true);
    document.body.dataset.state = "error";
    return;
  }
  applyState(initialState());
  $("controls").addEventListener("change", scheduleRender);
  $("controls").addEventListener("submit", (event) => {
    event.preventDefault();
    render();
  });
  render();
}

start();
