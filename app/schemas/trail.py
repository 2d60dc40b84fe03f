"""TrailResponse: the current window's path of each market (an extension of the interface)."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from app.config import MIN_REFRESH_MS
from app.markets import MARKETS, SPANS
from app.schemas.fields import StrictBoolean, StrictInteger

# The longest any window lasts: a 4-hour block across the autumn change of clocks (5 hours).
LONGEST_S = max(span.seconds for span in SPANS.values()) + 3600


class PointField(fields.Field[list[Any]]):
    """``[s, pUp, mid]``: seconds into the window (0 to its length), then two numbers 0-1 or
    null."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[Any]:
        if not isinstance(value, list) or len(value) != 3:
            raise ValidationError("a point is [s, pUp, mid].")
        s, *rest = value
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s <= LONGEST_S:
            raise ValidationError(f"s is seconds into the window, 0 to {LONGEST_S}.")
        for v in rest:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ValidationError("pUp and mid are numbers or null.")
            if v is not None and not 0 <= v <= 1:
                raise ValidationError("pUp and mid are between 0 and 1.")
        return value


class TrailMarketSchema(Schema):
    """One market's points in its current window, oldest first."""

    class Meta:
        unknown = RAISE

    symbol = fields.String(required=True, validate=validate.OneOf(list(MARKETS)))
    windowStart = StrictInteger(required=True)  # noqa: N815
    points = fields.List(
        PointField(
            metadata={
                "type": "array",
                "description": "[s, pUp, mid]: seconds into the window; the model's P(up) "
                "and the market's UP mid (0-1), null while the row was stale or missing.",
            }
        ),
        required=True,
    )


class TrailResponseSchema(Schema):
    """The document ``GET /api/probboard/trail`` answers with."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    stepMs = StrictInteger(required=True, validate=validate.Range(min=MIN_REFRESH_MS))  # noqa: N815
    markets = fields.List(fields.Nested(TrailMarketSchema), required=True)
