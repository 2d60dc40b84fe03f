"""Market discovery on Gamma: the event of a 5-minute window, by slug.

The slug is ``<coin>-updown-5m-<T0>`` (``app.markets.Market.slug``) with ``T0`` the window
START (a multiple of 300). Inside ``event.markets[0]``, ``outcomes`` and ``clobTokenIds``
are JSON-encoded STRINGS; token ids pair with outcomes by position, and outcomes may come
as ``["Down","Up"]``: pair by label.
The settlement rule is read from each market (``cryptoMarketConfig`` / ``resolutionSource``).

An answer is believed only when it is about the window asked for: the event's (and the
market's) slug, ``eventStartTime`` and ``endDate`` those of the window, and two distinct
tokens; anything else is an ``UpstreamError`` (another window's books must never sit beside
this window's probability).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from app.markets import Market, Span
from app.refresher.model import SPOT, TWAP

TOKEN_ID = re.compile(r"[0-9]{1,78}")
TWAP_STREAM = re.compile(r"twap-([0-9]{1,3})s")
MAX_LOOKBACK_S = 300


class UpstreamError(Exception):
    """An upstream answered something we cannot use; the message says what."""


def json_of(response: httpx.Response, what: str) -> Any:
    """The JSON body of a 200 answer; ``UpstreamError`` naming ``what`` answered otherwise."""
    if response.status_code != 200:
        raise UpstreamError(f"{what} answered {response.status_code}")
    try:
        return response.json()
    except ValueError as exc:
        raise UpstreamError(f"{what} answered something that is not JSON") from exc


class WrongMarketError(UpstreamError):
    """Gamma answered about another window than the one asked for, or with unusable tokens."""


@dataclass(frozen=True)
class WindowMarket:
    """One window's market as the board needs it."""

    window_start: int
    slug: str
    up_token_id: str
    down_token_id: str
    rule: str  # spot or twap
    lookback_s: int | None  # a TWAP's lookback (twapLookbackSeconds); None for spot or unknown
    condition_id: str | None
    price_to_beat: float | None  # Gamma's eventMetadata.priceToBeat, when present
    span: Span  # the window's kind

    @property
    def window_end(self) -> int:
        """When the window ends (unix seconds)."""
        return self.span.end(self.window_start)


def _json_list(value: Any, field: str) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise UpstreamError(f"{field} is not valid JSON") from exc
    if not isinstance(value, list):
        raise UpstreamError(f"{field} is not a list")
    return value


def settlement_rule(market: dict[str, Any]) -> str:
    """``twap`` when the market settles on a TWAP, else ``spot``."""
    return settlement(market)[0]


def settlement(market: dict[str, Any]) -> tuple[str, int | None]:
    """(rule, TWAP lookback in seconds) as the market states them.

    ``cryptoMarketConfig.twapLookbackSeconds`` gives the lookback; failing that, the
    ``...-twap-<N>s-...`` stream named in ``resolutionSource``. It is never assumed: a TWAP
    market that states no lookback gets None (and the board no probability for it).
    """
    config = market.get("cryptoMarketConfig")
    config = config if isinstance(config, dict) else {}
    source = market.get("resolutionSource")
    source = source.lower() if isinstance(source, str) else ""
    if config.get("twapEnabled") is not True and "twap" not in source:
        return SPOT, None
    stated = config.get("twapLookbackSeconds")
    if isinstance(stated, int) and not isinstance(stated, bool) and 0 < stated <= MAX_LOOKBACK_S:
        return TWAP, stated
    named = TWAP_STREAM.search(source)
    if named and 0 < int(named.group(1)) <= MAX_LOOKBACK_S:
        return TWAP, int(named.group(1))
    return TWAP, None


def _epoch(value: Any) -> int | None:
    """Unix seconds of an ISO-8601 UTC time (``...Z``); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(parsed.timestamp()) if parsed.tzinfo is not None else None


def check_window(
    event: dict[str, Any], market: dict[str, Any], window_start: int, slug: str, span: Span
) -> None:
    """``WrongMarketError`` unless the event and its market name the window asked for: the slug
    (required on the event), and the window's times where they are given."""
    if event.get("slug") != slug:
        raise WrongMarketError(f"asked for {slug}, the event is {str(event.get('slug'))[:80]!r}")
    if "slug" in market and market["slug"] != slug:
        raise WrongMarketError(f"asked for {slug}, the market is {str(market['slug'])[:80]!r}")
    expected = {"eventStartTime": window_start, "endDate": span.end(window_start)}
    for owner in (event, market):
        for name, t in expected.items():
            if name in owner and _epoch(owner[name]) != t:
                raise WrongMarketError(f"{slug}: {name} {str(owner[name])[:40]!r} is not {t}")


def parse_event(event: Any, window_start: int, coin: Market, span: Span) -> WindowMarket:
    """The market of ``coin``'s ``span`` window in a Gamma event object; ``UpstreamError``
    when it does not fit, ``WrongMarketError`` when it is not the window asked for."""
    if not isinstance(event, dict):
        raise UpstreamError("the event is not an object")
    markets = event.get("markets")
    if not isinstance(markets, list) or not markets or not isinstance(markets[0], dict):
        raise UpstreamError("the event has no market")
    market = markets[0]
    slug = str(event.get("slug"))
    if slug not in span.slugs(coin.symbol, window_start):
        slug = coin.slug(window_start, span)  # check_window names the one asked for
    check_window(event, market, window_start, slug, span)
    outcomes = [str(o).strip().lower() for o in _json_list(market.get("outcomes"), "outcomes")]
    token_ids = [str(t) for t in _json_list(market.get("clobTokenIds"), "clobTokenIds")]
    if len(outcomes) != len(token_ids) or {"up", "down"} - set(outcomes):
        raise UpstreamError(f"unexpected outcomes {outcomes!r}")
    by_label = dict(zip(outcomes, token_ids, strict=True))
    for token in by_label.values():
        if not TOKEN_ID.fullmatch(token):
            raise UpstreamError("a token id is not a decimal string")
    if len(set(token_ids)) != len(token_ids):
        raise WrongMarketError("two outcomes share one token id")
    metadata = event.get("eventMetadata")
    price_to_beat = None
    if isinstance(metadata, dict):
        raw = metadata.get("priceToBeat")
        if isinstance(raw, int | float | str):
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            # Finite and positive here; near the spot where it is used (the source).
            price_to_beat = value if math.isfinite(value) and value > 0 else None
    condition = market.get("conditionId")
    rule, lookback = settlement(market)
    return WindowMarket(
        window_start=window_start,
        slug=slug,
        up_token_id=by_label["up"],
        down_token_id=by_label["down"],
        rule=rule,
        lookback_s=lookback,
        condition_id=condition if isinstance(condition, str) else None,
        price_to_beat=price_to_beat,
        span=span,
    )


class GammaClient:
    """``GET {gamma}/events/slug/{slug}`` for one market's windows of one span, with
    timeouts; None while a window is not listed."""

    def __init__(self, base_url: str, http: httpx.Client, market: Market, span: Span) -> None:
        self._base = base_url.rstrip("/")
        self._http = http
        self._market = market
        self._span = span

    def window(self, window_start: int) -> WindowMarket | None:
        """The market of the window starting at ``window_start``, or None (404 for every
        form of its slug: not listed)."""
        for slug in self._span.slugs(self._market.symbol, window_start):
            response = self._http.get(f"{self._base}/events/slug/{slug}")
            if response.status_code != 404:
                event = json_of(response, "gamma")
                return parse_event(event, window_start, self._market, self._span)
        return None
