"""Best bid and ask per outcome token: the upstream's own top of book, checked by a level book.

The CLOB tells its own top of book twice: every ``price_change`` entry carries the asset's
new ``best_bid``/``best_ask``, and ``best_bid_ask`` messages carry nothing else. That top
wins: there are no sequence numbers, so one lost ``price_change`` leaves a locally rebuilt
level book wrong until the next snapshot. The level book (from ``book`` snapshots and
``price_change`` levels) is kept to check the top: when the two disagree, or the top is
crossed, the asset is marked for a fresh REST snapshot (``wanted_snapshots``).

While REST answers, a top that contradicts the level book is shown but not believed
(``dispute``) until the two agree again: the top moves back to the book, or a snapshot
brings the book to the top. The upstream's top wins over a lost ``price_change``, never over
what the CLOB's REST says: a REST book read after the disagreement began that still
contradicts the top makes it a disagreement (``Dispute.contradicted``), not a repair
(issue 35: another window's top sent under this window's token ids). While REST fails
(``rest_reachable(False)``) there is no REST book to contradict the socket: its top is
believed alone, as the only word there is.

Prices and sizes are decimal strings; the arrays' order is not to be trusted: best bid = max
bid price, best ask = min ask price. An empty side is None, never 0 or 1 (the top's
``best_bid`` "0" and ``best_ask`` "1" mean empty, and so does an absent field).

Nothing is believed unread: a level's price must lie strictly between 0 and 1 (no order
rests at 0 or 1), a top's bid in [0, 1) and its ask in (0, 1] ("-0" or "1e-400" as an ask
is garbage, not a free outcome). In a ``book`` snapshot
unreadable levels are skipped, and a side whose levels are ALL unreadable refuses the
snapshot whole (the old book stays, and ages), counted as ``junk_book``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.refresher import clocks
from app.refresher.sources.polymarket.suspects import Suspects


def _price(value: Any) -> float | None:
    """A price in [0, 1] (-0 read as 0), or None."""
    if isinstance(value, bool):
        return None
    try:
        price = float(value) + 0.0  # -0 is 0
    except (TypeError, ValueError):
        return None
    return price if math.isfinite(price) and 0.0 <= price <= 1.0 else None


def _size(value: Any) -> float | None:
    try:
        size = float(value)
    except (TypeError, ValueError):
        return None
    return size if math.isfinite(size) and size >= 0 else None


def _levels(levels: Any) -> dict[float, float] | None:
    """The price -> size of a snapshot's side (an absent side is empty; unreadable levels,
    a price outside (0, 1) or a size that is not a number, are skipped); None when levels
    were sent and not one of them is readable."""
    book: dict[float, float] = {}
    if levels is None:
        return book
    if not isinstance(levels, list):
        return None  # "bids": "junk" or {} is not an empty side
    readable = 0
    for level in levels:
        if not isinstance(level, dict):
            continue
        price, size = _price(level.get("price")), _size(level.get("size"))
        if price is not None and size is not None and 0.0 < price < 1.0:
            readable += 1
            if size > 0:
                book[price] = size
    return book if readable or not levels else None


def top_side(value: Any, empty: float) -> tuple[bool, float | None]:
    """(usable, price) of one side of an upstream top: ``empty`` ("0" for a bid, "1" for an
    ask) and an absent field mean no order on that side; garbage is not usable."""
    if value is None:
        return True, None
    price = _price(value)
    # Only the bid's side may say 0 (empty) and only the ask's 1: an ask of 0 or a bid of 1
    # is not a market.
    if price is None or price == 1.0 - empty:
        return False, None
    return True, (None if price == empty else price)


@dataclass(frozen=True)
class Quote:
    """Best bid and ask of one token, and when they were last confirmed (monotonic s)."""

    bid: float | None
    ask: float | None
    at: float
    via: str

    @property
    def crossed(self) -> bool:
        """A bid at or above the ask: not a market anyone can trade, so never fresh."""
        return self.bid is not None and self.ask is not None and self.bid >= self.ask


@dataclass(frozen=True)
class Dispute:
    """A token's top that contradicts its level book: ``contradicted`` once a REST book read
    after the disagreement began still does."""

    top: tuple[float | None, float | None]
    book: tuple[float | None, float | None]
    contradicted: bool


class Books:
    """Tops and level books of the tokens being watched; thread-safe."""

    def __init__(
        self, on_change: Callable[[], None] | None = None, suspects: Suspects | None = None
    ) -> None:
        self._on_change = on_change  # called when a token's best bid or ask changes
        self.suspects = suspects or Suspects("clob")
        self._bids: dict[str, dict[float, float]] = {}
        self._asks: dict[str, dict[float, float]] = {}
        self._quotes: dict[str, Quote] = {}
        self._top_at: dict[str, float] = {}  # when the upstream last told its own top
        self._wanted: set[str] = set()
        self._unconfirmed_since: dict[str, float] = {}  # top != level book since (monotonic)
        self._rest_asked_at: dict[str, float] = {}  # the request time of the last REST book
        self._rest_ok = True  # the last REST request was answered
        self._lock = threading.Lock()

    # -- writers (the socket's thread and the upkeep thread) ------------------------------
    def snapshot(
        self, asset: str, bids: Any, asks: Any, via: str, requested_at: float | None = None
    ) -> None:
        """Replace a token's level book with a full snapshot.

        ``requested_at`` (monotonic) is when a REST request was sent: a top the socket told
        after that is newer than the snapshot and stays the quote.
        """
        bid_levels, ask_levels = _levels(bids), _levels(asks)
        if bid_levels is None or ask_levels is None:
            self.suspects.note("junk_book", f"{via} book of {asset[:12]}...: unreadable levels")
            return
        with self._lock:
            self._bids[asset] = bid_levels
            self._asks[asset] = ask_levels
            if requested_at is not None:
                self._rest_asked_at[asset] = requested_at
            level_top = self._level_top(asset)
            quote = self._quotes.get(asset)
            newer_top = requested_at is not None and self._top_at.get(asset, -math.inf) > (
                requested_at
            )
            if newer_top and quote is not None:
                self._check(asset, (quote.bid, quote.ask))
                return
            confirms = quote is not None and (quote.bid, quote.ask) == level_top
            if requested_at is not None and quote is not None and confirms:
                via = quote.via  # REST confirms what the socket said: the origin stays
            self._set(asset, level_top, via)
            if requested_at is None or confirms:
                self._unconfirmed_since.pop(asset, None)
            # else: REST says otherwise than the socket's last top; the newer REST book is
            # shown, and the disagreement stands until a socket top agrees with the book.
            self._wanted.discard(asset)
            if self._quotes[asset].crossed:
                self._wanted.add(asset)

    def change(
        self,
        asset: str,
        side: str,
        price: Any,
        size: Any,
        via: str,
        top: tuple[Any, Any] | None = None,
    ) -> None:
        """Apply one level change (size 0 removes the level), then the upstream's top that
        came with it (``top`` = the entry's raw ``(best_bid, best_ask)``), if any."""
        level_price, level_size = _price(price), _size(size)
        wanted = side.upper()
        with self._lock:
            has_levels = asset in self._bids
            # An unknown side changes nothing (rather than the wrong side).
            known = wanted in ("BUY", "SELL") and level_price is not None
            if has_levels and known and level_price is not None and level_size is not None:
                book = self._bids[asset] if wanted == "BUY" else self._asks[asset]
                if level_size == 0:
                    book.pop(level_price, None)
                else:
                    book[level_price] = level_size
            if top is not None and self._apply_top(asset, top, via):
                return
            if has_levels:
                self._set(asset, self._level_top(asset), via)
                self._unconfirmed_since.pop(asset, None)
                if self._quotes[asset].crossed:
                    self._wanted.add(asset)

    def top(self, asset: str, best_bid: Any, best_ask: Any, via: str) -> None:
        """The upstream's own top of book (a ``best_bid_ask`` message)."""
        with self._lock:
            taken = self._apply_top(asset, (best_bid, best_ask), via)
        if not taken and (best_bid, best_ask) != (None, None):
            self.suspects.note("out_of_range", f"{via} top of {asset[:12]}...: unreadable")

    def rest_reachable(self, answered: bool) -> None:
        """Whether the last REST request for books was answered: while not, the socket's
        top is believed alone (nothing can confirm or contradict it)."""
        self._rest_ok = answered

    def forget(self, keep: set[str]) -> None:
        """Drop the books of tokens no longer watched."""
        with self._lock:
            tables = (
                self._bids,
                self._asks,
                self._quotes,
                self._top_at,
                self._unconfirmed_since,
                self._rest_asked_at,
            )
            for table in tables:
                for asset in [a for a in table if a not in keep]:
                    del table[asset]
            self._wanted &= keep

    # -- readers ----------------------------------------------------------------------
    def quote(self, asset: str) -> Quote | None:
        """The newest best bid/ask of ``asset``."""
        return self._quotes.get(asset)

    def dispute(self, asset: str) -> Dispute | None:
        """How ``asset``'s top contradicts its level book, or None when they agree."""
        with self._lock:
            since = self._unconfirmed_since.get(asset)
            quote = self._quotes.get(asset)
            if since is None or quote is None or not self._rest_ok:
                return None
            top, book = (quote.bid, quote.ask), self._level_top(asset)
            if top == book:
                return None  # the REST book is shown: nothing disputed on the board now
            rest = self._rest_asked_at.get(asset)
            return Dispute(top, book, contradicted=rest is not None and rest >= since)

    def wanted_snapshots(self) -> set[str]:
        """Tokens whose level book disagrees with the upstream's top, or whose top is crossed."""
        with self._lock:
            return set(self._wanted)

    # -- inside the lock --------------------------------------------------------------
    def _apply_top(self, asset: str, top: tuple[Any, Any], via: str) -> bool:
        bid_ok, bid = top_side(top[0], 0.0)
        ask_ok, ask = top_side(top[1], 1.0)
        if not (bid_ok and ask_ok) or (top[0] is None and top[1] is None):
            return False  # garbage, or no top at all: the level book decides
        self._top_at[asset] = clocks.monotonic()
        self._set(asset, (bid, ask), via)
        self._check(asset, (bid, ask))
        return True

    def _check(self, asset: str, top: tuple[float | None, float | None]) -> None:
        crossed = top[0] is not None and top[1] is not None and top[0] >= top[1]
        differs = asset in self._bids and self._level_top(asset) != top
        if differs:
            self._unconfirmed_since.setdefault(asset, clocks.monotonic())
        else:
            self._unconfirmed_since.pop(asset, None)
        if crossed or asset not in self._bids or differs:
            self._wanted.add(asset)
        else:
            self._wanted.discard(asset)

    def _level_top(self, asset: str) -> tuple[float | None, float | None]:
        bids, asks = self._bids.get(asset, {}), self._asks.get(asset, {})
        return (max(bids) if bids else None, min(asks) if asks else None)

    def _set(self, asset: str, top: tuple[float | None, float | None], via: str) -> None:
        before = self._quotes.get(asset)
        self._quotes[asset] = Quote(bid=top[0], ask=top[1], at=clocks.monotonic(), via=via)
        if self._on_change is not None and (before is None or (before.bid, before.ask) != top):
            self._on_change()
