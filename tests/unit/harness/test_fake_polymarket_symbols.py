"""The fake upstreams serve several markets at once (issue 28): each market's Gamma slug, its
own tokens and books, its own Chainlink stream on RTDS and its own open price on the site;
and BTC, the default everywhere, stays what it was before there were others.

Real servers on 127.0.0.1 (the fakes), real HTTP and WebSocket clients.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from app.markets import MARKETS
from harness.fake_polymarket import (
    SLUG_PREFIX,
    SPOT_FILTERS,
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP,
    TWAP_TOPIC,
    FakeMarket,
    FakePolymarket,
    FakeRtds,
    filters_of,
    iso,
    running,
    token_id,
)
from harness.spans import FIVE_MINUTES

T0 = 1_795_516_200  # a window start (a multiple of 300)
RECV_S = 5.0  # generous: another process may be loading the machine


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    """Every fake, started and always stopped."""
    # Own fakes: each test lists its markets or starts its live paths in them.
    with running() as fakes:
        yield fakes


@contextmanager
def subscribed(url: str, entries: list[tuple[str, str]]) -> Iterator[ClientConnection]:
    """A connection to the RTDS fake subscribed to (topic, filters) entries, then closed."""
    with connect(url) as connection:
        send(connection, "subscribe", entries)
        yield connection


def send(connection: ClientConnection, action: str, entries: list[tuple[str, str]]) -> None:
    """A subscribe or unsubscribe message for (topic, filters) entries."""
    subscriptions = [{"topic": t, "type": "*", "filters": f} for t, f in entries]
    connection.send(json.dumps({"action": action, "subscriptions": subscriptions}))


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Until ``predicate()``; fail after ``RECV_S``."""
    deadline = time.monotonic() + RECV_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def receive(connection: ClientConnection) -> dict[str, Any]:
    """The next JSON message (fails after ``RECV_S``)."""
    raw = connection.recv(timeout=RECV_S)
    message = json.loads(raw)
    assert isinstance(message, dict), message
    return message


def until_sentinel(connection: ClientConnection, sentinel_ms: int) -> list[dict[str, Any]]:
    """Every message received up to the update stamped ``sentinel_ms`` (excluded): what the
    connection was sent before it, since a connection's frames arrive in order."""
    received: list[dict[str, Any]] = []
    while True:
        message = receive(connection)
        if message.get("payload", {}).get("timestamp") == sentinel_ms:
            return received
        received.append(message)


def test_two_markets_of_one_window_are_served_apart(world: FakePolymarket) -> None:
    """BTC's and ETH's windows of the same T0 are both listed: each slug answers its own
    event (series, asset, resolution source, tokens), each token its own book, and a change
    to one market's book leaves the other's alone."""
    btc = world.list_market(FakeMarket(T0, rule=TWAP))
    eth = world.list_market(FakeMarket(T0, rule=TWAP, symbol="ETH"))
    assert world.market(T0) is btc and world.market_of("BTC", T0) is btc
    assert world.market_of("ETH", T0) is eth and world.market_of("SOL", T0) is None
    assert set(btc.tokens).isdisjoint(eth.tokens) and btc.condition != eth.condition

    with httpx.Client(base_url=world.gamma.url, timeout=RECV_S) as gamma:
        events = {}
        for market in (btc, eth):
            answer = gamma.get(f"/events/slug/{market.slug}")
            assert answer.status_code == 200
            events[market.symbol] = answer.json()
        assert gamma.get(f"/events/slug/sol-updown-5m-{T0}").status_code == 404
        listed = gamma.get("/events", params={"slug": eth.slug}).json()
        single = gamma.get(f"/markets/slug/{eth.slug}").json()
    assert listed == [events["ETH"]] and single == events["ETH"]["markets"][0]
    for symbol, market in (("BTC", btc), ("ETH", eth)):
        event = events[symbol]
        raw = event["markets"][0]
        assert event["slug"] == raw["slug"] == f"{symbol.lower()}-updown-5m-{T0}"
        assert event["seriesSlug"] == MARKETS[symbol].series
        assert raw["cryptoMarketConfig"]["asset"] == symbol
        assert raw["resolutionSource"].endswith(f"/{symbol.lower()}-usd-twap-60s-streams")
        assert json.loads(raw["clobTokenIds"]) == list(market.tokens)
        assert raw["eventStartTime"] == iso(T0)
    assert events["BTC"]["id"] != events["ETH"]["id"]
    assert world.gamma.lookups() == [T0] and world.gamma.lookups("ETH") == [T0]

    world.set_level(eth.up_token, "BUY", "0.53", "0", send=False)  # ETH's best bid goes
    world.set_level(eth.up_token, "BUY", "0.70", "10", send=False)
    tokens = [*btc.tokens, *eth.tokens]
    with httpx.Client(base_url=world.clob.url, timeout=RECV_S) as clob:
        books = clob.post("/books", json=[{"token_id": t} for t in tokens]).json()
    by_token = {book["asset_id"]: book for book in books}
    assert list(by_token) == tokens
    assert by_token[eth.up_token]["market"] == eth.condition
    assert by_token[btc.up_token]["market"] == btc.condition
    assert max(float(level["price"]) for level in by_token[eth.up_token]["bids"]) == 0.70
    assert max(float(level["price"]) for level in by_token[btc.up_token]["bids"]) == 0.53


def test_every_market_is_made_up_on_demand() -> None:
    """With ``auto_markets``, any market's slug of any window answers, each market its own."""
    # Own fakes: with every market made up on demand.
    with running(auto_markets=True) as world:
        slugs = {symbol: MARKETS[symbol].slug(T0, FIVE_MINUTES) for symbol in MARKETS}
        with httpx.Client(base_url=world.gamma.url, timeout=RECV_S) as gamma:
            events = {s: gamma.get(f"/events/slug/{slug}").json() for s, slug in slugs.items()}
    assert {s: e["slug"] for s, e in events.items()} == slugs
    tokens = [json.loads(e["markets"][0]["clobTokenIds"])[0] for e in events.values()]
    assert len(set(tokens)) == len(MARKETS)
    assert {s: world.market_of(s, T0) is not None for s in MARKETS} == dict.fromkeys(MARKETS, True)


def test_rtds_sends_a_client_only_the_symbols_it_subscribed(world: FakePolymarket) -> None:
    """Each connection gets the history and the updates of the streams it subscribed, each
    message carrying its own symbol; the other streams' points are recorded, not sent."""
    rtds = world.rtds
    values = {"btc/usd": "95000", "eth/usd": "3500", "sol/usd": "180", "xrp/usd": "2.5"}
    for symbol, value in values.items():
        rtds.seed(SPOT_TOPIC, [(T0 * 1000, value)], symbol=symbol)
    btc_eth = [(SPOT_TOPIC, SPOT_FILTERS), (SPOT_TOPIC, filters_of("eth/usd"))]
    xrp_only = [(SPOT_TOPIC, filters_of("xrp/usd")), (TWAP_TOPIC, '{"symbol":"xrp/usd"}')]
    with subscribed(rtds.url, btc_eth) as both, subscribed(rtds.url, xrp_only) as xrp:
        histories = [receive(both), receive(both)]
        assert {h["payload"]["symbol"] for h in histories} == {"btc/usd", "eth/usd"}
        for history in histories:
            assert history["topic"] == SPOT_HISTORY_TOPIC and history["type"] == "subscribe"
            [point] = history["payload"]["data"]
            assert point == {
                "timestamp": T0 * 1000,
                "value": float(values[history["payload"]["symbol"]]),
            }
        history = receive(xrp)  # the spot's snapshot only: no TWAP history by default
        assert history["payload"]["symbol"] == "xrp/usd"
        assert sorted(map(sorted, rtds.symbols_of_connections())) == [
            ["btc/usd", "eth/usd"],
            ["xrp/usd"],
        ]
        assert rtds.subscribed_symbols() == {"btc/usd", "eth/usd", "xrp/usd"}
        assert rtds.subscribed_topics("xrp/usd") == {SPOT_TOPIC, TWAP_TOPIC}
        assert rtds.subscribed_topics("eth/usd") == {SPOT_TOPIC}

        t = (T0 + 1) * 1000
        for topic in (SPOT_TOPIC, TWAP_TOPIC):
            for symbol, value in values.items():
                rtds.push(topic, t, value, symbol=symbol)
        rtds.push(SPOT_TOPIC, t + 1, values["btc/usd"])  # the sentinels: the default symbol
        rtds.push(SPOT_TOPIC, t + 1, values["xrp/usd"], symbol="xrp/usd")
        to_both = [
            (m["topic"], m["payload"]["symbol"], m["payload"]["value"])
            for m in until_sentinel(both, t + 1)
        ]
        assert to_both == [(SPOT_TOPIC, "btc/usd", 95000.0), (SPOT_TOPIC, "eth/usd", 3500.0)]
        to_xrp = [(m["topic"], m["payload"]["symbol"]) for m in until_sentinel(xrp, t + 1)]
        assert to_xrp == [(SPOT_TOPIC, "xrp/usd"), (TWAP_TOPIC, "xrp/usd")]
        for symbol, value in values.items():  # every stream recorded, each in its own series
            assert rtds.value_at(t, symbol=symbol) == Decimal(value)
            assert rtds.value_at(t, TWAP_TOPIC, symbol=symbol) == Decimal(value)

        rtds.paused_symbols = {"eth/usd"}  # one stream goes silent, the other flows on
        rtds.push(SPOT_TOPIC, t + 2, "3501", symbol="eth/usd")
        rtds.send_point(SPOT_TOPIC, t + 2, "junk", symbol="eth/usd")
        rtds.push(SPOT_TOPIC, t + 2, "95001")
        rtds.push(SPOT_TOPIC, t + 3, "95002")
        held = [
            (m["payload"]["symbol"], m["payload"]["value"]) for m in until_sentinel(both, t + 3)
        ]
        assert held == [("btc/usd", 95001.0)]
        assert rtds.value_at(t + 2, symbol="eth/usd") == Decimal("3501")  # kept, not sent


def test_rtds_refuses_a_non_compact_filter_of_any_market(world: FakePolymarket) -> None:
    """``{"symbol": "eth/usd"}`` (with a space) matches nothing, as for btc/usd: no history,
    no updates, a bad subscription; unsubscribing a stream stops only that stream."""
    rtds = world.rtds
    rtds.seed(SPOT_TOPIC, [(T0 * 1000, "3500")], symbol="eth/usd")
    rtds.seed(SPOT_TOPIC, [(T0 * 1000, "180")], symbol="sol/usd")
    loose = json.dumps({"symbol": "eth/usd"})  # '{"symbol": "eth/usd"}'
    entries = [(SPOT_TOPIC, loose), (SPOT_TOPIC, filters_of("sol/usd"))]
    with subscribed(rtds.url, entries) as connection:
        assert receive(connection)["payload"]["symbol"] == "sol/usd"
        assert len(rtds.bad_subscriptions) == 1
        assert rtds.subscribed_symbols() == {"sol/usd"}
        t = (T0 + 1) * 1000
        rtds.push(SPOT_TOPIC, t, "3500", symbol="eth/usd")
        rtds.push(SPOT_TOPIC, t + 1, "180", symbol="sol/usd")
        assert until_sentinel(connection, t + 1) == []  # the eth/usd update never came
        send(connection, "unsubscribe", [(SPOT_TOPIC, filters_of("sol/usd"))])
        send(connection, "subscribe", [(SPOT_TOPIC, filters_of("xrp/usd"))])
        wait_for(lambda: rtds.symbols_of_connections() == [{"xrp/usd"}], "the change")
        rtds.push(SPOT_TOPIC, t + 2, "181", symbol="sol/usd")
        rtds.push(SPOT_TOPIC, t + 3, "2.6", symbol="xrp/usd")
        assert until_sentinel(connection, t + 3) == []


def test_a_live_stream_per_symbol(world: FakePolymarket) -> None:
    """``live(symbol=...)`` runs that stream around its market's start price, on its own
    path; a connection subscribed to it gets its points only."""
    sol = world.rtds.live(period_s=0.05, history_s=60, symbol="sol/usd")
    btc = world.rtds.live(period_s=0.05, history_s=60)
    assert sol.s0 == Decimal(str(MARKETS["SOL"].start_price)) and btc.s0 == Decimal("100000.0")
    assert sol.seed != btc.seed
    with subscribed(world.rtds.url, [(SPOT_TOPIC, filters_of("sol/usd"))]) as connection:
        messages = [receive(connection) for _ in range(5)]
    assert {m["payload"]["symbol"] for m in messages} == {"sol/usd"}
    # The history snapshot (among the first: live points may come before it) and updates.
    values = [m["payload"].get("value") or m["payload"]["data"][-1]["value"] for m in messages]
    assert all(100 < value < 300 for value in values), values
    assert sum("data" in m["payload"] for m in messages) == 1


def test_the_site_answers_by_symbol(world: FakePolymarket) -> None:
    """Each symbol's open price of the window; no ``symbol`` is BTC's; a market with no price
    (or no market) answers null."""
    world.site.open_prices[T0] = 95_000.5
    world.site.open_prices_of("ETH")[T0] = 3_500.25
    assert world.site.open_prices_of("BTC") is world.site.open_prices
    common = {"eventStartTime": iso(T0), "variant": "fiveminute", "endDate": iso(T0 + 300)}
    answers = {}
    with httpx.Client(base_url=world.site.url, timeout=RECV_S) as site:
        for symbol in ("BTC", "ETH", "eth", "SOL", "DOGE", None):
            query = common if symbol is None else {**common, "symbol": symbol}
            answers[symbol] = site.get("/api/crypto/crypto-price", params=query).json()["openPrice"]
    assert answers == {
        "BTC": 95_000.5,
        "ETH": 3_500.25,
        "eth": 3_500.25,
        "SOL": None,
        "DOGE": None,
        None: 95_000.5,
    }
    assert len(world.site.queries_of("ETH")) == 2 and len(world.site.queries_of("BTC")) == 2


def test_btc_defaults_are_what_they_were() -> None:
    """BTC is every default, and its identifiers and messages are derived as before there
    were other markets (tests, tapes and benchmarks hold them)."""
    market = FakeMarket(T0)
    assert market.symbol == "BTC" and market.slug == f"{SLUG_PREFIX}{T0}"

    def digest(key: str) -> str:
        value = int(hashlib.sha256(key.encode()).hexdigest(), 16)
        return str(10**76 + value % (9 * 10**76))

    assert market.tokens == (digest(f"{T0}:up"), digest(f"{T0}:down"))
    assert market.tokens == (token_id(T0, "up"), token_id(T0, "down"))
    assert market.condition == "0x" + hashlib.sha256(f"condition:{T0}".encode()).hexdigest()
    event = FakeMarket(T0, rule=TWAP).event()
    raw = event["markets"][0]
    assert (event["id"], event["seriesSlug"]) == (
        str(500000 + T0 // 300 % 100000),
        "btc-up-or-down-5m",
    )
    assert raw["question"].startswith("Bitcoin Up or Down")
    assert raw["resolutionSource"] == "https://data.chain.link/streams/btc-usd-twap-60s-streams"
    assert FakeMarket(T0).event()["markets"][0]["resolutionSource"] == (
        "https://data.chain.link/streams/btc-usd"
    )
    assert raw["cryptoMarketConfig"]["asset"] == "BTC"
    assert SPOT_FILTERS == filters_of("btc/usd") == '{"symbol":"btc/usd"}'
    assert FakeRtds.update(SPOT_TOPIC, 1, Decimal(1))["payload"]["symbol"] == "btc/usd"
    assert FakeRtds.first_message(SPOT_TOPIC, [])["payload"]["symbol"] == "btc/usd"

    world = FakePolymarket()
    world.list_market(market)
    assert world.markets == {T0: market} and world.markets_of("BTC") is world.markets
    world.rtds.push(SPOT_TOPIC, T0 * 1000, "95000")
    assert world.rtds.history[SPOT_TOPIC] == [(T0 * 1000, Decimal("95000"))]
    assert world.rtds.history_of("btc/usd") is world.rtds.history
    assert world.rtds.history_of("eth/usd")[SPOT_TOPIC] == []
    with pytest.raises(ValueError, match="DOGE"):
        FakeMarket(T0, symbol="DOGE")
    with pytest.raises(ValueError, match="doge/usd"):
        world.rtds.push(SPOT_TOPIC, T0 * 1000, "1", symbol="doge/usd")
