"""``GET /api/probboard/latest``: the full board, served under the caller's plan.

One pipeline, in this order: refuse a blocked address (``before_request``) → identify →
guest: flask-limiter's check | account: its plan's limit → render → headers → count a 401
to a presented key (``after_request``). Nothing else runs for it but the request id.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.board.timefmt import now_ms
from app.errors import json_response
from app.limits import count_failure, refuse_blocked
from app.plans import GUEST
from app.services import services

bp = Blueprint("latest", __name__)
bp.before_request(refuse_blocked)
bp.after_request(count_failure)
# The board depends on who asks: a shared cache must key on the credentials.
VARY = {"Vary": "Authorization, X-API-Key, Cookie"}


@bp.get("/api/probboard/latest")
def latest() -> Response:
    """BoardResponse under the caller's plan (the bus is in memory: no Redis per request)."""
    held = services()
    identity = held.authenticator.identify(request)  # 401/503 for refused credentials
    if identity is None:
        held.limits.guest()  # 429 over the guest limit
        plan, quota = GUEST, None
    else:
        plan, quota = identity.plan, held.limits.account(identity)  # 429 over the plan's
    body = held.renderer.render(held.bus.latest(), plan, now_ms())
    return held.limits.headers(json_response(body, headers=VARY), quota)
