"""The hourly markets' settlement source: Binance's 1-hour candle of the pair (issue 49,
point 2; the facts in docs/horizons.md).

An hourly window settles UP when its candle's close is at least its open. The price now is
the pair's exchange price on RTDS's ``crypto_prices`` topic (the Chainlink spot's witness for
the other kinds). The open is Binance's own answer for the candle (``klines.py``), asked once
the hour has begun (every ``RETRY_S`` until it comes) and checked against the first exchange
price received at or after the hour: apart by more than ``OPEN_TOLERANCE`` they disagree and
the open is doubted, with the reason, until a later answer agrees (the candle's open never
changes: a disagreement is a wrong answer or a wrong pair). With no exchange price around the
hour there is nothing to check it against: Binance's answer stands, as the settlement's own
source. The outcome is read from the candle once it is final. Every network call is made by
``upkeep`` (the source's upkeep thread); a row reads what it holds.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx

from app.markets import Market
from app.refresher.sources.binance.klines import Candle, KlinesClient, KlinesError
from app.refresher.sources.settlement import Opening

log = logging.getLogger(__name__)

NAME = "binance-candle"
VIA = "binance:klines"
INTERVAL = "1h"
RETRY_S = 5.0  # a candle not answered yet (or refused): asked again this much later
# The first exchange price of the hour against the candle's open: a second of BTC moves a few
# basis points (the largest real second 34 bp, docs/reliability.md); apart by more they are
# not the same trade. A choice, documented in docs/horizons.md.
OPEN_TOLERANCE = 0.003
AROUND_MS = 5_000  # the first exchange price within this of the hour is its witness


class ExchangePrices(Protocol):
    """A coin's exchange prices as RTDS's ``crypto_prices`` gives them (``ExchangeWitness``)."""

    def newest(self) -> tuple[int, float] | None:
        """The newest (stamp ms, price)."""

    def first_from(self, ts_ms: int, within_ms: int) -> tuple[int, float] | None:
        """The first (stamp ms, price) at or after ``ts_ms``, within ``within_ms``."""


@dataclass
class _Hour:
    """What is known of one coin's hour: the candle Binance answered, when to ask again."""

    candle: Candle | None = None
    asked_at: float = -math.inf
    error: str | None = None

    @property
    def final(self) -> bool:
        """Whether the candle was answered after its close: its close is the settlement's."""
        return self.candle is not None and self.candle.final(int(self.asked_at * 1000))


def pair_of(coin: Market) -> str:
    """Binance's symbol of ``coin``'s pair (``BTCUSDT``) from its ``crypto_prices`` name."""
    return coin.exchange.upper()


class BinanceCandleSettlement:
    """The hourly kind's settlement: Binance's 1-hour candle, witnessed by the exchange
    prices of ``prices`` (by symbol); thread-safe."""

    name = NAME
    witness = "the exchange price on RTDS (crypto_prices)"

    def __init__(
        self,
        klines: KlinesClient,
        prices: Mapping[str, ExchangePrices],
    ) -> None:
        self._klines = klines
        self._prices = prices
        self._hours: dict[tuple[str, int], _Hour] = {}
        self._lock = threading.Lock()

    def price_now(self, coin: Market) -> tuple[int, float] | None:
        """The newest exchange price of ``coin``'s pair."""
        prices = self._prices.get(coin.symbol)
        return prices.newest() if prices is not None else None

    def opening(self, coin: Market, t0: int) -> Opening:
        """The candle's open as Binance answered it, doubted while the first exchange price
        of the hour disagrees (or while Binance's answer was refused)."""
        with self._lock:
            hour = self._hours.get((coin.symbol, t0))
            candle, error = (hour.candle, hour.error) if hour else (None, None)
        if candle is None:
            return Opening(None, None, f"binance: {error}" if error else None)
        return Opening(candle.open, VIA, self._disagreement(coin, t0, candle.open))

    def _disagreement(self, coin: Market, t0: int, value: float) -> str | None:
        """Why the candle's open is not believed, or None."""
        prices = self._prices.get(coin.symbol)
        first = prices.first_from(t0 * 1000, AROUND_MS) if prices is not None else None
        if first is None:
            return None  # nothing to check it against: the settlement's own source stands
        apart = abs(math.log(value / first[1]))
        if apart <= OPEN_TOLERANCE:
            return None
        return (
            f"binance: the candle's open {value:.8g} is {apart * 1e4:.0f} bp from the first "
            f"{coin.exchange} price of the hour {first[1]:.8g} (more than "
            f"{OPEN_TOLERANCE * 1e4:.0f} bp)"
        )

    def outcome(self, coin: Market, t0: int) -> bool | None:
        """UP or DOWN once the candle Binance answered is final and its open believed."""
        with self._lock:
            hour = self._hours.get((coin.symbol, t0))
            candle = hour.candle if hour is not None and hour.final else None
        if candle is None:
            return None
        if self._disagreement(coin, t0, candle.open) is not None:
            return None
        return candle.up

    def upkeep(self, coin: Market, t0: int, now: float) -> None:
        """Ask Binance for the hour's candle once it has begun, every ``RETRY_S`` until it
        is answered, and again once the hour is over until the answer is final."""
        if now < t0:
            return
        key = (coin.symbol, t0)
        with self._lock:
            hour = self._hours.setdefault(key, _Hour())
            if hour.final or now - hour.asked_at < RETRY_S:
                return
            if hour.candle is not None and now * 1000 <= hour.candle.close_ms:
                return  # the open is known; the close is asked for once the hour is over
            hour.asked_at = now
        try:
            candle = self._klines.candle(pair_of(coin), t0, INTERVAL)
            error = None
        except (KlinesError, httpx.HTTPError) as exc:
            candle, error = None, f"{type(exc).__name__}: {exc}"[:200]
            log.warning("binance candle %s %s: %s", pair_of(coin), t0, error)
        with self._lock:
            if candle is not None:
                hour.candle, hour.error = candle, None
            elif error is not None:
                hour.error = error
        self._forget_before(t0 - 2 * 3600)

    def _forget_before(self, t0: int) -> None:
        """Drop the hours that started before ``t0`` (their rows are gone)."""
        with self._lock:
            for key in [k for k in self._hours if k[1] < t0]:
                del self._hours[key]
