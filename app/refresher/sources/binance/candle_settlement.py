"""The hourly markets' settlement source: Binance's 1-hour candle of the pair (issue 49,
point 2; the facts in docs/horizons.md).

An hourly window settles UP when its candle's close is at least its open. The price now is
the pair's exchange price on RTDS's ``crypto_prices`` topic (the Chainlink spot's witness for
the other kinds). The open is Binance's own answer for the candle (``klines.py``), asked once
the hour has begun (every ``RETRY_S`` until it comes) and checked against the first exchange
price received at or after the hour: apart by more than ``OPEN_TOLERANCE`` they disagree and
the open is doubted, with the reason, until a later answer agrees (the candle's open never
changes: a disagreement is a wrong answer or a wrong pair). Until ``FIRST_PRICE_WAIT_S`` after
the hour an open with no exchange price yet to check it waits (stale); with none by then there
is nothing to check it against, and Binance's answer stands as the settlement's own source.
The outcome is read from the candle once it is final. Every network call is made by
``upkeep`` (the source's upkeep thread); a row reads what it holds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
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
FINAL_AFTER_S = 5.0  # a candle asked for this long after its close is taken as final
# The first exchange price of the hour may come a second or two late: until this long after
# the hour, an open with nothing yet to check it against waits (stale, with the reason).
FIRST_PRICE_WAIT_S = 10.0
# The relayed exchange price against Binance's own last price (the running candle's close): a
# second or two apart in time, so a fast second's move (34 bp at most on real days) is allowed.
RELAY_TOLERANCE = 0.002
RELAY_LAG_S = 3.0  # the relayed prices from this long before the request answer for it
RELAY_CHECK_S = 30.0  # a check older than this (Binance not answering) says nothing


class ExchangePrices(Protocol):
    """A coin's exchange prices as RTDS's ``crypto_prices`` gives them (``ExchangeWitness``)."""

    def newest(self) -> tuple[int, float] | None:
        """The newest (stamp ms, price)."""

    def first_from(self, ts_ms: int, within_ms: int) -> tuple[int, float] | None:
        """The first (stamp ms, price) at or after ``ts_ms``, within ``within_ms``."""

    def in_force_at(self, ts_ms: int) -> tuple[int, float] | None:
        """The last (stamp ms, price) at or before ``ts_ms``."""

    def between(self, a_ms: int, b_ms: int) -> list[tuple[int, float]]:
        """The (stamp ms, price) stamped within [a_ms, b_ms], and the one in force at a_ms."""


@dataclass
class _Hour:
    """What is known of one coin's hour: the candle Binance answered and when it was asked
    for (set together, on an answer only), when it was last asked, the witness's first
    price of the hour (kept once seen: the witness keeps two minutes only)."""

    candle: Candle | None = None
    answered_for: float = -math.inf  # when the request that brought ``candle`` was sent
    answered_at: float = -math.inf  # and when its answer came (the relay check's span)
    asked_at: float = -math.inf
    error: str | None = None
    first_price: float | None = None

    @property
    def final(self) -> bool:
        """Whether the candle was asked for ``FINAL_AFTER_S`` after its close: its close is
        then the settlement's (Binance's own record settled, our clock's skew allowed)."""
        if self.candle is None:
            return False
        return self.answered_for * 1000 > self.candle.close_ms + FINAL_AFTER_S * 1000


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._klines = klines
        self._prices = prices
        self._clock = clock
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
            if hour is None:
                return Opening(None)
            candle, error, first = hour.candle, hour.error, self._first(coin, t0, hour)
        if candle is None:
            return Opening(None, None, f"binance: {error}" if error else None)
        if first is None and self._clock() < t0 + FIRST_PRICE_WAIT_S:
            why = "binance: waiting for the first exchange price of the hour to check the open"
            return Opening(candle.open, VIA, why)
        return Opening(candle.open, VIA, _disagreement(coin, candle.open, first))

    def _first(self, coin: Market, t0: int, hour: _Hour) -> float | None:
        """The first exchange price of the hour, kept in ``hour`` once seen (the caller
        holds the lock; the witness's own lock is taken inside, never the other way)."""
        if hour.first_price is None:
            prices = self._prices.get(coin.symbol)
            found = prices.first_from(t0 * 1000, AROUND_MS) if prices is not None else None
            hour.first_price = found[1] if found is not None else None
        return hour.first_price

    def relay_doubt(self, coin: Market, t0: int) -> str | None:
        """Why the exchange price RTDS relays is not Binance's: the running candle's close
        (Binance's own last price when it was asked, at most ``RELAY_CHECK_S`` ago) against
        the relayed price in force then, apart by more than ``RELAY_TOLERANCE``; else None.
        A relay that lies, or Binance's price moving for good against Chainlink's (a de-peg
        the spot's witness learns to accept), tell apart here: Binance itself answers."""
        check = self._recent_check(coin, t0)
        prices = self._prices.get(coin.symbol)
        if check is None or prices is None:
            return None
        close, sent, came = check
        # Every price relayed around the request (the relay lags Binance by a second or
        # two): the nearest to Binance's own is the one that answers for the relay.
        span = prices.between(int((sent - RELAY_LAG_S) * 1000), int(came * 1000) + 1000)
        if not span:
            return None
        nearest = min(span, key=lambda p: abs(math.log(close / p[1])))[1]
        return _apart(
            f"the exchange price RTDS relays {nearest:.8g}",
            nearest,
            f"Binance's own last price {close:.8g}",
            close,
            RELAY_TOLERANCE,
        )

    def relay_checked(self, coin: Market, t0: int) -> bool:
        """Whether Binance's own last price was read within ``RELAY_CHECK_S`` (so
        ``relay_doubt`` speaks)."""
        return self._recent_check(coin, t0) is not None

    def _recent_check(self, coin: Market, t0: int) -> tuple[float, float, float] | None:
        """(the running candle's close, when it was asked, when it came) for the hour, when
        asked within ``RELAY_CHECK_S`` and not final; else None."""
        with self._lock:
            hour = self._hours.get((coin.symbol, t0))
            if hour is None or hour.candle is None or hour.final:
                return None
            check = (hour.candle.close, hour.answered_for, hour.answered_at)
        return check if self._clock() - check[1] <= RELAY_CHECK_S else None

    def outcome(self, coin: Market, t0: int) -> bool | None:
        """UP or DOWN once the candle Binance answered is final and its open believed."""
        with self._lock:
            hour = self._hours.get((coin.symbol, t0))
            if hour is None or not hour.final or hour.candle is None:
                return None
            candle, first = hour.candle, self._first(coin, t0, hour)
        if _disagreement(coin, candle.open, first) is not None:
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
            self._first(coin, t0, hour)  # seen while the witness still keeps it
            if hour.final or now - hour.asked_at < RETRY_S:
                return
            closed_ms = hour.candle.close_ms if hour.candle is not None else None
            if closed_ms is not None and closed_ms < now * 1000 <= closed_ms + FINAL_AFTER_S * 1000:
                return  # over, not final yet: the close is asked for once it is
            # During the hour the running candle is asked for every RETRY_S too: its close is
            # Binance's own last price, the witness of the price RTDS relays (``relay_doubt``).
            hour.asked_at = now
        sent = self._clock()  # this request's own time (the pass's ``now`` is earlier)
        try:
            candle = self._klines.candle(pair_of(coin), t0, INTERVAL)
            error = None
        except (KlinesError, httpx.HTTPError) as exc:
            candle, error = None, f"{type(exc).__name__}: {exc}"[:200]
            log.warning("binance candle %s %s: %s", pair_of(coin), t0, error)
        with self._lock:
            # An answer older than the one held (a slow request overtaken) changes nothing.
            if candle is not None and sent >= hour.answered_for:
                hour.candle, hour.answered_for, hour.error = candle, sent, None
                hour.answered_at = self._clock()
            elif error is not None:
                hour.error = error
        self._forget_before(t0 - 2 * 3600)

    def _forget_before(self, t0: int) -> None:
        """Drop the hours that started before ``t0`` (their rows are gone)."""
        with self._lock:
            for key in [k for k in self._hours if k[1] < t0]:
                del self._hours[key]


def _disagreement(coin: Market, value: float, first: float | None) -> str | None:
    """Why the candle's open ``value`` is not believed against the first exchange price of
    the hour ``first``, or None (None too with no such price: the settlement's own source
    stands)."""
    if first is None:
        return None
    return _apart(
        f"the candle's open {value:.8g}",
        value,
        f"the first {coin.exchange} price of the hour {first:.8g}",
        first,
        OPEN_TOLERANCE,
    )


def _apart(what: str, value: float, against: str, other: float, tolerance: float) -> str | None:
    """The reason ``value`` (``what``) is not believed against ``other`` (``against``): they
    are more than ``tolerance`` apart in log; None when they are not."""
    apart = abs(math.log(value / other))
    if apart <= tolerance:
        return None
    bound = f"more than {tolerance * 1e4:.0f} bp"
    return f"binance: {what} is {apart * 1e4:.0f} bp from {against} ({bound})"
