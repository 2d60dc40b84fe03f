"""The board row: one market's line of the board, typed, as every source builds it.

A source returns ``BoardRow`` objects; ``as_json`` is the one place that names the row's JSON
fields and their order (the contract's fields, then our extensions), so the bus, the schemas'
tests and the renderer all see the same thing. What only the live source knows (provenance,
input ages, the TWAP lookback) is its ``LiveDetails``; a row without them omits those fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    def as_json(self) -> dict[str, Any]:
        """The row as it is published (field names and order of the board)."""
        row: dict[str, Any] = {
            "symbol": self.symbol,
            "slot": self.slot,
            "p_up_pct": self.p_up_pct,
            "p_down_pct": self.p_down_pct,
            "up_bid": self.up_bid,
            "up_ask": self.up_ask,
            "down_bid": self.down_bid,
            "down_ask": self.down_ask,
            "up_token_id": self.up_token_id,
            "down_token_id": self.down_token_id,
            "rem_secs": self.rem_secs,
            "ts": self.ts,
            "windowStart": self.window_start,
            "windowEnd": self.window_end,
            "price": self.price,
            "priceToBeat": self.price_to_beat,
            "sigma": self.sigma,
        }
        live = self.live
        if live is not None:
            row["sigmaScale"] = live.sigma_scale
        row["settlement"] = self.settlement
        if live is not None:
            row["twapLookbackS"] = live.twap_lookback_s
        row["source"] = self.source
        if live is not None:
            row["slug"] = live.slug
            row["sources"] = dict(live.sources)
            row["inputAgesMs"] = dict(live.input_ages_ms)
            row["suspect"] = list(live.suspect)
        return row
