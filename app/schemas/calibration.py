"""CalibrationResponse: the live record's scores (an extension of the interface)."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.calibration.periods import SPANS
from app.schemas.fields import StrictBoolean, StrictInteger


class ScoresSchema(Schema):
    """Mean Brier score and log loss (null with nothing to score)."""

    class Meta:
        unknown = RAISE

    brier = fields.Float(required=True, allow_none=True, validate=validate.Range(0, 1))
    logLoss = fields.Float(required=True, allow_none=True, validate=validate.Range(0))  # noqa: N815


class DifferenceSchema(Schema):
    """The model's scores minus the market's, over the windows that have both."""

    class Meta:
        unknown = RAISE

    brier = fields.Float(required=True, allow_none=True)
    logLoss = fields.Float(required=True, allow_none=True)  # noqa: N815
    n = StrictInteger(required=True, validate=validate.Range(min=0))


class BothSchema(Schema):
    """The model's and the market's scores on the same checkpoints (those with both)."""

    class Meta:
        unknown = RAISE

    n = StrictInteger(required=True, validate=validate.Range(min=0))
    model = fields.Nested(ScoresSchema, required=True)
    market = fields.Nested(ScoresSchema, required=True)


class OverallSchema(BothSchema):
    """Every checkpoint with both, and which did better by log loss (null: none, or a tie)."""

    better = fields.String(
        required=True, allow_none=True, validate=validate.OneOf(["model", "market"])
    )


class BucketSchema(Schema):
    """One time left: the model's and the market's scores."""

    class Meta:
        unknown = RAISE

    remS = StrictInteger(required=True)  # noqa: N815
    n = StrictInteger(required=True, validate=validate.Range(min=0))
    model = fields.Nested(ScoresSchema, required=True)
    nMarket = StrictInteger(required=True, validate=validate.Range(min=0))  # noqa: N815
    market = fields.Nested(ScoresSchema, required=True)
    difference = fields.Nested(DifferenceSchema, required=True)
    both = fields.Nested(BothSchema, required=True)


class BinSchema(Schema):
    """One reliability bin of P(up)."""

    class Meta:
        unknown = RAISE

    lo = fields.Float(required=True, validate=validate.Range(0, 1))
    hi = fields.Float(required=True, validate=validate.Range(0, 1))
    n = StrictInteger(required=True, validate=validate.Range(min=0))
    meanP = fields.Float(required=True, allow_none=True, validate=validate.Range(0, 1))  # noqa: N815
    observed = fields.Float(required=True, allow_none=True, validate=validate.Range(0, 1))


class PeriodSchema(Schema):
    """The windows covered: from the first one's start to the last one's end."""

    class Meta:
        unknown = RAISE

    start = fields.String(required=True)
    end = fields.String(required=True)


class CalibrationResponseSchema(Schema):
    """The document ``GET /api/probboard/calibration`` answers with."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    source = fields.String(required=True)
    symbol = fields.String(required=True)  # the market scored (``?symbol=``)
    # The period scored (``?period=``): its windows are those that started within it.
    span = fields.String(required=True, validate=validate.OneOf(SPANS))
    period = fields.Nested(PeriodSchema, required=True, allow_none=True)
    windowsRecorded = StrictInteger(required=True, validate=validate.Range(min=0))  # noqa: N815
    windows = StrictInteger(required=True, validate=validate.Range(min=0))
    buckets = fields.List(fields.Nested(BucketSchema), required=True)
    overall = fields.Nested(OverallSchema, required=True)
    reliability = fields.List(fields.Nested(BinSchema), required=True)
    reliabilityMarket = fields.List(fields.Nested(BinSchema), required=True)  # noqa: N815
    computedAt = fields.String(required=True)  # noqa: N815
    maxAgeS = StrictInteger(required=True)  # noqa: N815
