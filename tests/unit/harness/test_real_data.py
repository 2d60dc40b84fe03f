"""Real-data converters (``harness.real_data``) on tiny generated inputs: Binance klines and
Cronos-style parquet books become tapes in the documented format. Replays of klines tapes
through the backtest, and the command line over a whole file, are integration tests
(tests/integration/backtest/test_real_data_replays.py).

No real data here: the inputs are written by the tests (IGOLz/polyedge-v2 has no license).
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from app.backtest.report import backtest
from app.calibration.checkpoints import REMS
from bench import real
from harness.fake_polymarket import (
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    FakeMarket,
)
from harness.real_data import binance, cronos, files, klines
from harness.spans import WINDOW_S
from tests.support.kline_inputs import (
    D0,
    DAY,
    END,
    SECONDS,
    START,
    closes_by_stamp,
    frames,
    kline_rows,
    write_klines,
)

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


def test_a_day_span_warms_up_an_hour_and_scores_the_day_only() -> None:
    day = klines.parse_name(Path(f"BTCUSDT-1s-{DAY}.zip"))
    assert day is not None
    first = binance.span(D0 + 1, day.day)  # the data starts at this midnight
    assert (first.start, first.scored_from, first.scored_to) == (D0, D0 + 3600, D0 + 86400)
    later = binance.span(D0 - 86400 + 1, day.day)  # the day before is there: history
    assert (later.start, later.scored_from) == (D0 - binance.LEAD_S, D0)
    assert later.end == D0 + 86400 + binance.TAIL_S


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
