"""KeyVerificationResponse: what ``GET /api/keys/verify`` answers for a valid key."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.plans import ALL_PLANS
from app.schemas.fields import StrictBoolean

# ``...T12:34:56.789Z``: the key's previous use, UTC, milliseconds.
LAST_USED_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


class KeyVerificationResponseSchema(Schema):
    """The owner, the plan and the masked key; ``lastUsedAt`` the use before this one."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    userId = fields.String(required=True)  # noqa: N815
    plan = fields.String(required=True, validate=validate.OneOf(ALL_PLANS))
    maskedKey = fields.String(allow_none=True)  # noqa: N815
    lastUsedAt = fields.String(allow_none=True, validate=validate.Regexp(LAST_USED_PATTERN))  # noqa: N815
