"""The service's wall clock (``app.board.timefmt``): the system's, shifted by
``CLOCK_OFFSET_MS`` once at start-up, in every reading of it."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator

import pytest

from app.board import timefmt
from app.refresher.changes import Changes
from app.web import create_app
from tests.conftest import BASE_CONFIG

HOUR_MS = 3_600_000


@pytest.fixture(autouse=True)
def _real_clock_after() -> Iterator[None]:
    """Every test leaves the process on the real clock (as the next create_app would)."""
    yield
    timefmt.set_offset_ms(0)


def _near(reading_ms: float, expected_ms: float) -> bool:
    return abs(reading_ms - expected_ms) < 1000


def test_unshifted_the_clock_is_the_systems() -> None:
    timefmt.set_offset_ms(0)
    assert _near(timefmt.now_ms(), time.time() * 1000)
    assert _near(timefmt.now() * 1000, time.time() * 1000)


@pytest.mark.parametrize("offset_ms", [HOUR_MS, -HOUR_MS, 1])
def test_an_offset_moves_both_readings_alike(offset_ms: int) -> None:
    timefmt.set_offset_ms(offset_ms)
    assert _near(timefmt.now_ms(), time.time() * 1000 + offset_ms)
    assert _near(timefmt.now() * 1000, time.time() * 1000 + offset_ms)
    assert abs(timefmt.now() * 1000 - timefmt.now_ms()) < 50


def test_create_app_sets_the_offset_of_its_settings_and_resets_it_without() -> None:
    create_app({**BASE_CONFIG, "CLOCK_OFFSET_MS": str(-HOUR_MS)})
    assert _near(timefmt.now_ms(), time.time() * 1000 - HOUR_MS)
    create_app(dict(BASE_CONFIG))
    assert _near(timefmt.now_ms(), time.time() * 1000)


def test_the_served_time_and_a_changes_stamp_are_on_the_shifted_clock() -> None:
    """What the service stamps (``servedAt``, a board's ``newestInputMs``) reads the offset."""
    app = create_app({**BASE_CONFIG, "CLOCK_OFFSET_MS": str(HOUR_MS)})
    body = app.test_client().get("/api/probboard/latest").get_json()
    served = calendar.timegm(time.strptime(body["servedAt"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert abs(served - (time.time() + HOUR_MS / 1000)) < 5, body["servedAt"]
    changes = Changes()
    changes.notify()
    assert changes.newest_ms is not None
    assert _near(changes.newest_ms, time.time() * 1000 + HOUR_MS)
