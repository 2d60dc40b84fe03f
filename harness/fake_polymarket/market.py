"""The world's things: one window's market (``FakeMarket``: its Gamma event, its CLOB market
object, its tokens and condition) and one token's order book (``FakeBook``: its levels as
the CLOB writes them, bids ascending and asks descending).

``harness.fake_polymarket.world`` keeps them; the stand-ins serve them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from app.horizons import EASTERN
from app.markets import BINANCE_CANDLE, MARKETS, SPANS, Span
from harness.fake_polymarket.wire import (
    COIN_NAMES,
    DEFAULT_SYMBOL,
    SPOT,
    TWAP,
    chainlink_of,
    condition_id,
    iso,
    price_text,
    resolution_source,
    token_id,
)
from harness.spans import FIVE_MINUTES


def shifted(span: Span, t0: int, offset: int) -> int:
    """The start of ``span``'s window ``offset`` windows away from the one starting at ``t0``
    (a 4-hour window is 3 to 5 hours long: counted block by block)."""
    for _ in range(abs(offset)):
        t0 = span.end(t0) if offset > 0 else span.start(t0 - 1)
    return t0


@dataclass
class FakeMarket:
    """One window's Gamma event; ``outcomes`` gives the order of the JSON-string arrays.

    ``symbol`` is the market (a key of ``app.markets.MARKETS``: ``BTC``, ``ETH``, ``SOL``,
    ``XRP``): it gives the slug, the series, the titles, ``cryptoMarketConfig.asset`` and
    the resolution source; another market's tokens and condition differ from BTC's of the
    same window (BTC's are what they always were).
    """

    window_start: int
    outcomes: tuple[str, ...] = ("Up", "Down")
    rule: str = SPOT
    lookback: int = 60  # twapLookbackSeconds of a TWAP market (30 on some older ones)
    with_config: bool = True  # cryptoMarketConfig present (markets since 2026-08-07)
    # eventMetadata.priceToBeat (undocumented, late); on a TWAP market nobody knows whether it
    # is the TWAP or the spot at T0, so the source never uses it there (docs/price-to-beat.md)
    price_to_beat: float | None = None
    up_token: str = ""
    down_token: str = ""
    condition: str = ""
    symbol: str = DEFAULT_SYMBOL
    span: Span = FIVE_MINUTES  # the window's kind (``15m``, ``1h``, ``4h``: that market)
    yearless: bool = False  # an hourly market listed before March 2026: no year in its slug

    def __post_init__(self) -> None:
        chainlink_of(self.symbol)  # an unknown market fails here, not at its first request
        # The 5-minute markets' ids are what they always were; another length's differ.
        tag = "" if self.span == FIVE_MINUTES else f":{self.span.name}"
        t0, symbol = self.window_start, self.symbol
        self.up_token = self.up_token or token_id(t0, f"up{tag}", symbol)
        self.down_token = self.down_token or token_id(t0, f"down{tag}", symbol)
        self.condition = self.condition or condition_id(t0, symbol, tag)

    @property
    def slug(self) -> str:
        """``btc-updown-5m-<T0>`` (``eth-updown-15m-<T0>``... for another market or length)."""
        slugs = self.span.slugs(self.symbol, self.window_start)
        return slugs[-1] if self.yearless else slugs[0]

    @property
    def binance(self) -> bool:
        """Settled on Binance's candle (an hourly market), not on a Chainlink stream."""
        return self.span.settlement == BINANCE_CANDLE

    @property
    def window_end(self) -> int:
        """When the window ends (unix seconds; a 4-hour one across a change of clocks: 3 or
        5 hours after its start)."""
        return self.span.end(self.window_start)

    @property
    def series_tag(self) -> str:
        """The kind's tag in the Gamma series' slug (``btc-up-or-down-hourly``)."""
        return "hourly" if self.span.name == "1h" else self.span.name

    def title(self) -> str:
        """The event's title as Polymarket writes it, in US Eastern time."""
        coin = COIN_NAMES.get(self.symbol, self.symbol)
        start = datetime.fromtimestamp(self.window_start, EASTERN)
        day = f"{start:%B} {start.day}"
        if self.span.name == "1h":
            return f"{coin} Up or Down - {day}, {start.hour % 12 or 12}{start:%p} ET"
        end = datetime.fromtimestamp(self.window_end, EASTERN)
        clock = "{}:{:%M%p}".format
        span = f"{clock(start.hour % 12 or 12, start)}-{clock(end.hour % 12 or 12, end)}"
        return f"{coin} Up or Down - {day}, {span} ET"

    @property
    def chainlink(self) -> str:
        """The market's Chainlink stream on RTDS (``btc/usd``)."""
        return chainlink_of(self.symbol)

    @property
    def tokens(self) -> tuple[str, str]:
        """(UP, DOWN)."""
        return self.up_token, self.down_token

    def clob_market(self) -> dict[str, Any]:
        """The CLOB's own market object (``GET /markets/{condition_id}``): its tokens each
        with the outcome label the CLOB gives it, in the market's outcome order."""
        by_label = {"Up": self.up_token, "Down": self.down_token}
        t0 = self.window_start
        return {
            "condition_id": self.condition,
            "question_id": "0x" + hashlib.sha256(f"question:{self.condition}".encode()).hexdigest(),
            "tokens": [
                {"token_id": by_label[o], "outcome": o, "price": 0.5, "winner": False}
                for o in self.outcomes
                if o in by_label
            ],
            "market_slug": self.slug,
            "question": f"{COIN_NAMES.get(self.symbol, self.symbol)} Up or Down",
            "end_date_iso": iso(self.window_end),
            "game_start_time": iso(t0),
            "active": True,
            "closed": False,
            "accepting_orders": True,
            "minimum_order_size": 5,
            "minimum_tick_size": 0.01,
            "neg_risk": False,
        }

    def event(self) -> dict[str, Any]:
        """The Gamma event object."""
        t0 = self.window_start
        by_label = {"Up": self.up_token, "Down": self.down_token}
        twap = self.rule == TWAP
        rank = list(MARKETS).index(self.symbol)  # 0 for BTC: its ids as they always were
        rank += list(SPANS).index(self.span.name) * len(MARKETS)  # 0 for the 5-minute kind
        market: dict[str, Any] = {
            "id": str(500000 + rank * 100000 + t0 // self.span.seconds % 100000),
            "question": self.title(),
            "conditionId": self.condition,
            "slug": self.slug,
            "resolutionSource": resolution_source(
                self.symbol, self.rule, self.lookback, self.binance
            ),
            "startDate": iso(t0 - 86400),  # the listing time: NOT the window start
            "eventStartTime": iso(t0),
            "endDate": iso(self.window_end),
            "outcomes": json.dumps(list(self.outcomes)),
            "outcomePrices": json.dumps(["0.5" for _ in self.outcomes]),
            "clobTokenIds": json.dumps([by_label.get(o, "0") for o in self.outcomes]),
            "active": True,
            "closed": False,
            "acceptingOrders": True,
            "orderPriceMinTickSize": 0.01,
            "orderMinSize": 5,
            # Gamma's own snapshot of UP: deliberately NOT the CLOB's best levels.
            "bestBid": 0.01,
            "bestAsk": 0.99,
            "lastTradePrice": 0.5,
        }
        if self.with_config and not self.binance:  # the hourly markets name Binance's page
            market["cryptoMarketConfig"] = {
                "asset": self.symbol,
                "duration": self.span.name,
                "twapEnabled": twap,
                "twapLookbackSeconds": self.lookback if twap else 0,
            }
        event: dict[str, Any] = {
            "id": market["id"],
            "slug": self.slug,
            "title": market["question"],
            "seriesSlug": MARKETS[self.symbol].series.replace("-5m", f"-{self.series_tag}"),
            "startDate": market["startDate"],
            "endDate": market["endDate"],
            "markets": [market],
        }
        if self.price_to_beat is not None:
            event["eventMetadata"] = {"priceToBeat": self.price_to_beat}
        return event


class FakeBook:
    """One token's book: price -> size, both decimal strings."""

    def __init__(
        self, bids: dict[str, str] | None = None, asks: dict[str, str] | None = None
    ) -> None:
        self.bids = dict(bids or {})
        self.asks = dict(asks or {})

    def set(self, side: str, price: str, size: str) -> None:
        """Set a level (``side`` BUY = bid, SELL = ask); size ``"0"`` removes it."""
        levels = self.bids if side.upper() == "BUY" else self.asks
        # "0.5" and "0.50" are one level: reuse the key the book already has for that price.
        key = next((p for p in levels if Decimal(p) == Decimal(price)), price)
        if Decimal(size) == 0:
            levels.pop(key, None)
        else:
            levels[key] = size

    @property
    def best_bid(self) -> float | None:
        """The highest bid price."""
        return max((float(p) for p in self.bids), default=None)

    @property
    def best_ask(self) -> float | None:
        """The lowest ask price."""
        return min((float(p) for p in self.asks), default=None)

    @property
    def best_bid_text(self) -> str:
        """The best bid as the market channel writes it; ``"0"`` when there is no bid."""
        best = max(self.bids, key=Decimal, default=None)
        return price_text(best) if best is not None else "0"

    @property
    def best_ask_text(self) -> str:
        """The best ask as the market channel writes it; ``"1"`` when there is no ask."""
        best = min(self.asks, key=Decimal, default=None)
        return price_text(best) if best is not None else "1"

    def spread_text(self) -> str:
        """``best_ask - best_bid`` (an empty side counting as 1 / 0), a decimal string."""
        return price_text(Decimal(self.best_ask_text) - Decimal(self.best_bid_text))

    def hash(self) -> str:
        """A digest of the levels (the ``hash`` of snapshots and of ``price_change`` entries)."""
        levels = json.dumps([self.bids, self.asks], sort_keys=True).encode()
        return hashlib.sha1(levels, usedforsecurity=False).hexdigest()

    def as_json(self, asset_id: str, market: str, timestamp_ms: int) -> dict[str, Any]:
        """The CLOB book object: bids ascending, asks descending (the documented trap)."""

        def ordered(levels: dict[str, str], descending: bool) -> list[dict[str, str]]:
            prices = sorted(levels, key=Decimal, reverse=descending)
            return [{"price": p, "size": levels[p]} for p in prices]

        return {
            "market": market,
            "asset_id": asset_id,
            "timestamp": str(timestamp_ms),
            "hash": self.hash(),
            "bids": ordered(self.bids, descending=False),
            "asks": ordered(self.asks, descending=True),
            "min_order_size": "5",
            "tick_size": "0.01",
            "neg_risk": False,
            "last_trade_price": "0.5",
        }


def default_books(market: FakeMarket) -> tuple[FakeBook, FakeBook]:
    """UP and DOWN books with several levels each (best: UP 0.53/0.55, DOWN 0.45/0.47)."""
    up = FakeBook(
        bids={"0.50": "120", "0.51": "80", "0.52": "60", "0.53": "40.5"},
        asks={"0.55": "35", "0.56": "70", "0.58": "90", "0.60": "150"},
    )
    down = FakeBook(
        bids={"0.40": "100", "0.44": "50", "0.45": "25"},
        asks={"0.47": "30", "0.49": "60", "0.52": "200"},
    )
    return up, down
