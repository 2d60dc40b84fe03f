"""The live source's hourly rows: windows settled on Binance's 1-hour candle (issue 49).

Their price is the exchange price RTDS relays on ``crypto_prices`` (``ExchangeReading``),
their price to beat the candle's open as Binance answers it (``BinanceCandleSettlement``),
both doubted as their witnesses say: the candle's open by the first exchange price of the
hour, the exchange price by the coin's Chainlink spot (the two are each other's witness:
while they disagree one of them is wrong, and the row is stale with the reason). The model is
the same digital option on the spot rule, its volatility the Chainlink spot's over the time
left (``model_inputs.candle_answer``). The windows, books and identity checks are the other
kinds' (``Windows``, ``Books``, ``Doubts``).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from app.board.row import BoardRow
from app.markets import BINANCE_CANDLE, Market, Span
from app.refresher.sources.binance.candle_settlement import BinanceCandleSettlement
from app.refresher.sources.binance.klines import KlinesClient
from app.refresher.sources.polymarket import model_inputs
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.discovery import Windows
from app.refresher.sources.polymarket.doubts import Doubts
from app.refresher.sources.polymarket.row_assembly import (
    EXCHANGE_VIA,
    ExchangeReading,
    Instant,
    assemble_row,
)
from app.refresher.sources.polymarket.rtds import SPOT_KEY, RtdsFeed

SPOT_SILENT_MS = 5_000  # no believed spot point this long: the spot cannot check the price
UNCHECKED = (
    "price: nothing checks the exchange price (the Chainlink spot silent or not yet compared "
    "with it, and Binance's own last price not read for 30 s)"
)


class HourlyRows:
    """The candle's settlement source and the rows of the kinds that settle on it."""

    def __init__(
        self,
        binance_url: str,
        spans: tuple[Span, ...],
        markets: tuple[Market, ...],
        rtds: RtdsFeed,
        clock: Callable[[], float],
        http: httpx.Client,
    ) -> None:
        self.klines = KlinesClient(binance_url, http=http)  # the source's: its deadline, tape
        prices = {coin.symbol: rtds.witnesses[coin.exchange] for coin in markets}
        self.settlement = BinanceCandleSettlement(self.klines, prices, clock)
        self._spans = tuple(span for span in spans if span.settlement == BINANCE_CANDLE)
        self._markets = markets
        self._rtds = rtds
        self.name = "polymarket"  # the live source's (``PolymarketSource.name``)

    @classmethod
    def serving(
        cls,
        binance_url: str | None,
        spans: tuple[Span, ...],
        markets: tuple[Market, ...],
        rtds: RtdsFeed,
        clock: Callable[[], float],
        http: httpx.Client,
    ) -> HourlyRows | None:
        """The part for ``spans`` when one settles on Binance's candle, else None;
        ``ValueError`` when one does and no Binance address is given."""
        if not any(span.settlement == BINANCE_CANDLE for span in spans):
            return None
        if not binance_url:
            raise ValueError("the hourly windows settle on Binance: BINANCE_REST_URL is needed")
        return cls(binance_url, spans, markets, rtds, clock, http)

    def upkeep(self, now: float) -> None:
        """Each coin's candle of the current hour: its open, its close once over."""
        for span in self._spans:
            for coin in self._markets:
                self.settlement.upkeep(coin, span.start(now), now)

    def row(
        self, coin: Market, span: Span, at: Instant, windows: Windows, books: Books, doubts: Doubts
    ) -> BoardRow:
        """``coin``'s row of its hourly window at ``at``."""
        window = windows.get(coin, span.start(at.now), span)
        market = window.market
        up = books.quote(market.up_token_id) if market is not None else None
        down = books.quote(market.down_token_id) if market is not None else None
        doubts.judge_identity(window, market)
        opening = self.settlement.opening(coin, window.t0)
        window.price_to_beat, window.price_to_beat_via = opening.believed, opening.via
        spot = self._rtds.of(coin)[SPOT_KEY]
        witness = self._rtds.witnesses[coin.exchange]
        spot_point = spot.latest()  # read once: the shown price and its check agree on it
        silent = spot_point is None or at.now_ms - spot_point[0] > SPOT_SILENT_MS
        # The price in force at the newest believed spot point: the newest it can have
        # checked (a second or two older than the newest received); the newest when silent.
        if spot_point is None or silent:
            shown = witness.newest()
        else:
            shown = witness.in_force_at(spot_point[0])
        exchange = ExchangeReading(shown, witness.received_ms())
        answer = model_inputs.candle_answer(market, opening.believed, exchange.dated(), spot)
        # Neither the spot (silent, or its basis to the exchange not learnt) nor Binance's own
        # last price (not read for a while) can check the relayed price: not believed alone.
        unchecked = (silent or not witness.learned) and not self.settlement.relay_checked(
            coin, window.t0
        )
        found = (
            opening.doubt,
            self.settlement.relay_doubt(coin, window.t0),
            spot.doubt(),
            witness.contradicted_by(spot_point),
            UNCHECKED if unchecked else None,
        )
        return assemble_row(
            window, up, down, exchange, found, opening.believed, answer, at, self.name,
            price_via=EXCHANGE_VIA, decimals=coin.exchange_decimals,
        )  # fmt: skip

    def close(self) -> None:
        """Nothing of its own to close: the source's HTTP client carries its requests."""
        self.klines.close()
