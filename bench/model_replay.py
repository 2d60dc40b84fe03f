"""The model alone on per-second paths: fast figures by rule and checkpoint, no live source.

``bench/paths.py`` and ``bench/real.py`` replay tapes through the live source (arrival lags,
gaps, witnesses, the price to beat as latched): the figures a user would see, at about
twenty times real time. This replays only the model (``volatility.history`` once per
window on the 4 h before it, ``volatility.estimate`` at each checkpoint, ``model``'s
P(up)) on a path of one price a second, every price on time: a week of real seconds in
minutes, to compare two versions of the model on the same paths.

    python -m bench.model_replay feed [--hours 24] [--seed 1]
    python -m bench.model_replay brownian [--hours 24] [--seed 1]
    python -m bench.model_replay binance DATA [--days 2026-03-14,2026-03-15]
                                 [--multipliers] [--json OUT]
    ... [--window 15m]   the 15-minute windows, scored at 870 ... 5 s left (issue 39)

``binance`` reads ``BTCUSDT-1s-<day>.zip`` under DATA (docs/real-data.md; the day before
the first is read for warm-up when present, and not scored). For each rule (spot, 30 s and
60 s TWAP; the outcome and the price to beat computed from the path by the rule, ties UP)
it prints the log loss at each checkpoint and over all, and the tails: where it said
< 10 % (> 90 %), the mean said and how often UP came. ``--multipliers`` adds, per
checkpoint, the variance multiplier that would have scored best (0.3 to 1.7 times the
model's own) and what it would have gained: where the model is still too wide or too
narrow. To compare two versions run it from each checkout (a ``git worktree``). Nothing is
pinned and no time is a figure here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.calibration import scores
from app.markets import SPANS
from app.refresher import model, volatility
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S as HISTORY_S
from harness.spans import REMS_OF_WINDOW

RULES: dict[str, tuple[str, int | None]] = {
    "spot": (model.SPOT, None),
    "twap30": (model.TWAP, 30),
    "twap60": (model.TWAP, 60),
}
MULTIPLIERS = (0.3, 0.45, 0.6, 0.75, 1.0, 1.3, 1.7)


@dataclasses.dataclass
class Scored:
    """Per checkpoint: (P(up) at each multiplier, whether UP came)."""

    by_checkpoint: dict[int, list[tuple[tuple[float, ...], bool]]]


def _loss(p: float, up: bool) -> float:
    return scores.log_loss(p, int(up))


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def replay(
    start_s: int,
    prices: Sequence[float],
    multipliers: Sequence[float],
    from_s: int = 0,
    window: str = "5m",
) -> dict[str, Scored]:
    """Every whole ``window`` (5m, 15m) starting at or after ``from_s`` with ``HISTORY_S``
    before it, scored at the window's checkpoints per rule."""
    length, rems = SPANS[window].seconds, SPANS[window].rems
    times = [(start_s + k) * 1000 for k in range(len(prices))]
    found = {name: Scored({c: [] for c in rems}) for name in RULES}
    warm = ((start_s + HISTORY_S) // length + 1) * length
    first = max(warm, -(-from_s // length) * length)
    for t0 in range(first, start_s + len(prices) - length - 1, length):
        i0, end = t0 - start_s, t0 - start_s + length
        # The factors of this window length, as the live series of a board serving it has.
        past = volatility.history(
            times[i0 - HISTORY_S : i0 + 1], prices[i0 - HISTORY_S : i0 + 1], windows=(length,)
        )
        for name, (rule, lookback) in RULES.items():
            span = lookback or 1
            beat = math.fsum(prices[i0 - span + 1 : i0 + 1]) / span
            up = math.fsum(prices[end - span + 1 : end + 1]) / span >= beat
            for left in rems:
                i = end - left
                edge = i - volatility.SIGMA_WINDOW_S
                estimate = volatility.estimate(times[edge : i + 1], prices[edge : i + 1], past)
                if estimate is None:
                    continue
                known = None
                if lookback and left < lookback:
                    seen = prices[end - lookback + 1 : i + 1]
                    known = math.fsum(seen) / len(seen)
                sigma, jump_var = _spread(estimate, rule, lookback, left, length)
                answers = tuple(
                    model.probability_up(
                        prices[i],
                        beat,
                        left,
                        sigma * math.sqrt(m),
                        rule,
                        lookback,
                        known,
                        jump_rate=estimate.jump_rate,
                        jump_var=jump_var * m,
                        rho=estimate.rho,
                        last_return=estimate.last_return,
                        ratios=estimate.ratios,
                    )
                    for m in multipliers
                )
                found[name].by_checkpoint[left].append((answers, up))
    return found


def _spread(
    estimate: volatility.Volatility, rule: str, lookback: int | None, left: float, length: int
) -> tuple[float, float]:
    # A model from before the settlement's own factors has no spread(): its sigma is it.
    spread = getattr(estimate, "spread", None)
    if spread is None:
        return estimate.sigma, estimate.jump_var
    sigma, jump_var = spread(rule, lookback, left, length)
    return float(sigma), float(jump_var)


def figures(found: dict[str, Scored], multipliers: Sequence[float]) -> dict[str, Any]:
    """Log loss per checkpoint and over all, the tails, and the best multiplier per
    checkpoint (the model's own is ``multipliers.index(1.0)``)."""
    own = multipliers.index(1.0)
    out: dict[str, Any] = {}
    for name, scored in found.items():
        rems = list(scored.by_checkpoint)
        rows = [(ps[own], up) for c in rems for ps, up in scored.by_checkpoint[c]]
        low = [(p, up) for p, up in rows if p < 0.1]
        high = [(p, up) for p, up in rows if p > 0.9]
        best = {}
        for c in rems:
            pairs = scored.by_checkpoint[c]
            losses = [
                _mean([_loss(ps[j], up) for ps, up in pairs]) for j in range(len(multipliers))
            ]
            j = min(range(len(multipliers)), key=losses.__getitem__)
            best[c] = (multipliers[j], losses[own] - losses[j])
        out[name] = {
            "checkpoints": {
                c: _mean([_loss(ps[own], up) for ps, up in scored.by_checkpoint[c]]) for c in rems
            },
            "all": _mean([_loss(p, up) for p, up in rows]),
            "count": len(rows),
            "below_10": _tail(low),
            "above_90": _tail(high),
            "best_multiplier": best,
        }
    return out


def _tail(rows: list[tuple[float, bool]]) -> tuple[float, float, int]:
    """(mean said in percent, how often UP came in percent, how many)."""
    said = 100 * _mean([p for p, _ in rows])
    return said, 100 * _mean([float(up) for _, up in rows]), len(rows)


def _print(out: dict[str, Any], label: str, multipliers: bool) -> None:
    rems = list(next(iter(out.values()))["checkpoints"])
    left = ", ".join(str(c) for c in rems)
    print(f"{label}: log loss at {left} s left, over all; tails: said/came (count)")
    for name, f in out.items():
        row = " ".join(f"{f['checkpoints'][c]:.3f}" for c in rems)
        low, high = f["below_10"], f["above_90"]
        print(f"  {name:7s} {row} | all {f['all']:.4f} ({f['count']})", end="")
        print(f" | < 10 %: {low[0]:.1f}/{low[1]:.1f} ({low[2]})", end="")
        print(f" | > 90 %: {high[0]:.1f}/{high[1]:.1f} ({high[2]})")
        if multipliers:
            best = " ".join(f"{c}:x{m}(-{g:.3f})" for c, (m, g) in f["best_multiplier"].items())
            print(f"          best multiplier: {best}")


def _binance(data: Path, days: list[str]) -> tuple[int, list[float], int]:
    from harness.real_data import klines
    from harness.real_data.klines import find, read_closes

    files = find([data], "BTCUSDT")
    wanted = sorted(days) if days else sorted(str(d) for d in files)
    closes: dict[int, float] = {}
    for day, kline in files.items():
        # The day before the first wanted one warms the history up when it is there.
        if str(day) in wanted or (
            wanted and str(day) < wanted[0] and _next_day(str(day)) == wanted[0]
        ):
            closes.update((int(t), float(v)) for t, v in read_closes(kline.path).items())
    if not closes:
        raise SystemExit(f"no BTCUSDT-1s klines of {wanted or 'any day'} under {data}")
    first, last = min(closes), max(closes)
    prices, price = [], closes[first]
    for t in range(first, last + 1):
        price = closes.get(t, price)  # a second without a trade keeps the last price
        prices.append(price)
    scored_from = min(klines.day_start(day) for day in files if str(day) in wanted)
    return first, prices, scored_from


def _next_day(day: str) -> str:
    from datetime import date, timedelta

    return str(date.fromisoformat(day) + timedelta(days=1))


def _simulated(kind: str, hours: float, seed: int) -> tuple[int, list[float]]:
    from harness.fake_polymarket import BrownianPath
    from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath

    start = 1_800_000_000 - HISTORY_S - 3600
    seconds = int(hours * 3600) + HISTORY_S + 3600
    path = (
        SettlementFeedPath(seed, FEED_SIGMA, 100_000, start, seconds)
        if kind == "feed"
        else BrownianPath(seed, 1.2e-4, 100_000, start, seconds)
    )
    return start, [float(path.value(start + k)) for k in range(seconds)]


def main(argv: list[str] | None = None) -> int:
    """Replay the model on the chosen path and print (and write) its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("path", choices=("feed", "brownian", "binance"))
    parser.add_argument("data", nargs="?", type=Path, help="for binance: the klines' folder")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", default="", help="for binance: comma-separated days")
    parser.add_argument("--multipliers", action="store_true")
    parser.add_argument("--window", choices=list(REMS_OF_WINDOW), default="5m")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    if args.path == "binance":
        if args.data is None:
            parser.error("binance needs the klines' folder")
        start, prices, scored_from = _binance(args.data, [d for d in args.days.split(",") if d])
        label = f"binance {args.days or 'all days'}"
    else:
        start, prices = _simulated(args.path, args.hours, args.seed)
        scored_from, label = 0, f"{args.path} {args.hours:g} h seed {args.seed}"
    multipliers = MULTIPLIERS if args.multipliers else (1.0,)
    found = replay(start, prices, multipliers, scored_from, args.window)
    out = figures(found, multipliers)
    _print(out, f"{label}, {args.window} windows", args.multipliers)
    if args.json_out:
        args.json_out.write_text(json.dumps({"label": label, "figures": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
