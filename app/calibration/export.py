"""The recorded windows of one market, a page at a time, newest first (``/windows``).

Paged in SQL by the window's start (keyset: ``window_start < before``, newest first,
``limit + 1`` rows to know whether another page follows), so a page costs the same at any
depth of a year of windows and nothing loads the whole table. One record's windows
(``store.Track``: a source's, of one market and one length) are an index range of (source,
symbol, window, window_start); within one record a start names one window (its slug is the
market's and the length's prefix and the start), so a start alone is an exact cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.calibration.store import Track, checkpoints, windows
from app.markets import SPANS, Span, price_decimals, shown_price

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True)
class WindowQuery:
    """Which windows: one record (source, market, length), starting in [start, end)."""

    track: Track
    start: int | None = None  # the earliest window start (inclusive), unix seconds
    end: int | None = None  # the latest window start (exclusive), unix seconds


@dataclass(frozen=True)
class Page:
    """One page of windows, newest first; ``before``: the next page's bound, None at the end."""

    windows: list[dict[str, Any]]
    before: int | None


def _price(value: float | None, decimals: int) -> float | None:
    """A stored price to its source's decimals (a record older than issue 50 kept float
    noise)."""
    return None if value is None else shown_price(value, decimals)


def _window(row: Any, span: Span, decimals: int) -> dict[str, Any]:
    """A stored window (of the kind ``span``) in the export's shape (its checkpoints still to
    come), its prices to ``decimals``."""
    start = int(row["window_start"])
    return {
        "slug": row["slug"],
        "windowStart": start,
        "windowEnd": span.end(start),
        "rule": row["rule"],
        "lookbackS": row["lookback_s"],
        "priceToBeat": _price(row["price_to_beat"], decimals),
        "outcome": row["outcome"],
        "outcomeSource": row["outcome_source"],
        "checkpoints": [],
    }


def page(conn: Connection, query: WindowQuery, limit: int, before: int | None) -> Page:
    """Up to ``limit`` windows of ``query`` that start before ``before`` (any when None),
    newest first, each with its stored checkpoints (most time left first)."""
    statement = select(windows).where(*query.track.of(windows))
    if query.start is not None:
        statement = statement.where(windows.c.window_start >= query.start)
    bounds = [bound for bound in (query.end, before) if bound is not None]
    if bounds:
        statement = statement.where(windows.c.window_start < min(bounds))
    rows = conn.execute(statement.order_by(windows.c.window_start.desc()).limit(limit + 1))
    span = SPANS[query.track.window]  # where its windows end
    decimals = price_decimals(query.track.symbol, span)
    found = [_window(row, span, decimals) for row in rows.mappings()]
    more = len(found) > limit
    found = found[:limit]
    if found:
        by_slug = {w["slug"]: w for w in found}
        taken = conn.execute(
            select(checkpoints)
            .where(checkpoints.c.slug.in_(list(by_slug)))
            .order_by(checkpoints.c.slug, checkpoints.c.rem_s.desc())
        )
        for row in taken.mappings():
            by_slug[row["slug"]]["checkpoints"].append(
                {
                    "remS": row["rem_s"],
                    "pUp": row["p_up"],
                    "marketMid": row["market_mid"],
                    "sigma": row["sigma"],
                    "price": _price(row["price"], decimals),
                }
            )
    return Page(found, found[-1]["windowStart"] if more else None)
