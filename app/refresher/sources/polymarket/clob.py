"""The CLOB: the market WebSocket for live books, and REST ``POST /books`` as fallback."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from app.refresher import clocks
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.feed import Feed, each
from app.refresher.sources.polymarket.gamma import json_of

log = logging.getLogger(__name__)

WS = "clob-ws"
REST = "clob-rest"
SWAP_RETRY_S = 2.0


class ClobFeed(Feed):
    """The market channel for the watched tokens: books kept warm across window changes.

    Tokens are added and removed on the open connection with the documented ``operation``
    messages; if the upstream refuses them (``INVALID OPERATION``), a new connection with
    the whole subscription is opened before the old one is closed. Books are forgotten only
    for tokens no longer watched; after a real reconnect the snapshots rebuild them.
    """

    name_for_logs = "clob"
    tape_src = "clob-ws"
    ping_every_s = 10.0

    def __init__(self, url: str, books: Books, stop: threading.Event) -> None:
        super().__init__(url, stop)
        self.books = books
        self._assets: tuple[str, ...] = ()  # wanted (set by the refresher's thread)
        self._on_socket: set[str] = set()  # subscribed on the current connection
        self._subscribing: set[str] = set()  # what the last subscription() asked for
        self._ops_refused = False
        self._swap_tried_at = -SWAP_RETRY_S
        self.resolutions: list[dict[str, Any]] = []  # market_resolved messages (newest last)
        # Told (asset, the message's ``market``) for every message about a watched asset
        # (``book``, ``price_change``, ``best_bid_ask``): the CLOB's own word on which market
        # a token belongs to (identity.py).
        self.on_book: Callable[[str, Any], None] | None = None

    def watch(self, assets: tuple[str, ...]) -> None:
        """Watch exactly ``assets``; the feed's thread applies a change on the open socket."""
        if assets != self._assets:
            self._assets = assets
            self.books.forget(set(assets))
            self.wake()  # a feed waiting for tokens connects now

    def subscription(self) -> list[str] | None:
        """The market subscription for the watched tokens (the first frame of a connection)."""
        assets = self._assets
        if not assets:
            return None
        self._subscribing = set(assets)
        return [
            json.dumps(
                {"assets_ids": list(assets), "type": "market", "custom_feature_enabled": True}
            )
        ]

    def on_connect(self) -> None:
        """The new connection carries what its subscription asked for."""
        self._on_socket = set(self._subscribing)

    def pending(self) -> list[str]:
        """``operation`` frames that bring the open connection to the watched tokens."""
        if self._ops_refused:
            return []
        wanted = set(self._assets)
        added, removed = wanted - self._on_socket, self._on_socket - wanted
        frames = []
        if added:
            frames.append(_operation("subscribe", added))
        if removed:
            frames.append(_operation("unsubscribe", removed))
        self._on_socket = wanted
        return frames

    def wants_new_connection(self) -> bool:
        """Operations refused and the tokens changed: move to a new connection (at most every
        ``SWAP_RETRY_S`` while that fails)."""
        if not self._ops_refused or self._on_socket == set(self._assets):
            return False
        now = clocks.monotonic()
        if now - self._swap_tried_at < SWAP_RETRY_S:
            return False
        self._swap_tried_at = now
        return True

    def on_text(self, text: str) -> None:
        """``INVALID OPERATION`` refuses our add/remove: from now on, change connections."""
        if text.upper() == "INVALID OPERATION":
            if not self._ops_refused:
                log.warning(
                    "clob: the upstream refused a subscription change; "
                    "moving to a new connection for each change from now on"
                )
            self._ops_refused = True
            self._on_socket = set()  # unknown: the next change of tokens replaces the socket
        elif text.upper() not in ("NO NEW ASSETS", "[]"):
            super().on_text(text)

    def handle(self, message: Any) -> None:
        """Apply ``book``, ``price_change`` and ``best_bid_ask`` (a first frame may be an array)."""
        watched = self._assets
        for item in each(message):
            kind = item.get("event_type")
            if kind == "book":
                asset = str(item.get("asset_id", ""))
                if asset in watched:
                    self._note_market(asset, item)
                    self.books.snapshot(asset, item.get("bids"), item.get("asks"), WS)
            elif kind == "price_change":
                for change in item.get("price_changes") or []:
                    if not isinstance(change, dict):
                        continue
                    asset = str(change.get("asset_id", ""))
                    if asset not in watched:
                        continue
                    self._note_market(asset, item)
                    has_top = "best_bid" in change or "best_ask" in change
                    self.books.change(
                        asset,
                        str(change.get("side", "")),
                        change.get("price"),
                        change.get("size"),
                        WS,
                        (change.get("best_bid"), change.get("best_ask")) if has_top else None,
                    )
            elif kind == "best_bid_ask":
                asset = str(item.get("asset_id", ""))
                if asset in watched:
                    self._note_market(asset, item)
                    self.books.top(asset, item.get("best_bid"), item.get("best_ask"), WS)
            elif kind == "market_resolved":
                self.resolutions = [*self.resolutions[-49:], item]

    def _note_market(self, asset: str, item: dict[str, Any]) -> None:
        """Tell ``on_book`` which market the message about ``asset`` says it is in."""
        if self.on_book is not None:
            self.on_book(asset, item.get("market"))


def winners_of(resolutions: Iterable[Any]) -> dict[str, bool]:
    """Token id -> won, from ``market_resolved`` messages (``winning_asset_id``); anything
    else among ``resolutions`` is ignored."""
    found: dict[str, bool] = {}
    for item in resolutions:
        if not isinstance(item, dict) or item.get("event_type") != "market_resolved":
            continue
        winner = str(item.get("winning_asset_id", ""))
        assets = item.get("assets_ids")
        for asset in assets if isinstance(assets, list) else []:
            found[str(asset)] = str(asset) == winner
        if winner:
            found[winner] = True
    return found


def _operation(name: str, assets: set[str]) -> str:
    return json.dumps(
        {"assets_ids": sorted(assets), "operation": name, "custom_feature_enabled": True}
    )


def fetch_books(http: httpx.Client, base_url: str, assets: list[str]) -> dict[str, Any]:
    """``POST {clob}/books`` for ``assets``: their book objects by asset id."""
    response = http.post(
        f"{base_url.rstrip('/')}/books", json=[{"token_id": asset} for asset in assets]
    )
    return {str(book.get("asset_id")): book for book in each(json_of(response, "clob /books"))}
