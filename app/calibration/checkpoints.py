"""A window's checkpoints: P(up) and the market's UP mid at fixed times left, from boards.

A window's checkpoint at ``rem`` seconds left is the first board with ``rem - GRACE_S <
rem_secs <= rem`` (a window joined late has no earlier checkpoints: missing, never filled
in). ``pUp`` is the model's own fraction, ``marketMid`` the mid of UP's best bid and ask
(None when a side is empty); both None when the row was stale at that board. Rows are taken
typed (``BoardRow``), as the refresher and the backtest build them, never as their JSON.

Each window kind has its own checkpoints (``Span.rems``, app/markets.py: ``REMS`` for the
5-minute windows, the contract's) and its own end (``Span.end``). A window is
named by its slug, which names the market and the length (``btc-updown-15m-...``), so a
15-minute row can never mix into a 5-minute window's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.calibration import outcomes
from app.markets import DEFAULT_SPAN, MARKETS, SPANS, Span

if TYPE_CHECKING:
    # For the annotations only: the board's package imports the schemas, which import this
    # package (app.calibration.periods), so a real import would knot the folders together.
    from app.board.row import BoardRow

REMS = DEFAULT_SPAN.rems  # the 5-minute windows' (the contract's)
GRACE_S = 2.0


@dataclass
class Window:
    """What the boards said about one window."""

    slug: str
    window_start: int
    span: Span  # the window's kind
    rule: str | None = None
    lookback_s: int | None = None  # a TWAP's lookback (the row's ``twapLookbackS``)
    price_to_beat: float | None = None
    up_token: str | None = None
    down_token: str | None = None
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)
    fresh: list[int] = field(default_factory=list)  # checkpoints taken, not yet stored
    # A simulated window's market (its next window's price to beat is its final price, as
    # the walk latched it), or None (a live one: ``next_slug`` from its slug only).
    simulated_symbol: str | None = None

    @property
    def end(self) -> int:
        """When the window ends (epoch seconds)."""
        return self.span.end(self.window_start)

    @property
    def rems(self) -> tuple[int, ...]:
        """The times left this window is scored at (its length's)."""
        return self.span.rems

    @property
    def next_slug(self) -> str | None:
        """The slug of the same market's next window (a slug is its market's prefix and its
        start; a simulated window's, whatever its kind's slugs); None for a live slug not of
        that form (a live hourly window: its next hour's open is not its candle's close)."""
        start = str(self.window_start)
        if self.slug.endswith(start):
            return self.slug.removesuffix(start) + str(self.end)
        if self.simulated_symbol is not None:
            following = self.span.slugs(self.simulated_symbol, self.end)[0]
            # The repeated autumn hour shares its name in words: never its own successor.
            return following if following != self.slug else None
        return None


def _mid(bid: float | None, ask: float | None) -> float | None:
    if bid is None or ask is None:
        return None
    return (float(bid) + float(ask)) / 2


def track(
    windows: dict[str, Window], row: BoardRow, at: float, stale_after_ms: int
) -> Window | None:
    """Take the board row built at ``at`` (with the model's own P(up), ``model_p_up``) into
    its window; the window, or None for a row of no window (or of a length not scored)."""
    span = SPANS.get(row.window)
    if span is None:
        return None
    start = row.window_start
    live = row.live
    # A live row names its market (None while it is unknown: no window to speak of); the
    # simulated source's rows have no slug, and their window is named as the market's would be.
    if live is not None:
        slug = live.slug
    else:
        market = MARKETS.get(row.symbol)
        slug = market.slug(start, span) if market is not None else None
    if slug is None:
        return None
    window = windows.get(slug)
    if window is None:
        simulated = row.symbol if live is None else None
        window = windows[slug] = Window(slug, start, span, simulated_symbol=simulated)
    window.rule = row.settlement or window.rule
    window.lookback_s = (live.twap_lookback_s if live is not None else None) or window.lookback_s
    if row.price_to_beat is not None:
        window.price_to_beat = float(row.price_to_beat)
    window.up_token = row.up_token_id or window.up_token
    window.down_token = row.down_token_id or window.down_token
    rem = float(row.rem_secs)
    stale = at * 1000 - float(row.ts) > stale_after_ms
    for checkpoint in window.rems:
        if checkpoint not in window.checkpoints and checkpoint - GRACE_S < rem <= checkpoint:
            window.checkpoints[checkpoint] = {
                "remS": checkpoint,
                "pUp": None if stale else row.model_p_up,
                "marketMid": None if stale else _mid(row.up_bid, row.up_ask),
            }
            window.fresh.append(checkpoint)
    return window


def settled(
    window: Window, windows: Mapping[str, Window], winners: dict[str, bool]
) -> tuple[str | None, str | None]:
    """How ``window`` settled (``app.calibration.outcomes``): its final price is the price to
    beat of the SAME market's window after it (``windows``: by slug, which names the market;
    never by start alone, which several markets share)."""
    following = windows.get(window.next_slug) if window.next_slug else None
    final = following.price_to_beat if following is not None else None
    return outcomes.outcome(
        window.up_token, window.down_token, winners, window.price_to_beat, final
    )
