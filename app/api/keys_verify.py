"""``GET /api/keys/verify``: is this API key valid, whose is it, and under which plan."""

from __future__ import annotations

from datetime import datetime

from flask import Blueprint, Response, request

from app.auth import authenticator
from app.board.snapshot import dumps
from app.errors import json_response
from app.limits import count_failure, refuse_blocked
from app.metrics.web import PLAN_KEY

bp = Blueprint("keys_verify", __name__)
# A blocked address is refused first; a 401 to a presented key counts a failure.
bp.before_request(refuse_blocked)
bp.after_request(count_failure)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@bp.get("/api/keys/verify")
def verify() -> Response:
    """KeyVerificationResponse; ``lastUsedAt`` is the key's previous use (this one excluded)."""
    identity = authenticator().require_key(request)
    request.environ[PLAN_KEY] = identity.plan
    key = identity.key
    assert key is not None  # require_key only returns key identities
    body = {
        "ok": True,
        "userId": identity.account_name,
        "plan": identity.plan,
        "maskedKey": key.masked,
        "lastUsedAt": _iso(identity.previous_use),
    }
    return json_response(dumps(body))
