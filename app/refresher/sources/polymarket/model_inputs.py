"""The model's inputs from the live feeds, and its answer for one window.

The model follows each market's settlement rule (``app.refresher.model``): the centre is the
Chainlink SPOT (never the TWAP, which trails it), the volatility is the spot's, measured on
the settlement's own rule and horizon (``Volatility.spread``), and the time left is counted
from the spot's own timestamp. A TWAP window inside its lookback also needs the mean of the
spot so far: a hole there means no probability, never a made-up one.
"""

from __future__ import annotations

from typing import NamedTuple

from app.refresher.model import SPOT, TWAP, horizon_ratio, percentages, probability_up
from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.points import MAX_GAP_MS
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.volatility import Volatility


class ModelAnswer(NamedTuple):
    """P(up) and P(down) in percent, the sigma used, the variance scale over the time left,
    and the model's own unrounded P(up); each None when the model cannot answer. ``point``:
    the spot point (stamp ms, value) it read, which the row shows (None: the row reads the
    newest)."""

    p_up_pct: float | None
    p_down_pct: float | None
    sigma: float | None
    sigma_scale: float | None
    p_up: float | None
    point: tuple[int, float] | None = None


def answer(
    market: WindowMarket | None, price_to_beat: float | None, spot: PriceSeries
) -> ModelAnswer:
    """The model's answer for ``market``'s window against ``price_to_beat``, from ``spot``.

    One reading: the price is the point the volatility estimate ends at, so its last return
    is the one into that price, whatever point the RTDS thread adds meanwhile."""
    vol = spot.volatility()
    sigma = vol.sigma if vol else None
    latest = vol.newest if vol is not None else spot.latest()
    nothing = ModelAnswer(None, None, sigma, vol.scale if vol else None, None, latest)
    if market is None or price_to_beat is None or latest is None or vol is None:
        return nothing
    ts_ms, price = latest
    end_ms = market.window_end * 1000
    tau = max(0.0, (end_ms - ts_ms) / 1000.0)  # from the price's own time, not ours
    known_mean = None
    if market.rule == TWAP:
        if market.lookback_s is None:
            return nothing
        if tau < market.lookback_s:
            start_ms = end_ms - market.lookback_s * 1000
            if not spot.covered(start_ms, ts_ms, MAX_GAP_MS):
                return nothing  # a hole in what is averaged
            known_mean = spot.mean(start_ms, ts_ms) or price
    return _priced(
        market,
        price_to_beat,
        latest,
        vol,
        market.rule,
        market.lookback_s,
        known_mean,
        vol.last_return,
    )


def candle_answer(
    market: WindowMarket | None,
    price_to_beat: float | None,
    point: tuple[int, float] | None,
    spot: PriceSeries,
) -> ModelAnswer:
    """The model's answer for an hourly window (settled on Binance's candle: its close
    against its open, ``price_to_beat``) at the exchange price ``point``. The volatility is
    the coin's Chainlink spot's, over the time left by its own smoothing (the horizon ratio
    brings a smoothed feed's variance back to the price's over minutes and hours); no
    continuation: Binance's price is no smoothed feed (docs/horizons.md, point 3: the short
    estimate scored best on the real days)."""
    vol = spot.volatility()
    if market is None or price_to_beat is None or point is None or vol is None:
        sigma = vol.sigma if vol else None
        return ModelAnswer(None, None, sigma, vol.scale if vol else None, None, point)
    return _priced(market, price_to_beat, point, vol, SPOT, None, None, 0.0)


def _priced(
    market: WindowMarket,
    price_to_beat: float,
    point: tuple[int, float],
    vol: Volatility,
    rule: str,
    lookback_s: int | None,
    known_mean: float | None,
    last_return: float,
) -> ModelAnswer:
    """P(up) of ``market``'s window at the price ``point`` under ``rule``: the spread measured
    on that rule and horizon (volatility/settlement.py), the time left from the price's own
    stamp."""
    ts_ms, price = point
    tau = max(0.0, (market.window_end * 1000 - ts_ms) / 1000.0)  # from the price's own time
    length = market.window_end - market.window_start  # a 4-hour one may be 3 or 5 hours
    spread, jump_var = vol.spread(rule, lookback_s, tau, length)
    p_up = probability_up(
        price,
        price_to_beat,
        tau,
        spread,
        rule,
        lookback_s,
        known_mean,
        jump_rate=vol.jump_rate,
        jump_var=jump_var,
        rho=vol.rho,
        last_return=last_return,
        ratios=vol.ratios,
    )
    up, down = percentages(p_up)
    # The variance scale applied over the time left (the feed's own, from its smoothing).
    ratio = horizon_ratio(vol.rho, tau, vol.ratios)
    return ModelAnswer(up, down, vol.sigma, ratio, p_up, point)
