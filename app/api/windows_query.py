"""The parameters of ``GET /api/probboard/windows``, read and checked before anything else.

``symbol`` (``app.api.symbols``), ``window`` (``app.api.window_param``: the windows of one
length, the default window's without it), ``from`` and ``to`` (ISO 8601 or unix seconds;
windows starting at or after ``from`` and before ``to``), ``limit`` (1 to 1,000, default 100),
``cursor`` (a ``next`` as served; read by ``resumed``, after the guest limit) and ``format``
(``json`` or ``csv``; without it, ``Accept`` decides). Each bad value is a 400 with a code of
its own; a parameter given twice is one too.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Request

from app.api.params import query_value
from app.api.symbols import requested_market
from app.api.window_param import requested_window
from app.calibration.cursor import CursorError, WindowCursors
from app.calibration.export import DEFAULT_LIMIT, MAX_LIMIT
from app.config import Settings
from app.errors import ApiError
from app.markets import SPANS, Market, Span

JSON, CSV = "application/json", "text/csv"
FORMATS = {"json": JSON, "csv": CSV}
_UNIX = re.compile(r"[0-9]{1,12}")  # ASCII only: \\d matches any script's digits
_LIMIT = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class WindowsRequest:
    """What a request asks for: a market and a window length, a span of starts, a page and a
    media type."""

    market: Market
    window: Span
    start: int | None
    end: int | None
    limit: int
    before: int | None
    media: str


def parse_time(value: str, name: str) -> int:
    """``value`` as unix seconds, rounded up (window starts are whole seconds, and both bounds
    compare a start with ``>=`` / ``<``); 400 ``invalid_time`` for anything else."""
    if _UNIX.fullmatch(value):
        return int(value)
    try:
        # fromisoformat: ISO 8601 dates and date-times, with "Z" or an offset (no zone: UTC).
        parsed = datetime.fromisoformat(value) if value.isascii() else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise ApiError(
            400,
            "invalid_time",
            f"{name} must be an ISO 8601 date-time (2026-11-26T10:00:00Z) or unix seconds.",
        )
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return math.ceil(parsed.timestamp())


def _span(request: Request) -> tuple[int | None, int | None]:
    """``from`` and ``to`` (unix seconds, None when absent); 400 when ``from`` is after ``to``."""
    given = query_value(request, "from", "invalid_time")
    start = None if given is None else parse_time(given, "from")
    given = query_value(request, "to", "invalid_time")
    end = None if given is None else parse_time(given, "to")
    if start is not None and end is not None and start > end:
        raise ApiError(400, "invalid_time", "from must not be after to.")
    return start, end


def _limit(request: Request) -> int:
    """``limit``: windows per page, 1 to ``MAX_LIMIT``."""
    given = query_value(request, "limit", "invalid_limit")
    if given is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(given) or not 1 <= int(given) <= MAX_LIMIT:
        raise ApiError(400, "invalid_limit", f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    return int(given)


def _media(request: Request) -> str:
    """``format`` when given; else CSV only for a caller that prefers it in ``Accept``."""
    given = query_value(request, "format", "invalid_format")
    if given is not None:
        if given not in FORMATS:
            raise ApiError(400, "invalid_format", "format must be json or csv.")
        return FORMATS[given]
    # Without Accept (or with */*), the first: JSON.
    return request.accept_mimetypes.best_match([JSON, CSV]) or JSON


def resumed(request: Request, asked: WindowsRequest, cursors: WindowCursors) -> WindowsRequest:
    """``asked`` from the page ``cursor`` names (unchanged without one); 400 ``invalid_cursor``
    for a cursor not minted here, or one of another query (another symbol, window, ``from``
    or ``to``). Read after the guest limit: a forged cursor costs its sender a slot."""
    text = query_value(request, "cursor", "invalid_cursor")
    if text is None:
        return asked
    try:
        found = cursors.decode(text)
    except CursorError as exc:
        raise ApiError(400, "invalid_cursor", f"cursor is not a next as served ({exc}).") from exc
    mine = (asked.market.symbol, asked.window.name, asked.start, asked.end)
    if (found.symbol, found.window, found.start, found.end) != mine:
        raise ApiError(
            400,
            "invalid_cursor",
            "cursor belongs to another query: send it with the symbol, window, from and to it "
            "came with.",
        )
    return dataclasses.replace(asked, before=found.before)


def windows_request(request: Request, settings: Settings) -> WindowsRequest:
    """Every parameter but ``cursor``, checked (see the module docstring; ``resumed`` reads
    the cursor)."""
    market = requested_market(settings.markets, request)
    named = requested_window(settings, request)
    window = settings.default_window if named is None else SPANS[named]
    start, end = _span(request)
    return WindowsRequest(market, window, start, end, _limit(request), None, _media(request))
