"""The board row: one market's line of the board, typed, as every source builds it.

A source returns ``BoardRow`` objects. ``ROW_FIELDS`` below is the one definition of what a
row publishes: each field's JSON name, in the board's order (the contract's fields, then our
extensions), the attribute that holds it, and whether only the live source knows it (its
``LiveDetails``: a row without them omits those fields). ``as_json`` is built from it, and
the schemas, the page and the renderer are checked against it by tests
(``tests/unit/board/test_row_fields.py``; docs/board.md, "Adding a field"). In-process
readers (the track record, the backtest) take the typed row, never its JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal, NamedTuple

from app.markets import DEFAULT_SPAN

DEFAULT_WINDOW = DEFAULT_SPAN.name  # the contract's window


@dataclass(frozen=True, slots=True)
class RowField:
    """One published field of the row (see ``ROW_FIELDS``)."""

    name: str  # as published (the JSON key)
    attribute: str  # of BoardRow, or of LiveDetails when ``live``
    contract: bool  # a field of the interface's BoardItem; else one of our extensions
    live: bool = False  # only in a row with LiveDetails
    # A container the row holds is published as a copy (a JSON list for a tuple), so what is
    # published never shares anything with the frozen row.
    copy: Literal["dict", "list"] | None = None
    # Not published while its value is this one (then published last): a 5-minute row stays
    # byte for byte the contract's row, a 15-minute one says which window it is.
    omitted_at: str | None = None


# The row's published fields, in the order of the board (byte for byte: the contract's
# fields first, in the contract's order; the live-only ones where the board has always had
# them). Changing this table changes the board: tests/unit/board/test_row_pinned.py pins it.
ROW_FIELDS: tuple[RowField, ...] = (
    RowField("symbol", "symbol", contract=True),
    RowField("slot", "slot", contract=True),
    RowField("p_up_pct", "p_up_pct", contract=True),
    RowField("p_down_pct", "p_down_pct", contract=True),
    RowField("up_bid", "up_bid", contract=True),
    RowField("up_ask", "up_ask", contract=True),
    RowField("down_bid", "down_bid", contract=True),
    RowField("down_ask", "down_ask", contract=True),
    RowField("up_token_id", "up_token_id", contract=True),
    RowField("down_token_id", "down_token_id", contract=True),
    RowField("rem_secs", "rem_secs", contract=True),
    RowField("ts", "ts", contract=False),
    RowField("windowStart", "window_start", contract=False),
    RowField("windowEnd", "window_end", contract=False),
    RowField("price", "price", contract=False),
    RowField("priceToBeat", "price_to_beat", contract=False),
    RowField("sigma", "sigma", contract=False),
    RowField("sigmaScale", "sigma_scale", contract=False, live=True),
    RowField("settlement", "settlement", contract=False),
    RowField("twapLookbackS", "twap_lookback_s", contract=False, live=True),
    RowField("source", "source", contract=False),
    RowField("slug", "slug", contract=False, live=True),
    RowField("sources", "sources", contract=False, live=True, copy="dict"),
    RowField("inputAgesMs", "input_ages_ms", contract=False, live=True, copy="dict"),
    RowField("suspect", "suspect", contract=False, live=True, copy="list"),
    RowField("window", "window", contract=False, omitted_at=DEFAULT_WINDOW),
)
CONTRACT_FIELDS = tuple(f.name for f in ROW_FIELDS if f.contract)
EXTENSION_FIELDS = tuple(f.name for f in ROW_FIELDS if not f.contract)
LIVE_FIELDS = tuple(f.name for f in ROW_FIELDS if f.live)
# The contract's row fields that are no row's: the web worker computes them for each answer
# at the time it serves (``app/board/render.py``) and appends them, in this order, after the
# published fields. A published row never carries them (``PublishedItemSchema``).
SERVE_TIME_FIELDS = ("dataAgeMs", "isStale", "latencyLevel")


@dataclass(frozen=True, slots=True)
class LiveDetails:
    """What the live source adds to a row: where each number came from and how old it is."""

    sigma_scale: float | None
    twap_lookback_s: int | None
    slug: str | None
    sources: dict[str, str | None]
    input_ages_ms: dict[str, int | None]
    # Why the row is stale although its inputs are young: inputs that disagree with their
    # witnesses (docs/reliability.md); empty when every input agrees.
    suspect: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One market's row at one instant. ``slot`` is the window start in unix seconds."""

    symbol: str
    slot: int
    p_up_pct: float | None
    p_down_pct: float | None
    up_bid: float | None
    up_ask: float | None
    down_bid: float | None
    down_ask: float | None
    up_token_id: str | None
    down_token_id: str | None
    rem_secs: float
    ts: int  # epoch ms of the row's oldest input that matters: its staleness
    window_start: int
    window_end: int
    price: float | None
    price_to_beat: float | None
    sigma: float | None
    settlement: str | None
    source: str
    live: LiveDetails | None = None
    # The model's own P(up) behind the row, not rounded (the track record's); not published.
    model_p_up: float | None = None
    window: str = DEFAULT_WINDOW  # the window's span (``app.markets.Span.name``)

    def as_json(self) -> dict[str, Any]:
        """The row as it is published (``ROW_FIELDS``: names and order of the board)."""
        names, values, copies = _PLAIN if self.live is None else _LIVE
        row = dict(zip(names, values(self), strict=True))
        for name, copy in copies:
            row[name] = copy(row[name])
        if self.window != DEFAULT_WINDOW:
            row["window"] = self.window
        return row


class _Shape(NamedTuple):
    """How ``as_json`` publishes a row of one kind (with LiveDetails or without)."""

    names: tuple[str, ...]
    values: Callable[[BoardRow], tuple[Any, ...]]  # every field's value, in one call
    copies: tuple[tuple[str, Callable[[Any], Any]], ...]  # (name, copy) of each container


def _shape(fields: tuple[RowField, ...]) -> _Shape:
    """The shape of a row publishing ``fields`` (a live field's value is in its details)."""
    paths = (f"live.{f.attribute}" if f.live else f.attribute for f in fields)
    return _Shape(
        names=tuple(f.name for f in fields),
        values=attrgetter(*paths),
        copies=tuple((f.name, dict if f.copy == "dict" else list) for f in fields if f.copy),
    )


# Built once from ROW_FIELDS: as_json runs for every row of every board the refresher builds.
_ALWAYS = tuple(f for f in ROW_FIELDS if f.omitted_at is None)
_LIVE = _shape(_ALWAYS)
_PLAIN = _shape(tuple(f for f in _ALWAYS if not f.live))
# The one field published only away from its default (a test keeps this list whole).
OMITTED_AT_DEFAULT = tuple(f.name for f in ROW_FIELDS if f.omitted_at is not None)
assert OMITTED_AT_DEFAULT == ("window",), "as_json publishes exactly these by hand"
