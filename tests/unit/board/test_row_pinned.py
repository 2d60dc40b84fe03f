"""The published row, pinned (issue 38): names, order and bytes as the board has them.

These literals are the board as it was before the row's fields were defined in one table
(``app/board/row.py``); a refactor that changed a name, the order or a byte of a row, on
``/api/probboard/latest`` or on the stream (the same pre-serialised rows), fails here. A
field added on purpose is added here too, in the same commit.
"""

from __future__ import annotations

import dataclasses
import json

from app.board.render import BoardRenderer
from app.board.row import BoardRow, LiveDetails
from app.board.snapshot import dumps, parse_snapshot
from app.config import load_settings

PLAIN_NAMES = [
    "symbol", "slot", "p_up_pct", "p_down_pct", "up_bid", "up_ask", "down_bid", "down_ask",
    "up_token_id", "down_token_id", "rem_secs", "ts", "windowStart", "windowEnd", "price",
    "priceToBeat", "sigma", "settlement", "source",
]  # fmt: skip
LIVE_NAMES = [
    "symbol", "slot", "p_up_pct", "p_down_pct", "up_bid", "up_ask", "down_bid", "down_ask",
    "up_token_id", "down_token_id", "rem_secs", "ts", "windowStart", "windowEnd", "price",
    "priceToBeat", "sigma", "sigmaScale", "settlement", "twapLookbackS", "source", "slug",
    "sources", "inputAgesMs", "suspect",
]  # fmt: skip
SERVE_TIME_NAMES = ["dataAgeMs", "isStale", "latencyLevel"]

START = 1_800_000_000
TS_MS = START * 1000 + 100_250

PLAIN_BYTES = (
    '{"symbol":"BTC","slot":1800000000,"p_up_pct":61.25,"p_down_pct":38.75,"up_bid":0.6,'
    '"up_ask":0.62,"down_bid":0.38,"down_ask":0.4,"up_token_id":"123","down_token_id":"456",'
    '"rem_secs":199.75,"ts":1800000100250,"windowStart":1800000000,"windowEnd":1800000300,'
    '"price":97123.45,"priceToBeat":97100.0,"sigma":2.5e-05,"settlement":"spot",'
    '"source":"simulated"}'
)
LIVE_BYTES = (
    '{"symbol":"BTC","slot":1800000000,"p_up_pct":61.25,"p_down_pct":38.75,"up_bid":0.6,'
    '"up_ask":0.62,"down_bid":null,"down_ask":0.4,"up_token_id":"123","down_token_id":null,'
    '"rem_secs":199.75,"ts":1800000100250,"windowStart":1800000000,"windowEnd":1800000300,'
    '"price":97123.45,"priceToBeat":null,"sigma":2.5e-05,"sigmaScale":1.1,"settlement":"twap",'
    '"twapLookbackS":30,"source":"polymarket","slug":"btc-updown-5m-1800000000",'
    '"sources":{"market":"gamma","upBook":"clob-ws","price":null},'
    '"inputAgesMs":{"upBook":12,"downBook":null},"suspect":["price to beat: witnesses differ"]}'
)


def plain_row() -> BoardRow:
    """A row without LiveDetails (the simulated source's kind), every field set."""
    return BoardRow(
        symbol="BTC",
        slot=START,
        p_up_pct=61.25,
        p_down_pct=38.75,
        up_bid=0.6,
        up_ask=0.62,
        down_bid=0.38,
        down_ask=0.4,
        up_token_id="123",
        down_token_id="456",
        rem_secs=199.75,
        ts=TS_MS,
        window_start=START,
        window_end=START + 300,
        price=97123.45,
        price_to_beat=97100.0,
        sigma=2.5e-05,
        settlement="spot",
        source="simulated",
        model_p_up=0.61251,
    )


def live_row() -> BoardRow:
    """A row with every LiveDetails field, some values null."""
    details = LiveDetails(
        sigma_scale=1.1,
        twap_lookback_s=30,
        slug="btc-updown-5m-1800000000",
        sources={"market": "gamma", "upBook": "clob-ws", "price": None},
        input_ages_ms={"upBook": 12, "downBook": None},
        suspect=("price to beat: witnesses differ",),
    )
    return dataclasses.replace(
        plain_row(),
        down_bid=None,
        down_token_id=None,
        price_to_beat=None,
        settlement="twap",
        source="polymarket",
        live=details,
    )


def test_a_row_without_live_details_publishes_these_names_in_this_order() -> None:
    assert list(plain_row().as_json()) == PLAIN_NAMES


def test_a_full_live_row_publishes_these_names_in_this_order() -> None:
    assert list(live_row().as_json()) == LIVE_NAMES


def test_the_rows_bytes_are_unchanged() -> None:
    assert dumps(plain_row().as_json()) == PLAIN_BYTES
    assert dumps(live_row().as_json()) == LIVE_BYTES


def test_a_published_row_is_a_copy_the_row_keeps_nothing_of() -> None:
    row = live_row()
    published = row.as_json()
    published["sources"]["market"] = "changed"
    published["inputAgesMs"]["upBook"] = 0
    published["suspect"].append("more")
    assert dumps(row.as_json()) == LIVE_BYTES


def test_the_served_rows_are_the_published_bytes_and_the_serve_time_fields() -> None:
    """``/latest`` and the stream splice the same pre-serialised rows (``render.py``)."""
    board = {"seq": 1, "ts": TS_MS, "source": "polymarket", "newestInputMs": TS_MS,
             "items": [live_row().as_json(), plain_row().as_json()]}  # fmt: skip
    renderer = BoardRenderer(load_settings({}))
    body = renderer.render(parse_snapshot(dumps(board)), "vip_pro", TS_MS + 10)
    served = ',"dataAgeMs":10,"isStale":false,"latencyLevel":"ok"}'
    assert f'"items":[{LIVE_BYTES[:-1]}{served},{PLAIN_BYTES[:-1]}{served}]}}' in body
    items = json.loads(body)["items"]
    assert [list(item) for item in items] == [
        LIVE_NAMES + SERVE_TIME_NAMES,
        PLAIN_NAMES + SERVE_TIME_NAMES,
    ]
