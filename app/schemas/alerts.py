"""Alerts (issue 51): the body ``POST /api/alerts`` takes, and the documents its endpoints
answer with (an extension of the interface).

The input schema checks each field's type and range; which symbols and windows are served
(the OpenAPI document's patterns: ``openapi_alerts``), whether a condition has the level and
side it needs, and whether the URL may be called are checked by ``app.alerts.requests`` (each
refusal a 400 with the field's own code).
"""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.alert_kinds import (
    ACTIVE,
    CONDITIONS,
    DELIVERED,
    EXPIRED,
    FAILED,
    FORMATS,
    PAUSED,
    PENDING,
    SIDES,
)
from app.schemas.fields import StrictBoolean, StrictInteger, StrictNumber

LEVEL_RANGE = (-100.0, 100.0)  # an edge may be negative; a probability line is 0-100


class AlertInputSchema(Schema):
    """``POST /api/alerts``'s body."""

    class Meta:
        unknown = RAISE

    url = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    symbol = fields.String(required=True, validate=validate.Length(min=1, max=8))
    window = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=8))
    condition = fields.String(required=True, validate=validate.OneOf(CONDITIONS))
    level = StrictNumber(load_default=None, allow_none=True, validate=validate.Range(*LEVEL_RANGE))
    side = fields.String(load_default=None, allow_none=True, validate=validate.OneOf(SIDES))
    format = fields.String(load_default="json", validate=validate.OneOf(FORMATS))


class AlertSchema(Schema):
    """An alert as the API shows it (never its secret)."""

    class Meta:
        unknown = RAISE

    id = fields.String(required=True)
    url = fields.String(required=True)
    symbol = fields.String(required=True)
    window = fields.String(required=True)
    condition = fields.String(required=True, validate=validate.OneOf(CONDITIONS))
    level = StrictNumber(required=True, allow_none=True)
    side = fields.String(required=True, allow_none=True, validate=validate.OneOf(SIDES))
    format = fields.String(required=True, validate=validate.OneOf(FORMATS))
    status = fields.String(required=True, validate=validate.OneOf((ACTIVE, PAUSED)))
    pausedReason = fields.String(required=True, allow_none=True)  # noqa: N815
    createdAt = fields.String(required=True)  # noqa: N815


class AlertCreatedSchema(Schema):
    """201 to ``POST /api/alerts``: the alert, and its signing secret, shown this once."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    alert = fields.Nested(AlertSchema, required=True)
    secret = fields.String(required=True, validate=validate.Regexp(r"^whsec_[A-Za-z0-9+/=]+$"))


class AlertOneSchema(Schema):
    """``GET /api/alerts/<id>``."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    alert = fields.Nested(AlertSchema, required=True)


class AlertListSchema(Schema):
    """``GET /api/alerts``: the caller's alerts, oldest first."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    alerts = fields.List(fields.Nested(AlertSchema), required=True)


class DeliverySchema(Schema):
    """One call of an alert."""

    class Meta:
        unknown = RAISE

    id = fields.String(required=True)
    at = fields.String(required=True)
    status = fields.String(
        required=True, validate=validate.OneOf((PENDING, DELIVERED, FAILED, EXPIRED))
    )
    attempts = StrictInteger(required=True, validate=validate.Range(min=0))
    httpStatus = StrictInteger(required=True, allow_none=True)  # noqa: N815
    latencyMs = StrictInteger(required=True, allow_none=True)  # noqa: N815
    error = fields.String(required=True, allow_none=True)


class DeliveriesSchema(Schema):
    """``GET /api/alerts/<id>/deliveries``: newest first."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    deliveries = fields.List(fields.Nested(DeliverySchema), required=True)
