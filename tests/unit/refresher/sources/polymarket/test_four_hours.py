"""The live source over Eastern 4-hour blocks (issue 49): a 4-hour row on its TWAP market,
across the autumn change of clocks (a 5-hour block), and its price to beat after a restart
(kept on Redis by the refresher that latched it, or the row says why it has none)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from app.markets import SPANS, parse_symbols, shown_price
from app.refresher.sources.polymarket.latch_journal import PREFIX
from app.refresher.sources.polymarket.rtds import TOPICS, TWAP_KEYS
from app.refresher.sources.polymarket.source import PolymarketSource
from harness.fake_polymarket import TWAP, BrownianPath, FakePolymarket, running
from harness.processes import RedisServer
from tests.support.live_source import Clock, sources_on, wait_for

# 2026-11-01 00:00 EDT: the Eastern block that holds the autumn change of clocks, 00:00 EDT
# to 04:00 EST, five real hours.
T0 = 1_793_505_600
FOUR_HOURS = SPANS["4h"]
BTC = parse_symbols("BTC")
LATER = T0 + 7_200  # two hours into the block: a restarted refresher
TWAP60 = TOPICS[TWAP_KEYS[60]]

Row = dict[str, Any]


PATH = BrownianPath(11, 1.2e-4, 100_000.0, T0 - 900, 7_200 + 1_200)


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: the test seeds their history, and cuts a hole in it.
    with running(auto_markets=True, auto_rule=TWAP) as fake:
        fake.rtds.seed_path(PATH, T0 - 900, T0 + 20)
        fake.clob_ws.keep_alive(0.1)
        yield fake


def _row(source: PolymarketSource, clock: Clock, ready: Any, what: str) -> Row:
    seen: list[Row] = []

    def check() -> bool:
        seen[:] = [source.rows(clock())[0].as_json()]
        return bool(ready(seen[0]))

    wait_for(check, what)
    return seen[0]


def _forget_t0(world: FakePolymarket) -> None:
    """Two hours on, and no history snapshot reaches back to T0 any more (a refresher
    started then)."""
    world.rtds.seed_path(PATH, LATER - 900, LATER + 1)
    for topic in (TOPICS["spot"], TWAP60, TOPICS[TWAP_KEYS[30]]):
        world.rtds.hole((T0 - 900) * 1000, (T0 + 600) * 1000, topic=topic)


def test_a_four_hour_row_over_the_autumn_change_of_clocks(
    world: FakePolymarket, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0 + 10.5)
    with sources_on(world, BTC, spans=(FOUR_HOURS,)) as make:
        source = make(clock)
        row = _row(
            source, clock, lambda r: r["p_up_pct"] is not None and r["up_bid"], "a 4-hour row"
        )
    market = world.market_of("BTC", T0, FOUR_HOURS)
    assert market is not None
    assert row["window"] == "4h" and row["slug"] == f"btc-updown-4h-{T0}"
    assert row["windowStart"] == T0 and row["windowEnd"] == T0 + 5 * 3600  # 00:00 EDT-04:00 EST
    assert row["rem_secs"] == pytest.approx(5 * 3600 - 10.5)
    assert (row["up_token_id"], row["down_token_id"]) == market.tokens
    assert (row["up_bid"], row["up_ask"]) == world.best(market.up_token)
    # The price to beat is the 60 s TWAP at T0, as the market settles: the TWAP topic sends
    # no history, so it is the spot's own mean over [T0 - 60, T0] (the report's value).
    report = world.rtds.value_at(T0 * 1000, topic=TWAP60)
    assert report is not None and row["priceToBeat"] == pytest.approx(float(report), rel=1e-12)
    assert row["sources"]["priceToBeat"] == f"rtds:{TOPICS['spot']}:mean60s"
    assert row["settlement"] == "twap" and row["twapLookbackS"] == 60
    assert row["suspect"] == []
    assert "no price to beat" not in caplog.text  # heard from before T0: nothing to say


def test_a_restarted_refresher_takes_the_price_to_beat_it_kept(
    world: FakePolymarket, fresh_redis: RedisServer
) -> None:
    clock = Clock(T0 + 10.5)
    with sources_on(world, BTC, spans=(FOUR_HOURS,), journal_url=fresh_redis.url) as make:
        first = _row(make(clock), clock, lambda r: r["priceToBeat"], "the latched price")
    kept = redis.Redis.from_url(fresh_redis.url).get(f"{PREFIX}btc-updown-4h-{T0}")
    # Kept at full precision; shown to the stream's decimals.
    assert kept is not None and shown_price(json.loads(kept)["value"]) == first["priceToBeat"]

    _forget_t0(world)
    clock = Clock(LATER + 0.5)
    with sources_on(world, BTC, spans=(FOUR_HOURS,), journal_url=fresh_redis.url) as make:
        row = _row(make(clock), clock, lambda r: r["p_up_pct"] is not None, "the kept price")
    assert row["priceToBeat"] == first["priceToBeat"]
    assert row["sources"]["priceToBeat"] == f"journal:{first['sources']['priceToBeat']}"
    assert row["suspect"] == [] and row["rem_secs"] == pytest.approx(3 * 3600 - 0.5)


def test_without_a_kept_price_the_row_has_no_probability_and_the_log_says_why(
    world: FakePolymarket, fresh_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # A record for another market under the same slug (another condition) is not taken.
    forged = {"value": 1.0, "via": f"rtds:{TWAP60}", "condition": "0xother", "rule": TWAP}
    forged |= {"lookback": 60, "t0": T0}
    client = redis.Redis.from_url(fresh_redis.url)
    client.set(f"{PREFIX}btc-updown-4h-{T0}", json.dumps(forged))
    _forget_t0(world)
    clock = Clock(LATER + 0.5)
    for journal_url, kept in ((fresh_redis.url, "none was kept"), (None, "no journal")):
        caplog.clear()
        with sources_on(world, BTC, spans=(FOUR_HOURS,), journal_url=journal_url) as make:
            source = make(clock)
            said = f"BTC 4h window {T0}: no price to beat (the stream was first heard after"
            row = _row(
                source,
                clock,
                lambda r: r["up_bid"] and r["price"] and said in caplog.text,  # noqa: B023
                "books, price and the log's reason",
            )
        # No opinion rather than a wrong one; the books and the price are fresh and true.
        assert row["p_up_pct"] is None and row["priceToBeat"] is None
        assert row["suspect"] == [] and row["sources"]["priceToBeat"] is None
        assert f"and {kept}" in caplog.text and "no P(up) until the next window" in caplog.text
