"""Books that quote like a market: ``FairQuoter`` moves every current window's UP and DOWN
books around the fair value of the fake's own path (issue 50, point 1).

The fair value is the exact zero-drift model (``app.refresher.model.probability_up``) on the
path the RTDS stand-in plays, with the market's own rule: a Chainlink window's TWAP (or spot)
price to beat and settlement, an hourly window's exchange candle. The quoter sees it late
(``lag_s``, a market maker's reaction), adds a mispricing of its own that wanders and
reverts (``noise``, on the log-odds; a market is no oracle), and quotes a spread of one
or two ticks with a few levels of depth on each side. DOWN's book is UP's mirror (a DOWN bid
at ``1 - UP ask``), as Polymarket's complementary books are. Each change is applied to the
world and sent as one ``price_change`` message, so REST and the market channel agree.

``python -m harness.fake_polymarket`` runs it by default (``--fixed-books``: the fixed books of
``market.default_books``, for checks that need them); tests that list their own books never
start it.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from app.markets import SPANS, Span
from app.refresher.model import SPOT, TWAP, probability_up
from harness.fake_polymarket.clob_ws import PriceChange
from harness.fake_polymarket.market import FakeBook, FakeMarket
from harness.fake_polymarket.wire import PAIR_OF_CHAINLINK
from harness.fake_polymarket.world import FakePolymarket
from harness.paths import SeededPath

log = logging.getLogger(__name__)

TICK = Decimal("0.01")
LOWEST, HIGHEST = Decimal("0.01"), Decimal("0.99")
# Depth below the best bid / above the best ask, in ticks, and the sizes drawn for a level.
DEPTH_TICKS = (0, 1, 2, 4)
SIZES = (20, 400)


@dataclass(frozen=True)
class QuoteStyle:
    """How the fake market quotes: its lag behind the path, its own mispricing (standard
    deviation on the log-odds, and how many seconds it takes to revert), the share of quotes
    two ticks wide instead of one, and how often the books move."""

    lag_s: float = 1.5
    noise: float = 0.1  # log-odds: about 2.5 points at even odds
    noise_revert_s: float = 20.0
    wide_share: float = 0.3
    period_s: float = 0.5


def fair_up(
    market: FakeMarket,
    path: SeededPath,
    exchange: Callable[[float], Decimal],
    t: float,
    sigma: float,
) -> float | None:
    """P(UP) of ``market`` at instant ``t`` by the exact model on the fake's own path (None
    before the window starts or when the path cannot say)."""
    t0, t1 = market.window_start, market.window_end
    if not t0 <= t < t1:
        return None
    second = int(t)
    if market.binance:  # the hourly kind: the exchange's candle, open to close
        price, k = float(exchange(t)), float(exchange(float(t0)))
        return probability_up(price, k, t1 - t, sigma)
    price = float(path.value(second))
    if market.rule != TWAP:
        return probability_up(price, float(path.value(t0)), t1 - t, sigma, rule=SPOT)
    lookback = market.lookback
    if not path.has_twap(t0, lookback):
        return None
    k = float(path.twap(t0, lookback))
    known = None
    if t1 - t < lookback:  # inside the settlement's own mean: part of it is known
        seen = [float(path.value(s)) for s in range(t1 - lookback + 1, second + 1)]
        known = math.fsum(seen) / len(seen) if seen else price
    return probability_up(price, k, t1 - t, sigma, rule=TWAP, lookback_s=lookback, known_mean=known)


def _ticks(value: float) -> Decimal:
    """``value`` on the tick grid, within the book's bounds."""
    ticked = Decimal(round(value * 100)) * TICK
    return min(HIGHEST, max(LOWEST, ticked))


def quote_books(mid: float, wide: bool, sizes: Sequence[int]) -> tuple[FakeBook, FakeBook]:
    """UP and DOWN books around a mid P(UP): best bid and ask one tick apart (two when
    ``wide``), ``DEPTH_TICKS`` levels each side with ``sizes`` (one per level and side, UP's
    bids then its asks), DOWN the mirror of UP."""
    spread = 2 if wide else 1
    bid = _ticks(mid - spread * 0.005)
    ask = min(HIGHEST, bid + spread * TICK)
    bid = min(bid, ask - TICK)
    up_bids = {bid - k * TICK for k in DEPTH_TICKS if bid - k * TICK >= LOWEST}
    up_asks = {ask + k * TICK for k in DEPTH_TICKS if ask + k * TICK <= HIGHEST}
    sized = iter(sizes)
    up = FakeBook(
        bids={_text(p): str(next(sized)) for p in sorted(up_bids, reverse=True)},
        asks={_text(p): str(next(sized)) for p in sorted(up_asks)},
    )
    down = FakeBook(
        bids={_text(1 - Decimal(p)): size for p, size in up.asks.items()},
        asks={_text(1 - Decimal(p)): size for p, size in up.bids.items()},
    )
    return up, down


def _text(price: Decimal) -> str:
    return format(price.quantize(TICK), "f")


def book_changes(asset: str, old: FakeBook, new: FakeBook) -> list[PriceChange]:
    """The (asset, side, price, size) entries that turn ``old`` into ``new`` (size ``"0"``
    removes a level)."""
    changes: list[PriceChange] = []
    for side, before, after in (("BUY", old.bids, new.bids), ("SELL", old.asks, new.asks)):
        known = {Decimal(p): p for p in before}
        for price, size in after.items():
            if before.get(known.get(Decimal(price), price)) != size:
                changes.append((asset, side, price, size))
        wanted = {Decimal(p) for p in after}
        changes += [(asset, side, p, "0") for p in before if Decimal(p) not in wanted]
    return changes


class FairQuoter:
    """Moves the books of every current window of ``paths``' markets (market symbol -> the
    path its Chainlink stream plays) around their fair value; one thread, stopped by
    ``stop``. ``world`` is the ``FakePolymarket`` (its clock, markets and CLOB)."""

    def __init__(
        self,
        world: FakePolymarket,
        paths: Mapping[str, SeededPath],
        style: QuoteStyle = QuoteStyle(),
        seed: int = 50,
        spans: Sequence[Span] = tuple(SPANS.values()),
    ) -> None:
        self.world = world
        self.paths = dict(paths)
        self.style = style
        self.spans = tuple(spans)
        self._random = random.Random(seed)  # a demo: reproducible, not secret
        self._mispricing: dict[tuple[str, str], float] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fair-quoter", daemon=True)

    def start(self) -> FairQuoter:
        """Quote every ``style.period_s`` until ``stop``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop quoting (waits for the thread, a period at most)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stopped.wait(self.style.period_s):
            try:
                self.quote_once()
            except Exception:  # a demo's books stand still for a period, never for good
                log.exception("the fake's quoter failed this period")

    def quote_once(self) -> int:
        """Re-quote every current window once; returns how many books changed."""
        now = self.world.clock()
        changed = 0
        for symbol, path in self.paths.items():
            for span in self.spans:
                market = self.world.market_of(symbol, span.start(now), span)
                if market is not None:
                    changed += self._quote(market, path, now)
        return changed

    def _quote(self, market: FakeMarket, path: SeededPath, now: float) -> int:
        exchange = self.world.rtds.exchange_prices.get(PAIR_OF_CHAINLINK[market.chainlink].upper())
        if exchange is None and market.binance:
            return 0
        seen_at = max(float(market.window_start), now - self.style.lag_s)
        if not market.window_start <= now < market.window_end:
            return 0
        fair = fair_up(market, path, exchange or (lambda _: Decimal(1)), seen_at, path.sigma)
        if fair is None:  # a window older than the path (a 4-hour one): no view, a coin flip
            fair = 0.5
        # The mispricing is on the log-odds: a few points at even odds, a fraction of a
        # point where the window is all but decided (as real books are).
        fair = min(1 - 1e-6, max(1e-6, fair))
        odds = math.log(fair / (1 - fair)) + self._wander((market.symbol, market.span.name))
        mid = 1 / (1 + math.exp(-odds))
        wide = self._random.random() < self.style.wide_share
        sizes = [self._random.randint(*SIZES) for _ in range(2 * len(DEPTH_TICKS))]
        up, down = quote_books(mid, wide, sizes)
        changes = []
        with self.world._lock:
            for token, new in zip(market.tokens, (up, down), strict=True):
                old = self.world.books.get(token)
                if old is not None and (old.bids, old.asks) != (new.bids, new.asks):
                    changes += book_changes(token, old, new)
        self.world.set_levels(changes)
        return len({c[0] for c in changes})

    def _wander(self, key: tuple[str, str]) -> float:
        """The market's own mispricing of one market: an AR(1) of ``style.noise`` standard
        deviation reverting over ``style.noise_revert_s``."""
        keep = math.exp(-self.style.period_s / self.style.noise_revert_s)
        shock = self.style.noise * math.sqrt(1 - keep * keep)
        now = self._mispricing.get(key, self._random.gauss(0.0, self.style.noise))
        now = keep * now + self._random.gauss(0.0, shock)
        self._mispricing[key] = now
        return now
