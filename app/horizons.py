"""Polymarket's longer up/down horizons as data: the hourly and 4-hour kinds' boundaries and
slugs (issue 49, point 1; the facts and their sources in docs/horizons.md).

``WINDOWS`` serves both (``app.markets.SPANS``); what is here is what every part of them
reads first:

- **Hourly** windows start on every UTC hour; Polymarket names each by the US Eastern hour
  and date it starts at, in words: ``bitcoin-up-or-down-march-29-2026-12am-et`` since about
  15 March 2026, ``bitcoin-up-or-down-january-23-1pm-et`` (no year) before. A reader tries
  the dated slug, then the yearless one (``hourly_slugs``).
- **4-hour** windows start at 00, 04, 08, 12, 16 and 20 h America/New_York wall-clock time, so
  their UTC start moves with daylight saving (``eastern_block_start``); their slug is
  ``btc-updown-4h-<start>``. The window that spans a change of clocks is 3 or 5 real hours
  long (``eastern_block_end``): Polymarket's own handling of it was never seen recorded, so
  the service checks Gamma's ``eventStartTime`` and ``endDate`` against these (``gamma.py``).

The zone comes from ``zoneinfo`` with the ``tzdata`` package in the lock, so a machine without
a system zone database computes the same boundaries.
"""

from __future__ import annotations

import math
from datetime import datetime
from zoneinfo import ZoneInfo

EASTERN = ZoneInfo("America/New_York")
HOUR_S = 3600
BLOCK_HOURS = 4  # the 4-hour kind's wall-clock block
# The coin's name in the hourly slugs (Polymarket's words; the 5- and 15-minute and 4-hour
# slugs use the lower-case symbol).
HOURLY_WORDS = {"BTC": "bitcoin", "ETH": "ethereum", "SOL": "solana", "XRP": "xrp"}
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)


def hour_start(t: float) -> int:
    """Start (unix seconds) of the UTC hour containing ``t``: floor, never ceil."""
    return math.floor(t / HOUR_S) * HOUR_S


def eastern_block_start(t: float) -> int:
    """Start (unix seconds) of the 4-hour Eastern block containing instant ``t``: its Eastern
    wall-clock hour floored to a multiple of four. Blocks start on whole Eastern hours, and
    an Eastern hour is a whole UTC hour, so the answer is the latest UTC hour at or before
    ``t`` whose Eastern wall-clock time is 00, 04, ... 20 h sharp."""
    start = hour_start(t)
    while True:  # at most four steps back (five across a change of clocks)
        local = datetime.fromtimestamp(start, EASTERN)
        if local.hour % BLOCK_HOURS == 0:
            return start
        start -= HOUR_S


def eastern_block_end(start: int) -> int:
    """End (unix seconds) of the 4-hour Eastern block starting at ``start``: the next block's
    start, four real hours later except across a change of clocks (three in spring, five in
    autumn)."""
    return eastern_block_start(start + (BLOCK_HOURS + 1) * HOUR_S)


def four_hour_slug(symbol: str, start: int) -> str:
    """``btc-updown-4h-<start>``: the 4-hour market of ``symbol`` starting at ``start``."""
    return f"{symbol.lower()}-updown-4h-{start}"


def hourly_slugs(symbol: str, start: int) -> tuple[str, str]:
    """The hourly market's slugs of ``symbol``'s hour starting at ``start``, the current form
    first: ``bitcoin-up-or-down-march-29-2026-12am-et``, then the form without the year that
    Polymarket used until March 2026. ``KeyError`` for a coin without an hourly market."""
    local = datetime.fromtimestamp(start, EASTERN)
    hour = local.hour % 12 or 12
    clock = f"{hour}{'am' if local.hour < 12 else 'pm'}"
    stem = f"{HOURLY_WORDS[symbol]}-up-or-down-{MONTHS[local.month - 1]}-{local.day}"
    return f"{stem}-{local.year}-{clock}-et", f"{stem}-{clock}-et"
