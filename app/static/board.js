// Probboard board page: polls /api/probboard/latest, or reads the vip_pro stream with fetch
// (EventSource cannot send the key header). No build step, no dependencies.
"use strict";

(function () {
  const KEY_STORE = "probboard.apiKey";
  const $ = (id) => document.getElementById(id);
  const state = { board: null, receivedAt: 0, timer: null, controller: null, mode: "polling",
                  backoff: 1000, tokens: { up: null, down: null }, noticeKind: null };

  const fmtPct = (v) => (v == null ? "–" : v.toFixed(2) + "%");
  const fmtPrice = (v) => (v == null ? "–" : v.toFixed(2));
  const fmtUsd = (v) => (v == null ? "–" : "$" + Number(v).toLocaleString("en-US", { maximumFractionDigits: 2 }));
  const shortToken = (t) => (t ? t.slice(0, 6) + "…" + t.slice(-6) : "–");
  const gap = (pct, ask) => (pct == null || ask == null ? "–" : ((pct - ask * 100) >= 0 ? "+" : "") + (pct - ask * 100).toFixed(1) + " pts");
  const clock = (secs) => { const s = Math.max(0, Math.floor(secs)); return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0"); };

  // kind: "poll" notices clear on the next good poll; "stream" notices (why the stream was
  // refused or ended) stay until the user changes the key.
  function notice(text, kind) {
    const el = $("notice");
    if (!text && state.noticeKind === "stream" && kind !== "stream") return;
    state.noticeKind = text ? (kind || "poll") : null;
    el.textContent = text || "";
    el.hidden = !text;
  }

  function item(board) {
    return (board.items || []).find((i) => i.symbol === "BTC") || null;
  }

  function render(board) {
    state.board = board;
    state.receivedAt = performance.now();
    const row = item(board);
    $("plan").textContent = "plan " + (board.planLabel || board.plan);
    $("refresh").textContent = board.refreshMs + " ms";
    $("updated").textContent = board.updatedAt ? board.updatedAt + " UTC" : "no data yet";
    $("p-up").textContent = fmtPct(row && row.p_up_pct);
    $("p-down").textContent = fmtPct(row && row.p_down_pct);
    $("bar-up").style.width = (row && row.p_up_pct != null ? row.p_up_pct : 50) + "%";
    for (const side of ["up", "down"]) {
      const bid = row && row[side + "_bid"], ask = row && row[side + "_ask"];
      $(side + "-bid").textContent = fmtPrice(bid);
      $(side + "-ask").textContent = fmtPrice(ask);
      $(side + "-gap").textContent = gap(row && row["p_" + side + "_pct"], ask);
      state.tokens[side] = row && row[side + "_token_id"];
      $(side + "-token").textContent = shortToken(state.tokens[side]);
      $(side + "-token").title = state.tokens[side] || "";
    }
    $("window").textContent = row && row.windowStart
      ? new Date(row.windowStart * 1000).toISOString().slice(11, 16) + "–" + new Date(row.windowEnd * 1000).toISOString().slice(11, 16) + " UTC"
      : "–";
    $("prices").textContent = row && (row.price != null || row.priceToBeat != null)
      ? "Price " + fmtUsd(row.price) + " · price to beat " + fmtUsd(row.priceToBeat)
      : "";
    tick();
  }

  // Between updates the countdown and the data age move locally, and the badge turns
  // stale by itself when no update comes: the page is never silently old.
  function tick() {
    const board = state.board;
    if (!board) return;
    const elapsed = performance.now() - state.receivedAt;
    const row = item(board);
    const age = board.dataAgeMs == null ? null : board.dataAgeMs + elapsed;
    $("age").textContent = age == null ? "–" : (age / 1000).toFixed(1) + " s";
    if (row && row.rem_secs != null) {
      const dataAge = (row.dataAgeMs != null ? row.dataAgeMs : board.dataAgeMs || 0) + elapsed;
      $("countdown").textContent = clock(row.rem_secs - dataAge / 1000);
    } else {
      $("countdown").textContent = "–";
    }
    // The server judged the data when it answered; locally, the data turns stale only when
    // an update is overdue (its age beyond the threshold plus one refresh interval).
    let level = board.latencyLevel || "danger";
    const overdue = (limit) => age > limit + (state.mode === "stream" ? 0 : board.refreshMs);
    if (age == null || overdue(board.severeStaleThresholdMs)) level = "danger";
    else if (overdue(board.staleThresholdMs) && level === "ok") level = "warn";
    const badge = $("badge");
    badge.className = "badge " + level;
    badge.textContent = level === "ok" ? "live" : level === "warn" ? "stale" : "danger: stale";
    document.body.classList.toggle("stale", level === "warn");
    document.body.classList.toggle("danger", level === "danger");
  }

  function key() {
    return sessionStorage.getItem(KEY_STORE) || "";
  }

  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    if (key()) h["X-API-Key"] = key();
    return h;
  }

  async function errorText(response) {
    try {
      const body = await response.json();
      return body.error || response.statusText;
    } catch (e) {
      return response.statusText;
    }
  }

  function schedule(fn, ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(fn, ms);
  }

  async function poll() {
    if (state.mode !== "polling") return;
    let wait = state.board ? state.board.refreshMs : 5000;
    try {
      const response = await fetch("/api/probboard/latest", { headers: headers(), cache: "no-store" });
      if (response.status === 429) {
        const seconds = Math.max(1, parseInt(response.headers.get("Retry-After") || "5", 10));
        notice("Rate limited: waiting " + seconds + " s before the next update.");
        wait = seconds * 1000;
      } else if (!response.ok) {
        notice("The board is not available: " + (await errorText(response)));
        wait = Math.max(wait, 5000);
      } else {
        render(await response.json());
        notice("");
      }
    } catch (e) {
      notice("Cannot reach the service; retrying.");
      wait = Math.max(wait, 5000);
    }
    schedule(poll, wait);
  }

  function startPolling(reason) {
    state.mode = "polling";
    $("mode").textContent = reason ? "polling (" + reason + ")" : "polling";
    schedule(poll, 0);
  }

  async function startStream() {
    if (!key()) return startPolling();
    if (state.controller) state.controller.abort();
    const controller = new AbortController();
    state.controller = controller;
    state.mode = "stream";
    clearTimeout(state.timer);
    $("mode").textContent = "stream (connecting)";
    let response;
    try {
      response = await fetch("/api/probboard/stream", {
        headers: headers({ Accept: "text/event-stream" }), signal: controller.signal, cache: "no-store",
      });
    } catch (e) {
      if (controller.signal.aborted) return;
      return reconnect("connection failed");
    }
    if (!response.ok) {
      const why = await errorText(response);
      notice("Stream refused (" + response.status + "): " + why + " Polling instead.", "stream");
      return startPolling("stream refused");
    }
    notice("", "stream");
    state.backoff = 1000;
    $("mode").textContent = "stream (live)";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = "message", data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event = val;
            else if (field === "data") data.push(val);
          }
          if (!data.length) continue;
          const payload = JSON.parse(data.join("\n"));
          if (event === "board") render(payload);
          else if (event === "error") {
            notice("Stream ended: " + (payload.error || payload.code) + " Polling instead.", "stream");
            controller.abort();
            return startPolling("stream ended");
          }
        }
      }
    } catch (e) {
      if (controller.signal.aborted) return;
    }
    reconnect("stream closed");
  }

  function reconnect(why) {
    if (state.mode !== "stream") return;
    $("mode").textContent = "stream (" + why + "; reconnecting)";
    const delay = state.backoff * (0.75 + Math.random() / 2);
    state.backoff = Math.min(30000, state.backoff * 2);
    schedule(startStream, delay);
  }

  function useKey(value) {
    notice("", "stream");
    if (value) sessionStorage.setItem(KEY_STORE, value);
    else sessionStorage.removeItem(KEY_STORE);
    if (state.controller) state.controller.abort();
    state.controller = null;
    if (value) startStream();
    else startPolling();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const value = $("api-key").value.trim();
      $("api-key").value = "";
      useKey(value);
    });
    $("forget-key").addEventListener("click", () => useKey(""));
    for (const button of document.querySelectorAll("button.copy")) {
      button.addEventListener("click", async () => {
        const token = state.tokens[button.dataset.copy];
        if (!token) return;
        try {
          await navigator.clipboard.writeText(token);
          button.textContent = "copied";
        } catch (e) {
          button.textContent = "copy failed";
        }
        setTimeout(() => { button.textContent = "copy"; }, 1500);
      });
    }
    setInterval(tick, 250);
    if (key()) startStream();
    else startPolling();
  });
})();
