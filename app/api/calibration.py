"""``GET /api/probboard/calibration``: the board's track record (an extension; public).

The scores of the windows the refresher recorded (``app.calibration``): per time left, the
Brier score and log loss of the model and of the market's UP mid, and the model's
reliability. Computed at most once every ``MAX_AGE_S`` per worker and kept: a read costs
nothing else. When the store cannot be read, the last answer is served (its
``computedAt`` says how old it is); with none yet, 503 ``calibration_unavailable``.

One market's at a time: ``?symbol=ETH`` (any served symbol, case-insensitive; the first of
``SYMBOLS`` when absent); anything else is 400 ``invalid_symbol`` (``app.api.symbols``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from flask import Blueprint, Response, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from app.accounts.deadline import DatabaseTimeoutError
from app.api.symbols import requested_market
from app.board.snapshot import dumps
from app.board.timefmt import served_at
from app.calibration import store, summary
from app.errors import ApiError, json_response
from app.extensions import db
from app.markets import WINDOW_S, Market
from app.schemas import check
from app.schemas.calibration import CalibrationResponseSchema
from app.services import services

bp = Blueprint("calibration", __name__)
MAX_AGE_S = 60
_SCHEMA = CalibrationResponseSchema()


class _Cache:
    """The last answer of this worker for one market, and when it was computed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.body: str | None = None
        self.at = -float("inf")


CACHE_KEY = "probboard.calibration"


def _compute(source: str, market: Market) -> str:
    with db.engine.connect() as conn:
        per_window = store.load(conn, source)
    per_window = [w for w in per_window if str(w["slug"]).startswith(market.slug_prefix)]
    scored = [w for w in per_window if w["outcome"] is not None]
    period = None
    if per_window:
        first, last = per_window[0]["windowStart"], per_window[-1]["windowStart"]
        period = {"start": served_at(first * 1000), "end": served_at((last + WINDOW_S) * 1000)}
    document: dict[str, Any] = {
        "ok": True,
        "source": source,
        "symbol": market.symbol,
        "period": period,
        "windowsRecorded": len(per_window),
        "windows": len(scored),
        **summary.summarize(per_window),
        "computedAt": served_at(int(time.time() * 1000)),
        "maxAgeS": MAX_AGE_S,
    }
    check(_SCHEMA, document, "CalibrationResponse")
    return dumps(document)


@bp.get("/api/probboard/calibration")
def calibration() -> Response:
    """CalibrationResponse (see the module docstring)."""
    held = services()
    market = requested_market(held.settings.markets, request)
    caches: dict[str, _Cache] = current_app.extensions.setdefault(
        CACHE_KEY, {m.symbol: _Cache() for m in held.settings.markets}
    )
    cache = caches[market.symbol]
    with cache.lock:  # one computation at a time; the others wait for it, then read it
        if time.monotonic() - cache.at >= MAX_AGE_S:
            try:
                source = held.settings.board_source
                cache.body = held.db_guard(
                    lambda: _compute(source, market), name="probboard-calibration"
                )
                cache.at = time.monotonic()
            except (SQLAlchemyError, DatabaseTimeoutError) as exc:
                if cache.body is None:
                    raise ApiError(
                        503,
                        "calibration_unavailable",
                        "The track record cannot be read right now; retry shortly.",
                        retry_after_ms=5000,
                    ) from exc
        body = cache.body
    assert body is not None
    return json_response(body)
