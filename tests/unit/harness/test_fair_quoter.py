"""The bundled fake quotes like a market (issue 50, point 1): its books sit around the fair
value of its own path by the exact model, mirrored UP/DOWN on the tick grid, late by the
quoter's lag; a book change is one set of level changes that turns the old book into the new.

A world that is built but not started (no sockets), on a driven clock.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from app.refresher.model import TWAP, probability_up
from harness.fake_polymarket import FakeMarket, FakePolymarket
from harness.fake_polymarket.brownian import BrownianPath
from harness.fake_polymarket.market import FakeBook
from harness.fake_polymarket.quoting import (
    FairQuoter,
    QuoteStyle,
    book_changes,
    fair_up,
    quote_books,
)

T0 = 1_795_981_500  # a 5-minute window start
SIGMA = 1.2e-4
EXACT = QuoteStyle(lag_s=0.0, noise=0.0, wide_share=0.0)


def _path() -> BrownianPath:
    return BrownianPath(7, SIGMA, 100_000.0, T0 - 700, 2000)


def _no_exchange(_: float) -> Decimal:
    raise AssertionError("a Chainlink window never reads the exchange price")


def test_fair_value_inside_the_lookback_is_the_exact_twap_model() -> None:
    """40 s before the end of a 60-s TWAP window: the price to beat is the TWAP at T0 and
    the settlement's first 20 seconds are known."""
    path, market = _path(), FakeMarket(T0, rule=TWAP)
    t = T0 + 260.0
    seen = [float(path.value(s)) for s in range(T0 + 241, T0 + 261)]
    expected = probability_up(
        float(path.value(T0 + 260)),
        float(path.twap(T0, 60)),
        40.0,
        SIGMA,
        rule=TWAP,
        lookback_s=60,
        known_mean=math.fsum(seen) / len(seen),
    )
    assert fair_up(market, path, _no_exchange, t, SIGMA) == pytest.approx(expected, rel=1e-12)
    assert fair_up(market, path, _no_exchange, T0 - 1.0, SIGMA) is None  # not begun
    assert fair_up(market, path, _no_exchange, T0 + 300.0, SIGMA) is None  # over


def test_books_are_mirrored_on_the_tick_grid() -> None:
    up, down = quote_books(0.534, wide=False, sizes=range(1, 9))
    assert (up.best_bid, up.best_ask) == (0.53, 0.54)
    assert (down.best_bid, down.best_ask) == (0.46, 0.47)
    assert {
        Decimal(p) + Decimal(q)
        for p, q in zip(sorted(up.bids), sorted(down.asks, reverse=True), strict=True)
    } == {Decimal(1)}
    wide_up, _ = quote_books(0.534, wide=True, sizes=range(1, 9))
    assert (wide_up.best_bid, wide_up.best_ask) == (0.52, 0.54)
    for mid in (0.0001, 0.999):
        edge_up, edge_down = quote_books(mid, wide=False, sizes=range(1, 9))
        prices = [Decimal(p) for book in (edge_up, edge_down) for p in (*book.bids, *book.asks)]
        assert all(Decimal("0.01") <= p <= Decimal("0.99") for p in prices)
        assert all(p == p.quantize(Decimal("0.01")) for p in prices)
        assert edge_up.best_bid is not None and edge_up.best_ask is not None
        assert edge_up.best_bid < edge_up.best_ask


def test_book_changes_turn_the_old_book_into_the_new() -> None:
    old = FakeBook(bids={"0.5": "10", "0.49": "5"}, asks={"0.52": "7"})
    new = FakeBook(bids={"0.50": "10", "0.48": "3"}, asks={"0.51": "8", "0.52": "9"})
    book = FakeBook(dict(old.bids), dict(old.asks))
    for _, side, price, size in book_changes("tok", old, new):
        book.set(side, price, size)
    assert {Decimal(p): s for p, s in book.bids.items()} == {
        Decimal(p): s for p, s in new.bids.items()
    }
    assert book.asks == new.asks
    assert not [c for c in book_changes("tok", old, new) if c[2] in ("0.5", "0.50")]


def test_the_quoter_brackets_the_fair_value_and_lags_it() -> None:
    """Without noise or lag the best bid and ask bracket the fair value; with a lag, the
    fair value of that many seconds before."""
    now = [T0 + 150.0]
    world = FakePolymarket(auto_markets=True, auto_rule=TWAP, clock=lambda: now[0])
    path = _path()
    quoter = FairQuoter(world, {"BTC": path}, EXACT, spans=(FakeMarket(T0).span,))
    for t in (T0 + 150.0, T0 + 250.0, T0 + 290.0):
        now[0] = t
        assert quoter.quote_once() == 2  # the UP and the DOWN book moved
        market = world.market(T0)
        assert market is not None
        fair = fair_up(market, path, _no_exchange, t, SIGMA)
        assert fair is not None
        bid, ask = world.best(market.up_token)
        assert bid is not None and ask is not None
        # A book's prices end at 0.01 and 0.99: a decided window is quoted at its edge.
        assert bid <= fair + 1e-9 and min(fair, 0.99) - 1e-9 <= ask and round(ask - bid, 2) == 0.01
        assert world.best(market.down_token) == (round(1 - ask, 2), round(1 - bid, 2))
    late = FairQuoter(world, {"BTC": path}, QuoteStyle(lag_s=20.0, noise=0.0, wide_share=0.0))
    now[0] = T0 + 200.0
    late.quote_once()
    then = fair_up(world.market(T0) or FakeMarket(T0), path, _no_exchange, T0 + 180.0, SIGMA)
    bid, ask = world.best((world.market(T0) or FakeMarket(T0)).up_token)
    assert then is not None and bid is not None and ask is not None
    assert bid <= then + 1e-9 <= ask + 2e-9
