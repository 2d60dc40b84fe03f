"""The stand-in for polymarket.com's own crypto-price endpoint (``site``, HTTP): the
price-to-beat fallback of spot markets.

``GET /api/crypto/crypto-price``, per ``symbol`` (BTC when absent). Its ``openPrice`` is the
spot at T0 even for ``twapEnabled=true`` (what a public study of TWAP rounds observed);
``FakeSite.twap_queries`` lists the queries that asked. A fault of value:
``open_price_override`` is every answer's ``openPrice`` (``45000.0``, ``1e308``,
``math.inf``, which JSON writes as the token ``Infinity``).
"""

from __future__ import annotations

from typing import Any

from app.markets import MARKETS
from harness.fake_polymarket.http_server import _HttpFake
from harness.fake_polymarket.wire import DEFAULT_SYMBOL, chainlink_of, from_iso


class FakeSite(_HttpFake):
    """``GET /api/crypto/crypto-price``: ``openPrice`` from ``open_prices[T0]`` (or null).

    Per market: the query's ``symbol`` (``BTC`` when absent, any case) picks the table,
    ``open_prices_of(symbol)``; ``open_prices`` is BTC's. A symbol no market has answers
    ``openPrice`` null.

    ``open_prices[T0]`` is the SPOT at the boundary second. ``twapEnabled=true`` (with
    ``twapLookbackSeconds``) changes nothing in the answer: a public study of 287 TWAP rounds
    found the site's open/close values are that spot, not the TWAP, so the fake answers the
    spot whatever the query says (docs/price-to-beat.md). Every query is recorded (``hits``);
    ``twap_queries`` lists those that asked for a TWAP, so a test can check nobody did.
    """

    def __init__(self) -> None:
        super().__init__()
        self.open_prices: dict[int, float | None] = {}  # BTC's
        self._other_open_prices: dict[str, dict[int, float | None]] = {
            symbol: {} for symbol in MARKETS if symbol != DEFAULT_SYMBOL
        }
        # A fault: every answer's openPrice (45000.0, 1e308, math.inf: the token Infinity).
        self.open_price_override: float | None = None

    def open_prices_of(self, symbol: str = DEFAULT_SYMBOL) -> dict[int, float | None]:
        """The open prices (window start -> spot at T0, or None) answered for ``symbol``:
        the live table, to fill in; ``open_prices`` itself for BTC."""
        if symbol == DEFAULT_SYMBOL:
            return self.open_prices
        chainlink_of(symbol)  # an unknown market is a mistake in the test
        return self._other_open_prices[symbol]

    def queries_of(self, symbol: str = DEFAULT_SYMBOL) -> list[dict[str, str]]:
        """The crypto-price queries received for ``symbol`` (no ``symbol``: BTC), in order."""
        return [
            hit.query
            for hit in self.requests_to("/api/crypto/crypto-price")
            if hit.query.get("symbol", DEFAULT_SYMBOL).upper() == symbol
        ]

    def twap_queries(self) -> list[dict[str, str]]:
        """The crypto-price queries received with ``twapEnabled=true``, in order."""
        return [
            hit.query
            for hit in self.requests_to("/api/crypto/crypto-price")
            if hit.query.get("twapEnabled", "").lower() == "true"
        ]

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The crypto-price route; 400 without ``eventStartTime``. ``twapEnabled`` is read
        and ignored: the answer is the spot at T0 either way (what the study observed)."""
        if method != "GET" or path != "/api/crypto/crypto-price":
            return 404, {"error": "not found"}
        try:
            t0 = from_iso(query["eventStartTime"])
        except (KeyError, ValueError):
            return 400, {"error": "eventStartTime is required"}
        symbol = query.get("symbol", DEFAULT_SYMBOL).upper()
        prices = self.open_prices_of(symbol) if symbol in MARKETS else {}
        open_price = prices.get(t0)  # the spot at T0, even with twapEnabled=true
        if self.open_price_override is not None:
            open_price = self.open_price_override
        return 200, {
            "openPrice": open_price,
            "closePrice": None,
            "timestamp": self.now_ms(),
            "completed": False,
            "incomplete": True,
            "cached": False,
        }
