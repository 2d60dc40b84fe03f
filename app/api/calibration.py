"""``GET /api/probboard/calibration``: the board's track record (an extension; public).

The scores of the windows the refresher recorded (``app.calibration``): per time left, the
Brier score and log loss of the model and of the market's UP mid, and the model's
reliability. Computed at most once every ``MAX_AGE_S`` per worker and kept: a read costs
nothing else. When the store cannot be read, the last answer is served (its
``computedAt`` says how old it is); with none yet, 503 ``calibration_unavailable``. A
computation that outlasts ``DB_TIMEOUT_MS`` is not lost: it finishes in the background and
keeps its answer for the next request (one computation at a time per market and period).

One market's at a time: ``?symbol=ETH`` (any served symbol, case-insensitive; the first of
``SYMBOLS`` when absent); anything else is 400 ``invalid_symbol`` (``app.api.symbols``).
Over one period: ``?period=24h`` (``7d``, ``30d``; ``all``, the default), the windows that
started within it; anything else is 400 ``invalid_period`` (``app.api.periods``). The
answer's ``span`` names the period and its ``period`` the first and last windows scored.
Of one window length: ``?window=15m`` (any served window, as on ``/latest``: issue 39), the
15-minute windows' record, scored at their own checkpoints (``Span.rems``); without
it, the default window's (the contract's 5 minutes), the answer exactly as before there
were others; anything else is 400 ``invalid_window`` (``app.api.window_param``).

The scores are sums the database computes (``app.calibration.totals``): the worker reads a
few hundred rows, whatever the size of the record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from flask import Blueprint, Response, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from app.accounts.db_deadline import DatabaseTimeoutError
from app.api import periods
from app.api.symbols import requested_market
from app.api.window_param import requested_window
from app.board.snapshot import dumps
from app.board.timefmt import served_at
from app.calibration import totals
from app.calibration.native import off_the_hub
from app.calibration.periods import SPANS, since
from app.calibration.store import Track
from app.errors import ApiError, json_response
from app.extensions import db
from app.markets import SPANS as WINDOWS
from app.schemas import check
from app.schemas.calibration import CalibrationResponseSchema
from app.services import services

bp = Blueprint("calibration", __name__)
MAX_AGE_S = 60
_SCHEMA = CalibrationResponseSchema()


class _Cache:
    """The last answer of this worker for one market, window and period, when it was
    computed, and whether a computation is under way."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.body: str | None = None
        self.at = -float("inf")
        self.running = False
        self.finished = threading.Event()  # set when no computation runs

    def refresh(self, compute: Callable[[], str]) -> None:
        """Compute and keep the answer (in ``db_guard``'s thread). It is kept even when the
        request that asked has stopped waiting (``DB_TIMEOUT_MS``): on a large record
        (SQLite) the answer may take longer than a request waits, and would never be kept."""
        try:
            body = compute()
            with self.lock:
                self.body, self.at = body, time.monotonic()
        finally:
            with self.lock:
                self.running = False
                self.finished.set()

    def due(self) -> bool:
        """True (and marked as running) when this answer is older than ``MAX_AGE_S`` and no
        computation runs: one at a time, whatever the requests."""
        with self.lock:
            if self.running or time.monotonic() - self.at < MAX_AGE_S:
                return False
            self.running = True
            self.finished.clear()
            return True


CACHE_KEY = "probboard.calibration"
clock: Callable[[], float] = time.time  # "now" of a period (a test moves it)


def _compute(track: Track, span: str) -> str:
    now = clock()
    with db.engine.connect() as conn:  # checked out here: the pool's locks are gevent's
        job = partial(totals.compute, conn, track, since(span, now), now)
        # SQLite's query would hold a gevent worker's only thread (PostgreSQL's driver yields).
        found = off_the_hub(job) if conn.dialect.name == "sqlite" else job()
    first, last = found.pop("first"), found.pop("last")
    period = None
    if first is not None:
        end = WINDOWS[track.window].end(last)
        period = {"start": served_at(first * 1000), "end": served_at(end * 1000)}
    document: dict[str, Any] = {
        "ok": True,
        "source": track.source,
        "symbol": track.symbol,
        "span": span,
        "period": period,
        **found,
        "computedAt": served_at(int(now * 1000)),
        "maxAgeS": MAX_AGE_S,
    }
    check(_SCHEMA, document, "CalibrationResponse")
    return dumps(document)


@bp.get("/api/probboard/calibration")
def calibration() -> Response:
    """CalibrationResponse (see the module docstring)."""
    held = services()
    market = requested_market(held.settings.markets, request)
    span = periods.requested_period(request)
    window = requested_window(held.settings, request) or held.settings.default_window.name
    track = Track(held.settings.board_source, market.symbol, window)
    caches: dict[tuple[str, str, str], _Cache] = current_app.extensions.setdefault(
        CACHE_KEY,
        {
            (m.symbol, w.name, name): _Cache()
            for m in held.settings.markets
            for w in held.settings.windows
            for name in SPANS
        },
    )
    cache = caches[(market.symbol, window, span)]
    failure: Exception | None = None
    if cache.due():
        try:
            held.db_guard(
                lambda: cache.refresh(lambda: _compute(track, span)),
                name="probboard-calibration",
            )
        except (SQLAlchemyError, DatabaseTimeoutError) as exc:
            failure = exc  # the last answer is served, if any
    elif cache.body is None:  # the first answer is being computed: wait for it as long
        cache.finished.wait(held.db_guard.timeout_s)  # as the one who asked for it does
    with cache.lock:
        body = cache.body
    if body is None:
        raise ApiError(
            503,
            "calibration_unavailable",
            "The track record cannot be read right now; retry shortly.",
            retry_after_ms=5000,
        ) from failure
    return json_response(body)
