"""Backtests of a tape holding 5- and 15-minute windows (``WINDOWS=5m,15m``, issue 39).

The tape is written by ``harness.tapes`` from the fakes' own frames, as a refresher serving
both window lengths records them; the report has one document per (market, window), each
scored at its own checkpoints, and a one-market 5-minute tape's report keeps its shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.backtest.replay import spans_of
from app.backtest.report import backtest, document_of, text
from app.backtest.tapes import read_tapes
from app.calibration.checkpoints import REMS
from app.markets import SPANS
from harness.fake_polymarket import TWAP, BrownianPath
from harness.spans import FIVE_MINUTES
from harness.tapes import TapeSpec, settled_up, write
from harness.tapes import lines as tape_lines

T0 = 1_800_000_000  # a multiple of 900: starts a 5- and a 15-minute window
SIGMA = 1.2e-4
FIFTEEN = SPANS["15m"]
LENGTH_S = 1800  # half an hour of tape: two 15-minute windows (one resolved by the market,
# one by the feed) and six 5-minute ones; the replay costs about 4 ms a tape second
WINDOWS_15M = LENGTH_S // 900
# The keys of a one-market 5-minute report, as before issue 39 (with issue 50's headline,
# ``overall``: the model's and the market's scores on the same checkpoints).
FLAT_KEYS = {"windows", "windowsWithOutcome", "buckets", "overall", "reliability",
             "reliabilityMarket", "perWindow", "replay"}  # fmt: skip


def spec(spans: tuple[Any, ...], seed: int = 31, length_s: int = LENGTH_S) -> TapeSpec:
    """``length_s`` of TWAP windows of ``spans`` (the first span's count: that length's)."""
    path = BrownianPath(seed, SIGMA, 100_000, T0 - 2400, length_s + 3000)
    windows = length_s // spans[0].seconds
    return TapeSpec(path, SIGMA, T0, windows, rule=TWAP, resolved_every=2, spans=spans)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], TapeSpec]:
    """The report of a one-market tape of both lengths."""
    tape = spec((FIVE_MINUTES, FIFTEEN))
    folder = write(tape, tmp_path_factory.mktemp("tapes") / "both")
    return backtest(read_tapes([folder])), tape


def test_a_tape_of_both_lengths_reports_a_document_per_market_and_window(
    both: tuple[dict[str, Any], TapeSpec],
) -> None:
    doc, tape = both
    assert set(doc) == {"symbols", "windows"}
    five = doc["symbols"]["BTC"]
    fifteen = doc["windows"]["15m"]["symbols"]["BTC"]
    assert set(five) == set(fifteen) == FLAT_KEYS
    assert document_of(doc) is five and document_of(doc, "15m", "BTC") is fifteen
    # Each document holds its own length's windows only, scored at its own checkpoints.
    assert all(w["slug"].startswith("btc-updown-5m-") for w in five["perWindow"])
    assert [b["remS"] for b in five["buckets"]] == list(REMS)
    assert five["windowsWithOutcome"] == LENGTH_S // 300
    starts = [T0 + i * 900 for i in range(WINDOWS_15M)]
    scored = [w for w in fifteen["perWindow"] if w["windowStart"] in starts]
    assert [w["slug"] for w in scored] == [f"btc-updown-15m-{s}" for s in starts]
    assert all(w["slug"].startswith("btc-updown-15m-") for w in fifteen["perWindow"])
    assert [b["remS"] for b in fifteen["buckets"]] == list(SPANS["15m"].rems)
    assert fifteen["windowsWithOutcome"] == WINDOWS_15M
    for i, window in enumerate(scored):
        up = settled_up(tape.path, TWAP, tape.lookback, window["windowStart"], 900)
        source = "market" if i % 2 == 0 else "feed"
        assert (window["outcome"], window["outcomeSource"]) == ("up" if up else "down", source)
        assert window["priceToBeat"] == pytest.approx(float(tape.path.twap(window["windowStart"],
                                                                           60)))  # fmt: skip
        rems = [c["remS"] for c in window["checkpoints"]]
        assert rems == list(SPANS["15m"].rems), window["slug"]
        assert all(c["pUp"] is not None and c["marketMid"] is not None
                   for c in window["checkpoints"])  # fmt: skip
    # Each bucket counts its windows; the replay counts each document's own boards.
    assert all(b["n"] == WINDOWS_15M for b in fifteen["buckets"])
    assert five["replay"]["boards"] == fifteen["replay"]["boards"] > 0
    report = text(doc)
    assert "== BTC 5m" in report and "== BTC 15m" in report
    assert f"btc-updown-15m-{T0}" in report and "  870 " in report


def test_a_one_market_five_minute_tape_keeps_its_shape(tmp_path: Path) -> None:
    folder = write(spec((FIVE_MINUTES,), length_s=900), tmp_path / "five")  # its shape: 3 will do
    doc = backtest(read_tapes([folder]))
    assert set(doc) == FLAT_KEYS and doc["windowsWithOutcome"] == 3
    assert document_of(doc) is doc
    assert not text(doc).startswith("==")


def test_a_fifteen_minute_only_tape_is_keyed_under_its_window(tmp_path: Path) -> None:
    folder = write(spec((FIFTEEN,), seed=32, length_s=900), tmp_path / "fifteen")  # one window
    doc = backtest(read_tapes([folder]))
    assert set(doc) == {"windows"} and set(doc["windows"]) == {"15m"}
    assert document_of(doc, "15m")["windowsWithOutcome"] == 1


def test_the_windows_of_a_tape_are_those_its_gamma_requests_name() -> None:
    def gamma(slug: str) -> dict[str, Any]:
        url = f"https://gamma-api.polymarket.com/events/slug/{slug}"
        return {"t": 1.0, "src": "gamma", "method": "GET", "url": url, "status": 0}

    lines = [gamma(f"eth-updown-15m-{T0}"), gamma(f"btc-updown-5m-{T0}"), gamma("other")]
    assert spans_of(lines) == (FIVE_MINUTES, FIFTEEN)  # in the windows' own order
    assert spans_of(lines[:1]) == (FIFTEEN,)
    by_query = {**lines[0], "url": f"https://g/events?slug=btc-updown-15m-{T0}&limit=1"}
    assert spans_of([by_query]) == (FIFTEEN,)  # the older lookup's form (docs/tapes.md)
    # A tape without a Gamma request (or of before issue 39) is a 5-minute tape.
    assert spans_of([{"t": 1.0, "src": "rtds", "event": "connect"}]) == (FIVE_MINUTES,)


def test_a_tape_of_eastern_blocks_counts_the_autumn_block_as_five_hours() -> None:
    """The tape writer's 4-hour windows are Eastern blocks (issue 49): the one holding the
    autumn change of clocks lasts 5 hours, its market's end and outcome are that long, and a
    start that is no block's is refused."""
    four = SPANS["4h"]
    autumn = 1_793_505_600  # 2026-11-01 00:00 EDT
    path = BrownianPath(5, SIGMA, 100_000, autumn - 2400, 5 * 3600 + 3000)
    with pytest.raises(ValueError, match="must start a window of every one of spans"):
        TapeSpec(path, SIGMA, autumn + 3600, 1, spans=(four,))
    tape = TapeSpec(path, SIGMA, autumn, 1, rule=TWAP, resolved_every=1, spans=(four,))
    lines = tape_lines(tape)
    listed = [json.loads(line["frame"])["slug"] for line in lines if line["src"] == "gamma"]
    assert listed == [f"btc-updown-4h-{autumn}", f"btc-updown-4h-{autumn + 5 * 3600}"]
    (resolved,) = [
        json.loads(line["frame"]) for line in lines
        if line["src"] == "clob-ws" and "market_resolved" in line.get("frame", "")
    ]  # fmt: skip
    up = settled_up(path, TWAP, 60, autumn, 5 * 3600)
    assert resolved["winning_outcome"] == ("Up" if up else "Down")
    assert int(resolved["timestamp"]) == (autumn + 5 * 3600 + 120) * 1000
    # The last second's points arrive just after it: the tape ends after the outcome.
    assert int(max(line["t"] for line in lines)) == autumn + 5 * 3600 + 180


def test_a_tape_of_hourly_windows_carries_the_exchange_price_and_binances_candle() -> None:
    """The tape writer's hourly windows (issue 49) carry what their rows are built from: the
    pair's exchange price beside each spot point, Binance's running candle while the hour
    runs and its closed candle after; each settles by its market's resolution on the candle
    (close >= open), the only way an hourly window settles."""
    hour = SPANS["1h"]
    path = BrownianPath(9, SIGMA, 100_000, T0 - 2400, 3600 + 3000)
    tape = TapeSpec(path, SIGMA, T0, 1, rule=TWAP, resolved_every=2, spans=(hour,))
    lines = tape_lines(tape)
    loaded = [(line["src"], json.loads(line["frame"])) for line in lines if "frame" in line]
    frames = [(src, f) for src, f in loaded if isinstance(f, dict)]  # not the lists
    # (The spot's history snapshot arrives under the same topic, as RTDS sends it: not these.)
    exchange = [
        f["payload"]
        for src, f in frames
        if src == "rtds" and f.get("topic") == "crypto_prices" and f.get("type") == "update"
    ]
    assert {p["symbol"] for p in exchange} == {"btcusdt"}
    by_second = {p["timestamp"] // 1000: p["value"] for p in exchange}
    assert by_second[T0] == pytest.approx(float(path.value(T0)) * 0.9997, abs=0.006)
    asked = [line for line in lines if line["src"] == "binance"]
    assert all(line["url"].endswith(f"startTime={T0 * 1000}&limit=1") for line in asked)
    candles = [(line["t"], json.loads(line["frame"])[0]) for line in asked]
    opens = {row[1] for _, row in candles}
    assert opens == {f"{by_second[T0]:.2f}"}  # every answer has the hour's first price
    at, final = candles[-1]
    assert at == T0 + 3600 + 6 and final[4] == f"{by_second[T0 + 3599]:.2f}"
    running = [(t, row) for t, row in candles if t < T0 + 3600]
    assert len(running) == 1800
    assert all(row[4] == f"{by_second[int(t) - 1]:.2f}" for t, row in running)
    (resolved,) = [f for src, f in frames if f.get("event_type") == "market_resolved"]
    up = by_second[T0 + 3599] >= by_second[T0]
    assert resolved["winning_outcome"] == ("Up" if up else "Down")
