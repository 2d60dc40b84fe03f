"""Backtests: tapes of a Brownian market with known sigma replayed through the live source.

The tapes are written by ``harness.tapes`` in the documented format; the replay runs the
live source's own code on tape time, so what is scored is what the board would have said.
The exact answers come from the path and the true sigma, computed here on their own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app.backtest.report import backtest
from app.backtest.tapes import read_tapes
from app.calibration import scores
from app.calibration.checkpoints import REMS
from app.refresher import volatility
from harness.fake_polymarket import SPOT, TWAP, BrownianPath
from harness.spans import FIVE_MINUTES, WINDOW_S
from harness.tapes import TapeSpec, exact_p_up, settled_up, write
from tests.support.live_source import BTC_ONLY

T0 = 1_800_000_000
SIGMA = 1.2e-4
# Half an hour of windows: the replay costs about 4 ms a tape second (and 13 minutes of
# run-up), so a window is about a second of replay. The checks that catch a wrong model do
# not need many: each checkpoint's probability must be within 0.05 of the exact one (the
# worst of 54 was 0.022 on this seed), and sigma x3 raised the summed log loss by 1.2
# (needed: 0.5) and was worse in 8 of 9 buckets (needed: 7).
WINDOWS = 6


def brownian_tape(
    tmp: Path, rule: str, seed: int, windows: int = WINDOWS, **options: Any
) -> tuple[Path, TapeSpec]:
    path = BrownianPath(seed, SIGMA, 100_000, T0 - 2400, windows * WINDOW_S + 3000)
    spec = TapeSpec(path, SIGMA, T0, windows, rule=rule, **options)
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


Report = tuple[dict[str, Any], TapeSpec]


def _report(tmp_path_factory: pytest.TempPathFactory, rule: str, seed: int) -> Report:
    folder, spec = brownian_tape(tmp_path_factory.mktemp("tapes"), rule, seed)
    return backtest(read_tapes([folder])), spec


@pytest.fixture(scope="module")
def twap_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The backtest of a TWAP tape of ``WINDOWS`` windows, shared by the tests below."""
    return _report(tmp_path_factory, TWAP, 21)


@pytest.fixture(scope="module")
def spot_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The backtest of a spot tape of ``WINDOWS`` windows, shared by the tests below."""
    return _report(tmp_path_factory, SPOT, 22)


@pytest.fixture
def reports(request: pytest.FixtureRequest) -> dict[str, Report]:
    """The report of the test's ``rule`` (TWAP when it has none): each rule's backtest runs
    in the setup of the first test that reads it, not both in one."""
    callspec = getattr(request.node, "callspec", None)
    rule = str(callspec.params["rule"]) if callspec is not None else TWAP
    return {rule: request.getfixturevalue(f"{rule}_report")}


@pytest.mark.parametrize("rule", [TWAP, SPOT])
def test_the_models_log_loss_is_that_of_the_exact_model(
    reports: dict[str, Report], rule: str
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
    reports: dict[str, Report], rule: str
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
    reports: dict[str, Report], rule: str
) -> None:
    doc, spec = reports[rule]
    seen = {"market": 0, "feed": 0}
    for i, window in enumerate(
        w for w in doc["perWindow"] if w["windowStart"] < T0 + WINDOWS * 300
    ):
        start = window["windowStart"]
        assert window["slug"] == BTC_ONLY[0].slug(start, FIVE_MINUTES) and window["rule"] == rule
        up = settled_up(spec.path, rule, spec.lookback, start)
        assert window["outcome"] == ("up" if up else "down"), window
        expected = "market" if (start - T0) // WINDOW_S % spec.resolved_every == 0 else "feed"
        assert window["outcomeSource"] == expected, (i, window)
        seen[expected] += 1
        k = spec.path.twap(start, spec.lookback) if rule == TWAP else spec.path.value(start)
        assert window["priceToBeat"] == pytest.approx(float(k), abs=1e-6)
    assert seen == {"market": WINDOWS // 2, "feed": WINDOWS // 2}


def test_a_model_three_times_too_volatile_is_visibly_worse(
    tmp_path: Path,
    reports: dict[str, Report],
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
    reports: dict[str, Report],
) -> None:
    doc, spec = reports[TWAP]
    table = doc["reliability"]
    assert [(b["lo"], b["hi"]) for b in table] == [(i / 10, (i + 1) / 10) for i in range(10)]
    assert sum(b["n"] for b in table) == len(paired(doc, spec, "pUp"))
    for b in table:
        if b["n"]:
            assert b["lo"] <= b["meanP"] <= b["hi"] and 0 <= b["observed"] <= 1


# -- the command --------------------------------------------------------------------------


def test_the_command_prints_the_report_and_the_json_document(app: Flask, tmp_path: Path) -> None:
    folder, _ = brownian_tape(tmp_path, TWAP, 23, windows=1)  # the report's shape: one will do
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


def test_a_tape_written_by_hand_from_the_documented_format(app: Flask, tmp_path: Path) -> None:
    """Only docs/tapes.md and the upstream formats: a spot window with 20 minutes of 1 s
    history, its Gamma answer, its books quoted every second, and its resolution."""
    start = T0 - 180  # the recording starts three minutes before the window (the snapshot
    # carries the 20 minutes before that)
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
