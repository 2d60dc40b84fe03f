"""The refresher's own program records a tape as a user would run it, and ends it cleanly.

``python -m app.refresher --record DIR`` against the fake Polymarket upstreams and a real
redis-server; SIGTERM; the tape holds both sockets' whole lives (connect ... disconnect) and
the HTTP exchanges, in time order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.fake_polymarket import FakePolymarket, running
from harness.processes import BIN, Process, RedisServer, service_env, wait_until


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    with running(auto_markets=True) as fake:
        fake.rtds.live()
        fake.clob_ws.keep_alive(0.1)
        yield fake


def test_the_program_records_and_closes_its_tape(world: FakePolymarket, tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)
    redis.start()
    tapes = tmp_path / "tapes"
    refresher = Process(
        [str(BIN / "python"), "-m", "app.refresher", "--record", str(tapes)],
        service_env(REDIS_URL=redis.url, **world.env()),
        tmp_path / "refresher.log",
    )
    try:

        def recorded(needle: str) -> bool:
            return any(needle in path.read_text() for path in tapes.glob("*.jsonl"))

        assert wait_until(lambda: recorded('\\"event_type\\"'), timeout=30), refresher.output()
        assert refresher.stop() == 0, refresher.output()
    finally:
        refresher.stop()
        redis.stop()
    lines = [json.loads(line) for path in sorted(tapes.glob("*.jsonl")) for line in path.open()]
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
    for src in ("clob-ws", "rtds"):
        events = [line["event"] for line in lines if line["src"] == src and "event" in line]
        assert events == ["connect", "disconnect"], (src, events)
    assert any(line["src"] == "gamma" and line["status"] == 200 for line in lines)
