"""The price-to-beat journal (issue 49): what it keeps and gives back on a real Redis, and
what it does while Redis is away (nothing is lost, nothing raises, nothing is recalled)."""

from __future__ import annotations

import json

import redis

from app.markets import SPANS, parse_symbols
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.latch_journal import PREFIX, LatchJournal
from harness.processes import RedisServer, free_port

T0 = 1_795_971_600  # a 4-hour block's start
FOUR = SPANS["4h"]
VIA = "rtds:crypto_prices_twap_sixty"


def _window(condition: str = "0xabc") -> LiveWindow:
    market = WindowMarket(
        window_start=T0,
        slug=f"btc-updown-4h-{T0}",
        up_token_id="1",
        down_token_id="2",
        rule="twap",
        lookback_s=60,
        condition_id=condition,
        price_to_beat=None,
        span=FOUR,
    )
    return LiveWindow(parse_symbols("BTC")[0], T0, FOUR, market=market)


def test_a_kept_price_to_beat_comes_back_for_its_own_market_only(
    fresh_redis: RedisServer,
) -> None:
    journal = LatchJournal(fresh_redis.url)
    try:
        journal.note(_window(), 100_123.45, VIA)
        journal.note(_window(), 1.0, "journal:" + VIA)  # a recalled value is never re-kept
        journal.flush()
        assert journal.queued == 0
        assert journal.recall(_window()) == (100_123.45, "journal:" + VIA)
        assert journal.recall(_window("0xother")) is None  # another market, same slug
        client = redis.Redis.from_url(fresh_redis.url)
        key = f"{PREFIX}btc-updown-4h-{T0}"
        kept = json.loads(client.get(key) or b"{}")
        assert kept == {"value": 100_123.45, "via": VIA, "condition": "0xabc", "rule": "twap",
                        "lookback": 60, "t0": T0}  # fmt: skip
        # Kept until an hour after the block's end.
        assert 0 < client.ttl(key) <= FOUR.end(T0) - T0 + 3600
        for junk in (b"not json", b"[1, 2]", json.dumps(kept | {"value": "1"}).encode()):
            client.set(key, junk)
            assert journal.recall(_window()) is None, junk
    finally:
        journal.close()


def test_while_redis_is_away_nothing_is_lost_and_nothing_raises() -> None:
    journal = LatchJournal(f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    journal.note(_window(), 100_123.45, VIA)
    journal.flush()  # refused: kept for the next flush
    assert journal.recall(_window()) is None
    journal.close()
    assert journal.queued == 1  # still queued: a later flush (Redis back) writes it
