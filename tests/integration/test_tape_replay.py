"""A tape recorded from a live source replays to the boards that source built.

A live source on the fake Polymarket upstreams records its tape on the real clock (prices
and quotes flowing: the recording of a live exchange is the subject), then the backtest's
replay asks for boards at the same instants (``tests/unit/refresher/test_tape.py`` holds the
recorder's own tests).
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path
from typing import Any

import pytest

from app.backtest.replay import new_replay, run, spans_of
from app.backtest.tapes import read_tapes
from app.markets import SPANS
from app.refresher.sources.binance.candle_settlement import RETRY_S
from app.refresher.sources.polymarket.discovery import DISCOVERY_RETRY_S
from app.refresher.tape import Tape
from harness.fake_polymarket import running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import BTC_ONLY, sources_on


def test_a_recorded_tape_replays_to_the_boards_the_live_source_built(tmp_path: Path) -> None:
    """Record a live source on the fakes (real clock, prices and quotes flowing), then
    replay its tape asking for boards at the same instants: the same P(up) and the same
    best levels, wherever no frame arrived in the 50 ms before the instant (a frame being
    handled while the live row was built may or may not be in it), from the replay's first
    board with the market on (its lookup is answered at another moment: the tape's answer
    came after the replay's first try, which tries again ``DISCOVERY_RETRY_S`` later)."""
    # Own fakes: their live prices are the tape this test records.
    with running(auto_markets=True) as world:
        world.rtds.live(period_s=0.5)
        world.clob_ws.keep_alive(0.5)
        tape = Tape(tmp_path)
        live: list[tuple[float, dict[str, Any], float | None]] = []
        with sources_on(world, tape=tape) as make:
            source = make(time.time)
            # Until the live row has had its market for the replay's retry and 2.5 s more
            # (about 19 instants to compare), at most 12 s.
            deadline = time.monotonic() + 12
            until = deadline
            while time.monotonic() < until:
                now = time.time()
                [built] = source.rows(now)
                live.append((now, built.as_json(), built.model_p_up))
                if built.as_json()["slug"] is not None and until == deadline:
                    until = min(deadline, time.monotonic() + DISCOVERY_RETRY_S + 2.5)
                time.sleep(0.13)  # out of step with the fakes' half-second beat
    lines = list(read_tapes([tmp_path]))
    received = sorted(
        line["t"] for line in lines if line["src"] in ("clob-ws", "rtds") and "frame" in line
        and "dir" not in line
    )  # fmt: skip
    replay = new_replay(3000, lines[0]["t"], BTC_ONLY)
    boards = list(run(replay, iter(lines), 500, at=[now for now, _, _ in live]))
    assert len(boards) == len(live)

    def quiet(now: float) -> bool:
        i = bisect.bisect_right(received, now)
        return i == 0 or now - received[i - 1] > 0.05

    compared = 0
    # The replay's market found and its books in: from then on every board is compared. Its
    # first books may come later than the live run's: the replay asks the CLOB's REST books
    # at its own upkeep moments, with the tokens it knows then (near a window's roll, two
    # windows'), and a request the tape has not answered at that moment fails; its books
    # then come from the socket's frames (CI, 2026-11-29 15:24, 22 s before a roll: "clob
    # /books failed: no recorded answer at this time", a board without books where the live
    # one had them).
    looked_up = False
    for (now, row, p_up), board in zip(live, boards, strict=True):
        assert board.t == now
        replayed = board.row.as_json()
        looked_up = looked_up or (replayed["slug"] is not None and replayed["up_bid"] is not None)
        if not looked_up or not quiet(now) or p_up is None or row["up_bid"] is None:
            continue  # the first seconds: the market's lookup is answered at another moment
        levels = ("up_bid", "up_ask", "down_bid", "down_ask", "slug", "priceToBeat", "price")
        assert {k: replayed[k] for k in levels} == {k: row[k] for k in levels}, now
        assert board.p_up == pytest.approx(p_up, abs=1e-9), now
        compared += 1
    assert compared >= 10, f"only {compared} instants could be compared"


def test_an_hourly_rows_tape_replays_its_candle(tmp_path: Path) -> None:
    """WINDOWS=5m,1h: the tape holds Binance's klines answers beside the sockets' frames
    (``src`` ``binance``), and the replay's hourly rows take the same candle open and the same
    slug in words as the live ones did."""
    hourly = SPANS["1h"]
    with running(auto_markets=True) as world:
        # An hour and more of history: the fake Binance builds the hour's candle from it.
        world.rtds.live(period_s=0.5, history_s=int(time.time()) % 3600 + 120)
        world.clob_ws.keep_alive(0.5)
        tape = Tape(tmp_path)
        live: list[tuple[float, dict[str, Any]]] = []
        with sources_on(world, tape=tape, spans=(FIVE_MINUTES, hourly)) as make:
            source = make(time.time)
            # Until the candle's retry has had time in the replay too (its first ask there
            # comes before the tape's answer, as the Gamma lookup's does), at most 20 s.
            deadline = time.monotonic() + 20
            until = deadline
            while time.monotonic() < until:
                now = time.time()
                row = source.rows(now)[1].as_json()
                if row["priceToBeat"] is not None and row["p_up_pct"] is not None:
                    live.append((now, row))
                    if until == deadline:
                        until = min(deadline, time.monotonic() + RETRY_S + 3)
                time.sleep(0.3)
    assert live, "no hourly row with a price to beat within 20 s"
    lines = list(read_tapes([tmp_path]))
    assert any(line["src"] == "binance" and "/api/v3/klines" in line["url"] for line in lines)
    assert spans_of(lines) == (FIVE_MINUTES, hourly)
    replay = new_replay(3000, lines[0]["t"], BTC_ONLY, (FIVE_MINUTES, hourly))
    boards = [b for b in run(replay, iter(lines), 500, at=[t for t, _ in live])]
    replayed = [b.row.as_json() for b in boards if b.row.window == "1h"]
    assert len(replayed) == len(live)
    last_live, last_replayed = live[-1][1], replayed[-1]
    assert last_replayed["slug"] == last_live["slug"] == hourly.slugs("BTC", last_live["slot"])[0]
    assert last_replayed["priceToBeat"] == last_live["priceToBeat"]
    assert last_replayed["sources"]["priceToBeat"] == "binance:klines"
