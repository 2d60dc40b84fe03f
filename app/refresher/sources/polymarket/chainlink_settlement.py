"""The Chainlink kinds' settlement source (5 and 15 minutes, 4 hours), behind the interface
every kind's settlement answers (``app/refresher/sources/settlement.py``).

Each window settles on its coin's Chainlink stream as RTDS relays it, by the rule its market
states (the spot, or its 60 s / 30 s TWAP): the price now is the spot series' newest believed
point; the open is the price to beat latched at T0 (``price_to_beat.py``: the stream's own
report or mean, else its witnessed fallbacks, else a journal's record after a restart), with
the doubt its witness raised; the outcome is the next window's open against this one's, both
the stream's own values (each window's price to beat is the previous one's final price). The
witnesses are the exchange price on ``crypto_prices`` and, for the spot, the TWAP reports
(``witness.py``, ``twap_witness.py``). The network is asked only in ``upkeep``.
"""

from __future__ import annotations

from app.markets import CHAINLINK, Market, Span
from app.refresher.sources.polymarket.discovery import LiveWindow, Windows
from app.refresher.sources.polymarket.latch_journal import JOURNAL_VIA
from app.refresher.sources.polymarket.price_to_beat import PRICE_TO_BEAT, PriceToBeat
from app.refresher.sources.polymarket.rtds import SPOT_KEY, RtdsFeed
from app.refresher.sources.settlement import Opening


class ChainlinkSettlement:
    """``span``'s settlement on the Chainlink stream of each coin."""

    name = CHAINLINK
    witness = "the exchange price on crypto_prices and the stream's TWAP reports"

    def __init__(
        self, span: Span, windows: Windows, price_to_beat: PriceToBeat, rtds: RtdsFeed
    ) -> None:
        if span.settlement != CHAINLINK:
            raise ValueError(f"the {span.name} windows do not settle on Chainlink")
        self.span = span
        self._windows = windows
        self._price_to_beat = price_to_beat
        self._rtds = rtds

    @classmethod
    def of(
        cls, spans: tuple[Span, ...], windows: Windows, price_to_beat: PriceToBeat, rtds: RtdsFeed
    ) -> dict[str, ChainlinkSettlement]:
        """One per kind of ``spans`` that settles on Chainlink, by the kind's name."""
        return {
            span.name: cls(span, windows, price_to_beat, rtds)
            for span in spans
            if span.settlement == CHAINLINK
        }

    def price_now(self, coin: Market) -> tuple[int, float] | None:
        """The newest believed point of ``coin``'s Chainlink spot."""
        return self._rtds.of(coin)[SPOT_KEY].latest()

    def opening(self, coin: Market, t0: int) -> Opening:
        """The price to beat of ``coin``'s window starting at ``t0`` as latched so far, and
        why it is doubted (a report its witness refused)."""
        window = self._windows.find(coin, t0, self.span)
        return opening_of(window) if window is not None else Opening(None)

    def outcome(self, coin: Market, t0: int) -> bool | None:
        """UP when the next window's price to beat (this one's final price) is at or above
        this one's, both the stream's own values (never a fallback's) and neither doubted;
        None before."""
        this = _own(self._windows.find(coin, t0, self.span))
        after = _own(self._windows.find(coin, self.span.end(t0), self.span))
        if this is None or after is None:
            return None
        return after >= this

    def upkeep(self, coin: Market, t0: int, now: float) -> None:
        """The window's price to beat from the stream, else its fallbacks (the site, the
        journal): the upkeep thread's."""
        window = self._windows.get(coin, t0, self.span)
        if window.market is not None:
            self._price_to_beat.upkeep(window, now)

    def latch(self, window: LiveWindow, now: float) -> None:
        """Latch from the points already received (no I/O: while a row is built)."""
        if window.market is not None:
            self._price_to_beat.latch(window, now)


def opening_of(window: LiveWindow) -> Opening:
    """``window``'s price to beat as latched so far, with the doubt its witness raised (the
    row's reading: it holds the window already)."""
    return Opening(window.price_to_beat, window.price_to_beat_via, window.doubts.get(PRICE_TO_BEAT))


def _own(window: LiveWindow | None) -> float | None:
    """``window``'s price to beat when it is the stream's own value (latched here, or kept
    by a refresher that latched it) and not doubted."""
    if window is None or window.price_to_beat is None or PRICE_TO_BEAT in window.doubts:
        return None
    via = window.price_to_beat_via or ""
    return window.price_to_beat if via.startswith(("rtds:", JOURNAL_VIA + "rtds:")) else None
