"""Replay: the recorded frames through the live source's own code, on a virtual clock.

The source runs without its threads (``background=False``). Frames received on a socket go
to the same feed objects (``receive``: the same parsing and handling as live); the socket's
``connect`` events call the same hooks; HTTP requests are answered from the tape
(``TapeHttp``); ``upkeep`` runs every ``UPKEEP_S`` and a row is built every tick, both on
tape time. The replayed code watches what it would watch live: frames for tokens it does
not watch are ignored by the same code that ignores them live.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from app.board.row import BoardRow
from app.markets import DEFAULT_SPAN, MARKETS, SPANS, Market, Span
from app.refresher import clocks
from app.refresher.sources.polymarket.clob import winners_of
from app.refresher.sources.polymarket.identity import UnrecordedError
from app.refresher.sources.polymarket.source import UPKEEP_S, PolymarketSource, Upstreams

# The replayed source's upstreams: never reached (requests are answered from the tape,
# which is matched on method, path, query and body, not on host).
REPLAY_UPSTREAMS = Upstreams(
    gamma="http://gamma.tape",
    clob="http://clob.tape",
    clob_ws="ws://clob-ws.tape",
    rtds="ws://rtds.tape",
    site="http://site.tape",
    binance="http://binance.tape",
)
HTTP_SOURCES = frozenset({"gamma", "clob-rest", "site", "binance"})
# A tape whose RTDS subscription names no market was recorded by the one-market refresher of
# before SYMBOLS, which served BTC only: that is its market.
UNNAMED_TAPE_MARKET = "BTC"
# A Gamma lookup of an up/down window (by path or query): its slug names the window's length.
GAMMA_WINDOW = re.compile(r"[a-z]+-updown-([0-9]+[mh])-[0-9]+")
# An hourly market's lookup: its slug is the Eastern hour in words.
GAMMA_HOURLY = re.compile(r"[a-z]+-up-or-down-[a-z]+-[0-9]+(?:-[0-9]{4})?-[0-9]+[ap]m-et")
Key = tuple[str, str, tuple[tuple[str, str], ...], str | None]


def request_key(method: str, url: str, body: str | None) -> Key:
    """What an HTTP request is matched on: method, path, query (in any order), body."""
    parts = urlsplit(url)
    query = tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return method.upper(), parts.path or "/", query, body or None


class TapeHttp(httpx.BaseTransport):
    """Answers a request with the latest recorded response to the same request at or before
    the virtual time; when that one failed, it fails like a timeout; with none, it raises
    ``UnrecordedError`` (a timeout too, which the identity check tells apart)."""

    def __init__(self) -> None:
        self._latest: dict[Key, tuple[int, str] | None] = {}

    def record(self, line: dict[str, Any]) -> None:
        """Take in a recorded exchange (the replay calls this as tape time passes it)."""
        status = line.get("status")
        key = request_key(
            str(line.get("method", "GET")), str(line.get("url", "")), line.get("body")
        )
        ok = isinstance(status, int) and status > 0
        self._latest[key] = (status, str(line.get("frame") or "")) if ok else None  # type: ignore[assignment]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """The recorded answer, or ``UnrecordedError`` (an ``httpx.ReadTimeout``)."""
        content = request.read()
        body = content.decode("utf-8", errors="replace") if content else None
        key = request_key(request.method, str(request.url), body)
        if key not in self._latest:
            raise UnrecordedError("no recorded answer at this time", request=request)
        found = self._latest[key]
        if found is None:  # recorded as failed: it fails again
            raise httpx.ReadTimeout("the recorded request failed", request=request)
        status, frame = found
        headers = {"Content-Type": "application/json"}
        return httpx.Response(status, headers=headers, text=frame, request=request)


class VirtualClock:
    """Tape time: set by the replay, read by the source (wall and monotonic alike)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Board:
    """One row the replayed source built, at tape time ``t`` (one per market a tick): typed,
    as the live refresher's recorder takes it."""

    t: float
    row: BoardRow

    @property
    def p_up(self) -> float | None:
        """The model's own fraction (not the rounded percentage)."""
        return self.row.model_p_up


@dataclass
class Replay:
    """A replay in progress: its source, and what the tape said about outcomes."""

    source: PolymarketSource
    clock: VirtualClock
    http: TapeHttp
    winners: dict[str, bool] = field(default_factory=dict)  # token id -> won (market_resolved)
    gamma_frames: list[str] = field(default_factory=list)  # Gamma answers, for outcomes
    lines: int = 0
    first_t: float | None = None
    last_t: float | None = None


def new_replay(
    stale_after_ms: int,
    start_t: float,
    markets: tuple[Market, ...],
    spans: tuple[Span, ...] = (DEFAULT_SPAN,),
) -> Replay:
    """A threadless live source of ``markets`` over ``spans`` on a virtual clock, answered
    from the tape; the source comes to life at ``start_t`` (the tape's first ``t``), as the
    live one did."""
    clock = VirtualClock()
    clock.t = start_t
    http = TapeHttp()
    source = PolymarketSource(
        REPLAY_UPSTREAMS,
        http=httpx.Client(transport=http),
        clock=clock,
        stale_after_ms=stale_after_ms,
        background=False,
        markets=markets,
        spans=spans,
    )
    return Replay(source, clock, http)


def markets_of(lines: list[dict[str, Any]]) -> tuple[Market, ...]:
    """The markets a tape was recorded for: the Chainlink symbols of its first RTDS subscribe
    frame (in their order), else ``UNNAMED_TAPE_MARKET``'s."""
    by_chainlink = {market.chainlink: market for market in MARKETS.values()}
    for line in lines:
        if line.get("src") != "rtds" or line.get("dir") != "out":
            continue
        try:
            frame = json.loads(str(line.get("frame")))
            subscriptions = list(frame["subscriptions"])
        except (ValueError, KeyError, TypeError):
            continue
        filters = [_chainlink_symbol(s) for s in subscriptions]
        found = list(dict.fromkeys(by_chainlink[f] for f in filters if f in by_chainlink))
        if found:
            return tuple(found)
    return (MARKETS[UNNAMED_TAPE_MARKET],)


def spans_of(lines: list[dict[str, Any]]) -> tuple[Span, ...]:
    """The window lengths a tape was recorded for: those its Gamma lookups name (the
    refresher looks up every served length's window as it starts), in ``SPANS`` order; a
    tape with none (recorded before ``WINDOWS``) is a 5-minute one."""
    named = set()
    for line in lines:
        if line.get("src") == "gamma":
            url = str(line.get("url", ""))
            found = GAMMA_WINDOW.search(url)
            if found is not None:
                named.add(found.group(1))
            if GAMMA_HOURLY.search(url):
                named.add("1h")
    return tuple(span for name, span in SPANS.items() if name in named) or (DEFAULT_SPAN,)


def _chainlink_symbol(subscription: Any) -> str | None:
    """The Chainlink symbol a subscription entry names (None for another kind: the exchange
    prices' entry filters by pairs, not by a JSON symbol)."""
    try:
        symbol = json.loads(subscription["filters"])["symbol"]
    except (ValueError, KeyError, TypeError):
        return None
    return symbol if isinstance(symbol, str) else None


def _take(replay: Replay, line: dict[str, Any]) -> None:
    src = line["src"]
    source = replay.source
    if src in HTTP_SOURCES:
        replay.http.record(line)
        if src == "gamma" and line.get("status") == 200:
            replay.gamma_frames.append(str(line.get("frame") or ""))
        return
    feed = source.clob if src == "clob-ws" else source.rtds if src == "rtds" else None
    if feed is None or line.get("dir") == "out":
        return
    event = line.get("event")
    if event == "connect":
        feed.on_connect()
    elif event is None and isinstance(line.get("frame"), str):
        frame = line["frame"]
        feed.receive(frame)
        if src == "clob-ws" and "market_resolved" in frame:
            _note_resolutions(replay, frame)


def _note_resolutions(replay: Replay, frame: str) -> None:
    try:
        message = json.loads(frame)
    except ValueError:
        return
    replay.winners.update(winners_of(message if isinstance(message, list) else [message]))


def run(
    replay: Replay,
    lines: Iterable[dict[str, Any]],
    tick_ms: int,
    at: Iterable[float] | None = None,
) -> Iterator[Board]:
    """Feed ``lines`` (in ``t`` order) and yield a board every ``tick_ms`` of tape time, on
    its multiples (or at each of the increasing times ``at``, to compare with a live run)."""
    tick_s = tick_ms / 1000.0
    clock, source = replay.clock, replay.source
    chosen = iter(at) if at is not None else None
    next_tick = next_upkeep = math.inf
    with clocks.use(clock):
        for line in lines:
            t = float(line["t"])
            if replay.first_t is None:
                replay.first_t = t
                first = math.ceil(t / tick_s) * tick_s
                next_tick = next(chosen, math.inf) if chosen is not None else first
                next_upkeep = t
            while min(next_tick, next_upkeep) <= t:
                if next_upkeep <= next_tick:
                    clock.t = next_upkeep
                    source.upkeep(next_upkeep)
                    next_upkeep += UPKEEP_S
                else:
                    clock.t = next_tick
                    for row in source.rows(next_tick):
                        yield Board(next_tick, row)
                    if chosen is not None:
                        next_tick = next(chosen, math.inf)
                    else:
                        next_tick += tick_s
            clock.t = t
            _take(replay, line)
            replay.lines += 1
            replay.last_t = t
