"""Backtests: tapes of a Brownian market with known sigma replayed through the live source.

The tapes are written by ``harness.tapes`` in the documented format; the replay runs the
live source's own code on tape time, so what is scored is what the board would have said.
The exact answers come from the path and the true sigma, computed here on their own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask

from app.backtest.replay import TapeHttp, VirtualClock
from app.backtest.report import backtest
from app.backtest.tapes import TapeError, read_tapes
from app.calibration import outcomes, scores
from app.calibration.checkpoints import REMS
from app.markets import WINDOW_S, parse_symbols
from app.refresher import volatility
from app.refresher.sources.polymarket.gamma import slug_for
from harness.fake_polymarket import SPOT, TWAP, BrownianPath, FakeMarket
from harness.tapes import TapeSpec, exact_p_up, settled_up, write
from tests.support.live_source import BTC_ONLY

T0 = 1_800_000_000
SIGMA = 1.2e-4
WINDOWS = 24


def brownian_tape(tmp: Path, rule: str, seed: int, **options: Any) -> tuple[Path, TapeSpec]:
    path = BrownianPath(seed, SIGMA, 100_000, T0 - 2400, WINDOWS * WINDOW_S + 3000)
    spec = TapeSpec(path, SIGMA, T0, WINDOWS, rule=rule, **options)
    return write(spec, tmp / f"tape-{rule}-{seed}"), spec


def exact_at(spec: TapeSpec, window_start: int, rem: int) -> float:
    """The exact P(up) at the checkpoint: the board at ``end - rem`` knows the spot up to the
    second before (each second's point arrives 50 ms after it)."""
    second = window_start + WINDOW_S - rem - 1
    return exact_p_up(spec.path, spec.rule, spec.lookback, window_start, second, spec.sigma)


def paired(doc: dict[str, Any], spec: TapeSpec, field: str) -> list[tuple[float, float, int]]:
    """(the report's probability, the exact one, outcome) at every checkpoint that has both."""
    found = []
    for window in doc["perWindow"]:
        if window["outcome"] is None:
            continue
        o = 1 if window["outcome"] == "up" else 0
        for checkpoint in window["checkpoints"]:
            if checkpoint[field] is not None:
                exact = exact_at(spec, window["windowStart"], checkpoint["remS"])
                found.append((checkpoint[field], exact, o))
    return found


def mean_log_loss(pairs: list[tuple[float, int]]) -> float:
    return math.fsum(scores.log_loss(p, o) for p, o in pairs) / len(pairs)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], TapeSpec]]:
    """One backtest per rule on a 2-hour tape (24 windows), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("tapes")
    found = {}
    for rule, seed in ((TWAP, 21), (SPOT, 22)):
        folder, spec = brownian_tape(tmp, rule, seed)
        found[rule] = (backtest(read_tapes([folder])), spec)
    return found


@pytest.mark.parametrize("rule", [TWAP, SPOT])
def test_the_models_log_loss_is_that_of_the_exact_model(
    reports: dict[str, tuple[dict[str, Any], TapeSpec]], rule: str
) -> None:
    doc, spec = reports[rule]
    assert doc["windows"] >= WINDOWS and doc["windowsWithOutcome"] == WINDOWS
    pairs = paired(doc, spec, "pUp")
    assert len(pairs) >= WINDOWS * len(REMS) * 0.9, len(pairs)  # nearly every checkpoint
    model = mean_log_loss([(p, o) for p, _, o in pairs])
    exact = mean_log_loss([(e, o) for _, e, o in pairs])
    print(f"{rule}: model log loss {model:.4f}, exact {exact:.4f}, {len(pairs)} checkpoints")
    assert abs(model - exact) <= 0.02, (model, exact)
    worst = max(abs(p - e) for p, e, _ in pairs)
    assert worst < 0.05, worst  # and each probability is close, not only the average


@pytest.mark.parametrize("rule", [TWAP, SPOT])
def test_a_market_quoting_the_exact_probability_scores_as_the_exact_model(
    reports: dict[str, tuple[dict[str, Any], TapeSpec]], rule: str
) -> None:
    doc, spec = reports[rule]
    pairs = paired(doc, spec, "marketMid")
    assert len(pairs) >= WINDOWS * len(REMS) * 0.9, len(pairs)
    market = mean_log_loss([(m, o) for m, _, o in pairs])
    exact = mean_log_loss([(e, o) for _, e, o in pairs])
    print(f"{rule}: market log loss {market:.4f}, exact {exact:.4f}")
    assert abs(market - exact) <= 0.02, (market, exact)
    for bucket in doc["buckets"]:
        assert bucket["n"] >= WINDOWS * 0.9 and bucket["nMarket"] >= WINDOWS * 0.9, bucket
        assert bucket["difference"]["n"] >= WINDOWS * 0.9, bucket


@pytest.mark.parametrize("rule", [TWAP, SPOT])
def test_outcomes_come_from_the_market_when_it_said_and_from_the_feed_otherwise(
    reports: dict[str, tuple[dict[str, Any], TapeSpec]], rule: str
) -> None:
    doc, spec = reports[rule]
    seen = {"market": 0, "feed": 0}
    for i, window in enumerate(
        w for w in doc["perWindow"] if w["windowStart"] < T0 + WINDOWS * 300
    ):
        start = window["windowStart"]
        assert window["slug"] == slug_for(start, BTC_ONLY[0]) and window["rule"] == rule
        up = settled_up(spec.path, rule, spec.lookback, start)
        assert window["outcome"] == ("up" if up else "down"), window
        expected = "market" if (start - T0) // WINDOW_S % spec.resolved_every == 0 else "feed"
        assert window["outcomeSource"] == expected, (i, window)
        seen[expected] += 1
        k = spec.path.twap(start, spec.lookback) if rule == TWAP else spec.path.value(start)
        assert window["priceToBeat"] == pytest.approx(float(k), abs=1e-6)
    assert seen["market"] >= 10 and seen["feed"] >= 10


def test_a_model_three_times_too_volatile_is_visibly_worse(
    tmp_path: Path,
    reports: dict[str, tuple[dict[str, Any], TapeSpec]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    estimate = volatility.estimate

    def too_volatile(*args: Any, **kwargs: Any) -> volatility.Volatility | None:
        found = estimate(*args, **kwargs)
        return dataclasses.replace(found, sigma=found.sigma * 3) if found else None

    monkeypatch.setattr(volatility, "estimate", too_volatile)
    doc, _ = reports[TWAP]
    folder, _ = brownian_tape(tmp_path, TWAP, 21)
    off = backtest(read_tapes([folder]))
    good = {b["remS"]: b["model"]["logLoss"] for b in doc["buckets"]}
    bad = {b["remS"]: b["model"]["logLoss"] for b in off["buckets"]}
    print(
        f"log loss summed over buckets: sigma x1 {sum(good.values()):.3f}, "
        f"x3 {sum(bad.values()):.3f}"
    )
    assert sum(bad.values()) > sum(good.values()) + 0.5, (good, bad)
    worse = [rem for rem in REMS if bad[rem] > good[rem]]
    assert len(worse) >= 7, (good, bad)
    # The market's own scores do not depend on the model.
    assert [b["market"] for b in off["buckets"]] == [b["market"] for b in doc["buckets"]]


def test_reliability_bins_cover_every_checkpoint_once(
    reports: dict[str, tuple[dict[str, Any], TapeSpec]],
) -> None:
    doc, spec = reports[TWAP]
    table = doc["reliability"]
    assert [(b["lo"], b["hi"]) for b in table] == [(i / 10, (i + 1) / 10) for i in range(10)]
    assert sum(b["n"] for b in table) == len(paired(doc, spec, "pUp"))
    for b in table:
        if b["n"]:
            assert b["lo"] <= b["meanP"] <= b["hi"] and 0 <= b["observed"] <= 1


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


def test_the_command_prints_the_report_and_the_json_document(app: Flask, tmp_path: Path) -> None:
    folder, _ = brownian_tape(tmp_path, TWAP, 23)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["backtest", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) >= {"windows", "buckets", "reliability", "perWindow"}
    assert [b["remS"] for b in doc["buckets"]] == list(REMS)
    assert set(doc["buckets"][0]) >= {"remS", "n", "model", "market"}
    assert set(doc["buckets"][0]["model"]) == {"brier", "logLoss"}
    assert set(doc["reliability"][0]) == {"lo", "hi", "n", "meanP", "observed"}
    window = doc["perWindow"][0]
    assert set(window) >= {"slug", "rule", "priceToBeat", "outcome", "outcomeSource",
                           "checkpoints"}  # fmt: skip
    assert set(window["checkpoints"][0]) == {"remS", "pUp", "marketMid"}
    text = runner.invoke(args=["backtest", str(folder)])
    assert text.exit_code == 0 and "reliability (model)" in text.output
    assert f"btc-updown-5m-{T0}" in text.output
    missing = runner.invoke(args=["backtest", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such file or folder" in missing.output


def test_an_empty_tape_gives_an_empty_report(app: Flask, tmp_path: Path) -> None:
    (tmp_path / "2026-11-24T01.jsonl").write_text("")
    result = app.test_cli_runner().invoke(args=["backtest", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("0 windows (0 with an outcome); 0 tape lines")
    doc = json.loads(
        app.test_cli_runner().invoke(args=["backtest", str(tmp_path), "--json"]).stdout
    )
    assert doc["windows"] == 0 and doc["perWindow"] == [] and doc["replay"]["speed"] is None


def test_a_tape_written_by_hand_from_the_documented_format(app: Flask, tmp_path: Path) -> None:
    """Only docs/tapes.md and the upstream formats: a spot window with 20 minutes of 1 s
    history, its Gamma answer, its books quoted every second, and its resolution."""
    start = T0 - 1200
    up, down = "1" * 76, "2" * 76
    event = {
        "slug": f"btc-updown-5m-{T0}",
        "markets": [{
            "conditionId": "0xabc", "outcomes": '["Up", "Down"]',
            "clobTokenIds": json.dumps([up, down]), "outcomePrices": '["0.5", "0.5"]',
            "resolutionSource": "https://data.chain.link/streams/btc-usd",
            "cryptoMarketConfig": {"twapEnabled": False, "twapLookbackSeconds": 0},
            "closed": False,
        }],
    }  # fmt: skip

    def price(second: int) -> float:
        return 100_000 + 20 * math.sin(second / 7.0) + (second - T0) * 0.05

    history = range(start - 1200, start + 1)
    lines: list[dict[str, Any]] = [
        {"t": start, "src": "rtds", "event": "connect"},
        {"t": start + 0.01, "src": "rtds", "frame": json.dumps({
            "topic": "crypto_prices", "type": "subscribe", "payload": {"symbol": "btc/usd",
            "data": [{"timestamp": s * 1000, "value": price(s)} for s in history]}})},
        {"t": start + 0.02, "src": "clob-ws", "event": "connect"},
        {"t": T0 - 120, "src": "gamma", "method": "GET",
         "url": f"https://gamma-api.polymarket.com/events/slug/btc-updown-5m-{T0}",
         "body": None, "status": 200, "frame": json.dumps(event)},
    ]  # fmt: skip
    for second in range(start + 1, T0 + 330):
        point = {"symbol": "btc/usd", "timestamp": second * 1000, "value": price(second)}
        update = {"topic": "crypto_prices_chainlink", "type": "update", "payload": point}
        lines.append({"t": second + 0.05, "src": "rtds", "frame": json.dumps(update)})
        if T0 - 59 <= second <= T0 + 305:
            for token, bid, ask in ((up, "0.55", "0.57"), (down, "0.43", "0.45")):
                lines.append({"t": second + 0.06, "src": "clob-ws", "frame": json.dumps({
                    "event_type": "best_bid_ask", "market": "0xabc", "asset_id": token,
                    "best_bid": bid, "best_ask": ask, "spread": "0.02"})})  # fmt: skip
    lines.append({"t": T0 + 320, "src": "clob-ws", "frame": json.dumps({
        "event_type": "market_resolved", "market": "0xabc", "assets_ids": [up, down],
        "winning_asset_id": up, "winning_outcome": "Up"})})  # fmt: skip
    lines.sort(key=lambda line: line["t"])
    tape = tmp_path / time.strftime("%Y-%m-%dT%H.jsonl", time.gmtime(start))
    tape.write_text("".join(json.dumps(line) + "\n" for line in lines))

    result = app.test_cli_runner().invoke(args=["backtest", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    [window] = [w for w in doc["perWindow"] if w["windowStart"] == T0]
    assert (window["outcome"], window["outcomeSource"], window["rule"]) == ("up", "market", "spot")
    assert window["priceToBeat"] == pytest.approx(price(T0))
    assert [c["remS"] for c in window["checkpoints"]] == list(REMS)
    assert all(c["marketMid"] == pytest.approx(0.56) for c in window["checkpoints"])
    assert all(0 <= c["pUp"] <= 1 for c in window["checkpoints"])
    text = app.test_cli_runner().invoke(args=["backtest", str(tmp_path)])
    assert f"btc-updown-5m-{T0}" in text.output and "up (market)" in text.output


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
