"""The hourly and 4-hour kinds' boundaries and slugs (issue 49, point 1: ``app/horizons.py``),
against the facts of docs/horizons.md: real slugs and starts recorded from Polymarket, the
issue's own examples, and both changes of clocks of 2026 on a driven clock (no real time)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime

import pytest

from app.horizons import (
    EASTERN,
    eastern_block_end,
    eastern_block_start,
    four_hour_slug,
    hour_start,
    hourly_slugs,
)
from app.markets import parse_windows

# Real 4-hour windows' starts (their slugs' T0), winter and summer (docs/horizons.md).
REAL_4H_STARTS = (1765342800, 1765846800, 1767747600, 1772442000, 1772557200, 1774152000,
                  1775390400, 1778947200, 1789372800)  # fmt: skip
SPRING_2026 = 1772946000  # 2026-03-08 00:00 EST: the clocks go forward at 02:00
AUTUMN_2026 = 1793505600  # 2026-11-01 00:00 EDT: the clocks go back at 02:00


@pytest.mark.parametrize("start", REAL_4H_STARTS)
def test_every_real_4_hour_start_is_a_block_start_and_every_instant_in_it_maps_to_it(
    start: int,
) -> None:
    local = datetime.fromtimestamp(start, EASTERN)
    assert (local.hour % 4, local.minute, local.second) == (0, 0, 0), local
    end = eastern_block_end(start)
    assert end - start == 4 * 3600
    for t in (start, start + 0.5, start + 3599, start + 2 * 3600, end - 0.001):
        assert eastern_block_start(t) == start, t
    assert eastern_block_start(end) == end


def test_the_issues_examples_are_eastern_4_hour_starts() -> None:
    """1772442000 is 04:00 EST, 1775390400 08:00 EDT: their UTC starts differ by an hour
    modulo four hours, as daylight saving moves them."""
    assert eastern_block_start(1772442000 + 100) == 1772442000
    assert eastern_block_start(1775390400 + 100) == 1775390400
    assert (1772442000 % 14400, 1775390400 % 14400) == (3600, 0)
    assert four_hour_slug("BTC", 1772442000) == "btc-updown-4h-1772442000"


@pytest.mark.parametrize(
    ("first", "hours"), [(SPRING_2026, 3), (AUTUMN_2026, 5)], ids=["spring", "autumn"]
)
def test_the_block_across_a_change_of_clocks_is_3_or_5_hours(first: int, hours: int) -> None:
    assert eastern_block_start(first) == first
    end = eastern_block_end(first)
    assert end - first == hours * 3600
    assert datetime.fromtimestamp(end, EASTERN).hour == 4
    assert eastern_block_end(end) - end == 4 * 3600  # and the next block is 4 hours again


def test_a_year_of_blocks_is_contiguous_on_eastern_hours() -> None:
    start, lengths = eastern_block_start(1767225600), []  # 2026-01-01 00:00 UTC
    while start < 1798761600:  # 2027-01-01
        end = eastern_block_end(start)
        assert datetime.fromtimestamp(end, EASTERN).hour % 4 == 0
        lengths.append((end - start) // 3600)
        start = end
    assert sorted(set(lengths)) == [3, 4, 5]
    assert (lengths.count(3), lengths.count(5)) == (1, 1)


@pytest.mark.parametrize(
    ("symbol", "start", "dated", "yearless"),
    [
        # The issue's examples (slugs without the year, as before March 2026).
        (
            "BTC",
            1772373600,
            "bitcoin-up-or-down-march-1-2026-9am-et",
            "bitcoin-up-or-down-march-1-9am-et",
        ),
        (
            "ETH",
            1771833600,
            "ethereum-up-or-down-february-23-2026-3am-et",
            "ethereum-up-or-down-february-23-3am-et",
        ),
        # Midnight, noon, and the Eastern date of a start that is the next day in UTC.
        (
            "BTC",
            1774756800,
            "bitcoin-up-or-down-march-29-2026-12am-et",
            "bitcoin-up-or-down-march-29-12am-et",
        ),
        (
            "SOL",
            1774800000,
            "solana-up-or-down-march-29-2026-12pm-et",
            "solana-up-or-down-march-29-12pm-et",
        ),
        (
            "XRP",
            1774753200,
            "xrp-up-or-down-march-28-2026-11pm-et",
            "xrp-up-or-down-march-28-11pm-et",
        ),
    ],
)
def test_hourly_slugs_name_the_eastern_hour_in_words(
    symbol: str, start: int, dated: str, yearless: str
) -> None:
    assert hour_start(start + 1800) == start
    assert hourly_slugs(symbol, start) == (dated, yearless)


def test_the_zone_is_known_without_a_system_zone_database() -> None:
    """tzdata is in the lock: with no system zone files on the search path, America/New_York
    still resolves, with the same offsets."""
    code = "from app.horizons import eastern_block_start as s;print(s(1772442100), s(1775390500))"
    env = {**os.environ, "PYTHONTZPATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1772442000", "1775390400"]


@pytest.mark.parametrize("value", ["4h", "5m,4H", "4h,15m,1h"])
def test_windows_names_every_horizon(value: str) -> None:
    names = [part.strip().lower() for part in value.split(",")]
    assert [span.name for span in parse_windows(value)] == names
