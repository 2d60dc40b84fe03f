"""Prices at their source's precision (issue 50, point 5): a TWAP window's price to beat is a
mean of the stream's values (or its 18-decimal report), a float with 14 decimals of noise
(``100050.94263611984``); the row shows it to the stream's own 8 decimals, and its price as
the stream wrote it. The clock is driven; the fakes and the live source are real."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.markets import CHAINLINK_DECIMALS, parse_symbols
from app.refresher.model import TWAP
from harness.fake_polymarket import FakePolymarket, running
from harness.fake_polymarket.brownian import BrownianPath
from harness.spans import FIVE_MINUTES
from tests.support.live_source import Clock, sources_on, wait_for

T0 = 1_800_000_000
BTC = parse_symbols("BTC")


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    with running(auto_markets=True, auto_rule=TWAP) as fake:
        yield fake


def _decimals(number: float) -> int:
    """The decimals of a number as JSON writes it."""
    text = json.dumps(number)
    return len(text.split(".")[1]) if "." in text else 0


def test_a_twap_price_to_beat_is_shown_to_the_streams_decimals(world: FakePolymarket) -> None:
    path = BrownianPath(11, 1.2e-4, "100050.12345678", T0 - 1000, 1100)
    world.rtds.seed_path(path, T0 - 900, T0 + 20, symbol=BTC[0].chainlink)
    world.clob_ws.keep_alive(0.1)
    exact = float(path.twap(T0, 60))
    assert _decimals(exact) > CHAINLINK_DECIMALS  # the float noise the issue saw
    clock = Clock(T0 + 20.5)
    with sources_on(world, spans=(FIVE_MINUTES,)) as make:
        source = make(clock)
        seen: list[dict[str, object]] = []

        def priced() -> bool:
            seen[:] = [source.rows(clock())[0].as_json()]
            return seen[0]["priceToBeat"] is not None and seen[0]["price"] is not None

        wait_for(priced, "a row with its price to beat")
        row = seen[0]
    assert row["priceToBeat"] == round(exact, CHAINLINK_DECIMALS)
    assert row["price"] in {float(path.value(t)) for t in range(T0, T0 + 21)}
    body = json.dumps(row)
    assert f'"priceToBeat": {round(exact, CHAINLINK_DECIMALS)!r}' in body
