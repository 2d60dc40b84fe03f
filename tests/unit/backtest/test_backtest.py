"""The backtest's parts on their own: scores, outcomes, the tape's HTTP answers, reading
tapes, an empty tape. Whole replays are integration tests (tests/integration/backtest/:
each replays a tape through the whole live source).
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import httpx
import pytest
from flask import Flask

from app.backtest.replay import TapeHttp, VirtualClock
from app.backtest.tapes import TapeError, read_tapes
from app.calibration import outcomes, scores
from app.markets import parse_symbols
from harness.fake_polymarket import FakeMarket

T0 = 1_800_000_000


# -- the parts on their own ------------------------------------------------------------------


def test_scores_by_hand() -> None:
    assert scores.brier(0.7, 1) == pytest.approx(0.09)
    assert scores.log_loss(0.7, 0) == pytest.approx(-math.log(0.3))
    assert scores.log_loss(1.0, 0) == pytest.approx(-math.log(1e-4))  # clipped
    assert scores.mean_scores([]) == {"brier": None, "logLoss": None}
    table = scores.reliability([(0.05, 0), (0.95, 1), (1.0, 1), (0.1, 1)])
    assert [b["n"] for b in table] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]  # 1 is in the last bin
    assert table[9]["meanP"] == pytest.approx(0.975) and table[9]["observed"] == 1


def test_gamma_outcome_prices_count_only_once_closed_and_resolved() -> None:
    market = FakeMarket(T0)
    open_event = market.event()
    closed = json.loads(json.dumps(open_event))
    closed["markets"][0] |= {"closed": True, "outcomePrices": json.dumps(["0", "1"])}
    assert outcomes.gamma_winners([json.dumps(open_event)]) == {}
    winners = outcomes.gamma_winners([json.dumps(closed)])
    assert winners == {market.up_token: False, market.down_token: True}  # ("Up", "Down")
    undecided = json.loads(json.dumps(open_event))
    undecided["markets"][0] |= {"closed": True}  # closed, still 0.5 / 0.5
    assert outcomes.gamma_winners([json.dumps(undecided)]) == {}
    assert outcomes.outcome(market.up_token, market.down_token, winners, 1.0, 2.0) == (
        "down",
        "market",
    )
    assert outcomes.outcome("a", "b", {}, 100.0, 100.0) == ("up", "feed")  # a tie is UP
    assert outcomes.outcome("a", "b", {}, 100.0, None) == (None, None)


def test_http_is_answered_with_the_latest_recorded_response_or_a_timeout() -> None:
    answers = TapeHttp()
    client = httpx.Client(transport=answers)
    url = "http://gamma.tape/events?slug=x&limit=1"
    with pytest.raises(httpx.ReadTimeout):
        client.get(url)  # nothing recorded yet
    answers.record({"method": "GET", "url": "https://g/events?limit=1&slug=x", "body": None,
                    "status": 200, "frame": '{"n":1}'})  # fmt: skip
    assert client.get(url).json() == {"n": 1}  # any host, parameters in any order
    answers.record({"method": "GET", "url": "https://g/events?slug=x&limit=1", "body": None,
                    "status": 404, "frame": "nope"})  # fmt: skip
    assert client.get(url).status_code == 404  # the latest wins
    answers.record({"method": "GET", "url": "https://g/events?slug=x&limit=1", "body": None,
                    "status": 0, "frame": ""})  # fmt: skip
    with pytest.raises(httpx.ReadTimeout):
        client.get(url)  # the latest exchange failed: so does this one
    answers.record({"method": "POST", "url": "https://c/books", "body": '[{"token_id":"1"}]',
                    "status": 200, "frame": "[]"})  # fmt: skip
    assert client.post("http://clob.tape/books", content='[{"token_id":"1"}]').text == "[]"
    with pytest.raises(httpx.ReadTimeout):
        client.post("http://clob.tape/books", content='[{"token_id":"2"}]')  # another body
    assert VirtualClock()() == 0.0


def test_unreadable_tapes_are_refused_with_their_place(tmp_path: Path) -> None:
    with pytest.raises(TapeError, match="no such file"):
        list(read_tapes([tmp_path / "missing"]))
    with pytest.raises(TapeError, match=r"no \.jsonl"):
        list(read_tapes([tmp_path]))
    bad = tmp_path / "2026-11-24T01.jsonl"
    bad.write_text('{"t": 1, "src": "rtds", "frame": "x"}\n{"t": 2, "src": \n')
    with pytest.raises(TapeError, match=r"2026-11-24T01\.jsonl:2: not JSON"):
        list(read_tapes([bad]))
    bad.write_text('{"t": 2, "src": "rtds"}\n{"t": 1, "src": "rtds"}\n')
    with pytest.raises(TapeError, match=":2: 't' goes back in time"):
        list(read_tapes([bad]))
    bad.write_text('{"src": "rtds"}\n')
    with pytest.raises(TapeError, match=":1: no number 't'"):
        list(read_tapes([bad]))


def test_gzipped_and_plain_files_merge_in_time_order(tmp_path: Path) -> None:
    import gzip

    (tmp_path / "a.jsonl").write_text('{"t": 1, "src": "x"}\n{"t": 3, "src": "x"}\n')
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as handle:
        handle.write('{"t": 2, "src": "y"}\n{"t": 4, "src": "y"}\n')
    assert [line["t"] for line in read_tapes([tmp_path])] == [1, 2, 3, 4]


# -- the command --------------------------------------------------------------------------


def test_an_empty_tape_gives_an_empty_report(app: Flask, tmp_path: Path) -> None:
    (tmp_path / "2026-11-24T01.jsonl").write_text("")
    result = app.test_cli_runner().invoke(args=["backtest", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("0 windows (0 with an outcome); 0 tape lines")
    doc = json.loads(
        app.test_cli_runner().invoke(args=["backtest", str(tmp_path), "--json"]).stdout
    )
    assert doc["windows"] == 0 and doc["perWindow"] == [] and doc["replay"]["speed"] is None


def test_the_markets_of_a_tape_are_those_of_its_rtds_subscription() -> None:
    from app.backtest.replay import markets_of
    from app.refresher.sources.polymarket.rtds import RtdsFeed

    feed = RtdsFeed("ws://127.0.0.1:9", threading.Event(), markets=parse_symbols("ETH,BTC"))
    [subscribe] = feed.subscription() or []
    lines = [
        {"t": 1.0, "src": "rtds", "event": "connect"},
        {"t": 1.0, "src": "clob-ws", "dir": "out", "frame": "{}"},
        {"t": 1.1, "src": "rtds", "dir": "out", "frame": subscribe},
    ]
    assert [m.symbol for m in markets_of(lines)] == ["ETH", "BTC"]
    # A tape without one (or of a one-market refresher) is the default market's.
    assert [m.symbol for m in markets_of(lines[:2])] == ["BTC"]
