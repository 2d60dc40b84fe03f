"""Real-data converters (``harness.real_data``) on tiny generated inputs: Binance klines and
Cronos-style parquet books become tapes in the documented format, and a replay of a klines
tape through the backtest gives P(up) at the checkpoints and the outcome the prices say.

No real data here: the inputs are written by the tests (IGOLz/polyedge-v2 has no license).
"""

from __future__ import annotations

import importlib
import json
import math
import statistics
import sys
import zipfile
from decimal import Decimal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from app.backtest.report import backtest
from app.backtest.tapes import read_tapes
from app.calibration.checkpoints import REMS
from app.markets import WINDOW_S
from bench import real
from harness.fake_polymarket import (
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP,
    TWAP_TOPIC,
    BrownianPath,
    FakeMarket,
)
from harness.real_data import __main__ as cli
from harness.real_data import binance, cronos, files, klines

DAY = "2026-03-12"
D0 = 1_773_273_600  # 2026-03-12 00:00 UTC
SECONDS = 4800  # 80 minutes of klines
START = D0 + 1200  # the tape starts 20 minutes into the data: the snapshot has history
END = START + 3610  # 12 windows, and the next one's price to beat (its T0 point arrives +1.4 s)


def kline_rows(seconds: int = SECONDS, micro: bool = True) -> list[str]:
    """Binance-style 1 s kline rows of a Brownian path (closes to the cent)."""
    path = BrownianPath(7, 1.5e-4, 70_000, D0, seconds)
    rows = []
    previous = Decimal("70000.00")
    for i in range(seconds):
        close = path.value(D0 + i + 1).quantize(Decimal("0.01"))
        opened = (D0 + i) * (1_000_000 if micro else 1000)
        high, low = max(previous, close), min(previous, close)
        rows.append(
            f"{opened},{previous},{high},{low},{close},0.1,{opened + 999},7000,3,0.05,3500,0"
        )
        previous = close
    return rows


def write_klines(folder: Path, zipped: bool = False) -> Path:
    """One (partial) day of klines, as Binance names it; zipped or not."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(kline_rows()) + "\n"
    name = f"BTCUSDT-1s-{DAY}.csv"
    if not zipped:
        (folder / name).write_text(text)
        return folder / name
    target = folder / name.replace(".csv", ".zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, text)
    return target


def closes_by_stamp() -> dict[int, float]:
    """Second -> price, read straight from the generated rows (the close of the kline that
    opens at s is the price at s + 1)."""
    found = {}
    for row in kline_rows():
        fields = row.split(",")
        found[int(fields[0]) // 1_000_000 + 1] = float(fields[4])
    return found


def frames(lines: list[dict[str, Any]], src: str) -> list[Any]:
    return [json.loads(x["frame"]) for x in lines if x["src"] == src and "frame" in x]


# -- klines --------------------------------------------------------------------------------


def test_klines_read_from_csv_and_zip_alike_in_micro_or_milliseconds(tmp_path: Path) -> None:
    csv_path = write_klines(tmp_path / "csv")
    zip_path = write_klines(tmp_path / "zip", zipped=True)
    from_csv, from_zip = klines.read_closes(csv_path), klines.read_closes(zip_path)
    assert from_csv == from_zip
    assert len(from_csv) == SECONDS and min(from_csv) == D0 + 1 and max(from_csv) == D0 + SECONDS
    millis = tmp_path / "ms" / f"BTCUSDT-1s-{DAY}.csv"
    millis.parent.mkdir()
    millis.write_text("open_time,open,high,low,close\n" + "\n".join(kline_rows(micro=False)))
    assert klines.read_closes(millis) == from_csv  # the header line is skipped
    found = files.discover([tmp_path])
    assert set(found.klines) == {klines.parse_name(csv_path).day}  # type: ignore[union-attr]
    assert found.klines[next(iter(found.klines))].path.suffix == ".csv"  # csv preferred


def test_a_broken_kline_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / f"BTCUSDT-1s-{DAY}.csv"
    bad.write_text(f"{D0 * 1_000_000},1,1,1,nan-ish,0\n")
    with pytest.raises(klines.KlineError, match=bad.name):
        klines.read_closes(bad)


def test_spot_tape_frames_are_the_documented_ones(tmp_path: Path) -> None:
    ticks = klines.Ticks.load([write_klines(tmp_path)])
    lines = list(binance.lines(ticks, START, END))
    assert [x["t"] for x in lines] == sorted(x["t"] for x in lines)
    assert lines[0] == {"t": START, "src": "rtds", "event": "connect"}
    assert lines[1]["src"] == "clob-ws" and lines[1]["event"] == "connect"
    closes = closes_by_stamp()
    rtds = frames(lines, "rtds")
    snapshot = rtds[0]
    assert snapshot["topic"] == SPOT_HISTORY_TOPIC and snapshot["type"] == "subscribe"
    history = snapshot["payload"]["data"]
    assert history[0]["timestamp"] == (D0 + 1) * 1000  # the data's first price (3 h asked)
    assert history[-1]["timestamp"] == (START - 2) * 1000  # arrived by the snapshot (1.4 s lag)
    assert all(closes[p["timestamp"] // 1000] == p["value"] for p in history)
    updates = [x for x in lines if x["src"] == "rtds" and '"update"' in x.get("frame", "")]
    last = min(END - 2, D0 + SECONDS)  # what arrives by END, or the data's last price
    assert len(updates) == last - (START - 1) + 1
    for item in updates:
        message = json.loads(item["frame"])
        payload = message["payload"]
        assert message["topic"] == SPOT_TOPIC and payload["symbol"] == "btc/usd"
        assert item["t"] == pytest.approx(payload["timestamp"] / 1000 + binance.ARRIVAL_LAG_S)
        assert payload["value"] == closes[payload["timestamp"] // 1000]
    gamma = [x for x in lines if x["src"] == "gamma"]
    starts = [START + i * WINDOW_S for i in range(len(gamma))]
    assert [json.loads(x["frame"]) for x in gamma] == [FakeMarket(t0).event() for t0 in starts]
    assert gamma[1]["url"].endswith(f"/events/slug/btc-updown-5m-{starts[1]}")
    assert gamma[1]["t"] == starts[1] - binance.GAMMA_AHEAD_S and gamma[1]["status"] == 200
    books = [x for x in lines if x["src"] == "clob-ws" and "frame" in x]
    assert len(books) == END - START  # every second
    for book in json.loads(books[100]["frame"]):
        assert book["event_type"] == "book"
        assert book["bids"] == [{"price": "0.01", "size": "1000"}]
        assert book["asks"] == [{"price": "0.99", "size": "1000"}]


def computed_outcome(closes: dict[int, float], t0: int, lookback: int | None) -> str:
    def settle(t: int) -> float:
        if lookback is None:
            return closes[t]
        return statistics.fmean(closes[s] for s in range(t - lookback + 1, t + 1))

    return "up" if settle(t0 + WINDOW_S) >= settle(t0) else "down"


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
    doc = backtest(read_tapes([tmp_path / "tape"]))
    closes = closes_by_stamp()
    windows = [w for w in doc["perWindow"] if START <= w["windowStart"] < END - WINDOW_S]
    assert len(windows) == 12
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
    doc = backtest(read_tapes([tmp_path / "tape"]))
    closes = closes_by_stamp()
    windows = [w for w in doc["perWindow"] if START <= w["windowStart"] < END - WINDOW_S]
    assert len(windows) == 12
    for window in windows:
        assert window["slug"] == f"xrp-updown-5m-{window['windowStart']}"
        assert window["outcome"] == computed_outcome(closes, window["windowStart"], None)
        assert all(c["pUp"] is not None for c in window["checkpoints"])
    with pytest.raises(ValueError, match="BTC's"):
        next(binance.lines(ticks, START, END, options, official={START: "up"}))
    with pytest.raises(ValueError, match="unknown symbol"):
        binance.TapeOptions(symbol="DOGE")


def frames_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RTDS price frames of a tape (updates and the snapshot)."""
    return [x for x in lines if x["src"] == "rtds" and '"payload"' in x.get("frame", "")]


def test_official_outcomes_come_as_market_resolved_and_win_in_the_report(tmp_path: Path) -> None:
    ticks = klines.Ticks.load([write_klines(tmp_path / "data")])
    closes = closes_by_stamp()
    t0s = [START + i * WINDOW_S for i in range(3)]
    # The second one deliberately the opposite of the prices (Chainlink is not Binance).
    official = {t0: computed_outcome(closes, t0, None) for t0 in t0s}
    official[t0s[1]] = "up" if official[t0s[1]] == "down" else "down"
    csv_path = tmp_path / files.OFFICIAL_NAME
    csv_path.write_text("timestamp,date,outcome\n" + "".join(
        f"{t0},x,{o}\n" for t0, o in official.items()) + "1773273601,x,up\n")  # fmt: skip
    assert binance.read_official(csv_path) == official  # not a window start: left out
    lines = list(binance.lines(ticks, START, END, official=official))
    resolved = [m for m in frames(lines, "clob-ws") if isinstance(m, dict)]
    assert [m["event_type"] for m in resolved] == ["market_resolved"] * 3
    market = FakeMarket(t0s[1])
    assert set(resolved[1]["assets_ids"]) == set(market.tokens)
    files.write_hourly(lines, tmp_path / "tape")
    doc = backtest(read_tapes([tmp_path / "tape"]))
    by_start = {w["windowStart"]: w for w in doc["perWindow"]}
    for t0, outcome in official.items():
        assert by_start[t0]["outcome"] == outcome and by_start[t0]["outcomeSource"] == "market"
    with pytest.raises(ValueError, match="TWAP"):
        list(binance.lines(ticks, START, END, binance.TapeOptions(rule=TWAP), official))


def test_a_day_span_warms_up_an_hour_and_scores_the_day_only() -> None:
    day = klines.parse_name(Path(f"BTCUSDT-1s-{DAY}.zip"))
    assert day is not None
    first = binance.span(D0 + 1, day.day)  # the data starts at this midnight
    assert (first.start, first.scored_from, first.scored_to) == (D0, D0 + 3600, D0 + 86400)
    later = binance.span(D0 - 86400 + 1, day.day)  # the day before is there: history
    assert (later.start, later.scored_from) == (D0 - binance.LEAD_S, D0)
    assert later.end == D0 + 86400 + binance.TAIL_S


def test_the_command_line_writes_hourly_files(tmp_path: Path, capsys: Any) -> None:
    write_klines(tmp_path / "data", zipped=True)
    assert cli.main([str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names[0] == "2026-03-12T00.jsonl" and all(n.endswith(".jsonl") for n in names)
    assert "lines" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # asked for books where there are none
        cli.main([str(tmp_path / "data"), "--books", "--out", str(tmp_path / "o2")])


# -- Cronos books --------------------------------------------------------------------------

UP_TOKEN = "1" * 77
OTHER = "2" * 77
T0 = 1_776_323_400


def book(token: str, bids: dict[str, str], asks: dict[str, str], ms: int) -> str:
    return json.dumps({
        "market": "0x" + "ab" * 32, "asset_id": token, "timestamp": str(ms), "hash": "h",
        "bids": [{"price": p, "size": s} for p, s in bids.items()],
        "asks": [{"price": p, "size": s} for p, s in asks.items()], "event_type": "book",
    })  # fmt: skip


def cronos_rows() -> list[dict[str, Any]]:
    """One window: the recorded token's book every second, rising to a win; a second token
    seen briefly; after the end a transient book, then the one-sided verdict."""
    rows = []
    for second in range(5, 300):
        p = round(0.5 + 0.45 * second / 300, 2)
        raw = book(UP_TOKEN, {f"{p - 0.01:.2f}": "10", "0.01": "5"}, {f"{p + 0.01:.2f}": "7"},
                   (T0 + second) * 1000)  # fmt: skip
        rows.append({"timestamp": T0 + second + 0.1, "raw_data": raw, "asset_id": UP_TOKEN})
    rows.append(
        {
            "timestamp": T0 + 100.2,
            "asset_id": OTHER,
            "raw_data": book(OTHER, {"0.30": "1"}, {"0.32": "1"}, (T0 + 100) * 1000),
        }
    )
    for offset, bids in ((0.2, {"0.51": "3"}), (1.0, {"0.99": "900"})):
        raw = book(UP_TOKEN, bids, {}, (T0 + 300) * 1000)
        rows.append({"timestamp": T0 + 300 + offset, "raw_data": raw, "asset_id": UP_TOKEN})
    for row in rows:
        row.update(slug=f"btc-updown-5m-{T0}", bids="[]", asks="[]")
    return rows


def test_cronos_books_become_a_tape_and_score_the_market(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not a probboard dependency")
    pq = importlib.import_module("pyarrow.parquet")
    folder = tmp_path / "market_data"
    folder.mkdir()
    rows = cronos_rows()
    pq.write_table(pa.Table.from_pylist(rows[:150]), folder / f"btc-updown-5m-{T0}_1.parquet")
    pq.write_table(pa.Table.from_pylist(rows[100:]), folder / f"btc-updown-5m-{T0}_2.parquet")
    found = files.discover([tmp_path])
    read = cronos.read_rows(found.parquet)
    assert len(read) == len(rows)  # the rows in both files count once
    lines = cronos.lines(read)
    assert [x["t"] for x in lines] == sorted(x["t"] for x in lines)
    gamma = [x for x in lines if x["src"] == "gamma"]
    assert len(gamma) == 1 and gamma[0]["t"] == T0 - binance.GAMMA_AHEAD_S
    event = json.loads(gamma[0]["frame"])
    market = event["markets"][0]
    tokens = dict(zip(json.loads(market["outcomes"]), json.loads(market["clobTokenIds"]),
                      strict=True))  # fmt: skip
    assert tokens == {"Up": UP_TOKEN, "Down": OTHER}  # the token recorded most is "Up"
    received = [x["frame"] for x in lines if x["src"] == "clob-ws" and "frame" in x]
    assert received == [r["raw_data"] for r in sorted(rows, key=lambda r: r["timestamp"])]
    per_window = cronos.per_window(lines, REMS)
    assert len(per_window) == 1 and per_window[0]["outcome"] == "up"  # the last word counts
    mids = {c["remS"]: c["marketMid"] for c in per_window[0]["checkpoints"]}
    # The first book at or after T - rem: the one of second 300 - rem (received 0.1 s later).
    assert mids[240] == pytest.approx(round(0.5 + 0.45 * 60 / 300, 2))
    assert set(mids) == set(REMS)
    figures = real.market_figures(per_window)
    assert figures["buckets"][0]["n"] == 1 and figures["buckets"][-1]["n"] == len(REMS)
    replayed = backtest(iter(lines))  # no price: no probability, as documented
    assert all(c["pUp"] is None for w in replayed["perWindow"] for c in w["checkpoints"])


def test_cronos_says_how_to_get_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # None in sys.modules: no module
    with pytest.raises(cronos.CronosError, match="pip install pyarrow"):
        cronos.read_rows([Path("x.parquet")])


# -- the bench's figures -------------------------------------------------------------------


def test_bench_figures_tails_agreement_and_chart(tmp_path: Path) -> None:
    windows = [
        {"computed": "up", "official": "up",
         "checkpoints": [{"remS": r, "pUp": 0.95} for r in REMS]},
        {"computed": "down", "official": "up",
         "checkpoints": [{"remS": r, "pUp": 0.05 if r < 100 else None} for r in REMS]},
    ]  # fmt: skip
    found = real.summary(windows, official=True)
    computed = found["computed"]
    assert computed["windows"] == 2 and computed["withP"] == pytest.approx(14 / 18)
    assert computed["buckets"][-1]["model"]["logLoss"] == pytest.approx(-math.log(0.95))
    assert computed["buckets"][-1]["coin"]["logLoss"] == pytest.approx(math.log(2))
    assert computed["tails"]["below10"] == {"n": 5, "said": 0.05, "observedUp": 0.0}
    assert found["official"]["tails"]["below10"]["observedUp"] == 1.0
    assert found["agreement"] == {"n": 2, "agree": 1}
    svg = real.reliability_svg(computed["reliability"], "t & <t>", "note")
    root = ElementTree.fromstring(svg)
    assert root.tag.endswith("svg") and len(root.findall(".//{*}circle")) == 2
