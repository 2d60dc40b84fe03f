"""A feed's reconnects against a real WebSocket server (the RTDS fake): the backoff starts
afresh after a healthy session, still grows while sessions fail at once, and each outage is
logged once at its start and once at its end.

Intervals are shortened (monkeypatched constants) so each test takes a few seconds; the
bounds asserted are loose multiples of them.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.refresher.sources.polymarket import feed as feed_module
from app.refresher.sources.polymarket.feed import Feed
from harness.fake_polymarket import SPOT_FILTERS, SPOT_TOPIC, FakeRtds, now_ms
from tests.support.live_source import wait_for

FEED_LOGGER = feed_module.__name__
TICK_S = 0.02  # the fake sends a price this often: a session that is up delivers data


class Probe(Feed):
    """The smallest feed: subscribes to the spot topic and counts what it is sent."""

    name_for_logs = "probe"

    def subscription(self) -> list[str] | None:
        """One subscription to the spot price, as the fake serves it."""
        entry = {"topic": SPOT_TOPIC, "type": "*", "filters": SPOT_FILTERS}
        return [json.dumps({"action": "subscribe", "subscriptions": [entry]})]

    def handle(self, message: Any) -> None:
        """Nothing to do: ``messages`` counts them."""


@pytest.fixture
def rtds() -> Iterator[FakeRtds]:
    """The RTDS fake, sending a spot price every ``TICK_S`` to whoever is subscribed."""
    fake = FakeRtds()
    fake.start()
    fake.every(TICK_S, lambda: fake.push(SPOT_TOPIC, now_ms(), "95000"))
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def short_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first backoff of 0.05 s with room to grow to 30 s; healthy after 0.2 s of data."""
    monkeypatch.setattr(feed_module, "BACKOFF_FIRST_S", 0.05)
    monkeypatch.setattr(feed_module, "BACKOFF_MAX_S", 30.0)
    monkeypatch.setattr(feed_module, "HEALTHY_S", 0.2)


@pytest.fixture
def probe(rtds: FakeRtds, short_intervals: None) -> Iterator[Probe]:
    """A started probe feed on the fake, stopped (thread joined) at the end."""
    feed = Probe(rtds.url, threading.Event())
    feed.start()
    try:
        yield feed
    finally:
        feed.stop_event.set()
        feed.join(5)
        assert not feed.is_alive()


def connected_and_fed(feed: Probe, rtds: FakeRtds, connections: int) -> None:
    """Until the fake has accepted ``connections`` and the feed has data on the last one."""
    wait_for(lambda: rtds.connections >= connections and feed.connected, "a connection")
    received = feed.messages
    wait_for(lambda: feed.messages > received, "data on the connection")


def test_the_backoff_starts_afresh_after_a_healthy_session(rtds: FakeRtds, probe: Probe) -> None:
    """Ten drops, each after a healthy spell: each reconnect is as quick as the first.
    Without the reset the ceilings double (0.05 ... 25.6 s) and a reconnect takes seconds."""
    for drop in range(1, 11):
        connected_and_fed(probe, rtds, drop)
        time.sleep(0.35)  # data for longer than HEALTHY_S
        rtds.drop()
        wait_for(
            lambda: rtds.connections > drop,  # noqa: B023 - called at once, in this iteration
            f"a reconnect within 1 s of drop {drop}",
            timeout=1.0,
            interval=0.01,
        )


def test_the_backoff_still_grows_while_sessions_fail_at_once(rtds: FakeRtds, probe: Probe) -> None:
    """Sessions dropped as soon as they open are no healthy spell: over 2 s the doubling
    backoff allows about seven connections, where a reset on every connection would allow
    dozens."""
    connected_and_fed(probe, rtds, 1)
    rtds.every(0.005, rtds.drop)
    start = rtds.connections
    time.sleep(2.0)
    assert rtds.connections - start < 20


def outage_lines(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str]]:
    """The feed's WARNING lines, and its INFO lines that say it is back."""
    lines = [r for r in caplog.records if r.name == FEED_LOGGER]
    warnings = [r.getMessage() for r in lines if r.levelno >= logging.WARNING]
    backs = [r.getMessage() for r in lines if "back after" in r.getMessage()]
    return warnings, backs


def test_each_outage_is_logged_once_at_its_start_and_once_at_its_end(
    rtds: FakeRtds, probe: Probe, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "BACKOFF_MAX_S", 0.2)  # many refused attempts in 1.5 s
    caplog.set_level(logging.DEBUG, logger=FEED_LOGGER)
    connected_and_fed(probe, rtds, 1)
    assert outage_lines(caplog) == ([], [])

    # A long outage: dropped, then every attempt refused for 1.5 s.
    rtds.refuse = True
    rtds.drop()
    time.sleep(1.5)
    rtds.refuse = False
    wait_for(lambda: len(outage_lines(caplog)[1]) == 1, "the end of the first outage")
    warnings, backs = outage_lines(caplog)
    assert len(warnings) == 1 and "probe" in warnings[0], warnings
    assert probe.url in warnings[0]  # where, and (before it) why
    match = re.fullmatch(r"probe: back after (\d+\.\d) s \((\d+) attempts\)", backs[0])
    assert match is not None, backs
    assert float(match[1]) >= 1.4 and int(match[2]) >= 3

    # A short one: one drop, one reconnect.
    time.sleep(0.3)
    rtds.drop()
    wait_for(lambda: len(outage_lines(caplog)[1]) == 2, "the end of the second outage")
    warnings, backs = outage_lines(caplog)
    assert len(warnings) == 2, warnings
    assert re.fullmatch(r"probe: back after \d+\.\d s \(1 attempt\)", backs[1]), backs
