"""The hourly row's price is witnessed by the Chainlink spot (issue 49, point 2): a lying
exchange price is never shown fresh on the hourly row.

The hourly kind settles on Binance's candle, so its row's price is the exchange price RTDS
relays on ``crypto_prices``; the Chainlink spot checks it, as the exchange price checks the
spot for the other kinds. Here the relayed exchange price turns 1 % off the truth while the
spot and its TWAP reports stay honest: the two reports side with the spot (the 5-minute row
may stay fresh), and the hourly row must turn stale with the reason, never fresh with the lie.
Real servers on loopback, the real clock (a live feed is the subject).
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from app.markets import SPANS
from harness.fake_polymarket import running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import sources_on

HOURLY = SPANS["1h"]
STALE_AFTER_MS = 3000
LIE = Decimal("1.01")


def _fresh(row: dict[str, Any], now: float) -> bool:
    return bool(int(now * 1000) - row["ts"] <= STALE_AFTER_MS)


def test_a_lying_exchange_price_is_never_fresh_on_the_hourly_row() -> None:
    with running(auto_markets=True) as world:
        # History back past the hour's start: the fake Binance builds the candle from it.
        world.rtds.live(period_s=0.25, history_s=int(time.time()) % 3600 + 120)
        world.clob_ws.keep_alive(0.25)
        truth = world.rtds.exchange_prices["BTCUSDT"]
        spans = (FIVE_MINUTES, HOURLY)
        with sources_on(world, spans=spans, stale_after_ms=STALE_AFTER_MS) as make:
            source = make(time.time)
            deadline = time.monotonic() + 25  # the witness learns its basis on 30 points
            learned = False
            while time.monotonic() < deadline and not learned:
                now = time.time()
                row = source.rows(now)[1].as_json()
                learned = source.rtds.witnesses["btcusdt"].learned and _fresh(row, now)
                learned = learned and row["p_up_pct"] is not None
                time.sleep(0.25)
            assert learned, "the hourly row never fresh with a learnt witness"
            world.rtds.exchange_glitch = lambda value: (value * LIE).quantize(Decimal("0.01"))
            lied_at = time.time()
            wrong, stale_reasons = [], []
            while time.time() < lied_at + 8:
                now = time.time()
                row = source.rows(now)[1].as_json()
                true_prices = {float(truth(s)) for s in range(int(now) - 4, int(now) + 1)}
                if _fresh(row, now) and row["price"] not in true_prices:
                    wrong.append((round(now - lied_at, 2), row["price"], sorted(true_prices)))
                if not _fresh(row, now):
                    stale_reasons.append(row["suspect"])
                time.sleep(0.2)
    assert not wrong, f"fresh hourly rows with the lying exchange price: {wrong[:3]}"
    assert stale_reasons and any(stale_reasons[-1]), stale_reasons[-1:]
