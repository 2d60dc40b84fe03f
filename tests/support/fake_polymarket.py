"""Fake Polymarket upstreams on 127.0.0.1 (free ports), for the tests and for benchmarks.

``FakePolymarket`` starts five servers that serve the documented shapes, awkward parts
included (see ../shared/upstream.md):

- ``gamma`` (HTTP): ``GET /events/slug/btc-updown-5m-<T0>`` answers an event whose
  ``markets[0].outcomes`` and ``clobTokenIds`` are JSON-encoded STRINGS, in the order the
  market says (``["Down","Up"]`` happens); 404 for a window not listed.
- ``clob`` (HTTP): ``POST /books`` (and ``GET /book``) with prices and sizes as decimal
  strings, bids ASCENDING and asks DESCENDING (the best levels are the last elements).
- ``site`` (HTTP): ``GET /api/crypto/crypto-price`` (the price-to-beat fallback).
- ``clob_ws`` (WebSocket): the market channel. The first frame after a subscription is a
  JSON ARRAY of ``book`` snapshots; then ``price_change`` messages driven by the test.
- ``rtds`` (WebSocket): the real-time data socket. The first message of a topic carries
  ``payload.data`` (a list of points); then ``update`` messages; the TWAP topic carries
  ``full_accuracy_value`` scaled by 1e18.

Every HTTP fake can be switched to answer 500 (``mode = "error"``) or never to answer
(``mode = "hang"``: longer than the client's 3 s timeout). Every WebSocket fake answers the
text ``PING`` with ``PONG`` and can drop its connections (``drop()``: the sockets just
close), refuse new ones (``refuse = True``: HTTP 503 at the handshake), go silent
(``silent = True``: nothing at all, not even ``PONG``) or freeze the current connections
(``freeze()``: ``PONG`` still answered, no data, as the real RTDS is known to do).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

WINDOW_S = 300
SPOT = "spot"
TWAP = "twap"
SPOT_TOPIC = "crypto_prices_chainlink"
TWAP_TOPIC = "crypto_prices_twap_sixty"
TOPICS = {SPOT: SPOT_TOPIC, TWAP: TWAP_TOPIC}
SPOT_RESOLUTION_SOURCE = "https://data.chain.link/streams/btc-usd"
TWAP_RESOLUTION_SOURCE = "https://data.chain.link/streams/btc-usd-twap-60s-streams"
SCALE = 10**18
HANG_S = 8.0  # a hung request: well past the client's 3 s timeout
SLUG_PREFIX = "btc-updown-5m-"


# -- identifiers, times, numbers --------------------------------------------------------


def token_id(window_start: int, label: str) -> str:
    """A 77-digit decimal token id, stable for (window, label)."""
    digest = int(hashlib.sha256(f"{window_start}:{label}".encode()).hexdigest(), 16)
    return str(10**76 + digest % (9 * 10**76))


def condition_id(window_start: int) -> str:
    """``0x`` + 64 hex digits, stable per window."""
    return "0x" + hashlib.sha256(f"condition:{window_start}".encode()).hexdigest()


def iso(t: float) -> str:
    """ISO-8601 UTC as Gamma writes it."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str) -> int:
    """Unix seconds of an ISO-8601 UTC time (``Z`` or ``+00:00``, with or without ms)."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def scaled(value: Decimal | str | float) -> str:
    """``full_accuracy_value``: the price times 1e18 as a decimal string."""
    return str(int(Decimal(str(value)) * SCALE))


def exact(value: Decimal | str | float) -> float:
    """What a correct reader of ``full_accuracy_value`` gets for ``value``."""
    return float(Decimal(scaled(value)) / Decimal(SCALE))


def now_ms() -> int:
    """Wall-clock epoch milliseconds."""
    return int(time.time() * 1000)


# -- markets and books -----------------------------------------------------------------


@dataclass
class FakeMarket:
    """One window's Gamma event; ``outcomes`` gives the order of the JSON-string arrays."""

    window_start: int
    outcomes: tuple[str, ...] = ("Up", "Down")
    rule: str = SPOT
    with_config: bool = True  # cryptoMarketConfig present (markets since 2026-08-07)
    price_to_beat: float | None = None  # eventMetadata.priceToBeat (undocumented, late)
    up_token: str = ""
    down_token: str = ""
    condition: str = ""

    def __post_init__(self) -> None:
        self.up_token = self.up_token or token_id(self.window_start, "up")
        self.down_token = self.down_token or token_id(self.window_start, "down")
        self.condition = self.condition or condition_id(self.window_start)

    @property
    def slug(self) -> str:
        """``btc-updown-5m-<T0>``."""
        return f"{SLUG_PREFIX}{self.window_start}"

    @property
    def tokens(self) -> tuple[str, str]:
        """(UP, DOWN)."""
        return self.up_token, self.down_token

    def event(self) -> dict[str, Any]:
        """The Gamma event object."""
        t0 = self.window_start
        by_label = {"Up": self.up_token, "Down": self.down_token}
        twap = self.rule == TWAP
        market: dict[str, Any] = {
            "id": str(500000 + t0 // WINDOW_S % 100000),
            "question": "Bitcoin Up or Down - (US Eastern title, never parsed)",
            "conditionId": self.condition,
            "slug": self.slug,
            "resolutionSource": TWAP_RESOLUTION_SOURCE if twap else SPOT_RESOLUTION_SOURCE,
            "startDate": iso(t0 - 86400),  # the listing time: NOT the window start
            "eventStartTime": iso(t0),
            "endDate": iso(t0 + WINDOW_S),
            "outcomes": json.dumps(list(self.outcomes)),
            "outcomePrices": json.dumps(["0.5" for _ in self.outcomes]),
            "clobTokenIds": json.dumps([by_label.get(o, "0") for o in self.outcomes]),
            "active": True,
            "closed": False,
            "acceptingOrders": True,
            "orderPriceMinTickSize": 0.01,
            "orderMinSize": 5,
            # Gamma's own snapshot of UP: deliberately NOT the CLOB's best levels.
            "bestBid": 0.01,
            "bestAsk": 0.99,
            "lastTradePrice": 0.5,
        }
        if self.with_config:
            market["cryptoMarketConfig"] = {
                "asset": "BTC",
                "duration": "5m",
                "twapEnabled": twap,
                "twapLookbackSeconds": 60 if twap else 0,
            }
        event: dict[str, Any] = {
            "id": market["id"],
            "slug": self.slug,
            "title": market["question"],
            "seriesSlug": "btc-up-or-down-5m",
            "startDate": market["startDate"],
            "endDate": market["endDate"],
            "markets": [market],
        }
        if self.price_to_beat is not None:
            event["eventMetadata"] = {"priceToBeat": self.price_to_beat}
        return event


class FakeBook:
    """One token's book: price -> size, both decimal strings."""

    def __init__(
        self, bids: dict[str, str] | None = None, asks: dict[str, str] | None = None
    ) -> None:
        self.bids = dict(bids or {})
        self.asks = dict(asks or {})

    def set(self, side: str, price: str, size: str) -> None:
        """Set a level (``side`` BUY = bid, SELL = ask); size ``"0"`` removes it."""
        levels = self.bids if side.upper() == "BUY" else self.asks
        if Decimal(size) == 0:
            levels.pop(price, None)
        else:
            levels[price] = size

    @property
    def best_bid(self) -> float | None:
        """The highest bid price."""
        return max((float(p) for p in self.bids), default=None)

    @property
    def best_ask(self) -> float | None:
        """The lowest ask price."""
        return min((float(p) for p in self.asks), default=None)

    def as_json(self, asset_id: str, market: str, timestamp_ms: int) -> dict[str, Any]:
        """The CLOB book object: bids ascending, asks descending (the documented trap)."""

        def ordered(levels: dict[str, str], descending: bool) -> list[dict[str, str]]:
            prices = sorted(levels, key=Decimal, reverse=descending)
            return [{"price": p, "size": levels[p]} for p in prices]

        return {
            "market": market,
            "asset_id": asset_id,
            "timestamp": str(timestamp_ms),
            "hash": hashlib.sha1(
                json.dumps([self.bids, self.asks], sort_keys=True).encode()
            ).hexdigest(),
            "bids": ordered(self.bids, descending=False),
            "asks": ordered(self.asks, descending=True),
            "min_order_size": "5",
            "tick_size": "0.01",
            "neg_risk": False,
            "last_trade_price": "0.5",
        }


def default_books(market: FakeMarket) -> tuple[FakeBook, FakeBook]:
    """UP and DOWN books with several levels each (best: UP 0.53/0.55, DOWN 0.45/0.47)."""
    up = FakeBook(
        bids={"0.50": "120", "0.51": "80", "0.52": "60", "0.53": "40.5"},
        asks={"0.55": "35", "0.56": "70", "0.58": "90", "0.60": "150"},
    )
    down = FakeBook(
        bids={"0.40": "100", "0.44": "50", "0.45": "25"},
        asks={"0.47": "30", "0.49": "60", "0.52": "200"},
    )
    return up, down


# -- HTTP fakes -------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    fake: _HttpFake

    def do_GET(self) -> None:
        self.fake.serve(self, "GET")

    def do_POST(self) -> None:
        self.fake.serve(self, "POST")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@dataclass
class Hit:
    """One request a fake received."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived (monotonic s)


class _HttpFake:
    """A ThreadingHTTPServer; ``mode`` is ``ok``, ``error`` (500) or ``hang``."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.hits: list[Hit] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        """Listen on a free port."""
        handler = type("Handler", (_Handler,), {"fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop listening; hung requests are let go."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def requests_to(self, path_prefix: str) -> list[Hit]:
        """The requests received so far whose path starts with ``path_prefix``."""
        return [hit for hit in list(self.hits) if hit.path.startswith(path_prefix)]

    def serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.hits.append(Hit(method, parts.path, query, body))
        if self.mode == "hang":
            deadline = time.monotonic() + HANG_S
            while time.monotonic() < deadline and not self._stopping.is_set():
                time.sleep(0.05)
            handler.close_connection = True
            return  # never answered
        if self.mode == "error":
            status, payload = 500, {"error": "internal server error"}
        else:
            status, payload = self.route(method, parts.path, query, body)
        data = json.dumps(payload).encode()
        with contextlib.suppress(OSError):
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        raise NotImplementedError


class FakeGamma(_HttpFake):
    """``GET /events/slug/{slug}`` (also ``/events?slug=`` and ``/markets/slug/{slug}``)."""

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world

    def lookups(self) -> list[int]:
        """The windows looked up by slug so far, in order."""
        starts = []
        for hit in self.requests_to("/events/slug/"):
            slug = hit.path.rsplit("/", 1)[-1]
            if slug.startswith(SLUG_PREFIX) and slug[len(SLUG_PREFIX) :].isdigit():
                starts.append(int(slug[len(SLUG_PREFIX) :]))
        return starts

    def _market(self, slug: str) -> FakeMarket | None:
        if not slug.startswith(SLUG_PREFIX) or not slug[len(SLUG_PREFIX) :].isdigit():
            return None
        return self.world.market(int(slug[len(SLUG_PREFIX) :]))

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        not_found = {"type": "not found error", "error": "id not found"}
        if method == "GET" and path.startswith("/events/slug/"):
            market = self._market(path.rsplit("/", 1)[-1])
            return (200, market.event()) if market else (404, not_found)
        if method == "GET" and path == "/events":
            market = self._market(query.get("slug", ""))
            return 200, [market.event()] if market else []
        if method == "GET" and path.startswith("/markets/slug/"):
            market = self._market(path.rsplit("/", 1)[-1])
            return (200, market.event()["markets"][0]) if market else (404, not_found)
        return 404, not_found


class FakeClobRest(_HttpFake):
    """``POST /books`` and ``GET /book``."""

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
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
        if method == "GET" and path == "/time":
            return 200, int(time.time())
        return 404, {"error": "not found"}


class FakeSite(_HttpFake):
    """``GET /api/crypto/crypto-price``: ``openPrice`` from ``open_prices[T0]`` (or null)."""

    def __init__(self) -> None:
        super().__init__()
        self.open_prices: dict[int, float | None] = {}

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if method != "GET" or path != "/api/crypto/crypto-price":
            return 404, {"error": "not found"}
        try:
            t0 = from_iso(query["eventStartTime"])
        except (KeyError, ValueError):
            return 400, {"error": "eventStartTime is required"}
        open_price = self.open_prices.get(t0)
        return 200, {
            "openPrice": open_price,
            "closePrice": None,
            "timestamp": now_ms(),
            "completed": False,
            "incomplete": True,
            "cached": False,
        }


# -- WebSocket fakes --------------------------------------------------------------------


class _Client:
    """One accepted WebSocket connection."""

    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection
        self.frozen = False  # PONG answered, no data
        self.assets: set[str] = set()
        self.topics: set[str] = set()
        self._lock = threading.Lock()

    def send(self, text: str) -> None:
        with self._lock, contextlib.suppress(ConnectionClosed, OSError, RuntimeError):
            self.connection.send(text)

    def drop(self) -> None:
        """Close the socket without a closing handshake: a connection that just drops."""
        with contextlib.suppress(OSError, RuntimeError):
            self.connection.close_socket()


class _WsFake:
    """A websockets sync server in a thread, with the switches every WS fake has."""

    path = "/"

    def __init__(self) -> None:
        self.refuse = False
        self.silent = False
        self.connections = 0  # accepted so far
        self.pings = 0
        self.subscriptions: list[Any] = []  # every subscribe message received, parsed
        self._clients: list[_Client] = []
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._tickers: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/path``."""
        assert self._server is not None, "not started"
        return f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}{self.path}"

    def start(self) -> None:
        """Listen on a free port."""
        self._server = serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._process_request,
            ping_interval=None,
            compression=None,
            close_timeout=1,
            max_size=2**22,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Drop every connection and stop listening."""
        self._stopping.set()
        for ticker in self._tickers:
            ticker.join(5)
        self.drop()
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def clients(self) -> list[_Client]:
        """The open connections."""
        with self._lock:
            return list(self._clients)

    def drop(self) -> None:
        """Drop every open connection (the sockets close; no close frame)."""
        for client in self.clients:
            client.drop()

    def freeze(self) -> None:
        """The current connections keep answering PING but carry no more data."""
        for client in self.clients:
            client.frozen = True

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.refuse:
            return connection.respond(503, "upstream unavailable\n")
        return None

    def _handle(self, connection: ServerConnection) -> None:
        client = _Client(connection)
        with self._lock:
            self._clients.append(client)
            self.connections += 1
        try:
            for raw in connection:
                text = raw if isinstance(raw, str) else raw.decode(errors="replace")
                if text.strip() == "PING":
                    self.pings += 1
                    if not self.silent:
                        client.send("PONG")
                    continue
                try:
                    message = json.loads(text)
                except ValueError:
                    continue
                self.on_message(client, message)
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self._clients.remove(client)

    def deliverable(self, client: _Client) -> bool:
        """Whether data may be sent to ``client`` now."""
        return not self.silent and not client.frozen

    def on_message(self, client: _Client, message: Any) -> None:
        raise NotImplementedError

    def every(self, period_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` every ``period_s`` in a thread until the fake stops."""

        def loop() -> None:
            while not self._stopping.wait(period_s):
                action()

        ticker = threading.Thread(target=loop, daemon=True)
        self._tickers.append(ticker)
        ticker.start()


class FakeClobWs(_WsFake):
    """The CLOB market channel."""

    path = "/ws/market"

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world
        self.snapshots_sent: list[list[str]] = []  # asset ids of each first frame

    def subscribed_assets(self) -> set[str]:
        """The assets of the newest subscription (empty before any)."""
        for message in reversed(self.subscriptions):
            if isinstance(message, dict) and isinstance(message.get("assets_ids"), list):
                return {str(a) for a in message["assets_ids"]}
        return set()

    def on_message(self, client: _Client, message: Any) -> None:
        if not isinstance(message, dict) or message.get("type") != "market":
            return
        assets = message.get("assets_ids")
        if not isinstance(assets, list):
            return
        self.subscriptions.append(message)
        client.assets = {str(a) for a in assets}
        if not self.deliverable(client):
            return
        books = [self.world.book_json(str(a)) for a in assets]
        frame = [b | {"event_type": "book"} for b in books if b is not None]
        client.send(json.dumps(frame))  # the first frame: a JSON ARRAY of snapshots
        self.snapshots_sent.append([b["asset_id"] for b in frame])

    def broadcast(self, asset: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every connection subscribed to ``asset``."""
        text = json.dumps(message)
        for client in self.clients:
            if asset in client.assets and self.deliverable(client):
                client.send(text)

    def send_price_change(self, asset: str, side: str, price: str, size: str) -> None:
        """The ``price_change`` message for a level the world has just changed."""
        book = self.world.books[asset]
        market = self.world.condition_of(asset)
        change = {
            "asset_id": asset,
            "price": price,
            "size": size,
            "side": side,
            "hash": hashlib.sha1(f"{asset}{price}{size}".encode()).hexdigest(),
            "best_bid": str(book.best_bid) if book.best_bid is not None else "0",
            "best_ask": str(book.best_ask) if book.best_ask is not None else "1",
        }
        message = {
            "event_type": "price_change",
            "market": market,
            "timestamp": str(now_ms()),
            "price_changes": [change],
        }
        self.broadcast(asset, message)

    def send_best_bid_ask(self) -> None:
        """A ``best_bid_ask`` message per subscribed asset (confirms the books unchanged)."""
        for client in self.clients:
            for asset in list(client.assets):
                book = self.world.books.get(asset)
                if book is None or not self.deliverable(client):
                    continue
                bid, ask = book.best_bid, book.best_ask
                client.send(
                    json.dumps(
                        {
                            "event_type": "best_bid_ask",
                            "market": self.world.condition_of(asset),
                            "asset_id": asset,
                            "best_bid": str(bid) if bid is not None else "0",
                            "best_ask": str(ask) if ask is not None else "1",
                            "spread": str(round((ask or 1) - (bid or 0), 4)),
                            "timestamp": str(now_ms()),
                        }
                    )
                )

    def keep_alive(self, period_s: float = 0.1) -> None:
        """Send ``best_bid_ask`` every ``period_s`` (a busy market: the books stay fresh)."""
        self.every(period_s, self.send_best_bid_ask)


class FakeRtds(_WsFake):
    """The real-time data socket: ``crypto_prices_chainlink`` and ``crypto_prices_twap_sixty``."""

    path = ""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[tuple[int, Decimal]]] = {SPOT_TOPIC: [], TWAP_TOPIC: []}
        self.history_limit = 1000
        self.bad_subscriptions: list[Any] = []

    def subscribed_topics(self) -> set[str]:
        """Topics of every valid subscription received."""
        topics: set[str] = set()
        for message in self.subscriptions:
            topics |= {s["topic"] for s in message["subscriptions"]}
        return topics

    def on_message(self, client: _Client, message: Any) -> None:
        if not isinstance(message, dict) or message.get("action") != "subscribe":
            return
        subscriptions = message.get("subscriptions")
        if not isinstance(subscriptions, list) or not all(
            isinstance(s, dict) and isinstance(s.get("filters"), str) for s in subscriptions
        ):
            self.bad_subscriptions.append(message)
            return
        topics = []
        for sub in subscriptions:
            try:
                filters = json.loads(sub["filters"]) if sub["filters"] else {}
            except ValueError:
                self.bad_subscriptions.append(message)
                return
            if filters.get("symbol") == "btc/usd" and sub.get("topic") in self.history:
                topics.append(str(sub["topic"]))
        self.subscriptions.append(message)
        client.topics |= set(topics)
        if not self.deliverable(client):
            return
        for topic in topics:
            points = list(self.history[topic])
            if points:
                client.send(json.dumps(self.first_message(topic, points)))

    @staticmethod
    def first_message(topic: str, points: list[tuple[int, Decimal]]) -> dict[str, Any]:
        """The message right after subscribing: the recent points as ``payload.data``."""
        return {
            "topic": topic,
            "type": "subscribe",
            "timestamp": now_ms(),
            "payload": {
                "symbol": "btc/usd",
                "data": [{"timestamp": ts, "value": float(v)} for ts, v in points],
            },
        }

    @staticmethod
    def update(topic: str, ts_ms: int, value: Decimal) -> dict[str, Any]:
        """An ``update`` message; the TWAP topic adds ``full_accuracy_value`` and ``window_s``.

        ``value`` is rounded to cents there, so a reader that ignores the exact value is seen.
        """
        payload: dict[str, Any] = {"symbol": "btc/usd", "timestamp": ts_ms, "value": float(value)}
        if topic == TWAP_TOPIC:
            payload["value"] = float(round(value, 2))
            payload["full_accuracy_value"] = scaled(value)
            payload["window_s"] = 60
        return {"topic": topic, "type": "update", "timestamp": now_ms(), "payload": payload}

    def seed(self, topic: str, points: list[tuple[int, Decimal | str | float]]) -> None:
        """Points the first message of ``topic`` will carry (in time order)."""
        for ts, value in points:
            self._record(topic, ts, Decimal(str(value)))

    def _record(self, topic: str, ts_ms: int, value: Decimal) -> None:
        with self._lock:
            series = self.history[topic]
            series.append((ts_ms, value))
            del series[: max(0, len(series) - self.history_limit)]

    def push(self, topic: str, ts_ms: int, value: Decimal | str | float) -> None:
        """Record a point and send it as an ``update`` to the connections on ``topic``."""
        amount = Decimal(str(value))
        self._record(topic, ts_ms, amount)
        text = json.dumps(self.update(topic, ts_ms, amount))
        for client in self.clients:
            if topic in client.topics and self.deliverable(client):
                client.send(text)

    def send_raw(self, message: Any) -> None:
        """Send anything to every connection (tests of garbage handling)."""
        text = message if isinstance(message, str) else json.dumps(message)
        for client in self.clients:
            if self.deliverable(client):
                client.send(text)

    def live(
        self,
        spot: Callable[[float], Decimal] | None = None,
        twap: Callable[[float], Decimal] | None = None,
        period_s: float = 0.2,
        history_s: int = 600,
    ) -> None:
        """Real-time prices: ``history_s`` of 1-second history, then a point every ``period_s``."""
        spot = spot or wave_price(Decimal("100000"), Decimal("40"), 45.0)
        twap = twap or wave_price(Decimal("99990"), Decimal("25"), 60.0)
        now = int(time.time())
        for t in range(now - history_s, now + 1):
            self._record(SPOT_TOPIC, t * 1000, spot(t))
            self._record(TWAP_TOPIC, t * 1000, twap(t))

        def tick() -> None:
            t = time.time()
            ts = int(t * 1000)
            self.push(SPOT_TOPIC, ts, spot(t))
            self.push(TWAP_TOPIC, ts, twap(t))

        self.every(period_s, tick)


def wave_price(base: Decimal, amplitude: Decimal, period_s: float) -> Callable[[float], Decimal]:
    """A smooth price path (18 decimals, as the TWAP's full accuracy carries)."""

    def price(t: float) -> Decimal:
        wave = Decimal(repr(math.sin(2 * math.pi * t / period_s)))
        return (base + amplitude * wave).quantize(Decimal("1e-18"))

    return price


# -- all of it --------------------------------------------------------------------------


@dataclass
class FakePolymarket:
    """Gamma, CLOB REST, site, CLOB market WS and RTDS fakes sharing one world.

    ``auto_markets``: every window is listed (markets made up on demand, with default books),
    for tests that run on the real clock and may cross a window boundary.
    """

    auto_markets: bool = False
    markets: dict[int, FakeMarket] = field(default_factory=dict)
    books: dict[str, FakeBook] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self.gamma = FakeGamma(self)
        self.clob = FakeClobRest(self)
        self.site = FakeSite()
        self.clob_ws = FakeClobWs(self)
        self.rtds = FakeRtds()
        self._started: list[_HttpFake | _WsFake] = []

    # lifecycle
    def start(self) -> FakePolymarket:
        """Start every server (stopping those started if one fails)."""
        try:
            for server in (self.gamma, self.clob, self.site, self.clob_ws, self.rtds):
                server.start()
                self._started.append(server)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server that was started."""
        for server in reversed(self._started):
            with contextlib.suppress(Exception):
                server.stop()
        self._started.clear()

    def __enter__(self) -> FakePolymarket:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The ``POLYMARKET_*`` variables that point the service at these fakes."""
        return {
            "BOARD_SOURCE": "polymarket",
            "POLYMARKET_GAMMA_URL": self.gamma.url,
            "POLYMARKET_CLOB_URL": self.clob.url,
            "POLYMARKET_CLOB_WS_URL": self.clob_ws.url,
            "POLYMARKET_RTDS_URL": self.rtds.url,
            "POLYMARKET_SITE_URL": self.site.url,
        }

    # the world
    def list_market(
        self,
        market: FakeMarket,
        books: tuple[FakeBook, FakeBook] | None = None,
    ) -> FakeMarket:
        """List ``market`` on Gamma, with its UP and DOWN books on the CLOB."""
        up, down = books or default_books(market)
        with self._lock:
            self.markets[market.window_start] = market
            self.books.setdefault(market.up_token, up)
            self.books.setdefault(market.down_token, down)
        return market

    def unlist(self, window_start: int) -> None:
        """Gamma answers 404 for this window again."""
        with self._lock:
            self.markets.pop(window_start, None)

    def market(self, window_start: int) -> FakeMarket | None:
        """The market of a window (made up when ``auto_markets``)."""
        with self._lock:
            market = self.markets.get(window_start)
            if market is None and self.auto_markets and window_start % WINDOW_S == 0:
                market = self.list_market(FakeMarket(window_start))
            return market

    def condition_of(self, asset: str) -> str:
        """The condition id of the market a token belongs to."""
        with self._lock:
            for market in self.markets.values():
                if asset in market.tokens:
                    return market.condition
        return "0x" + "0" * 64

    def book_json(self, asset: str) -> dict[str, Any] | None:
        """The CLOB book object of a token, or None when there is no book."""
        with self._lock:
            book = self.books.get(asset)
            if book is None:
                return None
            return book.as_json(asset, self.condition_of(asset), now_ms())

    def best(self, asset: str) -> tuple[float | None, float | None]:
        """(best bid, best ask) of a token as the fake holds it."""
        with self._lock:
            book = self.books[asset]
            return book.best_bid, book.best_ask

    def set_level(self, asset: str, side: str, price: str, size: str) -> None:
        """Change one level of a book (REST sees it at once) and send the ``price_change``."""
        with self._lock:
            self.books[asset].set(side, price, size)
        self.clob_ws.send_price_change(asset, side, price, size)


@contextlib.contextmanager
def running(auto_markets: bool = False) -> Iterator[FakePolymarket]:
    """All fakes, started and always stopped."""
    world = FakePolymarket(auto_markets=auto_markets)
    with world:
        yield world


def main() -> None:
    """``python -m tests.support.fake_polymarket``: live fakes until Ctrl-C (manual checks,
    benchmarks); prints the environment that points the service at them."""
    with running(auto_markets=True) as world:
        world.rtds.live()
        world.clob_ws.keep_alive(0.1)
        for name, value in world.env().items():
            print(f"export {name}={value}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
