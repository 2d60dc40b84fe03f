"""ErrorResponse: the body of every non-2xx answer."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.schemas.fields import StrictBoolean, StrictInteger


class ErrorResponseSchema(Schema):
    """``{"ok": false, "code": ..., "error": ..., "retryAfterMs": ...}``."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(False))
    code = fields.String()
    error = fields.String(required=True, validate=validate.Length(min=1))
    retryAfterMs = StrictInteger(validate=validate.Range(min=0))  # noqa: N815
