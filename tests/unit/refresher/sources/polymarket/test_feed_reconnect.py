"""A feed's reconnects against a real WebSocket server (the RTDS fake): the backoff starts
afresh after a healthy session, still grows while sessions fail at once, and each outage is
logged once at its start and once at its end.

The feed runs on a driven clock: its backoff waits (``pause``) move that clock by the time
asked instead of sleeping through it (the real wait is a moment), and a healthy spell is the
clock moved past ``HEALTHY_S`` while data flows. The backoff's ceilings and an outage's length
are then exact, with the real constants.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.refresher.sources.polymarket import feed as feed_module
from app.refresher.sources.polymarket.feed import BACKOFF_FIRST_S, BACKOFF_MAX_S, HEALTHY_S, Feed
from harness.fake_polymarket import SPOT_FILTERS, SPOT_TOPIC, FakeRtds, now_ms
from tests.support.live_source import Clock, wait_for

FEED_LOGGER = feed_module.__name__
TICK_S = 0.02  # the fake sends a price this often: a session that is up delivers data
REAL_PAUSE_S = 0.002  # what a backoff wait really sleeps: the driven clock moves the rest
POLL_EVERY_S = 0.002  # how often a wait looks (the events come every few milliseconds)


class Probe(Feed):
    """The smallest feed: subscribes to the spot topic and counts what it is sent."""

    name_for_logs = "probe"

    def subscription(self) -> list[str] | None:
        """One subscription to the spot price, as the fake serves it."""
        entry = {"topic": SPOT_TOPIC, "type": "*", "filters": SPOT_FILTERS}
        return [json.dumps({"action": "subscribe", "subscriptions": [entry]})]

    def handle(self, message: Any) -> None:
        """Nothing to do: ``messages`` counts them."""


class Driven:
    """The probe's clock, and every backoff it waited out: (ceiling, seconds)."""

    def __init__(self) -> None:
        self.clock = Clock(1000.0)
        self.waits: list[tuple[float, float]] = []
        self.feed: Probe | None = None

    def pause(self, seconds: float) -> None:
        """A backoff wait: the driven clock moves by ``seconds``, the real one a moment."""
        assert self.feed is not None
        self.waits.append((self.feed.backoff_s, seconds))
        self.clock.t += seconds
        self.feed.stop_event.wait(REAL_PAUSE_S)

    def ceilings(self) -> list[float]:
        """The ceilings of the backoffs waited out so far."""
        return [ceiling for ceiling, _ in list(self.waits)]


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
def driven() -> Driven:
    """The probe's driven clock and its record of backoffs."""
    return Driven()


@pytest.fixture
def probe(rtds: FakeRtds, driven: Driven) -> Iterator[Probe]:
    """A started probe feed on the fake and the driven clock, stopped (thread joined) at the
    end."""
    feed = Probe(rtds.url, threading.Event(), clock=driven.clock, pause=driven.pause)
    driven.feed = feed
    feed.start()
    try:
        yield feed
    finally:
        feed.stop_event.set()
        feed.join(5)
        assert not feed.is_alive()


def connected_and_fed(feed: Probe, rtds: FakeRtds, connections: int) -> None:
    """Until the fake has accepted ``connections`` and the feed has data on the last one."""
    wait_for(
        lambda: rtds.connections >= connections and feed.connected,
        "a connection",
        interval=POLL_EVERY_S,
    )
    received = feed.messages
    wait_for(lambda: feed.messages > received, "data on the connection", interval=POLL_EVERY_S)


def test_the_backoff_starts_afresh_after_a_healthy_session(
    rtds: FakeRtds, probe: Probe, driven: Driven
) -> None:
    """Ten drops, each after a healthy spell (data for longer than ``HEALTHY_S``): each
    reconnect waits out the first backoff. Without the reset the ceilings double (0.5, 1, 2
    ... 15 s)."""
    for drop in range(1, 11):
        connected_and_fed(probe, rtds, drop)
        driven.clock.t += HEALTHY_S + 1  # a healthy spell ...
        connected_and_fed(probe, rtds, drop)  # ... with data at its end
        rtds.drop()
        wait_for(
            lambda: len(driven.waits) >= drop,  # noqa: B023 - called at once, in this iteration
            f"the backoff after drop {drop}",
            interval=POLL_EVERY_S,
        )
    assert driven.ceilings() == [BACKOFF_FIRST_S] * 10
    assert all(0 <= seconds <= BACKOFF_FIRST_S for _, seconds in driven.waits)


def test_the_backoff_still_grows_while_sessions_fail_at_once(
    rtds: FakeRtds, probe: Probe, driven: Driven
) -> None:
    """Sessions dropped as soon as they open are no healthy spell, even with the backoffs'
    time passing between them: the ceilings double up to ``BACKOFF_MAX_S``, where a reset on
    every connection would keep them at the first."""
    connected_and_fed(probe, rtds, 1)
    rtds.every(0.005, rtds.drop)
    wait_for(lambda: len(driven.waits) >= 8, "eight failed sessions", interval=POLL_EVERY_S)
    expected = [min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**n) for n in range(8)]
    assert driven.ceilings()[:8] == expected


def outage_lines(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str]]:
    """The feed's WARNING lines, and its INFO lines that say it is back."""
    lines = [r for r in caplog.records if r.name == FEED_LOGGER]
    warnings = [r.getMessage() for r in lines if r.levelno >= logging.WARNING]
    backs = [r.getMessage() for r in lines if "back after" in r.getMessage()]
    return warnings, backs


def test_each_outage_is_logged_once_at_its_start_and_once_at_its_end(
    rtds: FakeRtds, probe: Probe, driven: Driven, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=FEED_LOGGER)
    connected_and_fed(probe, rtds, 1)
    assert outage_lines(caplog) == ([], [])

    # A long outage: dropped, then every attempt refused (five backoffs, 15 s at most).
    rtds.refuse = True
    rtds.drop()
    wait_for(lambda: len(driven.waits) >= 5, "five refused attempts", interval=POLL_EVERY_S)
    rtds.refuse = False
    wait_for(lambda: len(outage_lines(caplog)[1]) == 1, "the end of the first outage")
    warnings, backs = outage_lines(caplog)
    assert len(warnings) == 1 and "probe" in warnings[0], warnings
    assert probe.url in warnings[0]  # where, and (before it) why
    match = re.fullmatch(r"probe: back after (\d+\.\d) s \((\d+) attempts\)", backs[0])
    assert match is not None, backs
    waits = list(driven.waits)
    # The outage lasted the backoffs waited out (the driven clock moves only in them); each
    # wait was followed by one attempt.
    assert float(match[1]) == pytest.approx(sum(s for _, s in waits), abs=0.051)
    assert int(match[2]) == len(waits) >= 5

    # A short one: one drop, one reconnect.
    rtds.drop()
    wait_for(lambda: len(outage_lines(caplog)[1]) == 2, "the end of the second outage")
    warnings, backs = outage_lines(caplog)
    assert len(warnings) == 2, warnings
    assert re.fullmatch(r"probe: back after \d+\.\d s \(1 attempt\)", backs[1]), backs
