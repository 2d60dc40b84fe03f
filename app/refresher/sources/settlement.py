"""What a window kind settles on, behind one interface (issue 49, point 2).

Every Chainlink kind (5 and 15 minutes, 4 hours) settles on its coin's Chainlink stream, by the
rule its market states (spot or TWAP): the live source's spot series and price-to-beat latch
(``polymarket/price_to_beat.py``) are that source today. The hourly kind settles on Binance's
1-hour candle of the pair (``binance/candle_settlement.py``). A settlement source answers the
same four questions for any kind: the price now, the window's open (its price to beat, with
where it came from and why it is doubted), the outcome once the window is over, and which
witness checks it. It is asked from the upkeep thread for anything that needs the network
(``upkeep``); a row reads only what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.markets import Market

__all__ = ["Opening", "SettlementSource"]


@dataclass(frozen=True)
class Opening:
    """A window's open as its settlement source knows it: ``value`` (None while unknown),
    ``via`` (where it came from: the row's ``sources.priceToBeat``) and ``doubt`` (why it is
    not believed: the row stays stale with it; None when believed or simply unknown)."""

    value: float | None
    via: str | None = None
    doubt: str | None = None

    @property
    def believed(self) -> float | None:
        """The value when it is known and not doubted, else None."""
        return self.value if self.doubt is None else None


class SettlementSource(Protocol):
    """What one window kind settles on (``app.markets.Span.settlement`` names it)."""

    name: str  # ``chainlink`` or ``binance-candle``
    witness: str  # what checks it (shown in the reasons and docs)

    def price_now(self, coin: Market) -> tuple[int, float] | None:
        """The newest (stamp ms, price) of ``coin`` on this source, None before the first."""

    def opening(self, coin: Market, t0: int) -> Opening:
        """The open of ``coin``'s window starting at ``t0``, as known now (no I/O)."""

    def outcome(self, coin: Market, t0: int) -> bool | None:
        """UP (True) or DOWN of ``coin``'s window starting at ``t0`` once final, else None
        (no I/O)."""

    def upkeep(self, coin: Market, t0: int, now: float) -> None:
        """Ask the network what the window needs at ``now`` (its open once it has begun, its
        outcome once over), at most as often as the source allows."""
