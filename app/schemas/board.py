"""BoardResponse and BoardItem, and the board as it travels on the bus."""

from __future__ import annotations

from typing import Any

from marshmallow import INCLUDE, RAISE, Schema, ValidationError, fields, validate, validates_schema

from app.config import MIN_REFRESH_MS
from app.markets import DEFAULT_SPAN, MARKETS, SPANS
from app.plans import ALL_PLANS
from app.schemas import EXTENSION
from app.schemas.fields import (
    FlatMapping,
    StrictBoolean,
    StrictInteger,
    StrictNumber,
    is_count,
    is_text,
)

LATENCY_LEVELS = ("ok", "warn", "danger")
SETTLEMENTS = ("spot", "twap")
# Data times are epoch milliseconds before 2100: anything later is a corrupt board.
MAX_EPOCH_MS = 4_102_444_800_000
UPDATED_AT_PATTERN = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$"
SERVED_AT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
TOKEN_ID_PATTERN = r"^[0-9]{1,78}$"  # noqa: S105 - a pattern, not a password


LONGEST_S = max(span.longest_s for span in SPANS.values())


def _percent() -> StrictNumber:
    return StrictNumber(allow_none=True, validate=validate.Range(min=0, max=100))


def _price() -> StrictNumber:
    return StrictNumber(allow_none=True, validate=validate.Range(min=0, max=1))


def _token_id() -> fields.String:
    return fields.String(allow_none=True, validate=validate.Regexp(TOKEN_ID_PATTERN))


def _extension(
    field: type[fields.Field[Any]], description: str, **kwargs: Any
) -> fields.Field[Any]:
    """A row field beyond the interface's: optional, and marked so in the OpenAPI document."""
    metadata = {"description": description, EXTENSION: True}
    return field(metadata=metadata, **kwargs)


class BoardItemSchema(Schema):
    """One board row; the interface allows properties beyond those listed.

    Its fields are the row's (``ROW_FIELDS`` in ``app/board/row.py``, in that order) and the
    serve-time ones (``SERVE_TIME_FIELDS``) after the contract's, the extensions marked:
    ``tests/unit/board/test_row_fields.py`` checks it, so a field added to the row fails
    there until it is declared here with its validation. (Checked, not imported: the
    board's package imports this one.)
    """

    class Meta:
        unknown = INCLUDE

    symbol = fields.String(required=True, validate=validate.OneOf(list(MARKETS)))
    slot = StrictNumber(allow_none=True)
    p_up_pct = _percent()
    p_down_pct = _percent()
    up_bid = _price()
    up_ask = _price()
    down_bid = _price()
    down_ask = _price()
    up_token_id = _token_id()
    down_token_id = _token_id()
    # Up to the row's own window's length (checked below): 300 s for the contract's row.
    rem_secs = StrictNumber(allow_none=True, validate=validate.Range(min=0, max=LONGEST_S))
    dataAgeMs = StrictNumber(allow_none=True)  # noqa: N815
    isStale = StrictBoolean()  # noqa: N815
    latencyLevel = fields.String(validate=validate.OneOf(LATENCY_LEVELS))  # noqa: N815
    # The extensions, in the order of ROW_FIELDS (app/board/row.py; docs/board.md).
    ts = _extension(StrictInteger, "Data time of this row: its oldest input (epoch ms).")
    windowStart = _extension(StrictInteger, "The window's start, unix seconds.")  # noqa: N815
    windowEnd = _extension(StrictInteger, "The window's end, unix seconds.")  # noqa: N815
    price = _extension(StrictNumber, "The coin's price at `ts`.", allow_none=True)
    priceToBeat = _extension(  # noqa: N815
        StrictNumber, "The price latched at `windowStart`.", allow_none=True
    )
    sigma = _extension(StrictNumber, "The volatility the model used, per second.", allow_none=True)
    sigmaScale = _extension(  # noqa: N815
        StrictNumber, "Live source: the 5-minute horizon scale of the variance.", allow_none=True
    )
    settlement = _extension(
        fields.String,
        "How the window settles: `spot` or `twap`.",
        allow_none=True,
        validate=validate.OneOf(SETTLEMENTS),
    )
    twapLookbackS = _extension(  # noqa: N815
        StrictInteger, "Live source: the TWAP's lookback, seconds.", allow_none=True
    )
    source = _extension(fields.String, "Where the numbers came from (`simulated`, ...).")
    slug = _extension(fields.String, "Live source: the market's slug.", allow_none=True)
    sources = _extension(
        FlatMapping,
        "Live source: where each input came from (`market`, `upBook`, `downBook`, ...).",
        accepts=is_text,
        what="a string",
        keys=fields.String(),
        values=fields.String(allow_none=True),
        allow_none=True,
    )
    inputAgesMs = _extension(  # noqa: N815
        FlatMapping,
        "Live source: each input's age (ms; null for an input missing).",
        accepts=is_count,
        what="an integer at or above 0",
        keys=fields.String(),
        values=StrictInteger(allow_none=True, validate=validate.Range(min=0)),
        allow_none=True,
    )
    suspect = _extension(
        fields.List,
        "Live source: why the row is stale although its inputs are young (inputs that "
        "disagree with their witnesses); empty when every input agrees.",
        cls_or_instance=fields.String(),
    )
    window = _extension(
        fields.String,
        "The window the row belongs to (`?window=`): present on a row of another window "
        "than the 5-minute one, which stays the contract's row byte for byte.",
        validate=validate.OneOf(list(SPANS)),
    )

    @validates_schema
    def _probabilities_add_up(self, data: dict[str, Any], **kwargs: Any) -> None:
        up, down = data.get("p_up_pct"), data.get("p_down_pct")
        if up is not None and down is not None and abs(up + down - 100) > 1e-6:
            raise ValidationError("p_up_pct and p_down_pct must add up to 100.")

    @validates_schema
    def _rem_secs_within_its_window(self, data: dict[str, Any], **kwargs: Any) -> None:
        span = SPANS.get(str(data.get("window", DEFAULT_SPAN.name)), DEFAULT_SPAN)
        rem = data.get("rem_secs")
        if rem is not None and rem > span.longest_s:
            raise ValidationError(f"rem_secs {rem} is past a {span.name} window's length.")


class BoardResponseSchema(Schema):
    """The document ``GET /api/probboard/latest`` answers with and the stream carries."""

    class Meta:
        unknown = RAISE

    ok = StrictBoolean(required=True, validate=validate.Equal(True))
    plan = fields.String(required=True, validate=validate.OneOf(ALL_PLANS))
    planLabel = fields.String()  # noqa: N815
    refreshMs = StrictInteger(required=True, validate=validate.Range(min=MIN_REFRESH_MS))  # noqa: N815
    updatedAt = fields.String(allow_none=True, validate=validate.Regexp(UPDATED_AT_PATTERN))  # noqa: N815
    servedAt = fields.String(validate=validate.Regexp(SERVED_AT_PATTERN))  # noqa: N815
    dataAgeMs = StrictNumber(allow_none=True)  # noqa: N815
    staleThresholdMs = StrictNumber()  # noqa: N815
    severeStaleThresholdMs = StrictNumber()  # noqa: N815
    isStale = StrictBoolean()  # noqa: N815
    latencyLevel = fields.String(validate=validate.OneOf(LATENCY_LEVELS))  # noqa: N815
    # Extension: when the newest input behind the board reached the service (epoch ms).
    newestInputMs = StrictInteger(allow_none=True)  # noqa: N815
    items = fields.List(fields.Nested(BoardItemSchema), required=True)


class PublishedItemSchema(BoardItemSchema):
    """A row as the refresher publishes it: ``ts`` (epoch ms of its data) is required.

    The serve-time fields (``dataAgeMs``, ``isStale``, ``latencyLevel``) are computed by the
    web worker for each response, so a published row must not carry them.
    """

    ts = StrictInteger(required=True, validate=validate.Range(min=0, max=MAX_EPOCH_MS))

    @validates_schema
    def _no_serve_time_fields(self, data: dict[str, Any], **kwargs: Any) -> None:
        present = {"dataAgeMs", "isStale", "latencyLevel"} & set(data)
        if present:
            raise ValidationError(f"serve-time fields in a published row: {sorted(present)}")


class PublishedBoardSchema(Schema):
    """The board on the bus: ``{"seq", "ts", "source", "items"}``."""

    class Meta:
        unknown = RAISE

    seq = StrictInteger(required=True, validate=validate.Range(min=0))
    ts = StrictInteger(required=True, validate=validate.Range(min=0, max=MAX_EPOCH_MS))
    source = fields.String(required=True)
    items = fields.List(fields.Nested(PublishedItemSchema), required=True)
    # When the newest input behind the board arrived (epoch ms); older refreshers omit it.
    newestInputMs = StrictInteger(validate=validate.Range(min=0, max=MAX_EPOCH_MS))  # noqa: N815
    # Which refresher published it (host:pid), when several share the bus under a lease.
    publisher = fields.String(validate=validate.Length(max=300))
