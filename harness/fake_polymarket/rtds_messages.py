"""The RTDS stand-in's messages and subscription rules, apart from its state
(``rtds_socket``): which subscription entries are served and for which symbol, which filters
are wrong, and the history snapshot and ``update`` messages as the wire carries them."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from harness.fake_polymarket.wire import (
    CHAINLINK_SYMBOLS,
    DEFAULT_CHAINLINK,
    RTDS_TOPICS,
    SERVED_FILTERS,
    WINDOW_S_OF_TOPIC,
    now_ms,
    plain,
    scaled,
)


def served(subscription: Any) -> bool:
    """Whether one entry of ``subscriptions`` is served: a known topic and exactly the
    compact filter string of a known stream."""
    return symbol_of(subscription) is not None


def symbol_of(subscription: Any) -> str | None:
    """The Chainlink symbol a served entry of ``subscriptions`` asks for; None when the
    entry is not served."""
    if not isinstance(subscription, dict):
        return None
    if subscription.get("topic") not in RTDS_TOPICS:
        return None
    filters = subscription.get("filters")
    return SERVED_FILTERS.get(filters) if isinstance(filters, str) else None


def misfiltered(filters: str) -> bool:
    """A filter that is not JSON, or that means a served stream (``btc/usd``...) but is
    not its compact string (the server compares strings: it matches nothing). Another
    symbol is not an error."""
    try:
        parsed = json.loads(filters) if filters else None
    except ValueError:
        return True
    return any(parsed == {"symbol": symbol} for symbol in CHAINLINK_SYMBOLS)


def first_message(
    topic: str,
    points: list[tuple[int, Decimal]],
    wire_topic: str | None = None,
    *,
    symbol: str = DEFAULT_CHAINLINK,
    sent_ms: int | None = None,
) -> dict[str, Any]:
    """The history snapshot of ``symbol``: the recent points as ``payload.data``, under
    ``wire_topic`` (``crypto_prices`` for the spot, as the server sends it) or else
    ``topic``; sent at ``sent_ms`` (default: now on the real clock)."""
    return {
        "topic": wire_topic or topic,
        "type": "subscribe",
        "timestamp": now_ms() if sent_ms is None else sent_ms,
        "payload": {
            "symbol": symbol,
            "data": [{"timestamp": ts, "value": float(v)} for ts, v in points],
        },
    }


def update(
    topic: str,
    ts_ms: int,
    value: Decimal,
    *,
    plain_full_accuracy: bool = False,
    symbol: str = DEFAULT_CHAINLINK,
    sent_ms: int | None = None,
) -> dict[str, Any]:
    """An ``update`` message of ``symbol``, sent at ``sent_ms`` (default: now on the real
    clock); the TWAP topics add ``full_accuracy_value`` (scaled by 1e18, or a plain
    decimal string with ``plain_full_accuracy``) and ``window_s``.

    ``value`` is rounded to cents there, so a reader that ignores the exact value is seen.
    """
    payload: dict[str, Any] = {"symbol": symbol, "timestamp": ts_ms, "value": float(value)}
    window_s = WINDOW_S_OF_TOPIC.get(topic)
    if window_s is not None:
        payload["value"] = float(round(value, 2))
        payload["full_accuracy_value"] = plain(value) if plain_full_accuracy else scaled(value)
        payload["window_s"] = window_s
    sent = now_ms() if sent_ms is None else sent_ms
    return {"topic": topic, "type": "update", "timestamp": sent, "payload": payload}
