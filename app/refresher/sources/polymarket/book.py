"""Best bid and ask per outcome token, from CLOB book snapshots and updates.

Prices and sizes are decimal strings. The order of the arrays is not to be trusted (bids
ascending, asks descending in practice, the docs disagree): best bid = max bid price, best
ask = min ask price. An empty side is None, never 0 or 1.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any


def _price(value: Any) -> float | None:
    try:
        price = float(value)
    except (TypeError, ValueError):
        return None
    return price if math.isfinite(price) and 0.0 <= price <= 1.0 else None


def _size(value: Any) -> float | None:
    try:
        size = float(value)
    except (TypeError, ValueError):
        return None
    return size if math.isfinite(size) and size >= 0 else None


def _levels(levels: Any) -> dict[float, float]:
    book: dict[float, float] = {}
    if not isinstance(levels, list):
        return book
    for level in levels:
        if not isinstance(level, dict):
            continue
        price, size = _price(level.get("price")), _size(level.get("size"))
        if price is not None and size is not None and size > 0:
            book[price] = size
    return book


@dataclass(frozen=True)
class Quote:
    """Best bid and ask of one token, and when they were last confirmed (monotonic s)."""

    bid: float | None
    ask: float | None
    at: float
    via: str


class Books:
    """Order books of the tokens being watched; thread-safe."""

    def __init__(self) -> None:
        self._bids: dict[str, dict[float, float]] = {}
        self._asks: dict[str, dict[float, float]] = {}
        self._quotes: dict[str, Quote] = {}
        self._lock = threading.Lock()

    def _publish(self, asset: str, via: str) -> None:
        bids, asks = self._bids.get(asset, {}), self._asks.get(asset, {})
        self._quotes[asset] = Quote(
            bid=max(bids) if bids else None,
            ask=min(asks) if asks else None,
            at=time.monotonic(),
            via=via,
        )

    def snapshot(self, asset: str, bids: Any, asks: Any, via: str) -> None:
        """Replace a token's book with a full snapshot."""
        with self._lock:
            self._bids[asset] = _levels(bids)
            self._asks[asset] = _levels(asks)
            self._publish(asset, via)

    def change(self, asset: str, side: str, price: Any, size: Any, via: str) -> None:
        """Apply one level change (size 0 removes the level)."""
        level_price, level_size = _price(price), _size(size)
        wanted = side.upper()
        if level_price is None or level_size is None or asset not in self._bids:
            return
        if wanted not in ("BUY", "SELL"):
            return  # an unknown side changes nothing rather than the wrong side
        with self._lock:
            book = self._bids[asset] if wanted == "BUY" else self._asks[asset]
            if level_size == 0:
                book.pop(level_price, None)
            else:
                book[level_price] = level_size
            self._publish(asset, via)

    def touch(self, asset: str, via: str) -> None:
        """The book is confirmed unchanged (a message that carries no level change)."""
        with self._lock:
            if asset in self._bids:
                self._publish(asset, via)

    def quote(self, asset: str) -> Quote | None:
        """The newest best bid/ask of ``asset``."""
        return self._quotes.get(asset)

    def forget(self, keep: set[str]) -> None:
        """Drop the books of tokens no longer watched."""
        with self._lock:
            for table in (self._bids, self._asks, self._quotes):
                for asset in list(table):
                    if asset not in keep:
                        del table[asset]
