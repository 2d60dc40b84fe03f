"""The hourly (Binance candle) rule's model scored on real Binance seconds (issue 49, point 3).

    python -m bench.hourly_real FOLDER [--symbols BTC,ETH,SOL,XRP] [--history-days 2]
        [--json OUT]

FOLDER is searched recursively for Binance 1-second klines (``BTCUSDT-1s-YYYY-MM-DD.zip``,
IGOLz/polyedge-v2's ``data/binance_1s``: no license stated, so a local copy only, never
committed; docs/real-data.md). From them, per coin:

- **each hour's outcome** as the hourly market settles it: Binance's 1-hour candle, its open
  the first trade of the hour (the first 1-second kline's open), its close the last (the last
  one's close), UP when close >= open;
- **the price at each checkpoint** (``SPANS["1h"].rems``: 3,540 ... 5 s left): the close of
  the 1-second kline ending at that instant;
- **the 1-minute closes** (each minute's last second), the history the long-horizon
  variance reads (``app.refresher.volatility.long_horizon``): only minutes over before the
  checkpoint, the last ``--history-days`` days of them (no look-ahead).

Three answers are scored at every checkpoint, all the service's own zero-drift digital model
(``app.refresher.model.probability_up``, ties UP) on the price and the candle's open, only
their volatility differing:

- ``long``: the variance over the time left from the time-of-day profile and the regime;
- ``profile``: the profile alone (regime 1);
- ``short``: the last 15 minutes of 1-second returns, scaled by the square root of the time
  left (how the 5- and 15-minute kinds read the volatility before their settlement factors);
- ``coin``: 0.5.

Log loss (natural, p clipped to [1e-4, 1 - 1e-4]) and Brier (``app.calibration.scores``),
per coin and together; the first ``--history-days`` days are history only. Days 2026-03-12 to
-14 are those the 5-minute model's constants were fitted on; the long-horizon constants were
set before any score was seen (a priori, not fitted); 2026-03-15 to -18 are summed apart as
held out. Not timed: nothing here is a speed figure.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from app.calibration.scores import mean_scores
from app.markets import MARKETS, SPANS
from app.refresher.model import probability_up
from app.refresher.volatility.long_horizon import LongHorizon, long_horizon
from harness.real_data.klines import Seconds, find

HOURLY = SPANS["1h"]
HOUR_S = HOURLY.seconds
SHORT_S = 900  # the short answer's window of 1-second returns
HELD_OUT_FROM = date(2026, 3, 15)
ANSWERS = ("long", "profile", "short", "coin")


def _short_sigma(seconds: Seconds, now: int) -> float | None:
    """Sigma per root second of the last ``SHORT_S`` 1-second returns before ``now``."""
    closes = seconds.closes
    squares = [
        math.log(closes[s] / closes[s - 1]) ** 2
        for s in range(now - SHORT_S, now)
        if s in closes and s - 1 in closes
    ]
    return math.sqrt(math.fsum(squares) / len(squares)) if len(squares) > 60 else None


def _answers(
    price: float, k: float, now: int, rem: int, horizon: LongHorizon, short: float | None
) -> dict[str, float | None]:
    """P(up) of each answer at ``now`` with ``rem`` seconds left."""
    flat = LongHorizon(horizon.profile, 1.0, horizon.minutes)
    return {
        "long": probability_up(price, k, rem, horizon.sigma_ahead(now, rem)),
        "profile": probability_up(price, k, rem, flat.sigma_ahead(now, rem)),
        "short": probability_up(price, k, rem, short) if short else None,
        "coin": 0.5,
    }


def score_coin(
    seconds: Seconds, history_days: int
) -> dict[str, dict[str, list[tuple[float, int]]]]:
    """Per part (``fit``, ``held out``) and answer, the (P(up), outcome) pairs of every
    checkpoint of every scored hour."""
    minutes = seconds.minute_closes()
    starts = [m for m, _ in minutes]
    first = min(seconds.opens)
    first_hour = first - first % HOUR_S + history_days * 86_400
    last = max(seconds.opens)
    pairs: dict[str, dict[str, list[tuple[float, int]]]] = {
        part: {a: [] for a in ANSWERS} for part in ("fit", "held out")
    }
    for t0 in range(first_hour, last - HOUR_S + 2, HOUR_S):
        candle = seconds.candle(t0, HOUR_S)
        if candle is None:
            continue
        k, close = candle
        outcome = int(close >= k)
        day = datetime.fromtimestamp(t0, UTC).date()
        part = "held out" if day >= HELD_OUT_FROM else "fit"
        for rem in HOURLY.rems:
            now = t0 + HOUR_S - rem
            price = seconds.closes.get(now - 1)  # the second ending at ``now``
            if price is None:
                continue
            # Minutes over by ``now`` (a minute's close is its end's price), the last days.
            lo = bisect.bisect_left(starts, now - history_days * 86_400)
            hi = bisect.bisect_right(starts, now - 60)
            horizon = long_horizon(minutes[lo:hi])
            if horizon is None:
                continue
            for name, p in _answers(
                price, k, now, rem, horizon, _short_sigma(seconds, now)
            ).items():
                if p is not None:
                    pairs[part][name].append((p, outcome))
    return pairs


def main(argv: list[str] | None = None) -> int:
    """Score every coin found; print a table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--symbols", default=",".join(MARKETS))
    parser.add_argument("--history-days", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    together: dict[str, dict[str, list[tuple[float, int]]]] = {
        part: {a: [] for a in ANSWERS} for part in ("fit", "held out")
    }
    for symbol in args.symbols.split(","):
        pair = MARKETS[symbol.strip().upper()].exchange.upper()
        files = find([args.folder], pair)
        if not files:
            print(f"{symbol}: no {pair}-1s-* klines under {args.folder}", file=sys.stderr)
            continue
        seconds = Seconds.load(f.path for f in files.values())
        scored = score_coin(seconds, args.history_days)
        report[symbol] = _summary(scored)
        for part, answers in scored.items():
            for name, found in answers.items():
                together[part][name] += found
    report["all"] = _summary(together)
    for name, parts in report.items():
        for part, answers in parts.items():
            cells = "  ".join(
                f"{a} {s['logLoss']:.4f}/{s['brier']:.4f}"
                for a, s in answers.items()
                if s["logLoss"] is not None
            )
            print(f"{name:4} {part:8} n={answers['coin']['n']:5}  {cells}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def _summary(pairs: dict[str, dict[str, list[tuple[float, int]]]]) -> dict[str, Any]:
    """Per part and answer: n, log loss, Brier."""
    return {
        part: {name: {"n": len(found), **mean_scores(found)} for name, found in answers.items()}
        for part, answers in pairs.items()
    }


if __name__ == "__main__":
    raise SystemExit(main())
