"""One window's board row from its inputs: every number with where it came from and its age.

The row's ``ts`` is the time of its OLDEST input that matters (both books and the price), so
the row goes stale when any of them goes silent. A missing input leaves its fields null and
the row stale: its age counts from when it was first asked for, and is never under the stale
threshold. A crossed book is shown but stale. An input that disagrees with its witness (the
window's doubts, the spot's own) makes the row stale with the reasons in its ``suspect``:
never fresh and wrong (docs/reliability.md). Nothing here does I/O or judges anything: the
rooms before it did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from app.board.row import BoardRow, LiveDetails
from app.markets import CHAINLINK_DECIMALS, shown_price
from app.refresher.sources.polymarket.book import Quote
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.model_inputs import ModelAnswer
from app.refresher.sources.polymarket.rtds import EXCHANGE_TOPIC, SPOT_KEY, TOPICS

SPOT_VIA = f"rtds:{TOPICS[SPOT_KEY]}"  # the Chainlink kinds' price
EXCHANGE_VIA = f"rtds:{EXCHANGE_TOPIC}"  # the hourly kind's: Binance's price on RTDS


class PriceReading(Protocol):
    """What a row reads of its price's series: the Chainlink spot (``PriceSeries``) or the
    exchange price the hourly kind settles on (``ExchangeReading``)."""

    def latest(self) -> tuple[int, float] | None:
        """The newest (stamp ms, value)."""

    def information_ms(self, stamp_ms: int | None = None) -> int | None:
        """When the shown point's information was true (for its age)."""

    def frozen_since_ms(self) -> int | None:
        """The first stamp of a frozen value, else None."""

    def waiting(self) -> int:
        """How many newer points wait for a witness's verdict."""


class ExchangeReading:
    """The exchange price on RTDS (``crypto_prices``) as a row's price: ``point``, the one the
    caller chose (the newest its witness could judge), as old as its own stamp (Binance's
    time: no lag is forgiven), never frozen or waiting (its witness, the Chainlink spot,
    speaks through the row's doubts)."""

    def __init__(self, point: tuple[int, float] | None, received_ms: int | None) -> None:
        self._point = point
        self._received_ms = received_ms  # the newest price's receipt: no stamp is later

    def latest(self) -> tuple[int, float] | None:
        """The exchange price shown."""
        return self._point

    def dated(self) -> tuple[int, float] | None:
        """The exchange price shown, stamped when its information was true (for the time
        left and the age): its stamp, never later than its receipt (a stamp from the future
        neither keeps a row fresh nor shortens the window)."""
        at = self.information_ms()
        return (at, self._point[1]) if self._point is not None and at is not None else None

    def information_ms(self, stamp_ms: int | None = None) -> int | None:
        """The shown price's own stamp, at most its receipt."""
        stamp = stamp_ms if stamp_ms is not None else (self._point[0] if self._point else None)
        if stamp is None or self._received_ms is None:
            return stamp
        return min(stamp, self._received_ms)

    def frozen_since_ms(self) -> int | None:
        """Never judged frozen here."""
        return None

    def waiting(self) -> int:
        """Nothing waits: every exchange price is taken."""
        return 0


@dataclass(frozen=True)
class Instant:
    """When a row is built (the source's clock, in s and ms; the monotonic clock the books'
    confirmations use) and what the ages of missing inputs count from."""

    now: float
    now_ms: int
    mono: float
    stale_after_ms: int
    asked_at: Mapping[str, float]  # token -> when it was first watched (clock s)
    created: float  # when the source was made: the age of an input never asked for

    @property
    def never_fresh_ms(self) -> int:
        """A time old enough to be stale at once."""
        return self.now_ms - self.stale_after_ms - 1

    def waiting(self, token: str | None) -> int:
        """The time a missing input counts from: when it was first asked for, and never
        younger than the stale threshold, so the row is stale while it lacks it."""
        asked = self.asked_at.get(token, self.created) if token else self.created
        return min(int(asked * 1000), self.never_fresh_ms)

    def quote_ms(self, quote: Quote | None, token: str | None) -> int:
        """When ``quote`` was last confirmed (a crossed one: never fresh)."""
        if quote is None:
            return self.waiting(token)
        confirmed = self.now_ms - int((self.mono - quote.at) * 1000)
        return min(confirmed, self.never_fresh_ms) if quote.crossed else confirmed


def assemble_row(
    window: LiveWindow,
    up: Quote | None,
    down: Quote | None,
    spot: PriceReading,
    spot_doubts: tuple[str | None, ...],
    price_to_beat: float | None,
    model: ModelAnswer,
    at: Instant,
    source: str,
    price_via: str = SPOT_VIA,
    decimals: int = CHAINLINK_DECIMALS,
) -> BoardRow:
    """``window``'s row at ``at``: its books, its spot (and the spot's doubts), its price to
    beat (read once by the caller: the one the model was given) and the model's answer,
    each with its provenance and age; its prices to ``decimals``, their source's precision
    (a mean or an 18-decimal report shows no float noise)."""
    market = window.market
    # The point the model read (its price and age go with its P(up)), else the newest.
    latest = model.point if model.point is not None else spot.latest()
    up_token = market.up_token_id if market else None
    down_token = market.down_token_id if market else None
    # Its stamp plus the feed's normal lag (points.py).
    price_ms = spot.information_ms(latest[0] if latest else None)
    input_times = {
        "upBook": at.quote_ms(up, up_token),
        "downBook": at.quote_ms(down, down_token),
        "price": price_ms if price_ms is not None else at.waiting(None),
    }
    present = {"upBook": up is not None, "downBook": down is not None, "price": bool(latest)}
    rule = market.rule if market is not None else None
    # A row without a probability (no believable price to beat yet, too little history)
    # shows null there: no opinion rather than a wrong one; its books and price keep
    # their own ages (docs/reliability.md).
    ts = min(min(input_times.values()), at.now_ms)
    # A copy (atomic): the upkeep thread may doubt or clear while this tick reads.
    suspect = (
        *window.doubts.copy().values(),
        *(f"price: {why}" for why in spot_doubts if why),
        *_aged(spot, latest, price_ms, at),
    )
    if suspect:
        ts = min(ts, at.never_fresh_ms)  # inputs that disagree: stale, never fresh and wrong
    live = LiveDetails(
        sigma_scale=model.sigma_scale,
        twap_lookback_s=market.lookback_s if market else None,
        slug=market.slug if market else None,
        sources={
            "market": "gamma" if market else None,
            "upBook": up.via if up else None,
            "downBook": down.via if down else None,
            "price": price_via if latest else None,
            "priceToBeat": window.price_to_beat_via,
            "model": f"digital-option:{rule}" if model.p_up_pct is not None else None,
        },
        input_ages_ms={
            name: (max(0, at.now_ms - t) if present[name] else None)
            for name, t in input_times.items()
        },
        suspect=suspect,
    )
    t0, t1 = window.t0, window.span.end(window.t0)
    return BoardRow(
        symbol=window.coin.symbol,
        slot=t0,
        p_up_pct=model.p_up_pct,
        p_down_pct=model.p_down_pct,
        up_bid=up.bid if up else None,
        up_ask=up.ask if up else None,
        down_bid=down.bid if down else None,
        down_ask=down.ask if down else None,
        up_token_id=up_token,
        down_token_id=down_token,
        rem_secs=round(max(0.0, t1 - at.now), 3),
        ts=ts,
        window_start=t0,
        window_end=t1,
        price=shown_price(latest[1], decimals) if latest else None,
        price_to_beat=shown_price(price_to_beat, decimals) if price_to_beat is not None else None,
        sigma=model.sigma,
        settlement=rule,
        source=source,
        live=live,
        model_p_up=model.p_up,
        window=window.span.name,
    )


def _aged(
    spot: PriceReading, latest: tuple[int, float] | None, price_ms: int | None, at: Instant
) -> tuple[str, ...]:
    """Why the price is stale by its age alone (no witness contradicted it): a value frozen
    while the exchange moved, or no newer point believed (and how many newer ones wait for a
    witness's verdict); nothing while it is fresh."""
    if latest is None or price_ms is None or at.now_ms - price_ms <= at.stale_after_ms:
        return ()
    age_s = (at.now_ms - price_ms) / 1000
    frozen_ms = spot.frozen_since_ms()
    if frozen_ms is not None:
        held_s = (at.now_ms - frozen_ms) / 1000
        return (
            f"price: the spot {latest[1]:.8g} has not moved for {held_s:.1f} s while the "
            "exchange price moved",
        )
    waiting = spot.waiting()
    if waiting:
        return (
            f"price: no newer spot point believed for {age_s:.1f} s; {waiting} newer wait for"
            " a witness's verdict (the exchange price or the TWAP report of their second)",
        )
    return (f"price: no newer spot point believed for {age_s:.1f} s",)
