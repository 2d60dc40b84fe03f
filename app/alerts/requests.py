"""``POST /api/alerts``'s body, checked field by field (issue 51, point 1).

The body is a JSON object read by ``AlertInputSchema`` (types, ranges, unknown fields
refused), then checked against the service: a served symbol and window, the level and side a
condition needs, a target the rules admit (``app.alerts.targets``). Each refusal is a 400 whose
code names the field (``invalid_url``, ``invalid_symbol``, ``invalid_window``,
``invalid_condition``, ``invalid_level``, ``invalid_side``, ``invalid_format``), or
``invalid_body`` for a body that is no JSON object or has a field nobody reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from marshmallow import ValidationError

from app.alert_kinds import EDGE_ABOVE, P_UP_ABOVE, P_UP_BELOW, STALE, AlertSpec
from app.alerts.targets import AllowList, Resolver, check_url, system_resolver
from app.config import Settings
from app.errors import ApiError
from app.schemas.alerts import AlertInputSchema

MAX_BODY_BYTES = 8192
_SCHEMA = AlertInputSchema()


# Each field's own code (literal, so the OpenAPI tables can be held to what is raised).
_FIELD_ERRORS: dict[str, Callable[[str], ApiError]] = {
    "url": lambda why: ApiError(400, "invalid_url", why),
    "symbol": lambda why: ApiError(400, "invalid_symbol", why),
    "window": lambda why: ApiError(400, "invalid_window", why),
    "condition": lambda why: ApiError(400, "invalid_condition", why),
    "level": lambda why: ApiError(400, "invalid_level", why),
    "side": lambda why: ApiError(400, "invalid_side", why),
    "format": lambda why: ApiError(400, "invalid_format", why),
}


def _field_error(errors: dict[str, Any]) -> ApiError:
    """The first field's refusal (in the body's documented order), or the body's."""
    for name, refusal in _FIELD_ERRORS.items():
        if name in errors:
            why = errors[name][0] if isinstance(errors[name], list) else str(errors[name])
            return refusal(f"{name}: {why}")
    unknown = ", ".join(sorted(errors))
    return ApiError(400, "invalid_body", f"unknown field(s): {unknown}; see /api/openapi.json.")


def read_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object; 400 ``invalid_body`` otherwise."""
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(400, "invalid_body", f"the body is over {MAX_BODY_BYTES} bytes.")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_body", "the body must be a JSON object.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object.")
    return body


def new_alert(raw: bytes, settings: Settings, resolver: Resolver = system_resolver) -> AlertSpec:
    """The alert ``raw`` asks for, every field checked (see the module docstring)."""
    try:
        found = _SCHEMA.load(read_body(raw))
    except ValidationError as exc:
        messages = exc.messages if isinstance(exc.messages, dict) else {"_schema": exc.messages}
        raise _field_error(messages) from None
    symbol = found["symbol"].upper()
    served = {m.symbol for m in settings.markets}
    # isascii: str.upper maps a few non-ASCII letters onto ASCII ones ("\u017fol" -> "SOL").
    if symbol not in served or not found["symbol"].isascii():
        raise ApiError(
            400, "invalid_symbol", f"symbol must be a served market: {', '.join(sorted(served))}."
        )
    # Absent or null: the default window; an empty name is no served window.
    window = (settings.default_window.name if found["window"] is None else found["window"]).lower()
    windows = [span.name for span in settings.windows]
    if window not in windows:
        raise ApiError(
            400, "invalid_window", f"window must be a served window: {', '.join(windows)}."
        )
    condition, level, side = found["condition"], found["level"], found["side"]
    if condition == STALE:
        if level is not None:
            raise ApiError(400, "invalid_level", "level: a stale alert takes none.")
        if side is not None:
            raise ApiError(400, "invalid_side", "side: a stale alert takes none.")
    else:
        if level is None:
            raise ApiError(400, "invalid_level", f"level: {condition} needs a level.")
        if condition in (P_UP_ABOVE, P_UP_BELOW) and not 0 < level < 100:
            raise ApiError(400, "invalid_level", "level: a P(up) line is between 0 and 100.")
        if condition == EDGE_ABOVE and side is None:
            raise ApiError(400, "invalid_side", "side: edge_above needs side up or down.")
        if condition != EDGE_ABOVE and side is not None:
            raise ApiError(400, "invalid_side", f"side: {condition} takes none.")
    allowed = AllowList.parse(settings.alerts_allowed_hosts)
    check_url(found["url"], allowed, resolver)  # 400 invalid_url, saying why
    return AlertSpec(found["url"], symbol, window, condition, level, side, found["format"])
