"""The Redis board bus against a real redis-server: delivery, late joiners, restarts."""

from __future__ import annotations

import json

import pytest
import redis

from app.bus import redis_bus
from app.bus.redis_bus import BOARD_KEY, RedisBoardBus
from app.config import load_settings
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from harness.processes import RedisServer, wait_until


def _refresher(bus: RedisBoardBus) -> Refresher:
    settings = load_settings({"REDIS_URL": "memory://"})
    return Refresher(SimulatedSource(parse_symbols("BTC"), seed=1), bus, settings.refresh_tick_ms)


def test_published_board_reaches_a_subscriber_and_the_key(fresh_redis: RedisServer) -> None:
    publisher, worker = RedisBoardBus(fresh_redis.url), RedisBoardBus(fresh_redis.url)
    try:
        worker.start()
        assert wait_until(lambda: worker.status() == (True, "ready"))
        refresher = _refresher(publisher)
        assert refresher.tick()
        assert wait_until(lambda: worker.latest() is not None)
        stored = json.loads(redis.Redis.from_url(fresh_redis.url).get(BOARD_KEY) or b"{}")
        snapshot = worker.latest()
        assert snapshot is not None
        assert snapshot.seq == stored["seq"]
        assert snapshot.document["items"][0]["symbol"] == "BTC"
    finally:
        publisher.close()
        worker.close()


def test_a_worker_starting_late_reads_the_latest_board_from_the_key(
    fresh_redis: RedisServer,
) -> None:
    publisher = RedisBoardBus(fresh_redis.url)
    refresher = _refresher(publisher)
    assert refresher.tick()
    published = json.loads(redis.Redis.from_url(fresh_redis.url).get(BOARD_KEY) or b"{}")
    worker = RedisBoardBus(fresh_redis.url)
    try:
        worker.start()
        assert wait_until(lambda: worker.latest() is not None)
        snapshot = worker.latest()
        assert snapshot is not None and snapshot.seq == published["seq"]
    finally:
        publisher.close()
        worker.close()


def test_invalid_payload_on_the_channel_is_dropped(fresh_redis: RedisServer) -> None:
    worker = RedisBoardBus(fresh_redis.url)
    publisher = RedisBoardBus(fresh_redis.url)
    try:
        worker.start()
        assert wait_until(lambda: worker.status()[0])
        assert _refresher(publisher).tick()
        assert wait_until(lambda: worker.latest() is not None)
        good = worker.latest()
        client = redis.Redis.from_url(fresh_redis.url)
        for junk in (b"not json", b'{"seq": 1}', b"\xff\xfe", b'{"seq": NaN}'):
            client.publish("probboard:board", junk)
        # A valid board published after the junk still arrives: the subscriber survived it.
        assert _refresher(publisher).tick()
        assert good is not None
        assert wait_until(lambda: (worker.latest() or good).seq != good.seq)
        assert worker.latest() is not None and worker.latest() is not good
    finally:
        publisher.close()
        worker.close()


def test_subscriber_survives_a_redis_restart(
    restartable_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the subject: the readiness cache (1 s, it would answer "not ready" that long after
    # the restart) and the subscriber's wait for a message (close() is seen after it).
    monkeypatch.setattr(redis_bus, "HEALTH_CACHE_S", 0.05)
    monkeypatch.setattr(redis_bus, "LISTEN_WAIT_S", 0.1)
    worker = RedisBoardBus(restartable_redis.url)
    publisher = RedisBoardBus(restartable_redis.url)
    refresher = _refresher(publisher)
    try:
        worker.start()
        assert refresher.tick()
        assert wait_until(lambda: worker.latest() is not None)
        restartable_redis.stop()
        assert wait_until(lambda: not worker.status()[0], timeout=10)
        assert not refresher.tick()  # publishing fails, and says so, without raising
        restartable_redis.start()
        assert wait_until(lambda: worker.status() == (True, "ready"), timeout=15)
        before = worker.latest()
        assert before is not None
        assert refresher.tick()
        assert wait_until(lambda: (worker.latest() or before).seq > before.seq, timeout=10)
    finally:
        publisher.close()
        worker.close()
