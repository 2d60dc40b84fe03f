"""The markets' domain: the windows up/down markets settle over, and the markets.

A market is data (``Market``): what differs between BTC, ETH, SOL and XRP lives in one table
here, and the setting ``SYMBOLS`` picks the board's rows from it (``parse_symbols``). A
window's length is data too (``Span``: 5 and 15 minutes), picked by ``WINDOWS``
(``parse_windows``); ``WINDOW_S`` and ``window_start`` are the 5-minute window's, the
contract's board. This module imports nothing of the package, so the web app, the refresher,
calibration and the backtest all import it downwards.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

WINDOW_S = 300


def window_start(t: float) -> int:
    """Start (unix seconds) of the 5-minute window containing ``t``: floor, never ceil."""
    return math.floor(t / WINDOW_S) * WINDOW_S


@dataclass(frozen=True)
class Span:
    """A window's length as every part of the service needs it: its name (``5m``: the
    ``?window=`` value and the slugs' tag), its seconds, and the site's name for it."""

    name: str
    seconds: int
    site_variant: str  # ``variant=`` of the site's crypto-price endpoint

    def start(self, t: float) -> int:
        """Start (unix seconds) of this span's window containing ``t``: floor, never ceil."""
        return math.floor(t / self.seconds) * self.seconds


SPANS: dict[str, Span] = {
    span.name: span for span in (Span("5m", 300, "fiveminute"), Span("15m", 900, "fifteen"))
}
FIVE_MINUTES = SPANS["5m"]  # the contract's board


def _names(text: str, known: Collection[str], what: str, upper: bool) -> list[str]:
    """The names of a comma-separated setting (case-insensitive, in order), each ``known``;
    ``ValueError`` naming the bad value for an unknown, repeated or empty one."""
    names = [(part.strip().upper() if upper else part.strip().lower()) for part in text.split(",")]
    listed = ", ".join(known)
    if not text.strip() or any(not name for name in names):
        raise ValueError(f"expected comma-separated {what}s among {listed}, got {text!r}")
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} in {text!r} (known: {listed})")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} given more than once in {text!r}")
    return names


# Polymarket's other up/down horizons: known (app/horizons.py, docs/horizons.md), not served.
NOT_SERVED_YET = ("1h", "4h")


def parse_windows(text: str) -> tuple[Span, ...]:
    """The spans of a ``WINDOWS`` value (comma-separated, case-insensitive, in board order);
    ``ValueError`` naming the bad value for an unknown, repeated or empty one, or for a
    horizon Polymarket lists that the board does not serve yet."""
    for part in text.split(","):
        if part.strip().lower() in NOT_SERVED_YET:
            raise ValueError(
                f"window {part.strip()!r} in {text!r} is not served yet (served: "
                f"{', '.join(SPANS)}; the hourly and 4-hour markets: docs/horizons.md)"
            )
    return tuple(SPANS[name] for name in _names(text, SPANS, "window", upper=False))


@dataclass(frozen=True)
class Market:
    """One coin's 5-minute up/down market, as every part of the service needs it."""

    symbol: str  # the board row's ``symbol`` (upper case)
    chainlink: str  # its Chainlink stream on RTDS (``btc/usd``): the settlement source
    series: str  # the Gamma series' slug
    # The largest |log return| a point of its Chainlink stream is believed to move within one
    # second (the plausibility bound's base, docs/reliability.md), from the coin's real 1 s data.
    jump_base: float
    start_price: float  # the simulated source's first price
    sigma_per_year: float  # the simulated source's volatility (annualised)
    # The coin's exchange price on RTDS (topic ``crypto_prices``, Binance's pair in lower
    # case): the spot's witness, never the settlement value (docs/reliability.md).
    exchange: str
    # The largest |log move| of its settlement price believed within one window (more over a
    # longer gap: times the square root of the windows between the points). A level beyond it
    # is never believed, whatever confirms it: another coin's price under this coin's name.
    window_move: float

    @property
    def slug_prefix(self) -> str:
        """``btc-updown-5m-``: a window's slug is this and its start in unix seconds."""
        return f"{self.symbol.lower()}-updown-5m-"

    def slug(self, window_start: int) -> str:
        """The Gamma slug of the 5-minute window starting at ``window_start``."""
        return f"{self.slug_prefix}{window_start}"

    def span_slug(self, window_start: int, span: Span) -> str:
        """The Gamma slug of ``span``'s window starting at ``window_start``
        (``btc-updown-15m-<start>``)."""
        return f"{self.symbol.lower()}-updown-{span.name}-{window_start}"

    @property
    def key(self) -> str:
        """The lower-case name used in paths, metrics and ``/api/health``'s ``symbols``."""
        return self.symbol.lower()


# Real largest 1 s moves, 2026-03-12..18 (docs/reliability.md): BTC 34 bp, ETH 49 bp, SOL
# 79 bp, XRP 106 bp (146 bp to the farthest trade inside a second): each bound about 3x its own.
# A window's move (a choice): 10 % for BTC up to 25 % for XRP, a violent crash's 5 minutes
# several times over, and far inside the factor of 30 to 40,000 between two coins' prices.
MARKETS: dict[str, Market] = {
    market.symbol: market
    for market in (
        Market("BTC", "btc/usd", "btc-up-or-down-5m", 0.01, 95_000.0, 0.50, "btcusdt", 0.10),
        Market("ETH", "eth/usd", "eth-up-or-down-5m", 0.015, 3_500.0, 0.65, "ethusdt", 0.15),
        Market("SOL", "sol/usd", "sol-up-or-down-5m", 0.025, 180.0, 0.80, "solusdt", 0.20),
        Market("XRP", "xrp/usd", "xrp-up-or-down-5m", 0.03, 2.5, 0.80, "xrpusdt", 0.25),
    )
}


def parse_symbols(text: str) -> tuple[Market, ...]:
    """The markets of a ``SYMBOLS`` value (comma-separated, case-insensitive, in board order);
    ``ValueError`` naming the bad value for an unknown, repeated or empty one."""
    return tuple(MARKETS[name] for name in _names(text, MARKETS, "symbol", upper=True))
