"""The stand-in for the CLOB's WebSocket market channel (``clob_ws``).

- The first ``{"assets_ids": [...], "type": "market", ...}`` frame of a connection
  subscribes; the reply is a JSON ARRAY of ``book`` snapshots. A second ``type: "market"``
  frame on the same connection is refused: text ``INVALID OPERATION``, nothing changes
  (``refused``).
- ``{"assets_ids": [...], "operation": "subscribe" | "unsubscribe", ...}`` changes the
  assets of an open connection (``operations``): a subscribe answers a JSON array of
  snapshots of the assets it added, or the text ``NO NEW ASSETS``; an unsubscribe answers
  nothing. ``refuse_operations = True`` answers every operation ``INVALID OPERATION``.
- ``snapshot_delay_s > 0`` sends every snapshot reply that late, from a thread (a slow
  snapshot); the assets join the connection only then, so nothing about them comes first.
  ``hold_snapshots()`` holds every snapshot reply until ``release_snapshots()`` (a snapshot
  as late as the test says, not a number of real seconds); ``held_assets()`` says which.
- Then ``price_change`` messages driven by the test (``FakePolymarket.set_level`` /
  ``set_levels``; ``send=False`` loses the message on purpose), each entry carrying its
  asset's new ``best_bid`` / ``best_ask`` (``"0"`` / ``"1"`` for an empty side) as decimal
  strings; ``best_bid_ask`` (``send_best_bid_ask``, ``keep_alive``) and
  ``market_resolved`` (``send_market_resolved``).

Faults of value (off by default): ``junk_books = True`` makes every ``book`` snapshot's
levels unreadable (the subscription replies and ``send_books()``); ``top_override = (bid,
ask)`` puts those raw strings (``"-0"``, ``"1e-400"``) in every ``best_bid_ask``;
``top_offset = 1`` tells in every ``best_bid_ask`` and ``price_change`` entry the top of the
same outcome's token of the next window, under the token's own id; ``quiet = True`` pauses
``keep_alive`` (a quiet market).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from harness.fake_polymarket.clob_messages import (
    PriceChange,
    junk_levels,
    price_change_entries,
    resolved_message,
)
from harness.fake_polymarket.market import FakeMarket
from harness.fake_polymarket.wire import price_text
from harness.fake_polymarket.ws_server import _Client, _WsFake

if TYPE_CHECKING:
    from harness.fake_polymarket.world import FakePolymarket

# Re-exported: the fake's package and world import them from here.
__all__ = [
    "INVALID_OPERATION",
    "NO_NEW_ASSETS",
    "FakeClobWs",
    "PriceChange",
    "junk_levels",
]


INVALID_OPERATION = "INVALID OPERATION"
NO_NEW_ASSETS = "NO NEW ASSETS"


class FakeClobWs(_WsFake):
    """The CLOB market channel: one ``type: "market"`` frame per connection, then
    ``operation`` frames to change the assets; snapshots, ``price_change``,
    ``best_bid_ask`` and ``market_resolved`` messages."""

    path = "/ws/market"

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world
        self.snapshots_sent: list[list[str]] = []  # asset ids of each snapshot reply sent
        self.operations: list[Any] = []  # every ``operation`` frame received, parsed
        self.refused: list[Any] = []  # every frame answered ``INVALID OPERATION``
        self.refuse_operations = False  # answer every operation ``INVALID OPERATION``
        self.snapshot_delay_s = 0.0  # > 0: slow snapshots, sent that late from a thread
        self._held: list[Callable[[], None]] | None = None  # held snapshot replies, when held
        self.junk_books = False  # a fault: every book snapshot's levels are unreadable
        # A fault: the raw (best_bid, best_ask) strings of every best_bid_ask ("-0", "1e-400").
        self.top_override: tuple[str, str] | None = None
        self.quiet = False  # keep_alive sends nothing while set (a quiet market)
        # A fault: every top told (best_bid_ask, price_change entries) is that of the token of
        # the same outcome this many windows away, sent under the token's own id and market.
        self.top_offset = 0
        # Held while a connection's assets change and while anything is sent, so a message
        # about an asset never overtakes the snapshot that brings the asset in.
        self._send_lock = threading.RLock()

    def subscribed_assets(self) -> set[str]:
        """The assets of the newest ``type: "market"`` subscription (empty before any)."""
        for message in reversed(self.subscriptions):
            if isinstance(message, dict) and isinstance(message.get("assets_ids"), list):
                return {str(a) for a in message["assets_ids"]}
        return set()

    def assets_of_connections(self) -> list[set[str]]:
        """Each open connection's current assets (after operations; slow snapshots not yet
        sent are not counted), in the order the connections were accepted."""
        with self._send_lock:
            return [set(client.assets) for client in self.clients]

    def on_message(self, client: _Client, message: Any) -> None:
        """``type: "market"`` (once per connection) or an ``operation`` frame."""
        if not isinstance(message, dict):
            return
        if "operation" in message:
            self._operation(client, message)
            return
        if message.get("type") != "market" or not isinstance(message.get("assets_ids"), list):
            return
        if client.market_subscribed:
            # The real server takes one initial subscription per connection.
            self._refuse(client, message)
            return
        client.market_subscribed = True
        self.subscriptions.append(message)
        self._subscribe(client, [str(a) for a in message["assets_ids"]])

    def _refuse(self, client: _Client, message: Any) -> None:
        self.refused.append(message)
        self.reply(client, INVALID_OPERATION)

    def _operation(self, client: _Client, message: dict[str, Any]) -> None:
        self.operations.append(message)
        operation = message.get("operation")
        assets = message.get("assets_ids")
        if (
            self.refuse_operations
            or operation not in ("subscribe", "unsubscribe")
            or not isinstance(assets, list)
        ):
            self._refuse(client, message)
            return
        requested = list(dict.fromkeys(str(a) for a in assets))
        with self._send_lock:
            if operation == "unsubscribe":
                client.assets.difference_update(requested)
                client.pending.difference_update(requested)  # its slow snapshot is off too
                return
            new = [a for a in requested if a not in client.assets and a not in client.pending]
        if new:
            self._subscribe(client, new)
        else:
            self.reply(client, NO_NEW_ASSETS)

    def hold_snapshots(self) -> None:
        """Hold every snapshot reply from now until ``release_snapshots()``."""
        with self._send_lock:
            if self._held is None:
                self._held = []

    def held_assets(self) -> set[str]:
        """The assets whose snapshot replies are held or delayed, on every connection."""
        with self._send_lock:
            return set().union(*(client.pending for client in self.clients))

    def release_snapshots(self) -> None:
        """Send the held snapshot replies now, and the later ones at once."""
        with self._send_lock:
            held, self._held = self._held or [], None
            for reply in held:
                reply()

    def _subscribe(self, client: _Client, assets: list[str]) -> None:
        assets = list(dict.fromkeys(assets))
        with self._send_lock:
            if self.snapshot_delay_s <= 0 and self._held is None:
                self._snapshot(client, assets)
                return
            client.pending.update(assets)

            def slow() -> None:
                with self._send_lock:
                    due = [a for a in assets if a in client.pending]  # not unsubscribed since
                    client.pending.difference_update(due)
                    self._snapshot(client, due)

            if self._held is not None:
                self._held.append(slow)
                return
        self.later(self.snapshot_delay_s, slow)

    def _snapshot(self, client: _Client, assets: list[str]) -> None:
        """Add ``assets`` to the connection and send their books as one JSON array."""
        with self._send_lock:
            client.assets.update(assets)
            if not self.deliverable(client) or not self.is_open(client):
                return
            books = [self._book_message(a) for a in assets]
            frame = [b for b in books if b is not None]
            client.send(json.dumps(frame))  # a JSON ARRAY of snapshots ("[]" happens)
            self.snapshots_sent.append([b["asset_id"] for b in frame])

    def _book_message(self, asset: str) -> dict[str, Any] | None:
        """The ``book`` message of ``asset`` (its levels junk while ``junk_books``)."""
        book = self.world.book_json(asset)
        if book is None:
            return None
        if self.junk_books:
            book["bids"], book["asks"] = junk_levels(), junk_levels()
        return book | {"event_type": "book"}

    def send_books(self, asset: str | None = None) -> None:
        """A ``book`` snapshot (one object per message) of every asset each connection
        watches, or only of ``asset``: the market channel resends books as trades happen."""
        with self._send_lock:
            for client in self.clients:
                for watched in sorted(client.assets):
                    if asset is not None and watched != asset:
                        continue
                    message = self._book_message(watched)
                    if message is not None and self.deliverable(client):
                        client.send(json.dumps(message))

    def broadcast(self, asset: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every connection subscribed to ``asset``."""
        text = json.dumps(message)
        with self._send_lock:
            for client in self.clients:
                if asset in client.assets and self.deliverable(client):
                    client.send(text)

    def send_price_change(self, asset: str, side: str, price: str, size: str) -> None:
        """The ``price_change`` message for a level the world has just changed."""
        self.send_price_changes([(asset, side, price, size)])

    def send_price_changes(self, changes: Sequence[PriceChange]) -> None:
        """ONE ``price_change`` message per market with an entry per (asset, side, price,
        size) the world has just applied; each entry carries its asset's best bid/ask after
        all of them.

        A connection gets the entries of the assets it watches (the message is not sent to
        a connection that watches none of them).
        """
        if not changes:
            return
        quotes: dict[str, tuple[str, str, str]] = {}
        for asset, _, _, _ in changes:
            if asset not in quotes:
                quotes[asset] = self.world.quote_texts(self._top_source(asset))
        entries = price_change_entries(changes, quotes)
        # One message per market, as the real channel sends them: its ``market`` is the
        # condition of every asset in it (the source checks it, identity.py).
        by_market: dict[str, list[dict[str, str]]] = {}
        for entry in entries:
            by_market.setdefault(self.world.condition_of(entry["asset_id"]), []).append(entry)
        timestamp = str(self.now_ms())
        with self._send_lock:
            for client in self.clients:
                for market, market_entries in by_market.items():
                    mine = [e for e in market_entries if e["asset_id"] in client.assets]
                    if not mine or not self.deliverable(client):
                        continue
                    message = {
                        "event_type": "price_change",
                        "market": market,
                        "timestamp": timestamp,
                        "price_changes": mine,
                    }
                    client.send(json.dumps(message))

    def send_best_bid_ask(self, asset: str | None = None) -> None:
        """A ``best_bid_ask`` message per subscribed asset (confirms the books unchanged);
        only for ``asset`` when given."""
        with self._send_lock:
            for client in self.clients:
                for watched in list(client.assets):
                    if asset is not None and watched != asset:
                        continue
                    book = self.world.books.get(watched)
                    if book is None or not self.deliverable(client):
                        continue
                    best_bid, best_ask, _ = self.world.quote_texts(self._top_source(watched))
                    if self.top_override is not None:
                        best_bid, best_ask = self.top_override
                    message = {
                        "event_type": "best_bid_ask",
                        "market": self.world.condition_of(watched),
                        "asset_id": watched,
                        "best_bid": best_bid,
                        "best_ask": best_ask,
                        "spread": price_text(Decimal(best_ask) - Decimal(best_bid)),
                        "timestamp": str(self.now_ms()),
                    }
                    client.send(json.dumps(message))

    def _top_source(self, asset: str) -> str:
        """The token whose top is told for ``asset``: itself, unless ``top_offset``."""
        if not self.top_offset:
            return asset
        return self.world.counterpart(asset, self.top_offset) or asset

    def send_market_resolved(self, market: FakeMarket, winner: str) -> None:
        """``market_resolved`` to the connections watching either token; ``winner`` is
        ``"Up"`` / ``"Down"`` (any case) or the winning token id."""
        text = json.dumps(resolved_message(market, winner, self.now_ms()))
        with self._send_lock:
            for client in self.clients:
                if client.assets & set(market.tokens) and self.deliverable(client):
                    client.send(text)

    def keep_alive(self, period_s: float = 0.1) -> None:
        """Send ``best_bid_ask`` every ``period_s`` (a busy market: the books stay fresh),
        except while ``quiet``."""

        def beat() -> None:
            if not self.quiet:
                self.send_best_bid_ask()

        self.every(period_s, beat)
