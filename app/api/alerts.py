"""``/api/alerts``: a key holder's alerts (issue 51; an extension of the interface).

    POST   /api/alerts                      201 {"ok", "alert", "secret"}
    GET    /api/alerts                      {"ok", "alerts": [...]}
    GET    /api/alerts/<id>                 {"ok", "alert"}
    PATCH  /api/alerts/<id>                 {"status": "paused" | "active"} -> {"ok", "alert"}
    DELETE /api/alerts/<id>                 204
    GET    /api/alerts/<id>/deliveries      {"ok", "deliveries": [...]}, newest first

Every step, in order: refuse a blocked address → the key (``X-API-Key`` or Bearer; a session
cookie is not enough: 401; a 401 to a presented key counts a failed attempt) → the account's
alerts limit (``ALERTS_RATE_LIMIT``, a counter of its own: never a board read's; 429) →
the body (400 per field: ``app.alerts.requests``) → the
store (404, 403 another account's, 409 over the plan's limit; 503 when it cannot answer).
Answers are validated by their schemas (``app.schemas.alerts``) before they leave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, request
from marshmallow import Schema
from sqlalchemy.exc import SQLAlchemyError

from app.accounts.db_deadline import DatabaseTimeoutError
from app.alerts import store
from app.alerts.models import ACTIVE, PAUSED
from app.alerts.requests import new_alert, read_body
from app.alerts.secrets import SecretBox
from app.auth import Identity
from app.board.snapshot import dumps
from app.errors import ApiError, json_response
from app.limits import rate_limit_headers
from app.metrics.web import PLAN_KEY
from app.schemas import check
from app.schemas.alerts import (
    AlertCreatedSchema,
    AlertListSchema,
    AlertOneSchema,
    DeliveriesSchema,
)
from app.services import Services, services

bp = Blueprint("alerts", __name__)
_CREATED, _ONE, _LIST, _DELIVERIES = (
    AlertCreatedSchema(),
    AlertOneSchema(),
    AlertListSchema(),
    DeliveriesSchema(),
)


def _caller() -> tuple[Services, Identity, dict[str, str]]:
    """The services, the key's identity and the rate-limit headers (401, 429 first)."""
    held = services()
    with held.limits.key_attempt():  # 429 for a blocked address; a 401 counts a failure
        identity = held.authenticator.require_key(request)
    request.environ[PLAN_KEY] = identity.plan
    return held, identity, rate_limit_headers(held.limits.alerts(identity))


def _stored(held: Services, job: Callable[[], Any]) -> Any:
    """``job`` on the accounts database under its guard; 503 when it cannot answer."""
    try:
        return held.db_guard(job, name="probboard-alerts")
    except (SQLAlchemyError, DatabaseTimeoutError) as exc:
        raise ApiError(
            503,
            "alerts_unavailable",
            "Alerts cannot be read or written right now; retry shortly.",
            retry_after_ms=2000,
        ) from exc


def _answer(
    schema: Schema, body: dict[str, Any], headers: dict[str, str], status: int = 200
) -> Response:
    check(schema, body, "an alerts answer")
    return json_response(dumps(body), status=status, headers=headers)


@bp.post("/api/alerts")
def create() -> Response:
    """201 with the alert and its signing secret (shown this once)."""
    held, identity, headers = _caller()
    wanted = new_alert(request.get_data(cache=False), held.settings)
    box = SecretBox(held.pepper())

    def job() -> tuple[dict[str, Any], str]:
        alert, secret = store.create(identity, wanted, held.settings, box)
        return store.alert_json(alert), secret

    alert, secret = _stored(held, job)
    body = {"ok": True, "alert": alert, "secret": secret}
    headers["Location"] = f"/api/alerts/{alert['id']}"  # (every answer is no-store: the secret)
    return _answer(_CREATED, body, headers, 201)


@bp.get("/api/alerts")
def listing() -> Response:
    """The caller's alerts, oldest first."""
    held, identity, headers = _caller()
    found = _stored(held, lambda: [store.alert_json(a) for a in store.listing(identity)])
    return _answer(_LIST, {"ok": True, "alerts": found}, headers)


@bp.get("/api/alerts/<alert_id>")
def one(alert_id: str) -> Response:
    """One alert of the caller's."""
    held, identity, headers = _caller()
    found = _stored(held, lambda: store.alert_json(store.owned(identity, alert_id)))
    return _answer(_ONE, {"ok": True, "alert": found}, headers)


@bp.patch("/api/alerts/<alert_id>")
def change(alert_id: str) -> Response:
    """Pause an alert or make it active again: ``{"status": "paused" | "active"}``."""
    held, identity, headers = _caller()
    body = read_body(request.get_data(cache=False))
    status = body.get("status")
    if set(body) != {"status"} or status not in (ACTIVE, PAUSED):
        raise ApiError(400, "invalid_status", 'the body is {"status": "paused" | "active"}.')

    def job() -> dict[str, Any]:
        return store.alert_json(store.set_status(store.owned(identity, alert_id), status))

    return _answer(_ONE, {"ok": True, "alert": _stored(held, job)}, headers)


@bp.delete("/api/alerts/<alert_id>")
def delete(alert_id: str) -> Response:
    """204: the alert and its deliveries are gone."""
    held, identity, headers = _caller()
    _stored(held, lambda: store.delete(store.owned(identity, alert_id)))
    return Response(status=204, headers=headers)


@bp.get("/api/alerts/<alert_id>/deliveries")
def deliveries(alert_id: str) -> Response:
    """The alert's last calls, newest first."""
    held, identity, headers = _caller()

    def job() -> list[dict[str, Any]]:
        return [store.delivery_json(d) for d in store.deliveries(store.owned(identity, alert_id))]

    return _answer(_DELIVERIES, {"ok": True, "deliveries": _stored(held, job)}, headers)
