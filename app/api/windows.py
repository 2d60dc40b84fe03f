"""``GET /api/probboard/windows``: every call we recorded, downloadable (an extension; public).

The recorded windows of one market and one length (``?window=``, as on ``/latest``: the
default window's without it; ``app.calibration.export``), newest first, a page at a
time with a ``next`` cursor; JSON, or CSV (``format=csv`` or ``Accept: text/csv``) streamed a
window at a time. Limited like a guest's ``/latest`` read, for every caller: public, so
counted by address with ``GUEST_RATE_LIMIT`` (flask-limiter's check; the key names this
endpoint, so downloads and board reads have a window each).

The pipeline, in order: parameters but the cursor (a 400 costs no slot) → the guest limit
(429) → the cursor (400 ``invalid_cursor``: a forged one costs its sender a slot, so nobody
can send them unlimited) → one page read in SQL (503 ``record_unavailable`` when the store
cannot answer) → the answer. The page is read whole before the answer starts, so no database
connection is held while a slow client downloads.
"""

from __future__ import annotations

from flask import Blueprint, Response, request
from sqlalchemy.exc import SQLAlchemyError

from app.accounts.db_deadline import DatabaseTimeoutError
from app.api.vary import VARY_ACCEPT
from app.api.windows_csv import csv_lines
from app.api.windows_query import CSV, WindowsRequest, resumed, windows_request
from app.board.snapshot import dumps
from app.calibration import export
from app.calibration.cursor import Cursor, WindowCursors
from app.calibration.store import Track
from app.errors import ApiError, json_response
from app.extensions import db
from app.limits import rate_limit_headers
from app.markets import DEFAULT_SPAN
from app.services import services

bp = Blueprint("windows", __name__)


def _read(source: str, asked: WindowsRequest) -> export.Page:
    """One page of the store (in the database guard's own app context)."""
    track = Track(source, asked.market.symbol, asked.window.name)
    query = export.WindowQuery(track, asked.start, asked.end)
    with db.engine.connect() as conn:
        return export.page(conn, query, asked.limit, asked.before)


def _next(cursors: WindowCursors, asked: WindowsRequest, found: export.Page) -> str | None:
    """The cursor of the page after ``found`` (None when it was the last)."""
    if found.before is None:
        return None
    market, window = asked.market.symbol, asked.window.name
    return cursors.encode(Cursor(market, asked.start, asked.end, found.before, window))


@bp.get("/api/probboard/windows")
def windows() -> Response:
    """WindowsResponse, or its CSV (see the module docstring)."""
    held = services()
    asked = windows_request(request, held.settings)  # 400s before any limit
    # JSON or CSV by Accept: a cache keys on it (always: over-varying is only safe).
    headers = VARY_ACCEPT | rate_limit_headers(held.limits.guest())  # 429 over the limit
    asked = resumed(request, asked, held.cursors)  # 400 invalid_cursor, after the limit
    source = held.settings.board_source
    try:
        found = held.db_guard(lambda: _read(source, asked), name="probboard-windows")
    except (SQLAlchemyError, DatabaseTimeoutError) as exc:
        raise ApiError(
            503,
            "record_unavailable",
            "The recorded windows cannot be read right now; retry shortly.",
            retry_after_ms=5000,
        ) from exc
    following = _next(held.cursors, asked, found)
    if following is not None:  # in the body too, but a CSV has nowhere else to say it
        headers["X-Next-Cursor"] = following
    symbol = asked.market.symbol
    if asked.media == CSV:
        # The 5-minute file keeps its name from before there were other lengths.
        length = "" if asked.window == DEFAULT_SPAN else f"-{asked.window.name}"
        name = f"{symbol.lower()}{length}-windows.csv"
        headers["Content-Disposition"] = f'attachment; filename="{name}"'
        headers["Cache-Control"] = "no-store"
        lines = csv_lines(symbol, source, found.windows)
        return Response(lines, 200, headers, mimetype="text/csv")
    document = {"ok": True, "symbol": symbol, "source": source, "windows": found.windows,
                "next": following}  # fmt: skip
    return json_response(dumps(document), headers=headers)
