"""``GET /api/probboard/latest``: the full board, served under the caller's plan."""

from __future__ import annotations

from flask import Blueprint, Response

from app.board.timefmt import now_ms
from app.extensions import board_bus
from app.plans import GUEST

bp = Blueprint("latest", __name__)


@bp.get("/api/probboard/latest")
def latest() -> Response:
    """BoardResponse with staleness computed now; no Redis round trip per request."""
    body = board_bus.renderer.render(board_bus.bus.latest(), GUEST, now_ms())
    response = Response(body, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    return response
