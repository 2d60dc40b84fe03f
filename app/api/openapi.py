"""``GET /api/openapi.json``: the OpenAPI 3.1 document (an extension), built once per process."""

from __future__ import annotations

import json
from functools import cache

from flask import Blueprint, Response

from app.errors import json_response
from app.markets import Market, Span
from app.services import services

bp = Blueprint("openapi", __name__)


@cache
def _document(markets: tuple[Market, ...], windows: tuple[Span, ...]) -> str:
    from app.schemas.openapi import build_spec  # apispec is loaded only when asked for

    return json.dumps(build_spec(markets, windows), separators=(",", ":"))


@bp.get("/api/openapi.json")
def openapi() -> Response:
    """The document generated from the marshmallow schemas (``app/schemas/openapi.py``)."""
    settings = services().settings
    return json_response(_document(settings.markets, settings.windows))
