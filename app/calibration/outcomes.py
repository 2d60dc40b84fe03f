"""How a window settled: the market's own resolution, else the settlement feed by its rule.

- ``market``: the CLOB's ``market_resolved`` (``winning_asset_id``), or Gamma's
  ``outcomePrices`` once the market is closed and resolved (``["1","0"]``; the
  ``["0.5","0.5"]`` of an open market is no outcome);
- ``feed``: the window's final price against its price to beat (final ≥ price to beat is
  UP, ties resolve UP). Each window's price to beat is the previous window's final price,
  so the final price is the next window's price to beat as the replayed source latched it
  from the settlement feed (the spot, or the market's TWAP).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

UP, DOWN = "up", "down"


def _json_list(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def gamma_winners(frames: Iterable[str]) -> dict[str, bool]:
    """Token id -> won, for every closed and resolved market in Gamma's answers."""
    winners: dict[str, bool] = {}
    for frame in frames:
        if '"outcomePrices"' not in frame:
            continue
        try:
            event = json.loads(frame)
        except ValueError:
            continue
        events = event if isinstance(event, list) else [event]
        for item in events:
            markets = item.get("markets") if isinstance(item, dict) else None
            for market in markets if isinstance(markets, list) else []:
                if isinstance(market, dict) and market.get("closed") is True:
                    winners.update(_resolved(market))
    return winners


def _resolved(market: dict[str, Any]) -> dict[str, bool]:
    tokens = _json_list(market.get("clobTokenIds"))
    prices = _json_list(market.get("outcomePrices"))
    if tokens is None or prices is None or len(tokens) != len(prices):
        return {}
    try:
        values = [float(p) for p in prices]
    except (TypeError, ValueError):
        return {}
    if sorted(values) != [0.0] * (len(values) - 1) + [1.0]:
        return {}  # not resolved (an open market shows 0.5 / 0.5)
    return {str(token): value == 1.0 for token, value in zip(tokens, values, strict=True)}


def outcome(
    up_token: str | None,
    down_token: str | None,
    winners: dict[str, bool],
    price_to_beat: float | None,
    final: float | None,
) -> tuple[str | None, str | None]:
    """(``up`` | ``down`` | None, ``market`` | ``feed`` | None) for one window."""
    for token, label in ((up_token, UP), (down_token, DOWN)):
        if token is not None and winners.get(token) is True:
            return label, "market"
    if price_to_beat is not None and final is not None:
        return (UP if final >= price_to_beat else DOWN), "feed"
    return None, None
