"""``GET /api/probboard/trail`` (an extension): the current window's path of each market, for
one window kind (``?window=``, as ``/latest`` takes it; the default window without it).

What the page's window chart draws from the window's start when it opens mid-window
(``app/board/trail.py``). The steps of ``/latest``, in its order: refuse a blocked address →
identify (a 401 to a key counts a failure: ``limits.key_attempt()``) → ``?symbol=`` and
``?window=`` (a 400 costs no slot) → the guest or the plan's limit (one read, as a board
is) → answer.
The points are the plan's refresh interval apart: no plan gets a finer path than its own
polls would have drawn.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.api.symbols import requested_symbols
from app.api.vary import VARY
from app.api.window_param import requested_window
from app.board.timefmt import now_ms
from app.board.trail import STEP_MS
from app.errors import json_response
from app.limits import rate_limit_headers
from app.markets import SPANS
from app.metrics.web import PLAN_KEY
from app.plans import GUEST
from app.services import Services, services

bp = Blueprint("trail", __name__)


def _seeded(held: Services) -> None:
    """Once per worker: the points of the bus's history (up to a window back) first."""
    if not held.trail.seeded:
        held.bus.latest()  # starts the worker's subscription: no board falls between
        now = now_ms()
        # The bus keeps minutes: the longest window's length is no bound that matters.
        longest = max(span.seconds for span in SPANS.values())
        held.trail.seed(held.bus.sampled(now - longest * 1000, now, STEP_MS))


@bp.get("/api/probboard/trail")
def trail() -> Response:
    """``{"ok", "stepMs", "markets": [{"symbol", "windowStart", "points": [[s, pUp, mid]]}]}``."""
    held = services()
    limits = held.limits
    with limits.key_attempt():  # 429 for a blocked address; a 401 to a key counts a failure
        identity = held.authenticator.identify(request)
    plan = GUEST if identity is None else identity.plan
    request.environ[PLAN_KEY] = plan
    symbols = requested_symbols(held.settings.markets, request)
    window = requested_window(held.settings, request) or held.settings.default_window.name
    quota = limits.guest() if identity is None else limits.account(identity)
    _seeded(held)
    served = symbols or tuple(m.symbol for m in held.settings.markets)
    body = held.trail.answer(held.renderer.plans[plan].refresh_ms, served, window)
    return json_response(body, headers=VARY | rate_limit_headers(quota))
