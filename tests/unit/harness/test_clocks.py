"""``harness.clocks.OffsetClock`` and the fakes' one wall clock (``running(clock=...)``)."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from harness.clocks import REAL, OffsetClock
from harness.fake_polymarket import FakeMarket, running
from harness.spans import WINDOW_S, window_start

HOUR_S = 3600


class DrivenNs:
    """A wall clock in epoch nanoseconds that moves only when the test moves it."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns


T_NS = 1_800_000_123_456_000_000  # a reading of the base clock, 123.456 s into a window


def test_an_offset_clock_is_its_base_plus_its_offset() -> None:
    base = DrivenNs(T_NS)
    clock = OffsetClock(-HOUR_S * 1000, base)
    assert clock() == T_NS / 1e9 - HOUR_S
    assert clock.now_ms() == T_NS // 1_000_000 - HOUR_S * 1000
    assert REAL.offset_ms == 0 and REAL.base is time.time_ns
    assert clock.env() == {"CLOCK_OFFSET_MS": str(-HOUR_S * 1000)}


def test_an_offset_clock_ticks_at_its_bases_rate() -> None:
    base = DrivenNs(T_NS)
    clock = OffsetClock(123_456, base)
    first, first_ms = clock(), clock.now_ms()
    base.now_ns += 200_000_000  # 0.2 s
    assert clock() - first == pytest.approx(0.2, abs=1e-6)
    assert clock.now_ms() - first_ms == 200


def test_reading_puts_now_at_the_given_time() -> None:
    when = 1_700_000_000.25
    clock = OffsetClock.reading(when, DrivenNs(T_NS))
    assert clock() == pytest.approx(when, abs=0.001)  # to the millisecond
    assert isinstance(clock.offset_ms, int)


@pytest.mark.parametrize("into_s", [0.0, 6.0, 150.0, WINDOW_S - 1.0])
def test_into_window_puts_now_that_far_into_a_window(into_s: float) -> None:
    """On a driven base: the clock's millisecond is exactly that far past a window's start."""
    clock = OffsetClock.into_window(into_s, base=DrivenNs(T_NS))
    now_ms = clock.now_ms()
    assert now_ms - window_start(now_ms // 1000) * 1000 == round(into_s * 1000)
    assert abs(clock.offset_ms) < WINDOW_S * 1000


def test_every_fake_stamps_with_its_worlds_clock() -> None:
    """An hour back: the CLOB's /time, a book's timestamp, the RTDS messages and the live
    path's seconds all read the world's clock, not the real one."""
    clock = OffsetClock(-HOUR_S * 1000)
    # Own fakes: on this test's offset clock.
    with running(clock=clock) as world:
        t0 = window_start(clock())
        market = world.list_market(FakeMarket(t0))
        with urllib.request.urlopen(world.clob.url + "/time", timeout=5) as answer:
            assert abs(json.load(answer) - clock()) <= 1
        book = world.book_json(market.up_token)
        assert book is not None and abs(int(book["timestamp"]) - clock.now_ms()) < 1000
        path = world.rtds.live(period_s=0.2, history_s=60)
        assert path.start_s <= clock() - 60 and path.start_s > clock() - 3 * 60
        # Its history is the minute before the world's now, not the real clock's.
        assert world.rtds.value_at(int((clock() - 59) * 1000)) is not None
        assert world.rtds.value_at(int((clock() - 62) * 1000)) is None
        for fake in (world.gamma, world.clob, world.site, world.clob_ws, world.rtds):
            assert abs(fake.now_ms() - clock.now_ms()) < 1000, fake
