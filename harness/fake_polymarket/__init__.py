"""Fake Polymarket upstreams on 127.0.0.1 (free ports), for the tests and for benchmarks.

This file is the package's public surface: it only re-exports the names the callers import
(``from harness.fake_polymarket import FakePolymarket, running...``); the code is in one
module per stand-in and a few shared ones. ``python -m harness.fake_polymarket``
(``__main__.py``) runs every fake by hand until Ctrl-C.

``FakePolymarket`` starts five servers that serve today's documented shapes, awkward parts
included (see ../shared/upstream.md), each stood in for by one module:

- ``gamma.py``: Gamma, the market-listing REST API (``FakeGamma``, ``world.gamma``);
- ``clob.py``: the CLOB's REST API, books and markets (``FakeClobRest``, ``world.clob``);
- ``clob_ws.py``: the CLOB's WebSocket market channel (``FakeClobWs``, ``world.clob_ws``);
- ``rtds.py``: RTDS, the real-time data socket of Chainlink prices (``FakeRtds``,
  ``world.rtds``), on its protocol in ``rtds_socket.py``;
- ``site.py``: polymarket.com's crypto-price endpoint (``FakeSite``, ``world.site``).

The shared parts: ``world.py`` (``FakePolymarket``: the markets and books the stand-ins
serve, their start and stop, ``env()``; ``running``), ``market.py`` (``FakeMarket``,
``FakeBook``), ``wire.py`` (topics, filters, ids, times, prices as the wire writes them),
``http_server.py`` and ``ws_server.py`` (the servers every HTTP / WebSocket stand-in is
built on, with the switches they all have: ``mode``, ``trickle_bps``; ``drop()``,
``refuse``, ``silent``, ``freeze()``) and ``brownian.py`` (``BrownianPath``: the seeded
spot path RTDS plays). The 5-minute window's length is ``harness.spans.WINDOW_S``,
re-exported here.

Faults of VALUE (issue 27): well-formed answers that are wrong. Each is a switch a test turns
on, leaves on for a while and turns off; all are off by default, and off they change nothing
on the wire. Each module's docstring lists its own.
"""

from __future__ import annotations

from harness.fake_polymarket.brownian import LIVE_S, BrownianPath, live_span, wave_price
from harness.fake_polymarket.clob import FakeClobRest
from harness.fake_polymarket.clob_ws import (
    INVALID_OPERATION,
    NO_NEW_ASSETS,
    FakeClobWs,
    PriceChange,
    junk_levels,
)
from harness.fake_polymarket.gamma import FakeGamma
from harness.fake_polymarket.http_server import HANG_S, TRICKLE_POLL_S, Hit, Trickle
from harness.fake_polymarket.market import FakeBook, FakeMarket, default_books
from harness.fake_polymarket.rtds import FakeRtds
from harness.fake_polymarket.site import FakeSite
from harness.fake_polymarket.wire import (
    CHAINLINK_OF_PAIR,
    CHAINLINK_SYMBOLS,
    COIN_NAMES,
    DEFAULT_CHAINLINK,
    DEFAULT_SYMBOL,
    EXCHANGE_BASIS,
    EXCHANGE_TOPIC,
    PAIR_OF_CHAINLINK,
    RTDS_TOPICS,
    SCALE,
    SERVED_FILTERS,
    SLUG_PREFIX,
    SPOT,
    SPOT_FILTERS,
    SPOT_HISTORY_TOPIC,
    SPOT_RESOLUTION_SOURCE,
    SPOT_TOPIC,
    TOPICS,
    TWAP,
    TWAP30_TOPIC,
    TWAP_RESOLUTION_SOURCE,
    TWAP_TOPIC,
    TWAP_TOPICS,
    WINDOW_S_OF_TOPIC,
    chainlink_of,
    condition_id,
    exact,
    filters_of,
    from_iso,
    iso,
    now_ms,
    plain,
    price_text,
    resolution_source,
    scaled,
    token_id,
    twap_topic,
)
from harness.fake_polymarket.world import FakePolymarket, running
from harness.spans import WINDOW_S

__all__ = [
    "CHAINLINK_OF_PAIR",
    "CHAINLINK_SYMBOLS",
    "COIN_NAMES",
    "DEFAULT_CHAINLINK",
    "DEFAULT_SYMBOL",
    "EXCHANGE_BASIS",
    "EXCHANGE_TOPIC",
    "HANG_S",
    "INVALID_OPERATION",
    "LIVE_S",
    "NO_NEW_ASSETS",
    "PAIR_OF_CHAINLINK",
    "RTDS_TOPICS",
    "SCALE",
    "SERVED_FILTERS",
    "SLUG_PREFIX",
    "SPOT",
    "SPOT_FILTERS",
    "SPOT_HISTORY_TOPIC",
    "SPOT_RESOLUTION_SOURCE",
    "SPOT_TOPIC",
    "TOPICS",
    "TRICKLE_POLL_S",
    "TWAP",
    "TWAP30_TOPIC",
    "TWAP_RESOLUTION_SOURCE",
    "TWAP_TOPIC",
    "TWAP_TOPICS",
    "WINDOW_S",
    "WINDOW_S_OF_TOPIC",
    "BrownianPath",
    "FakeBook",
    "FakeClobRest",
    "FakeClobWs",
    "FakeGamma",
    "FakeMarket",
    "FakePolymarket",
    "FakeRtds",
    "FakeSite",
    "Hit",
    "PriceChange",
    "Trickle",
    "chainlink_of",
    "condition_id",
    "default_books",
    "exact",
    "filters_of",
    "from_iso",
    "iso",
    "junk_levels",
    "live_span",
    "now_ms",
    "plain",
    "price_text",
    "resolution_source",
    "running",
    "scaled",
    "token_id",
    "twap_topic",
    "wave_price",
]
