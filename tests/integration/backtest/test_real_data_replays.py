"""Replays of klines tapes (``harness.real_data``, on generated klines) through the whole
backtest: P(up) at every checkpoint and the outcome the prices (or the official verdicts)
say; and the converter's command line over a whole file.

No real data here: the inputs are written by the tests (IGOLz/polyedge-v2 has no license).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from app.backtest.report import backtest
from app.backtest.tapes import read_tapes
from app.calibration.checkpoints import REMS
from harness.fake_polymarket import (
    TWAP,
    TWAP_TOPIC,
    FakeMarket,
)
from harness.real_data import __main__ as cli
from harness.real_data import binance, files, klines
from harness.spans import WINDOW_S
from tests.support.kline_inputs import (
    END,
    START,
    WINDOWS,
    closes_by_stamp,
    computed_outcome,
    frames,
    frames_lines,
    write_klines,
)


def replayed_windows(tape: Path) -> list[dict[str, Any]]:
    """The backtest of ``tape``'s windows between ``START`` and ``END``: ``WINDOWS`` of them,
    the first settling DOWN and the second UP (both ways, kline_inputs)."""
    doc = backtest(read_tapes([tape]))
    windows = [w for w in doc["perWindow"] if START <= w["windowStart"] < END - WINDOW_S]
    assert len(windows) == WINDOWS
    assert [w["outcome"] for w in windows] == ["down", "up"], windows
    return windows


@pytest.mark.parametrize("rule", ["spot", TWAP])
def test_a_replayed_klines_tape_has_probabilities_and_the_prices_outcome(
    tmp_path: Path, rule: str
) -> None:
    ticks = klines.Ticks.load([write_klines(tmp_path / "data")])
    options = binance.TapeOptions(rule=rule, lookback=60)
    written = files.write_hourly(binance.lines(ticks, START, END, options), tmp_path / "tape")
    assert written > 0 and sorted(p.name for p in (tmp_path / "tape").iterdir()) == [
        "2026-03-12T00.jsonl", "2026-03-12T01.jsonl"
    ]  # fmt: skip
    windows = replayed_windows(tmp_path / "tape")
    closes = closes_by_stamp()
    for window in windows:
        t0 = window["windowStart"]
        assert window["rule"] == rule and window["outcomeSource"] == "feed"
        assert window["outcome"] == computed_outcome(closes, t0, 60 if rule == TWAP else None)
        assert [c["remS"] for c in window["checkpoints"]] == list(REMS)
        assert all(c["pUp"] is not None and 0 <= c["pUp"] <= 1 for c in window["checkpoints"])
    if rule == TWAP:
        twaps = [
            json.loads(x["frame"])["payload"]
            for x in read_tapes([tmp_path / "tape"])
            if x["src"] == "rtds" and TWAP_TOPIC in x.get("frame", "")
        ]
        sample = twaps[500]
        stamp = sample["timestamp"] // 1000
        mean = statistics.fmean(closes[s] for s in range(stamp - 59, stamp + 1))
        assert sample["window_s"] == 60 and sample["value"] == pytest.approx(mean, abs=0.006)
        assert int(sample["full_accuracy_value"]) / 1e18 == pytest.approx(mean, abs=1e-6)


def test_another_markets_klines_replay_as_that_market(tmp_path: Path) -> None:
    """XRPUSDT klines with ``symbol="XRP"``: the tape subscribes to xrp/usd, its prices and
    markets are XRP's, and the replay scores XRP's windows (outcomes computed)."""
    source = write_klines(tmp_path / "data")
    xrp = source.with_name(source.name.replace("BTCUSDT", "XRPUSDT"))
    source.rename(xrp)
    found = files.discover([tmp_path / "data"], symbol="XRPUSDT")
    assert list(found.klines) and not files.discover([tmp_path / "data"]).klines
    ticks = klines.Ticks.load([xrp])
    options = binance.TapeOptions(symbol="XRP")
    lines = list(binance.lines(ticks, START, END, options))
    subscribe = json.loads(next(x for x in lines if x.get("dir") == "out")["frame"])
    assert {json.loads(sub["filters"])["symbol"] for sub in subscribe["subscriptions"]} == {
        "xrp/usd"
    }
    symbols = {json.loads(x["frame"])["payload"].get("symbol") for x in frames_lines(lines)}
    assert symbols == {"xrp/usd"}
    files.write_hourly(iter(lines), tmp_path / "tape")
    windows = replayed_windows(tmp_path / "tape")
    closes = closes_by_stamp()
    for window in windows:
        assert window["slug"] == f"xrp-updown-5m-{window['windowStart']}"
        assert window["outcome"] == computed_outcome(closes, window["windowStart"], None)
        assert all(c["pUp"] is not None for c in window["checkpoints"])
    with pytest.raises(ValueError, match="BTC's"):
        next(binance.lines(ticks, START, END, options, official={START: "up"}))
    with pytest.raises(ValueError, match="unknown symbol"):
        binance.TapeOptions(symbol="DOGE")


def test_official_outcomes_come_as_market_resolved_and_win_in_the_report(tmp_path: Path) -> None:
    ticks = klines.Ticks.load([write_klines(tmp_path / "data")])
    closes = closes_by_stamp()
    t0s = [START + i * WINDOW_S for i in range(WINDOWS)]
    # The second one deliberately the opposite of the prices (Chainlink is not Binance).
    official = {t0: computed_outcome(closes, t0, None) for t0 in t0s}
    official[t0s[1]] = "up" if official[t0s[1]] == "down" else "down"
    csv_path = tmp_path / files.OFFICIAL_NAME
    csv_path.write_text("timestamp,date,outcome\n" + "".join(
        f"{t0},x,{o}\n" for t0, o in official.items()) + "1773273601,x,up\n")  # fmt: skip
    assert binance.read_official(csv_path) == official  # not a window start: left out
    # Until the last window's verdict has come (two minutes after its end).
    end = START + WINDOWS * WINDOW_S + binance.RESOLVED_AFTER_S + 10
    lines = list(binance.lines(ticks, START, end, official=official))
    resolved = [m for m in frames(lines, "clob-ws") if isinstance(m, dict)]
    assert [m["event_type"] for m in resolved] == ["market_resolved"] * WINDOWS
    market = FakeMarket(t0s[1])
    assert set(resolved[1]["assets_ids"]) == set(market.tokens)
    files.write_hourly(lines, tmp_path / "tape")
    doc = backtest(read_tapes([tmp_path / "tape"]))
    by_start = {w["windowStart"]: w for w in doc["perWindow"]}
    for t0, outcome in official.items():
        assert by_start[t0]["outcome"] == outcome and by_start[t0]["outcomeSource"] == "market"
    with pytest.raises(ValueError, match="TWAP"):
        list(binance.lines(ticks, START, END, binance.TapeOptions(rule=TWAP), official))


def test_the_command_line_writes_hourly_files(tmp_path: Path, capsys: Any) -> None:
    write_klines(tmp_path / "data", zipped=True)
    assert cli.main([str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names[0] == "2026-03-12T00.jsonl" and all(n.endswith(".jsonl") for n in names)
    assert "lines" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # asked for books where there are none
        cli.main([str(tmp_path / "data"), "--books", "--out", str(tmp_path / "o2")])
