"""False alarms over a whole simulated day, on a driven clock (issue 48, point 6).

``bench.false_alarms`` plays the realistic world against the whole source on the real clock,
minutes at a time. This plays a DAY of it in a minute or two: the same stand-ins (the
settlement feed's Chainlink spot, its honest 60 s and 30 s TWAP reports 3 s back as the real
ones, ``ExchangeView``'s exchange price four times a second) as RTDS's own messages
(``harness.fake_polymarket.rtds_messages``), handed to the real ``RtdsFeed`` (the source's
reader: its series, witnesses, learnt smoothing) on a clock that jumps from message to
message, with no socket. The spot's points arrive as the stand-in relays them: 1.3-1.6 s
after their stamp, about 2 % of the seconds missing (long gaps included), volatility in
regimes, repeats and jumps. Twice a second the price is judged as the row would be
(``row_assembly``): stale when a doubt stands (the spot's own, the TWAP reports', "no witness
left") or its information is over 3 s old.

    python -m bench.false_alarms_day [--day quiet|jumpy] [--hours 24] [--seed 1]
                                     [--silent none|twap-reports|exchange]

Nothing lies, so each stale sample is a false alarm, counted apart when the feed itself had
sent nothing newer (a gap of the stand-in's: no witness could help); a fresh sample whose
price is not the spot of its stamp, or older than the promise (its stamp plus the feed's
normal arrival lag more than 3 s ago), is a defect (exit 1). The first hour warms
up and is not counted. ``jumpy`` adds honest moves of 0.2-0.4 % within 2 s, one every 30 s
on average.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import json
import math
import random
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.markets import MARKETS, Market
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.sources.polymarket.rtds import RtdsFeed
from bench.false_alarms import honest_jumps, world_arguments
from harness.exchange_view import ExchangeView
from harness.fake_polymarket.rtds_messages import update
from harness.fake_polymarket.wire import EXCHANGE_TOPIC, SPOT_TOPIC, TWAP30_TOPIC, TWAP_TOPIC
from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath

START = 1_800_000_000  # a window's start (a multiple of 300)
WARM_S = 3600  # the first hour is not counted
STALE_AFTER_MS = 3000  # the default STALE_THRESHOLD_MS
SAMPLE_S = 0.5
EXCHANGE_S = 0.25
TWAP_SHIFT_S = 3  # the real reports average up to 3 s before their stamp
AGE_SLACK_S = 0.25  # the board's median of its last 31 newest points against the last 41 s here


@dataclass
class Tally:
    """What the samples showed."""

    samples: int = 0
    stale: int = 0
    stale_in_gaps: int = 0  # stale while the feed had relayed nothing newer
    wrong: list[str] = field(default_factory=list)
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)


def _message(topic: str, ts_ms: int, value: Decimal, symbol: str, sent_ms: int) -> Any:
    """An RTDS update as the wire carries it, parsed as the feed parses it."""
    return json.loads(json.dumps(update(topic, ts_ms, value, symbol=symbol, sent_ms=sent_ms)))


def simulate(day: str, hours: float, silent: str, seed: int) -> Tally:
    """One simulated day (``hours`` counted after the warm-up hour)."""
    market = MARKETS["BTC"]
    seconds = WARM_S + int(hours * 3600)
    first = START - WARM_S
    path = SettlementFeedPath(seed, FEED_SIGMA, 100_000.0, first - 120, seconds + 240)
    if day == "jumpy":
        for after, move in honest_jumps(random.Random(seed), seconds - 60).items():
            path.add_move(first + 60 + after, move / 2)
            path.add_move(first + 61 + after, move / 2)
    exchange = ExchangeView(path, seed)
    now = [float(first)]
    feed = RtdsFeed("ws://127.0.0.1:9/unused", threading.Event(), (market,), clock=lambda: now[0])
    spot = feed.of(market)["spot"]

    events: list[tuple[float, int, Any]] = []  # (arrival, order, message), a heap
    order = 0
    for ts_ms, arrival, value in path.arrivals(first, START + seconds - WARM_S):
        t = ts_ms // 1000
        sent = int(arrival * 1000)
        messages = [_message(SPOT_TOPIC, ts_ms, value, market.chainlink, sent)]
        if silent != "twap-reports":
            for topic, lookback in ((TWAP_TOPIC, 60), (TWAP30_TOPIC, 30)):
                if path.has_twap(t - TWAP_SHIFT_S, lookback):
                    twap = path.twap(t - TWAP_SHIFT_S, lookback)
                    messages.append(_message(topic, ts_ms, twap, market.chainlink, sent))
        for message in messages:
            events.append((arrival, order, message))
            order += 1
    heapq.heapify(events)

    tally = Tally()
    end = START + seconds - WARM_S
    tick = float(first)
    next_sample = float(START)
    while tick < end:
        while events and events[0][0] <= tick:
            arrival, _, message = heapq.heappop(events)
            now[0] = arrival
            feed.handle(message)
        now[0] = tick
        if silent != "exchange":
            price = exchange.value(tick)
            stamp = int(tick * 1000)
            wire = {"symbol": market.exchange, "timestamp": stamp, "value": float(price)}
            feed.handle({"topic": EXCHANGE_TOPIC, "type": "update", "payload": wire})
        if tick >= next_sample:
            _sample(tally, feed, spot, path, tick, market)
            next_sample += SAMPLE_S
        tick += EXCHANGE_S
    return tally


def _sample(
    tally: Tally,
    feed: RtdsFeed,
    spot: PriceSeries,
    path: SettlementFeedPath,
    now: float,
    market: Market,
) -> None:
    """Judge the price as the row would at ``now``."""
    tally.samples += 1
    doubts = [d for d in (spot.doubt(), feed.twap_doubt(market), feed.alone_doubt(market)) if d]
    latest = spot.latest()
    information = spot.information_ms()
    now_ms = int(now * 1000)
    aged = information is None or now_ms - information > STALE_AFTER_MS
    if doubts or aged:
        tally.stale += 1
        newest_sent = max(
            (t for t in range(int(now) - 6, int(now) + 1) if _relayed_by(path, t, now)),
            default=None,
        )
        if not doubts and (
            newest_sent is None or latest is None or newest_sent * 1000 <= latest[0]
        ):
            tally.stale_in_gaps += 1
            tally.reasons["the feed relayed nothing newer (its own gap)"] += 1
        waiting = " (newer ones waiting for a witness)" if spot.waiting() else ""
        for doubt in doubts or [f"by age: no newer spot point believed{waiting}"]:
            tally.reasons[re.sub(r"[-+]?\d[\d.,]*", "N", doubt)[:90]] += 1
        return
    assert latest is not None
    stamp_s = latest[0] / 1000
    if not math.isclose(latest[1], float(path.value(int(stamp_s))), rel_tol=1e-12):
        tally.wrong.append(f"at {now:.2f}: {latest} is not the spot of its stamp")
        return
    # The promise: fresh while the stamp plus the feed's normal lag (the median of the last
    # points' own arrival lags, at most 2 s) is at most the stale threshold old.
    arrived = sorted(
        lag
        for t in range(int(now) - 40, int(now) + 1)
        if (lag := path.arrival_lag(t)) is not None and t + lag <= now
    )
    normal = min(arrived[len(arrived) // 2], 2.0) if arrived else 0.0
    age = now - stamp_s - normal
    if age > STALE_AFTER_MS / 1000 + AGE_SLACK_S:
        tally.wrong.append(f"at {now:.2f}: {latest} shown fresh at an honest age of {age:.2f} s")


def _relayed_by(path: SettlementFeedPath, t: int, now: float) -> bool:
    """Whether second ``t``'s point had arrived by ``now``."""
    lag = path.arrival_lag(t)
    return lag is not None and t + lag <= now


def main(argv: list[str] | None = None) -> int:
    """Simulate the day and print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.false_alarms_day")
    world_arguments(parser)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    began = time.monotonic()
    tally = simulate(args.day, args.hours, args.silent, args.seed)
    n = tally.samples
    print(
        f"day {args.day}, seed {args.seed}, {args.silent} silent: {n} samples over"
        f" {args.hours:g} h (simulated in {time.monotonic() - began:.0f} s)"
    )
    witness_caused = tally.stale - tally.stale_in_gaps
    print(
        f"stale {tally.stale / n:.3%} ({tally.stale}); in the feed's own gaps"
        f" {tally.stale_in_gaps / n:.3%}; otherwise (false alarms) {witness_caused / n:.3%}"
        f" ({witness_caused}); fresh and wrong {len(tally.wrong)}"
    )
    for reason, count in tally.reasons.most_common(8):
        print(f"  {count:6d}  {reason}")
    for line in tally.wrong[:5]:
        print("  WRONG", line)
    return 1 if tally.wrong else 0


if __name__ == "__main__":
    sys.exit(main())
