"""Synthetic tapes (``docs/tapes.md``) of a market on a seeded path of known sigma, for backtests.

The path is a ``BrownianPath`` or the settlement-feed stand-in (``SettlementFeedPath``;
``PATHS`` names both). The frames are the fakes' own (``harness.fake_polymarket``: Gamma
events, CLOB books and ``best_bid_ask``, RTDS updates and history), laid out on tape time as
a recording of them would be: the spot and both TWAP topics every second (each point 50 ms
after its second; with ``arrivals="feed"``, at the stand-in's own lag, and nothing for the
seconds it leaves out), each window's Gamma answer (of every window length in ``spans``:
5 minutes unless told, 15 minutes, or both on one tape as a refresher with ``WINDOWS=5m,15m``
records them) two minutes ahead, its books from a
minute before it starts until a few seconds after it ends, and optionally its
``market_resolved``.

The market's quote of UP is set by ``market``: ``exact`` keeps its mid on the exact P(up)
(from the path and the true sigma, at the spot the board would see), ``none`` sends no
quotes at all; both books are symmetric (DOWN = 1 - UP). On the stand-in that P(up) is the
Brownian formula at the path's sigma, not the exact value (the feed is smoothed).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from statistics import NormalDist
from typing import Any

from app.markets import Span
from harness.fake_polymarket import (
    EXCHANGE_BASIS,
    EXCHANGE_TOPIC,
    SPOT,
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP,
    TWAP_TOPICS,
    BrownianPath,
    FakeBook,
    FakeMarket,
    FakeRtds,
)
from harness.fake_polymarket.binance import INTERVALS_MS, kline_row
from harness.fake_polymarket.market import shifted
from harness.paths import SeededPath
from harness.settlement_feed import SettlementFeedPath
from harness.spans import FIVE_MINUTES, WINDOW_S

POINT_DELAY_S = 0.05  # a second's price arrives this long after the second
QUOTE_DELAY_S = 0.06  # the market's quote of that second, just after the price
HISTORY_S = 1200  # the spot history the RTDS snapshot carries at the tape's start
# The recording starts this long before the first window: its Gamma lookup (T0 - 120 s) and
# its books (T0 - 59.5 s) are on the tape, and the history snapshot above gives the model its
# past (the replay costs about 1 ms per tape second: a longer lead is time, not information).
LEAD_S = 150
HALF_SPREAD = 0.005
PATHS: dict[str, type[SeededPath]] = {
    "brownian": BrownianPath,
    "feed": SettlementFeedPath,  # the settlement feed's stand-in (harness/settlement_feed.py)
}


def exact_p_up(
    path: SeededPath,
    rule: str,
    lookback: int,
    t0: int,
    at_s: float,
    sigma: float,
    length_s: int = WINDOW_S,
) -> float:
    """P(up) from the path itself and the true ``sigma``, knowing the spot up to second
    ``int(at_s)``, with the time left counted from ``at_s`` to the end of the window of
    ``length_s`` seconds: exact on a ``BrownianPath``, the Brownian formula at ``sigma`` on
    any other."""
    end = t0 + length_s
    second = int(at_s)
    k = float(path.twap(t0, lookback)) if rule == TWAP else float(path.value(t0))
    spot = float(path.value(second))
    tau = max(0.0, end - at_s)
    if rule == SPOT:
        centre, variance = spot, sigma**2 * tau
    elif tau > lookback:
        centre, variance = spot, sigma**2 * (tau - 2 * lookback / 3)
    else:
        known = [float(path.value(s)) for s in range(end - lookback + 1, second + 1)] or [spot]
        w = (lookback - tau) / lookback
        centre = w * statistics.fmean(known) + (1 - w) * spot
        variance = sigma**2 * tau**3 / (3 * lookback**2)
    if variance <= 0:
        return 1.0 if centre >= k else 0.0
    return NormalDist().cdf(math.log(centre / k) / math.sqrt(variance))


def settled_up(
    path: SeededPath, rule: str, lookback: int, t0: int, length_s: int = WINDOW_S
) -> bool:
    """How the window of ``length_s`` seconds settled: the final value (TWAP or spot at the
    end) ≥ the one at T0."""
    end = t0 + length_s
    if rule == TWAP:
        return path.twap(end, lookback) >= path.twap(t0, lookback)
    return path.value(end) >= path.value(t0)


@dataclass
class TapeSpec:
    """What to write: ``windows`` windows of ``spans[0]`` from ``first_window``, on ``path``,
    and the windows of the other ``spans`` over the same time (``first_window`` the start of
    a window of every span: for the 4-hour kind, an Eastern block's).

    ``arrivals``: ``prompt`` sends every second's points 50 ms after it; ``feed`` (a
    ``SettlementFeedPath`` only) sends them at the path's own arrival lag (1.45 s at the
    median, out of order now and then) and nothing for the seconds it leaves out (spot and
    TWAP alike, as when RTDS relays nothing).
    """

    path: SeededPath
    sigma: float
    first_window: int
    windows: int
    rule: str = TWAP
    lookback: int = 60
    market: str = "exact"  # or "none"
    resolved_every: int = 2  # every n-th window gets its market_resolved (0: none)
    quote_hz: int = 1  # best_bid_ask messages per second per token (a busy market: 10)
    arrivals: str = "prompt"  # or "feed"
    spans: tuple[Span, ...] = (FIVE_MINUTES,)  # the window lengths listed (WINDOWS)

    def __post_init__(self) -> None:
        if not self.spans or any(
            s.start(self.first_window) != self.first_window for s in self.spans
        ):
            raise ValueError("first_window must start a window of every one of spans")
        if self.arrivals not in ("prompt", "feed"):
            raise ValueError(f"arrivals must be 'prompt' or 'feed', not {self.arrivals!r}")
        if self.arrivals == "feed" and not isinstance(self.path, SettlementFeedPath):
            raise ValueError("arrivals='feed' needs a SettlementFeedPath (its lags and gaps)")

    def delay(self, second: int) -> float | None:
        """How long after ``second`` its points arrive; None when none is sent."""
        if self.arrivals == "feed":
            assert isinstance(self.path, SettlementFeedPath)  # checked at construction
            return self.path.arrival_lag(second)
        return POINT_DELAY_S


def _line(t: float, src: str, **fields: Any) -> dict[str, Any]:
    return {"t": round(t, 6), "src": src, **fields}


def _quote_frames(
    market: FakeMarket, p_up: float, t: float
) -> list[dict[str, Any]]:  # fmt: skip
    bid = min(max(p_up - HALF_SPREAD, 0.0005), 0.9995 - 2 * HALF_SPREAD)
    ask = bid + 2 * HALF_SPREAD
    frames = []
    for token, b, a in (
        (market.up_token, bid, ask),
        (market.down_token, 1 - ask, 1 - bid),
    ):
        message = {
            "event_type": "best_bid_ask",
            "market": market.condition,
            "asset_id": token,
            "best_bid": f"{b:.6f}",
            "best_ask": f"{a:.6f}",
            "spread": f"{a - b:.6f}",
            "timestamp": str(int(t * 1000)),
        }
        frames.append(_line(t, "clob-ws", frame=json.dumps(message)))
    return frames


def _points(path: SeededPath, second: int, t: float) -> list[dict[str, Any]]:
    """The spot and TWAP updates of ``second``, arriving at ``t``."""
    spot = FakeRtds.update(SPOT_TOPIC, second * 1000, path.value(second))
    out = [_line(t, "rtds", frame=json.dumps(spot))]
    for lookback, topic in TWAP_TOPICS.items():
        if path.has_twap(second, lookback):
            update = FakeRtds.update(topic, second * 1000, path.twap(second, lookback))
            out.append(_line(t + 0.001, "rtds", frame=json.dumps(update)))
    return out


CANDLE_EVERY_S = 2  # an hourly window's running candle, as Binance answers it, this often
FINAL_AFTER_S = 6  # the closed candle's answer, this long after the hour
HOUR_MS = INTERVALS_MS["1h"]


def _exchange(path: SeededPath, second: int) -> Decimal:
    """The exchange price of ``second`` as the fake relays it: the spot times the basis, to
    the cent (the hourly kind's price and candle)."""
    return (path.value(second) * EXCHANGE_BASIS).quantize(Decimal("0.01"))


def _exchange_line(path: SeededPath, second: int, t: float) -> dict[str, Any]:
    """``second``'s exchange price on RTDS's ``crypto_prices`` topic, arriving at ``t``."""
    payload = {
        "symbol": "btcusdt",
        "timestamp": second * 1000,
        "value": float(_exchange(path, second)),
    }
    message = {"topic": EXCHANGE_TOPIC, "type": "update", "timestamp": int(t * 1000),
               "payload": payload}  # fmt: skip
    return _line(t, "rtds", frame=json.dumps(message))


def _candle_lines(path: SeededPath, market: FakeMarket) -> list[dict[str, Any]]:
    """Binance's answers for the hourly window's candle as the source asks them: the running
    candle every ``CANDLE_EVERY_S`` (its open, and its close so far for the relay's check),
    then the closed one ``FINAL_AFTER_S`` after the hour."""
    t0, t1 = market.window_start, market.window_end
    url = (f"https://data-api.binance.vision/api/v3/klines?symbol=BTCUSDT&interval=1h"
           f"&startTime={t0 * 1000}&limit=1")  # fmt: skip
    opened = _exchange(path, t0)
    out: list[dict[str, Any]] = []
    low = high = opened
    for second in range(t0, t1):
        price = _exchange(path, second)
        low, high = min(low, price), max(high, price)
        asked = second + 1  # Binance's answer has the second just over
        if (asked - t0) % CANDLE_EVERY_S == 1 or second == t1 - 1:  # from the hour's 1st s
            at = asked + (FINAL_AFTER_S if second == t1 - 1 else 0)
            row = kline_row(t0 * 1000, HOUR_MS, (str(opened), str(high), str(low), str(price)))
            out.append(_line(at, "binance", method="GET", url=url, body=None, status=200,
                             frame=json.dumps([row])))  # fmt: skip
    return out


def _hourly_up(path: SeededPath, market: FakeMarket) -> bool:
    """The hourly market's outcome: the candle's close (its last second) at or above its open."""
    return _exchange(path, market.window_end - 1) >= _exchange(path, market.window_start)


def _starts(span: Span, first: int, last: int) -> list[int]:
    """The starts of ``span``'s windows from ``first`` that end by ``last``, and of the one
    after (a 4-hour block across a change of clocks is 3 or 5 hours: counted block by
    block)."""
    starts = [first]
    while span.end(starts[-1]) <= last:
        starts.append(span.end(starts[-1]))
    return starts


def lines(spec: TapeSpec) -> list[dict[str, Any]]:
    """Every line of the tape, in ``t`` order."""
    path, first = spec.path, spec.first_window
    start = first - LEAD_S
    last = shifted(spec.spans[0], first, spec.windows)  # the end of the last scored window
    end = last + 180  # and ends after the last outcome
    # Per span: its windows over the tape's length, and the one after the last (its Gamma
    # answer only: its price to beat settles the last one).
    by_span = [
        [
            FakeMarket(t0, rule=spec.rule, lookback=spec.lookback, span=span)
            for t0 in _starts(span, first, last)
        ]
        for span in spec.spans
    ]
    markets = [market for listed in by_span for market in listed]
    scored = [market for listed in by_span for market in listed[:-1]]
    # Each scored window's rank among its span's (every ``resolved_every``-th is resolved).
    rank = {id(m): i for listed in by_span for i, m in enumerate(listed)}
    out: list[dict[str, Any]] = [
        _line(start, "rtds", event="connect"),
        _line(start + 0.001, "clob-ws", event="connect"),
    ]
    history = path.spot_points(start - HISTORY_S, start)
    snapshot = FakeRtds.first_message(SPOT_TOPIC, history, wire_topic=SPOT_HISTORY_TOPIC)
    out.append(_line(start + 0.01, "rtds", frame=json.dumps(snapshot)))
    for market in markets:
        t0 = market.window_start
        url = f"https://gamma-api.polymarket.com/events/slug/{market.slug}"
        out.append(
            _line(t0 - 120, "gamma", method="GET", url=url, body=None, status=200,
                  frame=json.dumps(market.event()))
        )  # fmt: skip
        books = [
            FakeBook(bids={"0.49": "10"}, asks={"0.51": "10"}).as_json(token, market.condition, 0)
            | {"event_type": "book"}
            for token in market.tokens
        ]
        out.append(_line(t0 - 59.5, "clob-ws", frame=json.dumps(books)))
    hourly = any(market.binance for market in markets)
    for market in scored:
        if market.binance:
            out.extend(_candle_lines(path, market))
    for second in range(start + 1, end + 1):
        delay = spec.delay(second)
        if delay is not None:
            out.extend(_points(path, second, second + delay))
            if hourly:  # the pair's exchange price, relayed beside the spot
                out.append(_exchange_line(path, second, second + delay + 0.002))
        if spec.market == "exact":
            for market in scored:
                t0, t1 = market.window_start, market.window_end
                if t0 - 59 <= second <= t1 + 5:
                    known = min(second, t1)
                    rule = SPOT if market.binance else spec.rule  # the candle: close >= open
                    p = exact_p_up(path, rule, spec.lookback, t0, known, spec.sigma,
                                   t1 - t0) if second >= t0 else 0.5  # fmt: skip
                    for k in range(spec.quote_hz):
                        at = second + QUOTE_DELAY_S + k / spec.quote_hz
                        out.extend(_quote_frames(market, p, at))
    for market in scored:
        i = rank[id(market)]
        # An hourly window is settled by its market's resolution only: every one resolves.
        if market.binance or (spec.resolved_every and i % spec.resolved_every == 0):
            length_s = market.window_end - market.window_start
            up = (
                _hourly_up(path, market)
                if market.binance
                else settled_up(path, spec.rule, spec.lookback, market.window_start, length_s)
            )
            winner = market.up_token if up else market.down_token
            message = {
                "event_type": "market_resolved",
                "market": market.condition,
                "assets_ids": list(market.tokens),
                "winning_asset_id": winner,
                "winning_outcome": "Up" if up else "Down",
                "timestamp": str((market.window_end + 120) * 1000),
            }
            out.append(_line(market.window_end + 120, "clob-ws", frame=json.dumps(message)))
    out.sort(key=lambda line: line["t"])
    return out


def write(spec: TapeSpec, directory: Path, hourly: Callable[[float], str] | None = None) -> Path:
    """Write the tape to ``directory`` in hourly files (``docs/tapes.md``); returns it."""
    from app.refresher.tape import hour_name

    name_of = hourly or hour_name
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {}
    for line in lines(spec):
        files.setdefault(name_of(line["t"]), []).append(json.dumps(line, separators=(",", ":")))
    for name, texts in files.items():
        (directory / name).write_text("\n".join(texts) + "\n", encoding="utf-8")
    return directory
