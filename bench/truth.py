"""Is the live board true? The real source against a moving stand-in market, on the real clock.

Starts the fake Polymarket upstreams (harness/fake_polymarket/) with every window
listed as a TWAP market (today's rule), a Brownian spot of known sigma with 20 minutes of
history and its exact 60 s / 30 s TWAP reports, and a market maker that moves each window's
UP and DOWN books (one tick wide, ``price_change`` messages with best levels) so the UP mid
follows the exact probability. The real ``PolymarketSource`` builds a row every half
second; each row's P(up) is compared with the exact value computed from the path with the
true sigma at the spot's own timestamp. Run it across at least one roll:

    python -m bench.truth [--seconds 420] [--lookback 60] [--path brownian|feed]
                          [--window 5m|15m]

Reports P(up) error (median, 95th percentile, max, in points), sigma on the board against
the true one, and how many rows had null books, were stale, or showed a crossed book.

``--path feed`` plays the settlement-feed stand-in (``harness/settlement_feed.py``: smoothed,
fat-tailed, sigma 7.5e-5 over minutes, in regimes) instead of the Brownian path. Its P(up)
has no closed form, so there the reference (and the market maker's quote) is the Brownian
formula at the path's own REALISED sigma (its 60 s moves over the 20 minutes before the
row's spot): the "error" then measures how far the board departs from that formula
(``p_up_reference`` in the output says which one it is), not an error against the truth.

``--window 15m`` lists the 15-minute markets instead and serves them alone (``WINDOWS=15m``):
the exact P(up) is at the 15-minute window's end, the rows' time left runs from 900 s
(``--seconds 960`` crosses a roll). ``--window 4h`` the Eastern 4-hour blocks: the run's clock
(every stand-in's and the source's, ``harness.clocks.OffsetClock``) starts 60 s before a
block's start (``--before-start``), so the block's price to beat is latched live at T0, and
the exact P(up) is at the block's end (3 to 5 hours left). ``--window 1h`` the hourly markets
the same way (60 s before an hour), settled on Binance's candle (the fake's klines, made of the
exchange prices it relays: the spot times a constant basis): the exact P(up) is the spot
rule's, close >= open.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from decimal import Decimal

from app.markets import BINANCE_CANDLE, MARKETS, SPANS, Span
from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams
from harness import tapes
from harness.clocks import OffsetClock
from harness.fake_polymarket import SPOT, TWAP, FakeBook, FakeMarket, FakePolymarket, live_span
from harness.paths import SeededPath
from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath
from harness.spans import FIVE_MINUTES

SIGMA = 1.2e-4
STALE_MS = 3000
TICK = Decimal("0.01")


def reference_sigma(path: SeededPath, ts_ms: int) -> float:
    """The sigma of the reference P(up): the Brownian path's own; on the stand-in, what it
    realised over the 20 minutes before ``ts_ms`` (its regimes move it away from ``sigma``)."""
    if isinstance(path, SettlementFeedPath):
        second = ts_ms // 1000
        return path.realised_sigma(second - 1200, second)
    return path.sigma


def exact_p_up(
    path: SeededPath, ts_ms: int, t0: int, lookback: int, span: Span = FIVE_MINUTES
) -> float:
    """P(TWAP at the end >= TWAP at T0) at ``ts_ms`` of ``span``'s window starting at
    ``t0`` (the hourly kind: P(close >= open) of the exchange price, the spot times a constant
    basis in the fakes, so the spot's own ratio)
    ``t0``, with ``reference_sigma``: exact on the Brownian path, the Brownian formula at
    the realised sigma on the stand-in."""
    sigma = reference_sigma(path, ts_ms)
    length = span.end(t0) - t0  # a 4-hour block across a change of clocks: 3 or 5 hours
    rule = SPOT if span.settlement == BINANCE_CANDLE else TWAP
    return tapes.exact_p_up(path, rule, lookback, t0, ts_ms / 1000, sigma, length)


def start_path(world: FakePolymarket, kind: str, history_s: int) -> SeededPath:
    """Play ``history_s`` of history and then live points of a path of ``kind`` on the
    RTDS."""
    if kind == "brownian":
        return world.rtds.live(history_s=history_s, sigma=SIGMA, seed=7)
    path = SettlementFeedPath(7, FEED_SIGMA, 100_000, *live_span(history_s))
    world.rtds.live_on(path, history_s=history_s)
    return path


def quote_books(world: FakePolymarket, market: FakeMarket, p_up: float) -> None:
    """Move UP's and DOWN's books to one tick around ``p_up`` (and its complement)."""
    bid = (Decimal(str(p_up)) / TICK).to_integral_value(rounding="ROUND_FLOOR") * TICK
    bid = min(Decimal("0.98"), max(Decimal("0.01"), bid))
    ask = bid + TICK
    up_token, down_token = market.tokens
    changes = []
    for token, (new_bid, new_ask) in ((up_token, (bid, ask)), (down_token, (1 - ask, 1 - bid))):
        book = world.books[token]
        for price in list(book.bids):
            if Decimal(price) != new_bid:
                changes.append((token, "BUY", price, "0"))
        for price in list(book.asks):
            if Decimal(price) != new_ask:
                changes.append((token, "SELL", price, "0"))
        changes.append((token, "BUY", str(new_bid), "100"))
        changes.append((token, "SELL", str(new_ask), "100"))
    world.set_levels(changes)


def main() -> int:
    """Run the check and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=420.0)
    parser.add_argument("--lookback", type=int, default=60, choices=(30, 60))
    parser.add_argument("--path", default="brownian", choices=("brownian", "feed"))
    parser.add_argument("--window", default=FIVE_MINUTES.name, choices=list(SPANS))
    parser.add_argument(
        "--before-start",
        type=int,
        default=None,
        help="run on a clock shifted to this many seconds before a window's start (default: "
        "the real clock; 60 for the 4-hour kind, whose next block may be hours away)",
    )
    args = parser.parse_args()
    span = SPANS[args.window]
    before = (
        args.before_start
        if args.before_start is not None
        else (60 if span.seconds >= 3600 else None)
    )
    clock = OffsetClock()
    if before is not None:  # every stand-in, the market maker and the source on one clock
        clock = OffsetClock.reading(span.end(span.start(time.time())) - before)

    rule = SPOT if span.settlement == BINANCE_CANDLE else TWAP
    world = FakePolymarket(auto_markets=True, auto_rule=rule, clock=clock).start()
    stop = threading.Event()
    source: PolymarketSource | None = None
    try:
        path = start_path(world, args.path, 1200)
        listed = world.markets_of("BTC", span)  # the fake world's one market, of this length

        def list_windows(now: float) -> None:
            """List the current window and the next, where they are not yet."""
            for start in (span.start(now), span.end(span.start(now))):
                if listed.get(start) is None:
                    world.list_market(
                        FakeMarket(start, rule=rule, lookback=args.lookback, span=span),
                        (FakeBook({"0.49": "100"}, {"0.50": "100"}),
                         FakeBook({"0.50": "100"}, {"0.51": "100"})),
                    )  # fmt: skip

        list_windows(clock())

        def make_markets() -> None:
            while not stop.wait(0.5):
                now = clock()
                list_windows(now)
                t0 = span.start(now)
                if t0 - args.lookback < path.start_s:
                    continue  # a block begun before the path: no exact answer to quote
                p_up = exact_p_up(path, int(now * 1000), t0, args.lookback, span)
                quote_books(world, listed[t0], p_up)

        maker = threading.Thread(target=make_markets, daemon=True)
        maker.start()
        world.clob_ws.keep_alive(0.5)
        source = PolymarketSource(
            Upstreams(
                gamma=world.gamma.url,
                clob=world.clob.url,
                clob_ws=world.clob_ws.url,
                rtds=world.rtds.url,
                site=world.site.url,
                binance=world.binance.url,
            ),
            (MARKETS["BTC"],),  # the fake world's one market
            stale_after_ms=STALE_MS,
            spans=(span,),
            clock=clock,
        )
        source.warm_up(20)
        errors: list[float] = []
        sigmas: list[float] = []
        counts = {"rows": 0, "null_books": 0, "stale": 0, "crossed": 0, "no_probability": 0}
        crossed_fresh = null_fresh = 0
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            now = clock()
            [row] = source.rows(now)
            if row.window_start - args.lookback < path.start_s:
                # The block running when the shifted run starts began before the path: it has
                # no exact answer (and no price to beat); the run is about the next one.
                time.sleep(0.5)
                continue
            counts["rows"] += 1
            stale = int(now * 1000) - row.ts > STALE_MS
            books = (row.up_bid, row.up_ask, row.down_bid, row.down_ask)
            nulls = any(level is None for level in books)
            crossed = (
                row.up_bid is not None
                and row.up_ask is not None
                and row.down_bid is not None
                and row.down_ask is not None
                and (row.up_bid >= row.up_ask or row.down_bid >= row.down_ask)
            )
            counts["stale"] += stale
            counts["null_books"] += nulls
            counts["crossed"] += crossed
            crossed_fresh += crossed and not stale
            null_fresh += nulls and not stale
            if row.sigma is not None:
                sigmas.append(row.sigma)
            spot_age_ms = row.live.input_ages_ms.get("price") if row.live is not None else None
            if row.p_up_pct is None or spot_age_ms is None:
                counts["no_probability"] += 1
            else:
                ts_ms = int(now * 1000) - spot_age_ms  # the row's spot time
                exact = exact_p_up(path, ts_ms, row.window_start, args.lookback, span)
                errors.append(abs(row.p_up_pct - 100 * exact))
            time.sleep(0.5)
    finally:
        stop.set()
        if source is not None:
            source.close()
        world.stop()

    ordered = sorted(errors)
    figures = {
        "seconds": args.seconds,
        "lookback": args.lookback,
        "path": args.path,
        "window": span.name,
        "p_up_reference": "exact"
        if args.path == "brownian"
        else "Brownian formula at the path's realised sigma (not exact: the feed is smoothed)",
        **counts,
        "fresh_with_null_books": null_fresh,
        "fresh_and_crossed": crossed_fresh,
        "p_up_error_points": {
            "median": round(statistics.median(ordered), 2) if ordered else None,
            "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2) if ordered else None,
            "max": round(ordered[-1], 2) if ordered else None,
        },
        "sigma_board_median": statistics.median(sigmas) if sigmas else None,
        "sigma_true": path.sigma,
        "sigma_reference_at_end": reference_sigma(path, int(clock() * 1000)),
    }
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
