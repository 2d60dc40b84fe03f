"""What the fake CLOB socket's messages hold, apart from who gets them (``clob_ws``): the
``price_change`` entries, the ``market_resolved`` message and the unreadable levels of a
junk book."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.fake_polymarket.market import FakeMarket

PriceChange = tuple[str, str, str, str]  # (asset id, side BUY/SELL, price, size)


def price_change_entries(
    changes: Sequence[PriceChange], quotes: dict[str, tuple[str, str, str]]
) -> list[dict[str, str]]:
    """One ``price_change`` entry per change, each with its asset's best bid, best ask and
    book hash after all of them (``quotes``, by asset)."""
    entries = []
    for asset, side, price, size in changes:
        best_bid, best_ask, book_hash = quotes[asset]
        entries.append(
            {
                "asset_id": asset,
                "price": price,
                "size": size,
                "side": side,
                "hash": book_hash,
                "best_bid": best_bid,
                "best_ask": best_ask,
            }
        )
    return entries


def resolved_message(market: FakeMarket, winner: str, sent_ms: int) -> dict[str, Any]:
    """``market``'s ``market_resolved`` message, sent at ``sent_ms``; ``winner`` is
    ``"Up"`` / ``"Down"`` (any case) or the winning token id."""
    labels = {"up": "Up", "down": "Down", market.up_token: "Up", market.down_token: "Down"}
    outcome = labels.get(winner.lower()) or labels.get(winner)
    if outcome is None:
        raise ValueError(f"winner must be Up, Down or one of the tokens, not {winner!r}")
    return {
        "event_type": "market_resolved",
        "market": market.condition,
        "assets_ids": [market.up_token, market.down_token],
        "winning_asset_id": market.up_token if outcome == "Up" else market.down_token,
        "winning_outcome": outcome,
        "timestamp": str(sent_ms),
    }


def junk_levels() -> list[dict[str, Any]]:
    """Book levels none of which can be read: prices that are not numbers or out of [0, 1],
    sizes that are not numbers."""
    return [
        {"price": "abc", "size": "10"},
        {"price": "1.5", "size": "10"},
        {"price": "-0.25", "size": "10"},
        {"price": "NaN", "size": "10"},
        {"price": "0.5", "size": "lots"},
        {"price": None, "size": None},
    ]
