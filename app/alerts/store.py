"""An account's alerts in the accounts database, as the API manages them (issue 51, point 1).

Every function takes the caller's ``Identity`` where ownership matters: an alert of another
account is a 403 ``not_your_alert`` (an unknown id a 404 ``alert_not_found``). The plan's limit
(``ALERTS_LIMIT_USER``, ``ALERTS_LIMIT_VIP_PRO``; admin as vip_pro) is checked at creation:
409 ``alert_limit``.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import delete as sql_delete
from sqlalchemy import func, select

from app.alert_kinds import AlertSpec
from app.alerts.models import ACTIVE, PAUSED, Alert, Delivery
from app.alerts.secrets import SecretBox, new_secret
from app.auth import Identity
from app.board.timefmt import iso_of
from app.config import Settings
from app.errors import ApiError
from app.extensions import db
from app.plans import USER

DELIVERIES_SHOWN = 50


def limit_of(plan: str, settings: Settings) -> int:
    """How many alerts an account of ``plan`` may hold."""
    return settings.alerts_limit_user if plan == USER else settings.alerts_limit_vip_pro


def create(
    identity: Identity, new: AlertSpec, settings: Settings, box: SecretBox
) -> tuple[Alert, str]:
    """A new active alert of the caller's and its secret (in the clear, this once)."""
    held = db.session.scalar(
        select(func.count()).select_from(Alert).where(Alert.account_id == identity.account_id)
    )
    limit = limit_of(identity.plan, settings)
    if (held or 0) >= limit:
        raise ApiError(
            409,
            "alert_limit",
            f"the {identity.plan} plan holds at most {limit} alerts; delete one.",
        )
    secret = new_secret()
    alert = Alert(
        id="al_" + secrets.token_urlsafe(12),
        account_id=identity.account_id,
        url=new.url,
        symbol=new.symbol,
        window=new.window,
        condition=new.condition,
        level=new.level,
        side=new.side,
        format=new.format,
        status=ACTIVE,
        secret_encrypted=box.seal(secret),
        failures=0,
    )
    db.session.add(alert)
    db.session.commit()
    db.session.refresh(alert)  # read back within the session (the caller shows it)
    return alert, secret


def owned(identity: Identity, alert_id: str) -> Alert:
    """The caller's alert ``alert_id``: 404 when there is none, 403 when it is another's."""
    alert = db.session.get(Alert, alert_id) if len(alert_id) <= 32 else None
    if alert is None:
        raise ApiError(404, "alert_not_found", f"no alert {alert_id[:40]!r}.")
    if alert.account_id != identity.account_id:
        raise ApiError(403, "not_your_alert", "this alert belongs to another account.")
    return alert


def listing(identity: Identity) -> list[Alert]:
    """The caller's alerts, oldest first."""
    found = db.session.scalars(
        select(Alert)
        .where(Alert.account_id == identity.account_id)
        .order_by(Alert.created_at, Alert.id)
    )
    return list(found)


def delete(alert: Alert) -> None:
    """Delete an alert and its deliveries."""
    db.session.execute(sql_delete(Delivery).where(Delivery.alert_id == alert.id))
    db.session.delete(alert)
    db.session.commit()


def set_status(alert: Alert, status: str) -> Alert:
    """Pause an alert (by its owner) or make it active again (its failures forgiven)."""
    alert.status = status
    alert.paused_reason = "paused by its owner" if status == PAUSED else None
    if status == ACTIVE:
        alert.failures = 0
    db.session.commit()
    return alert


def deliveries(alert: Alert) -> list[Delivery]:
    """The alert's last ``DELIVERIES_SHOWN`` calls, newest first."""
    found = db.session.scalars(
        select(Delivery)
        .where(Delivery.alert_id == alert.id)
        .order_by(Delivery.at.desc(), Delivery.id)
        .limit(DELIVERIES_SHOWN)
    )
    return list(found)


def alert_json(alert: Alert) -> dict[str, Any]:
    """An alert as the API shows it (never its secret)."""
    return {
        "id": alert.id,
        "url": alert.url,
        "symbol": alert.symbol,
        "window": alert.window,
        "condition": alert.condition,
        "level": alert.level,
        "side": alert.side,
        "format": alert.format,
        "status": alert.status,
        "pausedReason": alert.paused_reason,
        "createdAt": iso_of(alert.created_at),
    }


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    """A call as ``/deliveries`` shows it."""
    return {
        "id": delivery.id,
        "at": iso_of(delivery.at),
        "status": delivery.status,
        "attempts": delivery.attempts,
        "httpStatus": delivery.http_status,
        "latencyMs": delivery.latency_ms,
        "error": delivery.error,
    }
