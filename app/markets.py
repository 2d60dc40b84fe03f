"""The markets' domain: the windows up/down markets settle over, and the markets.

A market is data (``Market``): what differs between BTC, ETH, SOL and XRP lives in one table
here, and the setting ``SYMBOLS`` picks the board's rows from it (``parse_symbols``). A
window kind is data too (``Span``: its boundaries, slugs, settlement, checkpoints, model
horizons and chart step), picked by ``WINDOWS`` (``parse_windows``); ``DEFAULT_SPAN`` is the
contract's 5-minute board. This module imports only ``app.horizons`` (which imports nothing
of the package), so the web app, the refresher, calibration and the backtest all import it
downwards.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from app import horizons

# How a kind's windows are bounded, and named on Gamma.
UTC_FIXED = "utc-fixed"  # fixed-length windows on multiples of their length in UTC
EASTERN_BLOCKS = "eastern-4h"  # 00, 04, ... 20 h America/New_York (``app.horizons``)
UPDOWN_SLUG = "updown"  # ``btc-updown-5m-<start>``
HOURLY_WORDS_SLUG = "words"  # ``bitcoin-up-or-down-march-29-2026-12am-et`` (and yearless)
# What a kind's windows settle on (``settlement`` in docs/horizons.md).
CHAINLINK = "chainlink"  # the coin's Chainlink stream on RTDS, by the market's own rule
BINANCE_CANDLE = "binance-candle"  # Binance's 1-hour candle of the pair: close >= open


@dataclass(frozen=True)
class Span:
    """A window kind, as every part of the service needs it: one entry of ``SPANS``.

    ``name`` is the ``?window=`` value and the up/down slugs' tag; ``seconds`` its length
    (a 4-hour window across a change of clocks is 3 or 5 real hours: ``end``);
    ``site_variant`` the site's crypto-price ``variant=`` (None: the site is not asked);
    ``boundaries`` and ``slug_scheme`` how its windows are bounded and named; ``settlement``
    what they settle on; ``rems`` the track record's checkpoints (seconds left);
    ``factor_horizons`` the model's horizons measured on pseudo-windows of this length
    (``app.refresher.volatility.settlement``); ``trail_step_s`` the window chart's step;
    ``served`` whether ``WINDOWS`` may name it yet."""

    name: str
    seconds: int
    site_variant: str | None
    rems: tuple[int, ...]
    factor_horizons: tuple[int, ...] = ()
    trail_step_s: int = 1
    settlement: str = CHAINLINK
    boundaries: str = UTC_FIXED
    slug_scheme: str = UPDOWN_SLUG
    served: bool = True

    def start(self, t: float) -> int:
        """Start (unix seconds) of this kind's window containing ``t``: floor, never ceil."""
        if self.boundaries == EASTERN_BLOCKS:
            return horizons.eastern_block_start(t)
        return math.floor(t / self.seconds) * self.seconds

    def end(self, t0: int) -> int:
        """End (unix seconds) of this kind's window starting at ``t0``: the next one's start."""
        if self.boundaries == EASTERN_BLOCKS:
            return horizons.eastern_block_end(t0)
        return t0 + self.seconds

    @property
    def label(self) -> str:
        """The page's name for it: ``5 min``, ``15 min``, ``1 hour``, ``4 hours``."""
        minutes = self.seconds // 60
        if minutes < 60:
            return f"{minutes} min"
        hours = minutes // 60
        return f"{hours} hour{'s' if hours > 1 else ''}"

    @property
    def adjective(self) -> str:
        """The page's "<kind> window": ``5-minute``, ``15-minute``, ``1-hour``, ``4-hour``."""
        minutes = self.seconds // 60
        return f"{minutes}-minute" if minutes < 60 else f"{minutes // 60}-hour"

    @property
    def longest_s(self) -> int:
        """The longest a window of this kind lasts (an autumn 4-hour block: 5 hours)."""
        return self.seconds + (horizons.HOUR_S if self.boundaries == EASTERN_BLOCKS else 0)

    def slugs(self, symbol: str, t0: int) -> tuple[str, ...]:
        """The Gamma slugs of ``symbol``'s window starting at ``t0``, the current form first
        (the hourly markets had no year in their slugs until March 2026)."""
        if self.slug_scheme == HOURLY_WORDS_SLUG:
            return horizons.hourly_slugs(symbol, t0)
        return (f"{symbol.lower()}-updown-{self.name}-{t0}",)


# One entry per kind Polymarket lists (facts and sources: docs/horizons.md). The 5-minute
# checkpoints are the contract's. The hourly and 4-hour kinds measure no factor horizons of
# their own: beyond the longest served kind's, the factor of its longest horizon holds (the
# feed's history is too short for pseudo-windows of hours; docs/horizons.md).
SPANS: dict[str, Span] = {
    span.name: span
    for span in (
        Span(
            "5m",
            300,
            "fiveminute",
            rems=(290, 240, 180, 120, 90, 60, 30, 15, 5),
            factor_horizons=(5, 15, 30, 60, 120, 180, 290),
        ),
        Span(
            "15m",
            900,
            "fifteen",
            rems=(870, 720, 600, 480, 300, 180, 120, 60, 30, 15, 5),
            # Beyond 290 s only: its shorter times left keep the 5-minute pseudo-windows'.
            factor_horizons=(420, 600),
            trail_step_s=3,
        ),
        Span(
            "1h",
            horizons.HOUR_S,
            None,
            rems=(3540, 3000, 2400, 1800, 1200, 600, 300, 120, 60, 30, 15, 5),
            trail_step_s=12,
            settlement=BINANCE_CANDLE,
            slug_scheme=HOURLY_WORDS_SLUG,
        ),
        Span(
            "4h",
            horizons.BLOCK_HOURS * horizons.HOUR_S,
            None,
            rems=(14100, 12600, 10800, 7200, 3600, 1800, 900, 300, 120, 60, 30, 15, 5),
            trail_step_s=48,
            boundaries=EASTERN_BLOCKS,
        ),
    )
}
DEFAULT_SPAN = SPANS["5m"]  # the contract's board (``/latest`` without ``window``)


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


def parse_windows(text: str) -> tuple[Span, ...]:
    """The spans of a ``WINDOWS`` value (comma-separated, case-insensitive, in board order);
    ``ValueError`` naming the bad value for an unknown, repeated or empty one, or for a
    horizon Polymarket lists that the board does not serve yet."""
    served = {name: span for name, span in SPANS.items() if span.served}
    for part in text.split(","):
        known = SPANS.get(part.strip().lower())
        if known is not None and not known.served:
            raise ValueError(
                f"window {part.strip()!r} in {text!r} is not served yet (served: "
                f"{', '.join(served)}; the hourly and 4-hour markets: docs/horizons.md)"
            )
    return tuple(served[name] for name in _names(text, served, "window", upper=False))


@dataclass(frozen=True)
class Market:
    """One coin's up/down markets, as every part of the service needs them."""

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
    # Its exchange pair's price tick in decimals (Binance: 0.01 for BTC, ETH, SOL; 0.0001 for
    # XRP): an hourly row's prices, which are that exchange's, are shown to it.
    exchange_decimals: int = 2

    def slug(self, window_start: int, span: Span) -> str:
        """The Gamma slug (current form) of ``span``'s window starting at ``window_start``
        (``btc-updown-15m-<start>``)."""
        return span.slugs(self.symbol, window_start)[0]

    @property
    def key(self) -> str:
        """The lower-case name used in paths, metrics and ``/api/health``'s ``symbols``."""
        return self.symbol.lower()


# The decimals a Chainlink stream's price is shown to (the board's JSON and the record's CSV):
# its values as RTDS relays them carry at most 8 (a hundred-millionth of a dollar); a mean
# of them (a TWAP price to beat) or an 18-decimal report is rounded there, never float noise.
CHAINLINK_DECIMALS = 8


def shown_price(value: float, decimals: int = CHAINLINK_DECIMALS) -> float:
    """``value`` as the board shows it: rounded to its source's ``decimals``."""
    return round(value, decimals)


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
        Market("XRP", "xrp/usd", "xrp-up-or-down-5m", 0.03, 2.5, 0.80, "xrpusdt", 0.25, 4),
    )
}


def price_decimals(symbol: str, span: Span) -> int:
    """The decimals a price of ``symbol``'s ``span`` windows is shown to: its settlement
    source's (an hourly window's exchange tick, else the Chainlink stream's)."""
    market = MARKETS.get(symbol)
    if span.settlement == BINANCE_CANDLE and market is not None:
        return market.exchange_decimals
    return CHAINLINK_DECIMALS


def parse_symbols(text: str) -> tuple[Market, ...]:
    """The markets of a ``SYMBOLS`` value (comma-separated, case-insensitive, in board order);
    ``ValueError`` naming the bad value for an unknown, repeated or empty one."""
    return tuple(MARKETS[name] for name in _names(text, MARKETS, "symbol", upper=True))
