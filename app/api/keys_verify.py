"""``GET /api/keys/verify``: is this API key valid, whose is it, and under which plan.

In order, every step in the view: refuse a blocked address → the key (401; a 401 to a
presented key counts a failed attempt: both steps are the ``with limits.key_attempt():``
block every key-taking endpoint runs) → the account's checks (429 over
``VERIFY_RATE_LIMIT``) → the answer.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.board.snapshot import dumps
from app.board.timefmt import iso_of
from app.errors import json_response
from app.limits import rate_limit_headers
from app.metrics.web import PLAN_KEY
from app.services import services

bp = Blueprint("keys_verify", __name__)


@bp.get("/api/keys/verify")
def verify() -> Response:
    """KeyVerificationResponse; ``lastUsedAt`` is the key's previous use (this one excluded)."""
    held = services()
    with held.limits.key_attempt():  # 429 for a blocked address; a 401 counts a failure
        identity = held.authenticator.require_key(request)  # 401 without a valid key
    request.environ[PLAN_KEY] = identity.plan
    headers = rate_limit_headers(held.limits.verify(identity))  # 429 over the account's checks
    key = identity.key
    assert key is not None  # require_key only returns key identities
    body = {
        "ok": True,
        "userId": identity.account_name,
        "plan": identity.plan,
        "maskedKey": key.masked,
        "lastUsedAt": iso_of(identity.previous_use),
    }
    return json_response(dumps(body), headers=headers)
