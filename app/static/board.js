// Probboard board page: polls /api/probboard/latest, or reads the vip_pro stream with fetch
// (EventSource cannot send the key header). No build step, no dependencies.
"use strict";

(function () {
  const KEY_STORE = "probboard.apiKey";
  const $ = (id) => document.getElementById(id);
  // cards: one per row of the board, keyed by symbol, in the board's order (see syncCards).
  // failing: the last request for a board failed (see judged). refused: why the service
  // refused the key the page had (see refuseKey). epoch: bumped whenever the key or the
  // window changes, so an answer to a request made before is ignored. view: the window shown
  // (see chooseWindow).
  const state = { board: null, receivedAt: 0, timer: null, controller: null, mode: "polling",
                  backoff: 1000, noticeKind: null, recordTimer: null, cards: new Map(),
                  failing: false, refused: null, epoch: 0, health: null, trailAsked: false,
                  recordAsked: 0, view: null, recordPeriod: "all" };
  // The record's sample-size note: below this many settled windows the two scores' gap is
  // within what chance makes of a few windows.
  const FEW_WINDOWS = 100;
  // One CSV file of the windows export holds at most this many windows (its limit).
  const CSV_LIMIT = 1000;
  // Before a row says how long its window is: the 5-minute kind's length.
  const WINDOW_S = 300;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const LEVEL_TEXT = { ok: "live", warn: "stale", danger: "danger: stale" };
  // A board from the simulated source: numbers generated here, not the markets'. It never
  // says live, and its staleness is said all the same.
  const SIMULATED_TEXT = { ok: "simulated", warn: "simulated · stale", danger: "simulated · danger: stale" };
  // The 401 codes of a key (docs/accounts.md), as the stream's last event may carry them.
  const KEY_REFUSED = new Set(["invalid_key", "missing_credentials", "malformed_authorization",
                               "conflicting_credentials"]);

  // Probabilities to one decimal (a tenth of a point is finer than any model's honesty).
  const fmtPct = (v) => (v == null ? "–" : v.toFixed(1) + "%");
  const fmtPrice = (v) => (v == null ? "–" : v.toFixed(2));
  const fmtUsd = (v, digits) => (v == null ? "–" : "$" + Number(v).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }));
  const shortToken = (t) => (t ? t.slice(0, 6) + "…" + t.slice(-6) : "–");
  const gap = (pct, ask) => (pct == null || ask == null ? "–" : ((pct - ask * 100) >= 0 ? "+" : "") + (pct - ask * 100).toFixed(1) + " pts");
  // A market's prices at its own precision (docs/board.md): five significant digits of the
  // price to beat, never fewer than cents (BTC $97,123.45, SOL $234.56, XRP $2.4937), and
  // more, up to 8, while the price and the price to beat would read the same but differ:
  // which side of the line the price is must show.
  function priceDigits(price, line) {
    const level = Math.abs(line != null ? line : price);
    let digits = level > 0 ? Math.min(8, Math.max(2, 4 - Math.floor(Math.log10(level)))) : 2;
    if (price != null && line != null && price !== line) {
      while (digits < 8 && price.toFixed(digits) === line.toFixed(digits)) digits += 1;
    }
    return digits;
  }
  // m:ss, and h:mm:ss while an hourly or 4-hour window has an hour or more left.
  const clock = (secs) => {
    const s = Math.max(0, Math.floor(secs));
    const pad = (n) => String(n).padStart(2, "0");
    if (s < 3600) return Math.floor(s / 60) + ":" + pad(s % 60);
    return Math.floor(s / 3600) + ":" + pad(Math.floor(s / 60) % 60) + ":" + pad(s % 60);
  };

  // kind: "poll" notices clear on the next good poll; "sticky" ones (why the stream was
  // refused or ended, why the key was refused) stay until the user changes the key.
  function notice(text, kind) {
    const el = $("notice");
    if (!text && state.noticeKind === "sticky" && kind !== "sticky") return;
    state.noticeKind = text ? (kind || "poll") : null;
    el.textContent = text || "";
    el.hidden = !text;
  }

  function render(board) {
    state.board = board;
    state.receivedAt = performance.now();
    state.failing = false;
    $("plan").textContent = "plan " + (board.planLabel || board.plan);
    $("refresh").textContent = board.refreshMs + " ms";
    $("updated").textContent = board.updatedAt ? board.updatedAt + " UTC" : "no data yet";
    const seen = new Set();
    const rows = (board.items || []).filter((row) => !seen.has(row.symbol) && seen.add(row.symbol));
    syncCards(rows.map((row) => row.symbol));
    if (rows.length) {
      const names = rows.map((row) => row.symbol);
      $("symbols").textContent = names.join(" · ") + " · " + state.view.kind + " window";
      document.title = "Probboard · " + names.join(", ") + " " + state.view.kind + " board";
    }
    for (const row of rows) renderCard(state.cards.get(row.symbol), row);
    if (!rows.length) renderCard(state.cards.get(""), null);
    if (rows.length && !state.trailAsked && state.view.chart) {
      state.trailAsked = true;
      loadTrail();
    }
    tick();
  }

  // -- one card per row, keyed by symbol ------------------------------------------------------
  // Cards of symbols no longer served go, new ones are made from the template, and the rest
  // keep their element (and their chart's history), moved only when the order changed. No
  // rows yet: one empty card (symbol ""), the page as it looks before any data.
  function syncCards(symbols) {
    const wanted = symbols.length ? symbols : [""];
    for (const [symbol, card] of state.cards) {
      if (!wanted.includes(symbol)) {
        card.el.remove();
        state.cards.delete(symbol);
      }
    }
    const box = $("markets");
    wanted.forEach((symbol, i) => {
      let card = state.cards.get(symbol);
      if (!card) {
        card = makeCard(symbol);
        state.cards.set(symbol, card);
      }
      if (box.children[i] !== card.el) box.insertBefore(card.el, box.children[i] || null);
    });
    // One row keeps the one-market layout; several make each market one card (narrower
    // charts, so their labels stay legible).
    const layout = wanted.length > 1 ? "multi" : "single";
    const relaid = !box.classList.contains(layout);
    box.className = "markets " + layout + (state.view.chart ? "" : " no-chart");
    if (relaid) for (const card of state.cards.values()) drawWindow(card);
  }

  function makeCard(symbol) {
    const el = $("market-template").content.firstElementChild.cloneNode(true);
    const card = { el, symbol, fields: {}, row: null, tokens: { up: null, down: null },
                   windowStart: null, windowPoints: [] };
    el.dataset.symbol = symbol;
    for (const node of el.querySelectorAll("[data-field]")) card.fields[node.dataset.field] = node;
    card.fields.symbol.textContent = symbol || "–";
    // The template's ids ("-prob-title", ...) made unique per card.
    const prefix = "market-" + (symbol.toLowerCase().replace(/[^a-z0-9]/g, "_") || "none");
    for (const node of el.querySelectorAll("[id]")) node.id = prefix + node.id;
    for (const node of el.querySelectorAll("[aria-labelledby]")) {
      node.setAttribute("aria-labelledby", prefix + node.getAttribute("aria-labelledby"));
    }
    const named = (text) => (symbol ? text.replace("the ", "the " + symbol + " ") : text);
    card.fields.chart.setAttribute("aria-label", named(card.fields.chart.getAttribute("aria-label")));
    for (const button of el.querySelectorAll("button.copy")) {
      button.setAttribute("aria-label", named(button.getAttribute("aria-label")));
      button.addEventListener("click", () => copyToken(button, card.tokens[button.dataset.copy]));
    }
    return card;
  }

  // A board row is always called `row` in this script: tests/unit/board/test_row_fields.py
  // reads the fields the page uses (row.name, row[...]) and checks each against the row's
  // definition in app/board/row.py, so a renamed field fails there, not on the page.
  function renderCard(card, row) {
    const f = card.fields;
    card.row = row;
    f["p-up"].textContent = fmtPct(row && row.p_up_pct);
    f["p-down"].textContent = fmtPct(row && row.p_down_pct);
    f["bar-up"].style.width = (row && row.p_up_pct != null ? row.p_up_pct : 50) + "%";
    for (const side of ["up", "down"]) {
      const bid = row && row[side + "_bid"], ask = row && row[side + "_ask"];
      f[side + "-bid"].textContent = fmtPrice(bid);
      f[side + "-ask"].textContent = fmtPrice(ask);
      f[side + "-gap"].textContent = gap(row && row["p_" + side + "_pct"], ask);
      card.tokens[side] = row && row[side + "_token_id"];
      f[side + "-token"].textContent = shortToken(card.tokens[side]);
      f[side + "-token"].title = card.tokens[side] || "";
    }
    f.window.textContent = row && row.windowStart
      ? new Date(row.windowStart * 1000).toISOString().slice(11, 16) + "–" + new Date(row.windowEnd * 1000).toISOString().slice(11, 16) + " UTC"
      : "–";
    const digits = row ? priceDigits(row.price, row.priceToBeat) : 2;
    f.prices.textContent = row && (row.price != null || row.priceToBeat != null)
      ? "Price " + fmtUsd(row.price, digits) + " · price to beat " + fmtUsd(row.priceToBeat, digits)
      : "";
    windowPoint(card, row);
  }

  async function copyToken(button, token) {
    if (!token) return;
    try {
      await navigator.clipboard.writeText(token);
      button.textContent = "copied";
    } catch (e) {
      button.textContent = "copy failed";
    }
    setTimeout(() => { button.textContent = "copy"; }, 1500);
  }

  // -- charts: inline SVG, drawn here (no library) ------------------------------------------
  function svgNode(name, attrs, text) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text != null) node.textContent = text;
    return node;
  }

  function clearSvg(svg) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
  }

  // A plot area in an SVG: value -> pixel on both axes, with gridlines and labels.
  function frame(svg, box, xs, ys, xLabel, yLabel) {
    const [w, h] = [box.w, box.h], pad = { l: 40, r: 12, t: yLabel ? 24 : 10, b: 30 };
    const x = (v) => pad.l + ((v - xs.min) / (xs.max - xs.min)) * (w - pad.l - pad.r);
    const y = (v) => h - pad.b - ((v - ys.min) / (ys.max - ys.min)) * (h - pad.t - pad.b);
    for (const v of ys.ticks) {
      svg.appendChild(svgNode("line", { class: "grid", x1: pad.l, x2: w - pad.r, y1: y(v), y2: y(v) }));
      svg.appendChild(svgNode("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" }, ys.fmt(v)));
    }
    for (const v of xs.ticks) {
      svg.appendChild(svgNode("text", { x: x(v), y: h - pad.b + 14, "text-anchor": "middle" }, xs.fmt(v)));
    }
    svg.appendChild(svgNode("rect", { class: "axis", x: pad.l, y: pad.t, width: w - pad.l - pad.r, height: h - pad.t - pad.b }));
    if (xLabel) svg.appendChild(svgNode("text", { x: (pad.l + w - pad.r) / 2, y: h - 2, "text-anchor": "middle" }, xLabel));
    if (yLabel) svg.appendChild(svgNode("text", { x: pad.l, y: 14 }, yLabel));
    return { x, y };
  }

  function line(svg, cls, points) {
    if (points.length < 2) return;
    svg.appendChild(svgNode("polyline", { class: cls, points: points.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ") }));
  }

  const pctTicks = { min: 0, max: 1, ticks: [0, 0.25, 0.5, 0.75, 1], fmt: (v) => Math.round(v * 100) + "%" };

  function windowPoint(card, row) {
    if (!state.view.chart || !row || row.windowStart == null || row.rem_secs == null) return;
    if (card.windowStart !== row.windowStart) {
      card.windowStart = row.windowStart;
      card.windowPoints = [];
    }
    const stale = row.isStale === true;
    const p = stale || row.p_up_pct == null ? null : row.p_up_pct / 100;
    const mid = stale || row.up_bid == null || row.up_ask == null ? null : (row.up_bid + row.up_ask) / 2;
    // A window's length is its row's (a 4-hour block lasts 3 to 5 hours across a change of
    // clocks); about 600 points a window whatever its length, as the service's trail keeps.
    const length = row.windowEnd != null ? row.windowEnd - row.windowStart : WINDOW_S;
    card.windowLength = length;
    const s = length - row.rem_secs;
    const last = card.windowPoints[card.windowPoints.length - 1];
    if (last && s < last.s + length / 600 && (last.p == null) === (p == null)) return;
    card.windowPoints.push({ s, p, mid });
    if (card.windowPoints.length > 4000) card.windowPoints.shift();
    drawWindow(card);
  }

  // Opened mid-window, the page asks once for what the service kept of the window so far
  // (/api/probboard/trail, points at this plan's refresh interval) and draws it before its
  // own points. Without it (refused, failed) the chart starts when the page opened, as it
  // always did.
  async function loadTrail() {
    const epoch = state.epoch;
    try {
      const response = await fetch("/api/probboard/trail" + state.view.query, { headers: headers(key()), cache: "no-store" });
      if (!response.ok || epoch !== state.epoch) return;
      const doc = await response.json();
      for (const market of doc.markets || []) {
        const card = state.cards.get(market.symbol);
        if (card) fillWindow(card, market);
      }
    } catch (e) {
      // the chart keeps what this page received
    }
  }

  // The trail's points of the card's window, before the first point the page took itself.
  function fillWindow(card, market) {
    if (card.windowStart != null && card.windowStart !== market.windowStart) return;
    card.windowStart = market.windowStart;
    const first = card.windowPoints.length ? card.windowPoints[0].s : Infinity;
    const earlier = (market.points || []).filter((q) => q[0] < first).map((q) => ({ s: q[0], p: q[1], mid: q[2] }));
    card.windowPoints = earlier.concat(card.windowPoints);
    drawWindow(card);
  }

  function drawWindow(card) {
    const svg = card.fields.chart;
    clearSvg(svg);
    const w = $("markets").classList.contains("multi") ? 420 : 600;
    svg.setAttribute("viewBox", "0 0 " + w + " 200");
    const length = card.windowLength || WINDOW_S;
    const xs = timeAxis(length);
    const at = frame(svg, { w, h: 200 }, xs, pctTicks, "time into the window (" + xs.unit + ")", null);
    const pts = card.windowPoints;
    line(svg, "model", pts.filter((q) => q.p != null).map((q) => [at.x(q.s), at.y(q.p)]));
    line(svg, "market", pts.filter((q) => q.mid != null).map((q) => [at.x(q.s), at.y(q.mid)]));
  }

  // The window chart's time axis over ``length`` seconds: at most 6 intervals of a round
  // step (1, 3, 5, 10, 15, 30 minutes, 1 hour), read as m:ss, or h:mm from an hour long.
  function timeAxis(length) {
    const step = [60, 180, 300, 600, 900, 1800, 3600].find((s) => length / s <= 6) || 3600;
    const ticks = [];
    for (let t = 0; t <= length + 0.5; t += step) ticks.push(t);
    const pad = (n) => String(n).padStart(2, "0");
    const long = length >= 3600;
    const fmt = long ? (v) => Math.floor(v / 3600) + ":" + pad(Math.floor(v / 60) % 60) : (v) => clock(v);
    return { min: 0, max: length, ticks, fmt, unit: long ? "h:mm" : "m:ss" };
  }

  function drawReliability(doc) {
    const svg = $("reliability-chart");
    clearSvg(svg);
    const at = frame(svg, { w: 420, h: 420 }, pctTicks, pctTicks, "forecast P(up)", "observed");
    svg.appendChild(svgNode("line", { class: "diag", x1: at.x(0), y1: at.y(0), x2: at.x(1), y2: at.y(1) }));
    for (const [cls, bins] of [["market", doc.reliabilityMarket || []], ["model", doc.reliability || []]]) {
      const shown = bins.filter((b) => b.n > 0 && b.meanP != null && b.observed != null);
      line(svg, cls, shown.map((b) => [at.x(b.meanP), at.y(b.observed)]));
      for (const b of shown) {
        const r = Math.min(9, 2.5 + Math.sqrt(b.n) / 2);
        const dot = svgNode("circle", { class: cls + " dot", cx: at.x(b.meanP), cy: at.y(b.observed), r });
        dot.appendChild(svgNode("title", {}, cls + ": " + b.n + " forecasts near " + Math.round(b.meanP * 100) + "%, UP " + Math.round(b.observed * 100) + "%"));
        svg.appendChild(dot);
      }
    }
  }

  function drawBrier(doc) {
    const svg = $("brier-chart");
    clearSvg(svg);
    const buckets = doc.buckets || [];
    const values = buckets.flatMap((b) => [b.model.brier, b.market.brier]).filter((v) => v != null);
    // The axis fits the scores: up to the largest (a coin flip's 0.25 with none yet).
    const ys = niceAxis(values.length ? Math.max(...values) : 0.25);
    // Time left runs from the window's start to its end, left to right; a label every few
    // checkpoints so that none runs into the next (15-minute windows have 20 of them).
    const rems = buckets.map((b) => b.remS);
    const every = Math.max(1, Math.ceil(rems.length / 8));
    const ticks = rems.map((_, i) => i).filter((i) => i % every === 0 || i === rems.length - 1);
    const xs = { min: 0, max: Math.max(1, rems.length - 1), ticks, fmt: (i) => timeLeft(rems[i]) };
    const unit = rems.some((r) => r >= 3600) ? "h:mm:ss" : "m:ss";
    const at = frame(svg, { w: 720, h: 300 }, xs, ys, "time left in the window (" + unit + ")", "Brier");
    for (const cls of ["market", "model"]) {
      const pts = buckets.map((b, i) => [i, b[cls].brier]).filter((q) => q[1] != null);
      line(svg, cls, pts.map((q) => [at.x(q[0]), at.y(q[1])]));
      for (const q of pts) svg.appendChild(svgNode("circle", { class: cls + " dot", cx: at.x(q[0]), cy: at.y(q[1]), r: 3 }));
    }
  }

  // A 0-based axis to just above ``top``: four or five round steps (1, 2, 2.5 or 5 times a
  // power of ten), labelled with the decimals the step needs.
  function niceAxis(top) {
    const raw = Math.max(top, 0.001) / 4;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((v) => v >= raw * (1 - 1e-9));
    const max = Math.max(step, Math.ceil(top / step - 1e-9) * step);
    const ticks = [];
    for (let i = 0; i * step <= max + step / 2; i += 1) ticks.push(i * step);
    let digits = 0;
    while (digits < 6 && Math.abs(step * Math.pow(10, digits) - Math.round(step * Math.pow(10, digits))) > 1e-6) digits += 1;
    return { min: 0, max, ticks, fmt: (v) => v.toFixed(digits) };
  }

  function recordNotice(text) {
    $("record-notice").textContent = text || "";
    $("record-notice").hidden = !text;
  }

  // The served markets: /api/health's (lower case), else the board's rows.
  function servedSymbols() {
    const served = state.health && Array.isArray(state.health.symbols) ? state.health.symbols : [];
    if (served.length) return served.map((name) => name.toUpperCase());
    return Array.from(state.cards.keys()).filter((name) => name);
  }

  // The market selector: one option per served market, kept when the list is the same.
  function syncRecordSymbols() {
    const select = $("record-symbol");
    const names = servedSymbols();
    const have = Array.from(select.options, (o) => o.value);
    if (names.length && names.join() !== have.join()) {
      const chosen = names.includes(select.value) ? select.value : names[0];
      select.replaceChildren(...names.map((name) => new Option(name, name)));
      select.value = chosen;
    }
    $("record-market").hidden = names.length < 2;
  }

  async function loadRecord() {
    syncRecordSymbols();
    const symbol = $("record-symbol").value;
    // Answers may cross when the market is changed quickly: only the last asked is drawn.
    const asked = (state.recordAsked += 1);
    // The record of the window the board shows (?window=, as the board asks it).
    const params = new URLSearchParams(state.view.query);
    if (symbol) params.set("symbol", symbol);
    if (state.recordPeriod !== "all") params.set("period", state.recordPeriod);
    const query = params.toString() ? "?" + params.toString() : "";
    const windows = state.view.kind + " windows";
    try {
      const response = await fetch("/api/probboard/calibration" + query, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (asked !== state.recordAsked) return;
      if (!response.ok) {
        recordNotice("The track record is not available: " + (await problem(response)).text);
        return;
      }
      const doc = await response.json();
      if (asked !== state.recordAsked) return;
      recordNotice("");
      const period = { "24h": "the last 24 hours", "7d": "the last 7 days", "30d": "the last 30 days", all: "all time" }[doc.span] || doc.span;
      $("record-summary").textContent = doc.symbol + " · " + windows + " · " + period + " (" + doc.source + ")";
      drawHeadline(doc, windows);
      drawRecordTable(doc);
      csvLinks(doc);
      drawReliability(doc);
      drawBrier(doc);
    } catch (e) {
      if (asked === state.recordAsked) recordNotice("Cannot reach the service; retrying.");
    }
  }

  const fmtScore = (v) => (v == null ? "–" : v.toFixed(3));
  const fmtCount = (n) => Number(n).toLocaleString("en-US");

  // Windows settled, both scores of the model and the market on the same checkpoints, and
  // which did better; a note while the sample is small.
  function drawHeadline(doc, windows) {
    const overall = doc.overall;
    $("record-windows").textContent = fmtCount(doc.windows);
    for (const side of ["model", "market"]) {
      for (const name of ["logLoss", "brier"]) {
        const cell = document.querySelector('[data-score="' + side + "-" + name + '"]');
        cell.textContent = fmtScore(overall[side][name]);
        cell.classList.toggle("better", overall.better === side);
      }
    }
    const verdict = $("record-verdict");
    if (!overall.n) {
      verdict.textContent = "Nothing to compare yet: the record fills in as windows end.";
    } else if (overall.better == null) {
      verdict.textContent = "A tie on " + fmtCount(overall.n) + " checkpoints.";
    } else {
      const [win, lose] = overall.better === "model" ? ["model", "market"] : ["market", "model"];
      verdict.textContent = "The " + (win === "model" ? "model" : "market") + " did better: log loss "
        + fmtScore(overall[win].logLoss) + " against " + fmtScore(overall[lose].logLoss)
        + " on " + fmtCount(overall.n) + " checkpoints.";
    }
    const small = $("record-small");
    const few = doc.windows > 0 && doc.windows < FEW_WINDOWS;  // none: the verdict says so
    small.hidden = !few;
    small.textContent = !few ? "" : "Only " + fmtCount(doc.windows) + " settled "
      + windows + " so far: with fewer than " + FEW_WINDOWS + ", which did better can be chance. Read these as a first look.";
  }

  // Seconds left as the page's clocks write them: 4:30, 14:30, 1:00:00.
  const timeLeft = (s) => clock(s);

  function drawRecordTable(doc) {
    const body = $("record-table").tBodies[0];
    body.replaceChildren(...(doc.buckets || []).map((b) => {
      const tr = document.createElement("tr");
      const both = b.both || { n: 0, model: {}, market: {} };
      const cells = [timeLeft(b.remS), fmtCount(b.n), fmtScore(b.model.logLoss), fmtScore(b.market.logLoss),
                     fmtScore(b.model.brier), fmtScore(b.market.brier)];
      let better = "–";
      if (both.n && both.model.logLoss != null && both.market.logLoss != null && both.model.logLoss !== both.market.logLoss) {
        better = both.model.logLoss < both.market.logLoss ? "model" : "market";
      }
      for (const text of [...cells, better]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      return tr;
    }));
  }

  // The shown period's windows as CSV (the windows export): one file, or one per
  // CSV_LIMIT windows (newest first) when the period holds more.
  function csvLinks(doc) {
    const box = $("record-csv");
    const params = new URLSearchParams(state.view.query);
    params.set("symbol", doc.symbol);
    params.set("format", "csv");
    params.set("limit", String(CSV_LIMIT));
    const links = [];
    if (doc.period && doc.windowsRecorded > CSV_LIMIT) {
      const first = Date.parse(doc.period.start) / 1000, end = Date.parse(doc.period.end) / 1000;
      const step = CSV_LIMIT * ((end - first) / Math.max(1, doc.windowsRecorded));
      for (let to = end, part = 1; to > first; to -= step, part += 1) {
        const from = Math.max(first, Math.floor(to - step));
        const each = new URLSearchParams(params);
        each.set("from", String(from));
        each.set("to", String(Math.ceil(to)));
        links.push(["part " + part, each]);
      }
    } else {
      if (doc.period) params.set("from", doc.period.start);
      links.push(["CSV", params]);
    }
    const text = links.length > 1 ? "Download these windows as CSV, newest first: " : "Download these windows as ";
    box.replaceChildren(document.createTextNode(text));
    links.forEach(([label, query], i) => {
      const a = document.createElement("a");
      a.href = "/api/probboard/windows?" + query.toString();
      a.textContent = label;
      if (i === 0) a.id = "record-csv-link";
      if (i) box.appendChild(document.createTextNode(" · "));
      box.appendChild(a);
    });
    if (links.length === 1) box.appendChild(document.createTextNode(" (" + fmtCount(doc.windowsRecorded) + " windows)."));
  }

  function choosePeriod(value) {
    state.recordPeriod = value;
    for (const b of document.querySelectorAll("#record-period button")) b.setAttribute("aria-pressed", String(b.dataset.period === value));
    loadRecord();
  }

  // /api/health: the served markets (the selector) and the source (the badge before a row).
  async function loadHealth() {
    try {
      const response = await fetch("/api/health", { headers: { Accept: "application/json" }, cache: "no-store" });
      if (response.ok) state.health = await response.json();
    } catch (e) {
      // the board's rows say the same once they come
    }
    if (!$("record-view").hidden) syncRecordSymbols();
    tick();
  }

  function showView(record) {
    $("board-view").hidden = record;
    $("record-view").hidden = !record;
    $("show-board").setAttribute("aria-pressed", String(!record));
    $("show-record").setAttribute("aria-pressed", String(record));
    clearInterval(state.recordTimer);
    if (record) {
      loadRecord();
      state.recordTimer = setInterval(loadRecord, 60000);
    }
  }

  // Between updates the countdowns and the data age move locally, and the badges turn
  // stale by themselves when no update comes: the page is never silently old.
  function tick() {
    const board = state.board;
    if (!board) return;
    const elapsed = performance.now() - state.receivedAt;
    const age = board.dataAgeMs == null ? null : board.dataAgeMs + elapsed;
    $("age").textContent = age == null ? "–" : (age / 1000).toFixed(1) + " s";
    const level = judged(board, board.latencyLevel, age);
    const badge = $("badge");
    const made = simulated(board);
    // Simulated numbers, or a live source on fake upstreams on this machine, in amber: not
    // the markets' own; "live" (green) only when the upstreams are not this machine's.
    const local = !made && state.health && state.health.sourceLabel !== "live";
    badge.className = "badge " + level + (made || local ? " simulated" : "");
    badge.textContent = made ? SIMULATED_TEXT[level] : liveText(level);
    // The board's level marks the cards around the markets; each market is marked by its own.
    document.body.classList.toggle("stale", level === "warn");
    document.body.classList.toggle("danger", level === "danger");
    const single = state.cards.size === 1;
    // Why rows are stale although their inputs are young (inputs their witnesses contradict).
    badge.title = (board.items || []).flatMap((row) => suspects(row, single)).join("\n");
    for (const card of state.cards.values()) tickCard(card, board, elapsed, level, single);
  }

  // Any row from the simulated source makes the board's badge say so; before any row,
  // /api/health's source does.
  function simulated(board) {
    const rows = board.items || [];
    if (rows.length) return rows.some((row) => row.source === "simulated");
    return Boolean(state.health && state.health.source === "simulated");
  }

  // A fresh live board's badge: /api/health's sourceLabel ("live · fake upstream on this
  // machine" against loopback upstreams), else "live"; a stale one says how stale.
  function liveText(level) {
    const label = state.health && state.health.sourceLabel;
    return level === "ok" && label && label !== "simulated" ? label : LEVEL_TEXT[level];
  }

  function suspects(row, single) {
    const why = Array.isArray(row && row.suspect) ? row.suspect : [];
    return single ? why : why.map((text) => row.symbol + ": " + text);
  }

  function tickCard(card, board, elapsed, boardLevel, single) {
    const row = card.row;
    const f = card.fields;
    let level = boardLevel;
    if (row) {
      const rowAgeMs = row.dataAgeMs != null ? row.dataAgeMs : board.dataAgeMs;
      const dataAge = rowAgeMs == null ? null : rowAgeMs + elapsed;
      f.countdown.textContent = row.rem_secs != null ? clock(row.rem_secs - (dataAge || 0) / 1000) : "–";
      level = judged(board, row.latencyLevel || board.latencyLevel, dataAge);
    } else {
      f.countdown.textContent = "–";
    }
    card.el.classList.toggle("stale", level === "warn");
    card.el.classList.toggle("danger", level === "danger");
    // With one market the header's badge is its badge.
    f["row-badge"].hidden = single || level === "ok";
    f["row-badge"].className = "badge row-badge " + level;
    f["row-badge"].textContent = level === "ok" ? "" : LEVEL_TEXT[level];
    f["row-badge"].title = suspects(row, true).join("\n");
  }

  // The server judged the data when it answered; locally, data turns stale only when an
  // update is overdue: its age beyond the threshold, plus one refresh interval while polls
  // succeed (the next one is not due yet). On the stream, or once a request has failed,
  // nothing is on its way, so there is no such grace: the page never says live on a board
  // that has stopped.
  function judged(board, serverLevel, age) {
    let level = serverLevel || "danger";
    const grace = state.mode === "stream" || state.failing ? 0 : board.refreshMs;
    const overdue = (limit) => age > limit + grace;
    if (age == null || overdue(board.severeStaleThresholdMs)) level = "danger";
    else if (overdue(board.staleThresholdMs) && level === "ok") level = "warn";
    return level;
  }

  // A request for a board failed: say why, and judge the board shown without grace at
  // once (the notice and the badge change together).
  function failed(text, kind) {
    state.failing = true;
    notice(text, kind);
    tick();
  }

  function key() {
    return sessionStorage.getItem(KEY_STORE) || "";
  }

  // A key as the API shows it (maskedKey, `keys list`): its first 12 and last 4 characters.
  // Anything shorter is not shown at all.
  function masked(value) {
    return value.length > 20 ? value.slice(0, 12) + "..." + value.slice(-4) : "(hidden)";
  }

  function headers(sent, extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    if (sent) h["X-API-Key"] = sent;
    return h;
  }

  // An ErrorResponse's code and message (the status and its text when the body is not one).
  async function problem(response) {
    try {
      const body = await response.json();
      return { code: body.code || String(response.status), text: body.error || response.statusText };
    } catch (e) {
      return { code: String(response.status), text: response.statusText };
    }
  }

  // The service refused the key (a 401: unknown, revoked, expired, disabled owner...). It
  // will not be accepted as it is, and every refused request counts toward this address's
  // failed-key throttle, so the page forgets it (never sends it again) and goes on with the
  // public board, saying why until another key is entered.
  function refuseKey(why) {
    state.refused = { masked: masked(key()), code: why.code, text: why.text };
    setKey("");
    state.failing = true;
    notice(refusedText(null), "sticky");
    tick();
    startPolling();
  }

  function refusedText(board) {
    const r = state.refused;
    const every = board ? ", refreshed every " + board.refreshMs / 1000 + " s" : "";
    return "Your API key " + r.masked + " was not accepted (" + r.code + "): " + r.text +
      " Showing the public board instead" + every + "; enter another key to try again.";
  }

  // Answers to the requests made so far are moot (the key or the window changed).
  function newEpoch() {
    state.epoch += 1;
    if (state.controller) state.controller.abort();
    state.controller = null;
  }

  // Keep (or drop) the key and make answers to requests sent with the previous one moot.
  function setKey(value) {
    if (value) sessionStorage.setItem(KEY_STORE, value);
    else sessionStorage.removeItem(KEY_STORE);
    newEpoch();
    $("key-status").textContent = value ? "Key in use: " + masked(value) + "." : "No key: the public board.";
    $("alerts-card").hidden = !value;
    $("alert-secret").hidden = true;
    if (value) loadAlerts();
  }

  // -- alerts (issue 51): a key holder's lines, made, paused and deleted with the key --------
  async function alertsCall(method, path, body) {
    const init = { method, headers: headers(key(), body ? { "Content-Type": "application/json" } : {}), cache: "no-store" };
    if (body) init.body = JSON.stringify(body);
    const response = await fetch("/api/alerts" + path, init);
    if (!response.ok) throw new Error((await problem(response)).text);
    return response.status === 204 ? null : response.json();
  }

  const lineText = (a) => a.symbol + " " + a.window + ": " + ({
    p_up_above: "P(up) above " + a.level + "%",
    p_up_below: "P(up) below " + a.level + "%",
    edge_above: a.side + " edge above " + a.level + " pts",
    stale: "stale, and fresh again",
  }[a.condition] || a.condition);

  function button(text, label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  async function loadAlerts() {
    const status = $("alerts-status");
    try {
      const doc = await alertsCall("GET", "");
      const rows = doc.alerts.map((a) => {
        const tr = document.createElement("tr");
        tr.dataset.alert = a.id;
        const cells = [lineText(a), a.url, a.status + (a.pausedReason ? " (" + a.pausedReason + ")" : "")];
        for (const text of cells) {
          const td = document.createElement("td");
          td.textContent = text;
          tr.appendChild(td);
        }
        const actions = document.createElement("td");
        const next = a.status === "active" ? "paused" : "active";
        actions.append(
          button(next === "paused" ? "pause" : "resume", (next === "paused" ? "Pause " : "Resume ") + lineText(a),
                 () => changeAlert(() => alertsCall("PATCH", "/" + a.id, { status: next }))),
          button("delete", "Delete " + lineText(a), () => changeAlert(() => alertsCall("DELETE", "/" + a.id))),
          button("calls", "Last calls of " + lineText(a), () => loadDeliveries(a)),
        );
        tr.appendChild(actions);
        return tr;
      });
      $("alerts-table").tBodies[0].replaceChildren(...rows);
      status.textContent = doc.alerts.length ? doc.alerts.length + " alert(s)." : "No alerts yet.";
    } catch (e) {
      status.textContent = "Alerts: " + e.message;
    }
  }

  async function changeAlert(call) {
    try {
      await call();
    } catch (e) {
      $("alerts-status").textContent = "Alerts: " + e.message;
      return;
    }
    $("alert-deliveries").hidden = true;
    loadAlerts();
  }

  async function loadDeliveries(alert) {
    try {
      const doc = await alertsCall("GET", "/" + alert.id + "/deliveries");
      const rows = doc.deliveries.map((d) => {
        const tr = document.createElement("tr");
        for (const text of [d.at.replace("T", " ").replace("Z", ""), d.status, d.attempts, d.httpStatus ?? "–", d.latencyMs ?? "–", d.error || ""]) {
          const td = document.createElement("td");
          td.textContent = String(text);
          tr.appendChild(td);
        }
        return tr;
      });
      $("deliveries-title").textContent = "Last calls: " + lineText(alert) + (rows.length ? "" : " (none yet)");
      $("alert-deliveries").querySelector("tbody").replaceChildren(...rows);
      $("alert-deliveries").hidden = false;
    } catch (e) {
      $("alerts-status").textContent = "Alerts: " + e.message;
    }
  }

  async function createAlert(form) {
    const data = new FormData(form);
    const condition = data.get("condition");
    const body = { url: data.get("url"), symbol: data.get("symbol"), window: data.get("window"),
                   condition, format: data.get("format") };
    if (condition !== "stale") body.level = Number(data.get("level"));
    if (condition === "edge_above") body.side = data.get("side") || "up";
    try {
      const doc = await alertsCall("POST", "", body);
      const secret = $("alert-secret");
      secret.textContent = "Created " + doc.alert.id + ". Its signing secret, shown this once (verify each call with it): " + doc.secret;
      secret.hidden = false;
    } catch (e) {
      $("alerts-status").textContent = "Alerts: " + e.message;
      return;
    }
    loadAlerts();
  }

  function schedule(fn, ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(fn, ms);
  }

  async function poll() {
    if (state.mode !== "polling") return;
    const epoch = state.epoch, sent = key();
    // The key changed while this request was out: its answer is about a key no longer in
    // use, and the new key's own requests have been started.
    const moot = () => epoch !== state.epoch || state.mode !== "polling";
    let wait = state.board ? state.board.refreshMs : 5000;
    try {
      const response = await fetch("/api/probboard/latest" + state.view.query, { headers: headers(sent), cache: "no-store" });
      const body = response.ok ? await response.json() : await problem(response);
      if (moot()) return;
      if (response.ok) {
        render(body);
        wait = body.refreshMs; // this board's plan: after a key change, not the last one's
        if (state.refused) notice(refusedText(body), "sticky");
        else notice("");
      } else if (response.status === 401 && sent) {
        return refuseKey(body);
      } else if (response.status === 429) {
        // Not a refusal of the key (its plan's limit, or this address's failed keys): keep
        // it, wait as told, and meanwhile let the badge say that the board is getting old.
        const seconds = Math.max(1, parseInt(response.headers.get("Retry-After") || "5", 10));
        failed("Rate limited: waiting " + seconds + " s before the next update. The service said: " + body.text);
        wait = seconds * 1000;
      } else {
        failed("The board is not available: " + body.text);
        wait = Math.max(wait, 5000);
      }
    } catch (e) {
      if (moot()) return;
      failed("Cannot reach the service; retrying.");
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
      response = await fetch("/api/probboard/stream" + state.view.query, {
        headers: headers(key(), { Accept: "text/event-stream" }), signal: controller.signal, cache: "no-store",
      });
    } catch (e) {
      if (controller.signal.aborted) return;
      return reconnect("connection failed");
    }
    if (!response.ok) {
      const why = await problem(response);
      if (controller.signal.aborted) return;
      if (response.status === 401) return refuseKey(why);
      notice("Stream refused (" + response.status + "): " + why.text + " Polling instead.", "sticky");
      return startPolling("stream refused");
    }
    notice("", "sticky");
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
            controller.abort();
            // The key was revoked (or its owner disabled) while streaming.
            if (KEY_REFUSED.has(payload.code)) return refuseKey({ code: payload.code, text: payload.error });
            notice("Stream ended: " + (payload.error || payload.code) + " Polling instead.", "sticky");
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

  // -- the window switch: which window's board (?window=, issue 39) --------------------------
  // The served windows are the switch's buttons (the template renders it from WINDOWS, only
  // when there are several); the default window is the board without the parameter, so the
  // default page asks exactly what it always did.
  function switchButtons() {
    return Array.from(document.querySelectorAll("#window-switch button"));
  }

  // Show the window ``name`` (a ?window= value; anything not served means the default): the
  // switch, the labels, the chart and the page's URL (shareable, kept on a reload).
  function showWindow(name) {
    const view = $("board-view").dataset;
    const wanted = String(name || "").toLowerCase();
    const button = switchButtons().find((b) => b.dataset.window === wanted);
    const chosen = button ? wanted : view.defaultWindow;
    const isDefault = chosen === view.defaultWindow;
    state.view = {
      name: chosen,
      kind: button ? button.dataset.kind : view.defaultKind,
      query: isDefault ? "" : "?window=" + encodeURIComponent(chosen),
      chart: true,
    };
    for (const b of switchButtons()) b.setAttribute("aria-pressed", String(b.dataset.window === chosen));
    $("symbols").textContent = state.view.kind + " window";
    document.title = "Probboard · " + state.view.kind + " board";
    const url = new URL(location.href);
    if (isDefault) url.searchParams.delete("window");
    else url.searchParams.set("window", chosen);
    if (url.href !== location.href) history.replaceState(null, "", url);
  }

  // The other window chosen: its rows replace the cards (the shown rows, countdowns and
  // charts are the previous window's), asked afresh with the same key.
  function chooseWindow(name) {
    if (name === state.view.name) return;
    showWindow(name);
    newEpoch();
    state.board = null;
    state.trailAsked = false;
    for (const card of state.cards.values()) card.el.remove();
    state.cards.clear();
    syncCards([]);
    if (key()) startStream();
    else startPolling();
    if (!$("record-view").hidden) loadRecord();  // the record of the window now chosen
  }

  function useKey(value) {
    state.refused = null;
    // A header can carry only visible ASCII: anything else is not a key, and fetch would
    // throw on it (read as "cannot reach the service") rather than send it.
    if (value && !/^[\x21-\x7e]+$/.test(value)) {
      notice("That is not an API key (pbk_ and letters, digits, - or _, no spaces): nothing was sent.", "sticky");
      return;
    }
    notice("", "sticky");
    setKey(value);
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
    $("alert-form").addEventListener("submit", (e) => {
      e.preventDefault();
      createAlert(e.target);
    });
    $("show-board").addEventListener("click", () => showView(false));
    $("show-record").addEventListener("click", () => showView(true));
    $("record-symbol").addEventListener("change", loadRecord);
    for (const button of document.querySelectorAll("#record-period button")) {
      button.addEventListener("click", () => choosePeriod(button.dataset.period));
    }
    for (const button of switchButtons()) {
      button.addEventListener("click", () => chooseWindow(button.dataset.window));
    }
    showWindow(new URLSearchParams(location.search).get("window"));
    loadHealth();
    syncCards([]);
    setInterval(tick, 250);
    setKey(key());
    if (key()) startStream();
    else startPolling();
  });
})();
