// Request-rate slider of a dashboard card: open-loop traffic estimates (POST /v1/estimates).
"use strict";

const RidgelineTraffic = (() => {
  const DEBOUNCE_MS = 200;
  // The saturation rate in an answer does not depend on the offered rate, so a first call at
  // any rate on the shortest stream the API allows (100 requests) learns the slider's range.
  const PROBE = { request_rate_per_s: 1, num_requests: 100 };
  const START_SHARE = 0.5; // the slider starts at half the saturation rate
  const SLIDER_STEPS = 200;
  const PERCENTILES = ["p50", "p90", "p99"];

  function figure(value, digits, unit = "") {
    if (value === null || value === undefined || !Number.isFinite(value)) return "–";
    return `${value.toLocaleString("en-US", { maximumFractionDigits: digits })}${unit}`;
  }

  function rounded(rate) {
    return Number(rate.toPrecision(3));
  }

  async function estimate(body, signal) {
    const response = await fetch("/v1/estimates", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.detail || `${response.status} ${response.statusText}`);
    return answer.traffic;
  }

  function show(panel, traffic) {
    for (const row of panel.querySelectorAll(".percentiles tbody tr")) {
      const values = traffic[row.dataset.field] || {};
      const digits = row.dataset.field === "tpot_ms" ? 2 : 1;
      row.querySelectorAll("td").forEach((cell, i) => {
        cell.textContent = figure(values[PERCENTILES[i]], digits);
      });
    }
    panel.querySelector(".utilization").textContent = figure(100 * traffic.utilization, 0, "%");
    panel.querySelector(".load").textContent = figure(traffic.load_factor, 2, "×");
    panel.querySelector(".achieved").textContent = figure(traffic.achieved_requests_per_s, 2);
    panel.querySelector(".saturation").textContent = figure(
      traffic.saturation_requests_per_s, 2);
    const note = panel.querySelector(".traffic-note");
    note.classList.remove("error");
    note.classList.toggle("saturated", traffic.saturated);
    note.textContent = traffic.message || `${figure(traffic.request_rate_per_s, 3)} requests/s ` +
      `(Poisson), ${traffic.measured_requests} of ${traffic.simulated_requests} simulated ` +
      "requests measured";
  }

  // Wire the card's slider and number box to estimates of ``base`` (an estimate body without
  // batch sizes); ``onServes`` runs once the first answer shows the replica serves this traffic.
  // Returns { ready: a promise settled after the first answer, stop() }.
  function attach(card, base, onServes) {
    const panel = card.querySelector(".traffic");
    const slider = panel.querySelector(".rate-slider");
    const number = panel.querySelector(".rate-number");
    const note = panel.querySelector(".traffic-note");
    let controller = null;
    let timer = null;

    async function run(traffic) {
      if (controller) controller.abort(); // a newer rate makes the one in flight stale
      const mine = new AbortController();
      controller = mine;
      panel.dataset.state = "loading";
      try {
        const answer = await estimate({ ...base, traffic }, mine.signal);
        return mine === controller ? answer : null;
      } catch (error) {
        if (mine !== controller || error.name === "AbortError") return null;
        note.textContent = error.message;
        note.classList.add("error");
        panel.dataset.state = "error";
        return null;
      }
    }

    async function showRate(rate) {
      const traffic = await run({ request_rate_per_s: rate });
      if (traffic === null) return;
      show(panel, traffic);
      panel.dataset.rate = String(rate);
      panel.dataset.state = "ready";
    }

    function moved(source, other) {
      const rate = Number(source.value);
      if (!(rate > 0)) return;
      other.value = String(rate);
      window.clearTimeout(timer);
      timer = window.setTimeout(() => showRate(rate), DEBOUNCE_MS);
    }

    async function start() {
      const probe = await run(PROBE);
      if (probe === null) return;
      onServes();
      const saturation = probe.saturation_requests_per_s;
      const step = saturation / SLIDER_STEPS;
      for (const input of [slider, number]) {
        input.min = String(step);
        input.disabled = false;
      }
      number.step = String(rounded(step)); // the slider keeps step="any": no snapping
      slider.max = String(saturation);
      const rate = rounded(START_SHARE * saturation);
      slider.value = number.value = String(rate);
      await showRate(rate);
    }

    slider.addEventListener("input", () => moved(slider, number));
    number.addEventListener("input", () => moved(number, slider));
    return {
      ready: start(),
      stop() {
        window.clearTimeout(timer);
        if (controller) controller.abort();
        controller = null;
      },
    };
  }

  return { attach };
})();
