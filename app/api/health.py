"""``GET /api/health``: public liveness and readiness of the board bus."""

from __future__ import annotations

from flask import Blueprint, Response

from app.board.snapshot import dumps
from app.errors import json_response
from app.services import services

bp = Blueprint("health", __name__)


@bp.get("/api/health")
def health() -> Response:
    """HealthResponse: always ``ok``; ``redisReady`` says whether the bus backend answers;
    ``source`` (an extension) names the board's source and ``sourceLabel`` says what its
    numbers are (``live · fake upstream on this machine`` against loopback upstreams)."""
    held = services()
    ready, status = held.bus.status()
    body = {
        "ok": True,
        "redisReady": ready,
        "redisStatus": status,
        "refreshMs": held.settings.refresh_ms,
        "symbols": [market.key for market in held.settings.markets],
        "source": held.settings.board_source,
        "sourceLabel": held.settings.source_label,
        "windows": [span.name for span in held.settings.windows],
    }
    return json_response(dumps(body))
