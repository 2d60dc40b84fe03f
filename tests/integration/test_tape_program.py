"""The refresher's own program records a tape as a user would run it, and ends it cleanly.

``python -m app.refresher --record DIR`` against the fake Polymarket upstreams and a real
redis-server; SIGTERM; the tape holds both sockets' whole lives (connect ... disconnect) and
the HTTP exchanges, in time order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backtest.report import backtest, document_of
from harness.fake_polymarket import FakePolymarket, running
from harness.processes import BIN, Process, RedisServer, service_env, wait_until

RECORD_S = 5.0


@pytest.fixture(scope="module")
def world() -> Iterator[FakePolymarket]:
    """The fakes, live, for the module: the tests only read them (each its own refresher)."""
    with running(auto_markets=True) as fake:
        fake.rtds.live()
        fake.clob_ws.keep_alive(0.1)
        yield fake


def test_the_program_records_and_closes_its_tape(
    world: FakePolymarket, fresh_redis: RedisServer, tmp_path: Path
) -> None:
    tapes = tmp_path / "tapes"
    # Own refresher: it records its own tape, closed when the test stops it.
    refresher = Process(
        [str(BIN / "python"), "-m", "app.refresher", "--record", str(tapes)],
        service_env(REDIS_URL=fresh_redis.url, **world.env()),
        tmp_path / "refresher.log",
    )
    try:

        def recorded(needle: str) -> bool:
            return any(needle in path.read_text() for path in tapes.glob("*.jsonl"))

        assert wait_until(lambda: recorded('\\"event_type\\"'), timeout=30), refresher.output()
        assert refresher.stop() == 0, refresher.output()
    finally:
        refresher.stop()
    lines = [json.loads(line) for path in sorted(tapes.glob("*.jsonl")) for line in path.open()]
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
    for src in ("clob-ws", "rtds"):
        events = [line["event"] for line in lines if line["src"] == src and "event" in line]
        assert events == ["connect", "disconnect"], (src, events)
    assert any(line["src"] == "gamma" and line["status"] == 200 for line in lines)


def test_a_tape_of_both_window_lengths_is_backtested_per_window(
    world: FakePolymarket, fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """Issue 39, point 4: the program serving ``WINDOWS=5m,15m`` records the 15-minute
    markets too, and the backtest of its tape reports them apart, at their own checkpoints."""
    tapes = tmp_path / "tapes"
    env = service_env(REDIS_URL=fresh_redis.url, SYMBOLS="BTC", WINDOWS="5m,15m", **world.env())
    # Own refresher: on this test's windows (5m,15m), its tape closed when the test stops it.
    refresher = Process(
        [str(BIN / "python"), "-m", "app.refresher", "--record", str(tapes)],
        env,
        tmp_path / "refresher.log",
    )
    try:

        def recorded(needle: str) -> bool:
            return any(needle in path.read_text() for path in tapes.glob("*.jsonl"))

        assert wait_until(lambda: recorded("btc-updown-15m-"), timeout=30), refresher.output()
        assert wait_until(lambda: recorded('\\"event_type\\"'), timeout=30), refresher.output()
        time.sleep(RECORD_S)  # a few seconds of both windows' rows on the tape
        assert refresher.stop() == 0, refresher.output()
    finally:
        refresher.stop()
    lines = [json.loads(line) for path in sorted(tapes.glob("*.jsonl")) for line in path.open()]
    report = backtest(lines)
    five, fifteen = document_of(report, "5m", "BTC"), document_of(report, "15m", "BTC")
    assert five["replay"]["boards"] > 0 and fifteen["replay"]["boards"] > 0, report
    assert [w["slug"][:15] for w in fifteen["perWindow"]] == ["btc-updown-15m-"], fifteen
    assert [w["slug"][:14] for w in five["perWindow"]][:1] == ["btc-updown-5m-"], five
    assert fifteen["perWindow"][0]["windowStart"] % 900 == 0, fifteen
    assert [b["remS"] for b in fifteen["buckets"]][:2] == [870, 720], fifteen
