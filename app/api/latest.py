"""``GET /api/probboard/latest``: the full board, served under the caller's plan.

One pipeline, in this order, every step in the view: refuse a blocked address → identify
(a 401 to a presented key counts as a failed attempt; both steps are the ``with
limits.key_attempt():`` block every key-taking endpoint runs) → read ``?symbol=`` and
``?window=`` (a 400 ``invalid_symbol`` or ``invalid_window`` costs no rate-limit slot) →
guest: the guest limit | account: its plan's limit (flask-limiter's check, for guests) →
render (only the rows asked for: the window's, and the symbols' when filtered) → headers.
Of the app-wide Flask hooks, flask-limiter's find no limit outside the guest step and CORS's
acts only on requests with ``Origin`` (the request id is settled in the WSGI layer).
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.api.symbols import requested_symbols
from app.api.vary import VARY
from app.api.window_param import requested_window
from app.board.timefmt import now_ms
from app.errors import json_response
from app.limits import rate_limit_headers
from app.metrics.web import PLAN_KEY, board_served
from app.plans import GUEST
from app.services import services

bp = Blueprint("latest", __name__)


@bp.get("/api/probboard/latest")
def latest() -> Response:
    """BoardResponse under the caller's plan (the bus is in memory: no Redis per request)."""
    held = services()
    limits = held.limits
    with limits.key_attempt():  # 429 for a blocked address; a 401 to a key counts a failure
        identity = held.authenticator.identify(request)  # 401/503 for refused credentials
    plan = GUEST if identity is None else identity.plan
    request.environ[PLAN_KEY] = plan  # the metrics count a refusal under its plan too
    symbols = requested_symbols(held.settings.markets, request)  # 400 before any limit
    window = requested_window(held.settings, request)  # 400 before any limit
    # 429 over the guest limit, or over the plan's
    quota = limits.guest() if identity is None else limits.account(identity)
    snapshot, now = held.bus.latest(), now_ms()
    body = held.renderer.render(snapshot, plan, now, symbols, window)
    if snapshot is not None:
        board_served(now - snapshot.ts_ms)
    return json_response(body, headers=VARY | rate_limit_headers(quota))
