"""The fake Gamma lists the hourly and 4-hour markets with their real slug schemes (issue 49,
point 5), read by the service's own Gamma client: the hourly ones by their Eastern hour in
words (dated, or yearless as listed before March 2026), the 4-hour ones on Eastern 4-hour
blocks, the block across the autumn change of clocks 5 hours long. The clock is driven: no
real window boundary is waited for.

Real servers on 127.0.0.1 (the fakes), the real HTTP client.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.markets import MARKETS, SPANS
from app.refresher.model import SPOT
from app.refresher.sources.polymarket.gamma import GammaClient
from harness.fake_polymarket import FakeMarket, FakePolymarket, running

AUTUMN_2026 = 1793505600  # 2026-11-01 00:00 EDT: this 4-hour block lasts until 04:00 EST
HOUR = 1774756800  # 2026-03-29 00:00 EDT: "bitcoin-up-or-down-march-29-2026-12am-et"
OLD_HOUR = 1769191200  # 2026-01-23 13:00 EST: "bitcoin-up-or-down-january-23-1pm-et"


@pytest.fixture(scope="module")
def world() -> Iterator[FakePolymarket]:
    """The fakes, every window of every market listed, on a clock that stands still."""
    with running(auto_markets=True, clock=lambda: AUTUMN_2026 + 60.0) as fakes:
        yield fakes


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """The service's kind of client: timeouts, no redirects."""
    with httpx.Client(timeout=5.0, follow_redirects=False) as client:
        yield client


@pytest.mark.parametrize("symbol", list(MARKETS))
def test_every_coin_has_its_hourly_market_by_its_eastern_hour_in_words(
    world: FakePolymarket, http: httpx.Client, symbol: str
) -> None:
    hourly = SPANS["1h"]
    found = GammaClient(world.gamma.url, http, MARKETS[symbol], hourly).window(HOUR)
    assert found is not None
    assert found.slug == hourly.slugs(symbol, HOUR)[0]
    assert found.slug.endswith("-march-29-2026-12am-et")
    assert (found.window_start, found.window_end) == (HOUR, HOUR + 3600)
    event = http.get(f"{world.gamma.url}/events/slug/{found.slug}").json()
    assert event["title"].endswith("Up or Down - March 29, 12AM ET")
    market = event["markets"][0]
    assert "cryptoMarketConfig" not in market
    assert market["resolutionSource"] == f"https://www.binance.com/en/trade/{symbol}_USDT"
    assert found.rule == SPOT  # the candle's close against its open: a rule at the end


def test_an_hourly_market_listed_without_a_year_is_found_by_its_second_slug(
    world: FakePolymarket, http: httpx.Client
) -> None:
    hourly = SPANS["1h"]
    world.list_market(FakeMarket(OLD_HOUR, symbol="ETH", span=hourly, yearless=True))
    before = len(world.gamma.requests_to("/events/slug/"))
    found = GammaClient(world.gamma.url, http, MARKETS["ETH"], hourly).window(OLD_HOUR)
    assert found is not None and found.slug == "ethereum-up-or-down-january-23-1pm-et"
    asked = [h.path.rsplit("/", 1)[-1] for h in world.gamma.requests_to("/events/slug/")]
    # The dated form first (not listed: 404), then the yearless one.
    assert asked[before:] == [
        "ethereum-up-or-down-january-23-2026-1pm-et",
        "ethereum-up-or-down-january-23-1pm-et",
    ]


def test_the_4_hour_block_across_the_autumn_change_of_clocks_lasts_5_hours(
    world: FakePolymarket, http: httpx.Client
) -> None:
    four = SPANS["4h"]
    client = GammaClient(world.gamma.url, http, MARKETS["BTC"], four)
    found = client.window(AUTUMN_2026)
    assert found is not None and found.slug == f"btc-updown-4h-{AUTUMN_2026}"
    assert found.window_end - found.window_start == 5 * 3600
    event = http.get(f"{world.gamma.url}/events/slug/{found.slug}").json()
    assert event["markets"][0]["endDate"] == "2026-11-01T09:00:00Z"
    assert event["title"] == "Bitcoin Up or Down - November 1, 12:00AM-4:00AM ET"
    after = client.window(found.window_end)
    assert after is not None and after.window_end - after.window_start == 4 * 3600
    # A start that is no Eastern block's is not a 4-hour market.
    assert client.window(AUTUMN_2026 + 3600) is None


def test_a_slug_no_kind_writes_is_not_listed(world: FakePolymarket, http: httpx.Client) -> None:
    for slug in (
        "bitcoin-up-or-down-february-30-2026-1pm-et",
        "bitcoin-up-or-down-march-29-2026-13pm-et",
        "dogecoin-up-or-down-march-29-2026-12am-et",
        f"btc-updown-2h-{HOUR}",
    ):
        assert http.get(f"{world.gamma.url}/events/slug/{slug}").status_code == 404, slug
