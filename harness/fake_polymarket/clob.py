"""The stand-in for the CLOB's REST API (``clob``, HTTP): the order books and the CLOB's own
market objects.

``POST /books`` (and ``GET /book``) answer prices and sizes as decimal strings, bids
ASCENDING and asks DESCENDING (the best levels are the last elements). ``GET
/markets/{condition_id}`` answers the CLOB's own market (``condition_id``, ``tokens:
[{token_id, outcome, price, winner}]``, ``market_slug``...); a fault of value,
``market_lookups_fail = True``, answers 500 there only.

The CLOB's WebSocket market channel is ``harness.fake_polymarket.clob_ws``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.fake_polymarket.http_server import _HttpFake

if TYPE_CHECKING:
    from harness.fake_polymarket.world import FakePolymarket


class FakeClobRest(_HttpFake):
    """``POST /books``, ``GET /book`` and ``GET /markets/{condition_id}`` (the CLOB's own
    market: its tokens and their outcome labels; 404 for an unknown condition).

    ``market_lookups_fail = True`` answers 500 to ``/markets/`` only (the books still work);
    ``market_lookups_missing = True`` answers 404 there, as for a condition it never heard of;
    ``books_fail = True`` answers 500 to the book routes only (the market lookups still work).
    """

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world
        self.market_lookups_fail = False
        self.market_lookups_missing = False
        self.books_fail = False

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The book routes (and ``/time``); 404 with the CLOB's message when there is no book."""
        if self.books_fail and path in ("/books", "/book"):
            return 500, {"error": "internal server error"}
        if method == "POST" and path == "/books":
            if not isinstance(body, list):
                return 400, {"error": "Invalid payload"}
            tokens = [str(item.get("token_id")) for item in body if isinstance(item, dict)]
            books = [self.world.book_json(t) for t in tokens]
            return 200, [b for b in books if b is not None]
        if method == "GET" and path == "/book":
            book = self.world.book_json(query.get("token_id", ""))
            if book is None:
                return 404, {"error": "No orderbook exists for the requested token id"}
            return 200, book
        if method == "GET" and path.startswith("/markets/"):
            if self.market_lookups_fail:
                return 500, {"error": "internal server error"}
            market = self.world.market_by_condition(path.removeprefix("/markets/"))
            if self.market_lookups_missing:
                market = None
            return (200, market.clob_market()) if market else (404, {"error": "market not found"})
        if method == "GET" and path == "/time":
            return 200, int(self.clock())
        return 404, {"error": "not found"}
