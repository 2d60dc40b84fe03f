"""HealthResponse: the public liveness and readiness document."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.config import BOARD_SOURCES, MIN_REFRESH_MS, SOURCE_LABELS
from app.markets import MARKETS, SPANS
from app.schemas import EXTENSION
from app.schemas.fields import StrictBoolean, StrictInteger


class RefreshMsSchema(Schema):
    """Refresh intervals per plan, in milliseconds."""

    class Meta:
        unknown = RAISE

    guest = StrictInteger(required=True, validate=validate.Range(min=MIN_REFRESH_MS))
    user = StrictInteger(required=True, validate=validate.Range(min=MIN_REFRESH_MS))
    vip_pro = StrictInteger(required=True, validate=validate.Range(min=MIN_REFRESH_MS))


class HealthResponseSchema(Schema):
    """The document ``GET /api/health`` answers with."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    redisReady = StrictBoolean(required=True)  # noqa: N815
    redisStatus = fields.String(required=True)  # noqa: N815
    refreshMs = fields.Nested(RefreshMsSchema, required=True)  # noqa: N815
    symbols = fields.List(
        fields.String(validate=validate.OneOf([m.key for m in MARKETS.values()])), required=True
    )
    # Extension: which source the refresher of this deployment reads (BOARD_SOURCE), so a
    # page can say SIMULATED before any board has arrived, and a client can tell the two.
    source = fields.String(
        validate=validate.OneOf(BOARD_SOURCES),
        metadata={
            "description": "Where the board's numbers come from: `simulated` (generated "
            "here) or `polymarket` (the live markets).",
            EXTENSION: True,
        },
    )
    # Extension (issue 50): what the numbers are, as the page's badge says it: a live source
    # whose upstreams are all on this machine (the bundled fakes) is not called live alone.
    sourceLabel = fields.String(  # noqa: N815
        validate=validate.OneOf(SOURCE_LABELS),
        metadata={
            "description": "What the board's numbers are: `simulated`, `live`, or `live · "
            "fake upstream on this machine` (every upstream address a loopback one).",
            EXTENSION: True,
        },
    )
    # Extension (issue 39): the windows served, in ``WINDOWS`` order; ``?window=`` takes one.
    windows = fields.List(
        fields.String(validate=validate.OneOf(list(SPANS))),
        metadata={
            "description": "The windows served (`5m`, `15m`); `?window=` on `/latest`, the "
            "stream and the track record picks one (without it: the 5-minute board).",
            EXTENSION: True,
        },
    )
