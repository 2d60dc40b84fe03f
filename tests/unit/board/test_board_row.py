"""One typed row (issue 28): the schemas and both sources agree with ``BoardRow``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from app.board.row import SERVE_TIME_FIELDS, BoardRow, LiveDetails
from app.markets import parse_symbols
from app.refresher.sources.simulated import SimulatedSource
from app.schemas import EXTENSION
from app.schemas.board import BoardItemSchema, PublishedItemSchema

SERVE_TIME = set(SERVE_TIME_FIELDS)  # computed per response, not on a row
T = 1_800_000_100.0


def _live_row() -> BoardRow:
    [simulated] = SimulatedSource(parse_symbols("BTC"), seed=1).rows(T)
    details = LiveDetails(
        sigma_scale=1.1,
        twap_lookback_s=None,
        slug="btc-updown-5m-1800000000",
        sources={"market": "gamma", "upBook": "clob-ws"},
        input_ages_ms={"upBook": 12, "downBook": None, "price": 3},
    )
    return dataclasses.replace(simulated, source="polymarket", live=details)


def test_every_field_the_item_schema_names_is_a_field_of_the_typed_row() -> None:
    schema = BoardItemSchema()
    declared = set(schema.declared_fields) - SERVE_TIME
    extensions = {n for n, f in schema.declared_fields.items() if f.metadata.get(EXTENSION)}
    # The contract's fields first, in the contract's order (the board, byte for byte).
    contract = [n for n in schema.declared_fields if n not in SERVE_TIME | extensions]
    # Every field a row can carry is in the schema (so in the OpenAPI document), marked as
    # an extension unless the contract names it; and the schema names no other.
    fifteen = dataclasses.replace(_live_row(), window="15m")  # the only row with "window"
    assert set(fifteen.as_json()) == declared
    assert set(_live_row().as_json()) == declared - {"window"}
    for row in (*SimulatedSource(parse_symbols("BTC"), seed=1).rows(T), _live_row(), fifteen):
        published = row.as_json()
        assert set(contract) <= set(published) <= declared, set(published) - declared
        assert list(published)[: len(contract)] == contract
        assert PublishedItemSchema().validate(published) == {}
        assert "model_p_up" not in published  # the track record's, never published


def test_live_details_add_their_fields_where_the_board_had_them() -> None:
    names = list(_live_row().as_json())
    assert names[names.index("sigma") + 1] == "sigmaScale"
    assert names[names.index("settlement") + 1] == "twapLookbackS"
    assert names[-5:] == ["source", "slug", "sources", "inputAgesMs", "suspect"]


def test_a_row_per_market_each_valid() -> None:
    rows = SimulatedSource(seed=2, markets=parse_symbols("BTC,ETH,SOL,XRP")).rows(T)
    for row in rows:
        assert PublishedItemSchema().validate(row.as_json()) == {}
        assert row.slot == row.window_start and row.slot % 300 == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sources", {"market": 5}),
        ("sources", {"market": ["gamma"]}),
        ("sources", ["gamma"]),
        ("inputAgesMs", {"upBook": -1}),
        ("inputAgesMs", {"upBook": True}),
        ("inputAgesMs", {"upBook": "12"}),
        ("inputAgesMs", {"upBook": 1.5}),
        ("price", math.nan),
        ("price", math.inf),
        ("priceToBeat", True),
    ],
)
def test_a_published_row_with_a_wrong_value_is_refused(field: str, value: object) -> None:
    """What every published board is validated against (the one-pass mappings and numbers
    the refresher's validation runs on): a wrong type, a negative age, a non-finite price."""
    row = _live_row().as_json()
    assert PublishedItemSchema().validate(row) == {}
    assert set(PublishedItemSchema().validate(row | {field: value})) == {field}
    # A missing input's age and source are null, which stays valid.
    assert PublishedItemSchema().validate(row | {"inputAgesMs": {"upBook": None}}) == {}
