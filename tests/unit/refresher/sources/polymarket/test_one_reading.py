"""A row's price, its P(up) and its age come from one reading of the spot.

The RTDS thread adds points while a tick builds its rows. Before, the model read the
volatility (whose last 1-second return continues into P(up)), then the newest point, and the
row read the newest point again: a point arriving in between put the newer price beside a
last return that ended a second earlier (or beside a P(up) priced on the older point). Seen
in CI under load as a fresh P(up) ten points off the exact model's in the second half of an
honest move (docs/reliability.md). Here the point arrives at exactly that moment.
"""

from __future__ import annotations

import math

from app.markets import MARKETS, shown_price
from app.refresher.sources.polymarket.book import Quote
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.model_inputs import answer
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S, PriceSeries
from app.refresher.sources.polymarket.row_assembly import Instant, assemble_row
from app.refresher.volatility import Volatility
from harness.spans import FIVE_MINUTES

T0 = 1_800_000_000 - 1_800_000_000 % 300
NOW = T0 + 200.0
MONO = 5_000.0
MARKET = WindowMarket(
    T0, f"btc-updown-5m-{T0}", "111", "222", "spot", None, "0x" + "c" * 64, None, FIVE_MINUTES
)  # fmt: skip
PRICE_TO_BEAT = 100_000.0


def _price(second: int) -> float:
    """A walk of alternating moves, then a fall whose 1-second returns shrink (the second
    half of an honest move): each second's return differs from the one before. To the
    stream's decimals, as it writes its values."""
    if second < 190:
        move = 2e-4 * (1 if second % 2 else -1) * ((second % 7) + 1) / 4
    else:
        move = -8e-4 * (1.0 - 0.5 ** (second - 189))
    return shown_price(PRICE_TO_BEAT * math.exp(move))


class ArrivingSeries(PriceSeries):
    """A series into which the RTDS thread adds ``arriving`` just after the volatility
    was read (the interleaving under load)."""

    arriving: tuple[int, float] | None = None

    def volatility(self) -> Volatility | None:
        """The estimate, then the point arrives."""
        estimate = super().volatility()
        if self.arriving is not None:
            point, self.arriving = self.arriving, None
            self.add(*point)
        return estimate


def _series(cls: type[PriceSeries], last: int) -> PriceSeries:
    spot = cls(SPOT_HISTORY_S, clock=lambda: NOW)
    for second in range(T0 - 200, T0 + last + 1):
        spot.add(second * 1000, _price(second - T0))
    return spot


def _row(spot: PriceSeries) -> dict[str, object]:
    window = LiveWindow(MARKETS["BTC"], T0, FIVE_MINUTES, market=MARKET)
    up = Quote(0.55, 0.56, MONO - 0.2, "clob-ws")
    down = Quote(0.44, 0.45, MONO - 0.2, "clob-ws")
    at = Instant(NOW, int(NOW * 1000), MONO, 2_000, {}, NOW - 60)
    model = answer(MARKET, PRICE_TO_BEAT, spot)
    return assemble_row(window, up, down, spot, (), PRICE_TO_BEAT, model, at, "pm").as_json()


def test_a_point_arriving_mid_tick_leaves_price_and_p_up_of_one_reading() -> None:
    racing = _series(ArrivingSeries, 195)
    assert isinstance(racing, ArrivingSeries)
    racing.arriving = ((T0 + 196) * 1000, _price(196))
    row = _row(racing)

    # What the row must equal: the same tick on a series holding exactly the points up to the
    # row's own price (no point arriving), whichever point that is.
    shown = row["price"]
    assert shown in (_price(195), _price(196)), shown
    upto = 195 if shown == _price(195) else 196
    calm = _row(_series(PriceSeries, upto))
    assert row["price"] == calm["price"]
    assert row["p_up_pct"] == calm["p_up_pct"], (row["p_up_pct"], calm["p_up_pct"])
    assert row["ts"] == calm["ts"]
