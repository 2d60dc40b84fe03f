"""Typed board rows for tests that feed the track record by hand (the recorder and the
checkpoints take ``BoardRow`` objects, as the refresher builds them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.board.row import BoardRow, LiveDetails
from harness.spans import WINDOW_S

_NULL = BoardRow(
    symbol="BTC",
    slot=0,
    p_up_pct=None,
    p_down_pct=None,
    up_bid=None,
    up_ask=None,
    down_bid=None,
    down_ask=None,
    up_token_id=None,
    down_token_id=None,
    rem_secs=0.0,
    ts=0,
    window_start=0,
    window_end=WINDOW_S,
    price=None,
    price_to_beat=None,
    sigma=None,
    settlement=None,
    source="polymarket",
)


def live_row(
    slug: str, window_start: int, twap_lookback_s: int | None = None, **values: Any
) -> BoardRow:
    """A live source's row of the window ``slug`` starting at ``window_start``: ``values``
    (BoardRow's attributes) as given, every other number and token null."""
    details = LiveDetails(
        sigma_scale=None,
        twap_lookback_s=twap_lookback_s,
        slug=slug,
        sources={},
        input_ages_ms={},
    )
    return dataclasses.replace(
        _NULL,
        slot=window_start,
        window_start=window_start,
        window_end=window_start + WINDOW_S,
        live=details,
        **values,
    )
