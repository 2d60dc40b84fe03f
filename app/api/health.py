"""``GET /api/health``: public liveness and readiness of the board bus."""

from __future__ import annotations

from flask import Blueprint, Response, current_app

from app.board.snapshot import dumps
from app.extensions import board_bus, settings_of

bp = Blueprint("health", __name__)


@bp.get("/api/health")
def health() -> Response:
    """HealthResponse: always ``ok``; ``redisReady`` says whether the bus backend answers."""
    ready, status = board_bus.bus.status()
    body = {
        "ok": True,
        "redisReady": ready,
        "redisStatus": status,
        "refreshMs": settings_of(current_app).refresh_ms,
        "symbols": ["btc"],
    }
    response = Response(dumps(body), mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    return response
