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
- ``blend``: the mean of the ``long`` and ``short`` variances;
- ``tapered``: their mean weighted by the time left (``long``'s share ``rem / 3600``);
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
ANSWERS = ("long", "profile", "short", "blend", "tapered", "coin")
SERVED = "short"  # what the hourly rows use (docs/horizons.md)
TAIL = 0.10  # the tails: said below 10 % or above 90 %


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
    long = horizon.sigma_ahead(now, rem)
    answers = {
        "long": probability_up(price, k, rem, long),
        "profile": probability_up(price, k, rem, flat.sigma_ahead(now, rem)),
        "short": None,
        "blend": None,
        "tapered": None,
        "coin": 0.5,
    }
    if short:
        # The two variances averaged; and weighted toward the long one by the time left
        # (the last minutes' returns say more about the next minutes than about the hour).
        share = rem / HOUR_S
        answers["short"] = probability_up(price, k, rem, short)
        answers["blend"] = probability_up(price, k, rem, math.sqrt((short**2 + long**2) / 2))
        tapered = math.sqrt(share * long**2 + (1 - share) * short**2)
        answers["tapered"] = probability_up(price, k, rem, tapered)
    return answers


def score_coin(
    seconds: Seconds, history_days: int, by_day: dict[str, list[tuple[float, int]]] | None = None
) -> dict[str, dict[str, list[tuple[float, int]]]]:
    """Per part (``fit``, ``held out``) and answer, the (P(up), outcome) pairs of every
    checkpoint of every scored hour; the served answer's (``SERVED``) also per day into
    ``by_day``."""
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
                if p is not None and name == SERVED and by_day is not None:
                    by_day.setdefault(day.isoformat(), []).append((p, outcome))
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
    days: dict[str, list[tuple[float, int]]] = {}
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
        scored = score_coin(seconds, args.history_days, days)
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
    report["tailsByDay"] = {day: tails(found) for day, found in sorted(days.items())}
    print(f"tails of {SERVED!r} per day (every coin): said < {TAIL:.0%} / > {1 - TAIL:.0%}: "
          "n, mean said, UP came")  # fmt: skip
    for day, found in report["tailsByDay"].items():
        low, high = found["low"], found["high"]
        print(f"  {day}  low n={low['n']:4} {low['said']:.3f} {low['came']:.3f}   "
              f"high n={high['n']:4} {high['said']:.3f} {high['came']:.3f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def tails(found: list[tuple[float, int]]) -> dict[str, dict[str, float]]:
    """Where the answer said below ``TAIL`` (``low``) and above ``1 - TAIL`` (``high``): how
    many, the mean said and how often UP came (nan with none)."""
    out = {}
    for name, low in (("low", True), ("high", False)):
        picked = [(p, o) for p, o in found if (p < TAIL if low else p > 1 - TAIL)]
        n = len(picked)
        said = math.fsum(p for p, _ in picked) / n if n else math.nan
        came = sum(o for _, o in picked) / n if n else math.nan
        out[name] = {"n": n, "said": said, "came": came}
    return out


def _summary(pairs: dict[str, dict[str, list[tuple[float, int]]]]) -> dict[str, Any]:
    """Per part and answer: n, log loss, Brier."""
    return {
        part: {name: {"n": len(found), **mean_scores(found)} for name, found in answers.items()}
        for part, answers in pairs.items()
    }


if __name__ == "__main__":
    raise SystemExit(main())
