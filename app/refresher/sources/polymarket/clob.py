"""The CLOB: the market WebSocket for live books, and REST ``POST /books`` as fallback."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.feed import Feed, each
from app.refresher.sources.polymarket.gamma import UpstreamError

WS = "clob-ws"
REST = "clob-rest"


class ClobFeed(Feed):
    """Subscribes to the watched tokens; ``book`` snapshots and ``price_change`` updates."""

    name_for_logs = "clob"
    ping_every_s = 10.0

    def __init__(self, url: str, books: Books, stop: threading.Event) -> None:
        super().__init__(url, stop)
        self.books = books
        self._assets: tuple[str, ...] = ()

    def watch(self, assets: tuple[str, ...]) -> None:
        """Watch exactly ``assets``; a change resubscribes."""
        if assets != self._assets:
            self._assets = assets
            self.books.forget(set(assets))
            self.resubscribe()

    def subscription(self) -> list[str] | None:
        """The market subscription for the watched tokens."""
        if not self._assets:
            return None
        return [
            json.dumps(
                {"assets_ids": list(self._assets), "type": "market", "custom_feature_enabled": True}
            )
        ]

    def on_connect(self) -> None:
        """After every (re)connect the books are rebuilt from fresh snapshots."""
        self.books.forget(set())

    def handle(self, message: Any) -> None:
        """Apply ``book`` and ``price_change`` messages (a first frame may be an array)."""
        for item in each(message):
            kind = item.get("event_type")
            if kind == "book":
                asset = str(item.get("asset_id", ""))
                if asset in self._assets:
                    self.books.snapshot(asset, item.get("bids"), item.get("asks"), WS)
            elif kind == "price_change":
                for change in item.get("price_changes") or []:
                    if isinstance(change, dict):
                        self.books.change(
                            str(change.get("asset_id", "")),
                            str(change.get("side", "")),
                            change.get("price"),
                            change.get("size"),
                            WS,
                        )
            elif kind in ("best_bid_ask", "last_trade_price", "tick_size_change"):
                asset = str(item.get("asset_id", ""))
                if asset in self._assets:
                    self.books.touch(asset, WS)


def fetch_books(http: httpx.Client, base_url: str, assets: list[str]) -> dict[str, Any]:
    """``POST {clob}/books`` for ``assets``: their book objects by asset id."""
    response = http.post(
        f"{base_url.rstrip('/')}/books", json=[{"token_id": asset} for asset in assets]
    )
    if response.status_code != 200:
        raise UpstreamError(f"clob /books answered {response.status_code}")
    try:
        payload = response.json()
    except ValueError as exc:
        raise UpstreamError("clob /books answered something that is not JSON") from exc
    return {str(book.get("asset_id")): book for book in each(payload)}
