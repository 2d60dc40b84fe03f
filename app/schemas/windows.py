"""WindowsResponse: one page of the recorded windows of a market (an extension)."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.schemas.fields import StrictBoolean, StrictInteger, StrictNumber


class ExportedCheckpointSchema(Schema):
    """What the board said at one time left (every value null: missing, see calibration.md)."""

    class Meta:
        unknown = RAISE

    remS = StrictInteger(required=True, validate=validate.Range(min=0))  # noqa: N815
    pUp = StrictNumber(required=True, allow_none=True, validate=validate.Range(0, 1))  # noqa: N815
    marketMid = StrictNumber(  # noqa: N815
        required=True, allow_none=True, validate=validate.Range(0, 1)
    )
    sigma = StrictNumber(required=True, allow_none=True)
    price = StrictNumber(required=True, allow_none=True)


class ExportedWindowSchema(Schema):
    """One recorded window: its rule, price to beat, outcome and checkpoints."""

    class Meta:
        unknown = RAISE

    slug = fields.String(required=True)
    windowStart = StrictInteger(required=True)  # noqa: N815
    windowEnd = StrictInteger(required=True)  # noqa: N815
    rule = fields.String(required=True, allow_none=True, validate=validate.OneOf(["spot", "twap"]))
    lookbackS = StrictInteger(  # noqa: N815
        required=True, allow_none=True, validate=validate.Range(min=0)
    )
    priceToBeat = StrictNumber(required=True, allow_none=True)  # noqa: N815
    outcome = fields.String(required=True, allow_none=True, validate=validate.OneOf(["up", "down"]))
    outcomeSource = fields.String(  # noqa: N815
        required=True, allow_none=True, validate=validate.OneOf(["feed", "market"])
    )
    checkpoints = fields.List(fields.Nested(ExportedCheckpointSchema), required=True)


class WindowsResponseSchema(Schema):
    """The document ``GET /api/probboard/windows`` answers with (JSON)."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    symbol = fields.String(required=True)
    source = fields.String(required=True)
    windows = fields.List(fields.Nested(ExportedWindowSchema), required=True)
    next = fields.String(required=True, allow_none=True)
