"""``GET /api/probboard/latest``: the full board, served under the caller's plan."""

from __future__ import annotations

from flask import Blueprint, Response

from app.auth import current_identity, identifies_caller
from app.board.timefmt import now_ms
from app.errors import json_response
from app.plans import GUEST
from app.services import services

bp = Blueprint("latest", __name__)
# The board depends on who asks: a shared cache must key on the credentials.
VARY = {"Vary": "Authorization, X-API-Key, Cookie"}


@bp.get("/api/probboard/latest")
@identifies_caller
def latest() -> Response:
    """BoardResponse under the caller's plan (the bus is in memory: no Redis per request)."""
    identity = current_identity()
    plan = identity.plan if identity is not None else GUEST
    held = services()
    body = held.renderer.render(held.bus.latest(), plan, now_ms())
    return json_response(body, headers=VARY)
