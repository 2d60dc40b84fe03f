"""The stand-in for Gamma, Polymarket's market-listing REST API (``gamma``, HTTP).

``GET /events/slug/btc-updown-5m-<T0>`` (``eth-``, ``sol-``, ``xrp-`` for the other
markets) answers an event whose ``markets[0].outcomes`` and ``clobTokenIds`` are
JSON-encoded STRINGS, in the order the market says (``["Down","Up"]`` happens); 404 for a
window not listed.

Faults of value (off by default; off, they change nothing on the wire):
``window_offset = -1 | +1`` answers the previous / next window's event for a slug;
``same_tokens = True`` writes ``clobTokenIds`` as ``[UP, UP]``; ``price_to_beat_override`` is
put as ``eventMetadata.priceToBeat`` whatever its type (the string ``"1e400"``...);
``trickle_windows`` limits ``trickle_bps`` to those windows' slugs. Identities (issue 35):
``tokens_offset`` / ``condition_offset`` take the event's ``clobTokenIds`` / ``conditionId``
from the window that many away (slug and times stay right); ``swapped_outcomes`` reverses
``outcomes`` beside token ids left in place.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.horizons import EASTERN, HOURLY_WORDS, MONTHS
from app.markets import MARKETS, SPANS, Span
from harness.fake_polymarket.http_server import _HttpFake
from harness.fake_polymarket.wire import DEFAULT_SYMBOL
from harness.spans import FIVE_MINUTES, WINDOW_S

if TYPE_CHECKING:
    from harness.fake_polymarket.world import FakePolymarket


HOURLY_SLUG = re.compile(
    r"(?P<coin>[a-z]+)-up-or-down-(?P<month>[a-z]+)-(?P<day>[0-9]{1,2})(?:-(?P<year>[0-9]{4}))?"
    r"-(?P<hour>[0-9]{1,2})(?P<half>am|pm)-et"
)
YEARLESS_UNTIL = 2026  # the hourly slugs carry their year since March 2026 (docs/horizons.md)


def _hourly_start(slug: str) -> tuple[str, int, Span] | None:
    """(symbol, the hour's start, the hourly kind) of an hourly slug in words (the year
    missing: 2026's, as Polymarket listed such slugs until March 2026), else None. Only a
    slug the service itself would write for that hour is known (round trip)."""
    found = HOURLY_SLUG.fullmatch(slug)
    words = {word: symbol for symbol, word in HOURLY_WORDS.items()}
    if found is None or found["coin"] not in words or found["month"] not in MONTHS:
        return None
    hour = int(found["hour"])
    if not 1 <= hour <= 12 or not 1 <= int(found["day"]) <= 31:
        return None
    year = int(found["year"] or YEARLESS_UNTIL)
    month = MONTHS.index(found["month"]) + 1
    try:
        local = datetime(year, month, int(found["day"]), hour % 12 + 12 * (found["half"] == "pm"))
    except ValueError:  # february-30
        return None
    start = int(local.replace(tzinfo=EASTERN).timestamp())
    symbol, span = words[found["coin"]], SPANS["1h"]
    return (symbol, start, span) if slug in span.slugs(symbol, start) else None


class FakeGamma(_HttpFake):
    """``GET /events/slug/{slug}`` (also ``/events?slug=`` and ``/markets/slug/{slug}``), for
    the slug of any market of ``app.markets.MARKETS`` (``btc-updown-5m-<T0>``,
    ``eth-updown-5m-<T0>``...).

    Faults (all off by default): ``window_offset`` windows away from the one asked for is
    the event answered (-1: the previous window's, with its own slug, times and tokens);
    ``same_tokens`` writes UP's token for every outcome; ``price_to_beat_override`` is the
    raw JSON value of ``eventMetadata.priceToBeat``; ``trickle_windows`` (with
    ``trickle_bps``) trickles only the answers about those windows, of any market (empty:
    every answer). Each applies to every market.

    Faults of identity (issue 35): the event is the right window's (slug and times), but
    ``tokens_offset`` windows away are its ``clobTokenIds`` taken from (in the same outcome
    order), ``condition_offset`` windows away its ``conditionId``; ``swapped_outcomes``
    writes the outcomes reversed beside token ids left in place (``[UP, DOWN]`` with
    ``["Down", "Up"]``).
    """

    def __init__(self, world: FakePolymarket) -> None:
        super().__init__()
        self.world = world
        self.window_offset = 0
        self.tokens_offset = 0
        self.condition_offset = 0
        self.swapped_outcomes = False
        self.same_tokens = False
        self.price_to_beat_override: object | None = None
        self.trickle_windows: set[int] = set()

    def lookups(self, symbol: str = DEFAULT_SYMBOL) -> list[int]:
        """The windows of ``symbol``'s market looked up by slug so far, in order."""
        starts = []
        for hit in self.requests_to("/events/slug/"):
            parsed = self.parse_slug(hit.path.rsplit("/", 1)[-1])
            if parsed is not None and parsed[0] == symbol:
                starts.append(parsed[1])
        return starts

    @staticmethod
    def parse_slug(slug: str) -> tuple[str, int] | None:
        """(symbol, window start) of a 5-minute up/down slug of a known market, else None."""
        parsed = FakeGamma.parse_span_slug(slug)
        return parsed[:2] if parsed is not None and parsed[2] == FIVE_MINUTES else None

    @staticmethod
    def parse_span_slug(slug: str) -> tuple[str, int, Span] | None:
        """(symbol, window start, span) of an up/down slug of a known market (``btc-updown-
        15m-<T0>``, ``btc-updown-4h-<T0>`` on a 4-hour start, or an hourly market's Eastern
        hour in words, with or without its year), else None."""
        hourly = _hourly_start(slug)
        if hourly is not None:
            return hourly
        for symbol in MARKETS:
            for span in SPANS.values():
                prefix = f"{symbol.lower()}-updown-{span.name}-"
                rest = slug.removeprefix(prefix)
                if rest != slug and rest.isdigit() and span.start(int(rest)) == int(rest):
                    return symbol, int(rest), span
        return None

    def _event(self, slug: str) -> dict[str, Any] | None:
        """The event answered for ``slug``: its window's, or as the faults switched on say."""
        parsed = self.parse_span_slug(slug)
        if parsed is None:
            return None
        symbol, window, span = parsed
        if span != FIVE_MINUTES:  # the faults are the 5-minute markets'
            other = self.world.market_of(symbol, window, span)
            # An hourly market answers to the form of slug it was listed under only.
            return None if other is None or other.slug != slug else other.event()
        market = self.world.market_of(symbol, window + self.window_offset * WINDOW_S)
        if market is None:
            return None
        event = market.event()
        self._misidentify(event, symbol, window)
        if self.same_tokens:
            raw = event["markets"][0]
            raw["clobTokenIds"] = json.dumps([market.up_token for _ in market.outcomes])
        if self.price_to_beat_override is not None:
            event.setdefault("eventMetadata", {})["priceToBeat"] = self.price_to_beat_override
        return event

    def _misidentify(self, event: dict[str, Any], symbol: str, window: int) -> None:
        """Apply the identity faults to ``event`` (the event of ``symbol``'s ``window``)."""
        raw = event["markets"][0]
        other = self.world.market_of(symbol, window + self.tokens_offset * WINDOW_S)
        if self.tokens_offset and other is not None:
            other_ids = json.loads(other.event()["markets"][0]["clobTokenIds"])
            raw["clobTokenIds"] = json.dumps(other_ids)
        other = self.world.market_of(symbol, window + self.condition_offset * WINDOW_S)
        if self.condition_offset and other is not None:
            raw["conditionId"] = other.condition
        if self.swapped_outcomes:
            raw["outcomes"] = json.dumps(list(reversed(json.loads(raw["outcomes"]))))

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The Gamma routes; 404 for an unknown or unlisted slug."""
        not_found = {"type": "not found error", "error": "id not found"}
        if method == "GET" and path.startswith("/events/slug/"):
            event = self._event(path.rsplit("/", 1)[-1])
            return (200, event) if event else (404, not_found)
        if method == "GET" and path == "/events":
            event = self._event(query.get("slug", ""))
            return 200, [event] if event else []
        if method == "GET" and path.startswith("/markets/slug/"):
            event = self._event(path.rsplit("/", 1)[-1])
            return (200, event["markets"][0]) if event else (404, not_found)
        return 404, not_found

    def trickle_rate(self, path: str, query: dict[str, str]) -> float:
        """``trickle_bps`` for the answers about ``trickle_windows`` (all when empty)."""
        if self.trickle_bps <= 0 or not self.trickle_windows:
            return self.trickle_bps
        slug = query.get("slug", "") if path == "/events" else path.rsplit("/", 1)[-1]
        parsed = self.parse_slug(slug)
        return self.trickle_bps if parsed and parsed[1] in self.trickle_windows else 0.0
