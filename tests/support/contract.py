"""Contract checks: every response body a test sees is validated against its schema."""

from __future__ import annotations

import json
from typing import Any

from app.schemas import check
from app.schemas.board import BoardResponseSchema
from app.schemas.calibration import CalibrationResponseSchema
from app.schemas.error import ErrorResponseSchema
from app.schemas.health import HealthResponseSchema
from app.schemas.trail import TrailResponseSchema
from app.schemas.windows import WindowsResponseSchema

SCHEMAS = {
    "board": BoardResponseSchema(),
    "error": ErrorResponseSchema(),
    "health": HealthResponseSchema(),
    "calibration": CalibrationResponseSchema(),
    "windows": WindowsResponseSchema(),
    "trail": TrailResponseSchema(),
}


def validated(kind: str, body: bytes | str) -> dict[str, Any]:
    """Parse ``body`` as JSON and check it against the ``kind`` schema; return the dict."""
    document = json.loads(body)
    check(SCHEMAS[kind], document, kind)
    assert isinstance(document, dict)
    return document
