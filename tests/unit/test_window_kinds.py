"""A window kind is data (issue 49, point 1): one ``app.markets.SPANS`` entry declares its
boundaries, slugs, settlement, checkpoints, model horizons and chart step, and the parts of
the service read it from there. Times are driven (no real clock)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from app.calibration.checkpoints import Window, settled, track
from app.calibration.store import symbol_of
from app.horizons import eastern_block_end, eastern_block_start, hourly_slugs
from app.markets import BINANCE_CANDLE, CHAINLINK, MARKETS, SPANS, Span, parse_windows
from app.refresher.sources.simulated import SimulatedSource
from app.schemas.board import BoardItemSchema
from tests.support.rows import live_row

AUTUMN_2026 = 1793505600  # 2026-11-01 00:00 EDT: the block holding the change is 5 hours
SPRING_2026 = 1772946000  # 2026-03-08 00:00 EST: 3 hours
APP = Path(__file__).resolve().parents[2] / "app"


def test_every_kind_polymarket_lists_has_one_entry_with_everything_it_needs() -> None:
    assert list(SPANS) == ["5m", "15m", "1h", "4h"]
    for span in SPANS.values():
        assert span.rems == tuple(sorted(span.rems, reverse=True)), span.name
        assert span.rems[-1] > 0 and span.rems[0] < span.seconds, span.name
        assert all(h < span.seconds for h in span.factor_horizons), span.name
        assert span.seconds % span.trail_step_s == 0, span.name
    assert SPANS["1h"].settlement == BINANCE_CANDLE
    assert {SPANS[k].settlement for k in ("5m", "15m", "4h")} == {CHAINLINK}
    assert [s.name for s in SPANS.values() if s.served] == ["5m", "15m", "1h", "4h"]


@pytest.mark.parametrize(("start", "hours"), [(AUTUMN_2026, 5), (SPRING_2026, 3)])
def test_the_4_hour_kind_is_bounded_by_eastern_blocks(start: int, hours: int) -> None:
    four = SPANS["4h"]
    for t in (start, start + 1, eastern_block_end(start) - 1):
        assert four.start(t) == start == eastern_block_start(t)
    assert four.end(start) - start == hours * 3600
    assert four.slugs("ETH", start) == (f"eth-updown-4h-{start}",)


def test_fixed_kinds_are_bounded_in_utc_and_named_by_their_start() -> None:
    t = 1_795_516_537.25
    for name, seconds in (("5m", 300), ("15m", 900), ("1h", 3600)):
        span = SPANS[name]
        assert span.start(t) == int(t) // seconds * seconds
        assert span.end(span.start(t)) == span.start(t) + seconds
    assert SPANS["15m"].slugs("SOL", 1_795_516_200) == ("sol-updown-15m-1795516200",)
    assert MARKETS["BTC"].slug(1_795_516_200, SPANS["5m"]) == "btc-updown-5m-1795516200"


def test_the_hourly_kind_is_named_by_the_eastern_hour_in_words_dated_first() -> None:
    start = 1774756800  # 2026-03-29 00:00 EDT (04:00 UTC)
    assert SPANS["1h"].slugs("BTC", start) == hourly_slugs("BTC", start)
    assert SPANS["1h"].slugs("BTC", start)[0] == "bitcoin-up-or-down-march-29-2026-12am-et"


def test_a_kind_not_served_yet_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [s.name for s in parse_windows("15m, 5M,4h, 1H")] == ["15m", "5m", "4h", "1h"]
    # A kind declared before it is served (as 1h and 4h were): named, and refused.
    monkeypatch.setitem(SPANS, "4h", dataclasses.replace(SPANS["4h"], served=False))
    with pytest.raises(
        ValueError, match=r"'4h' in '5m,4h' is not served yet \(served: 5m, 15m, 1h"
    ):
        parse_windows("5m,4h")


def test_no_module_of_the_service_assumes_the_5_minute_window() -> None:
    """Adding a kind touches the table: nothing in app/ names a 5-minute constant
    (``WINDOW_S``, ``FIVE_MINUTES``) any more; the contract's default is ``DEFAULT_SPAN``."""
    found = [
        f"{path.relative_to(APP)}: {name}"
        for path in APP.rglob("*.py")
        for name in re.findall(r"\b(WINDOW_S|FIVE_MINUTES)\b", path.read_text())
    ]
    assert not found, found


def test_the_simulated_source_latches_each_kind_at_its_own_start_across_a_change_of_clocks(
) -> None:  # fmt: skip
    """A simulated 4-hour window that spans the autumn change lasts 5 hours: its end, and
    the next window's price to beat latched there."""
    four, five = SPANS["4h"], SPANS["5m"]
    source = SimulatedSource((MARKETS["BTC"],), seed=7, spans=(five, four))
    end = eastern_block_end(AUTUMN_2026)
    t = AUTUMN_2026 + 60.0
    while t < end + 120:
        rows = source.rows(t)
        long = next(r for r in rows if r.window == "4h")
        short = next(r for r in rows if r.window == "5m")
        expected = AUTUMN_2026 if t < end else end
        assert long.window_start == expected and long.window_end == four.end(expected), t
        assert short.window_start == five.start(t)
        if t >= end:
            # The new window's price to beat is the path's price at its start: the 5-minute
            # window starting at the same instant latched the same price.
            assert short.window_start == end
            assert long.price_to_beat == short.price_to_beat
        t += 600.0 if t < end - 600 else 60.0


def test_the_row_schema_takes_a_5_hour_block_and_holds_each_kind_to_its_length() -> None:
    """A row's ``rem_secs`` is checked against its own kind: the autumn 4-hour block has up
    to 5 hours left; a 5-minute row with 301 s left is refused, as before."""
    four, five = SPANS["4h"], SPANS["5m"]
    t = AUTUMN_2026 + 60.0
    rows = SimulatedSource((MARKETS["BTC"],), seed=7, spans=(five, four)).rows(t)
    schema = BoardItemSchema()
    for row in rows:
        assert schema.validate(row.as_json()) == {}, row.window
    long = next(r for r in rows if r.window == "4h").as_json()
    assert long["rem_secs"] > 4 * 3600
    short = next(r for r in rows if r.window == "5m").as_json()
    assert "_schema" in schema.validate({**short, "rem_secs": 301.0})


def test_an_hourly_window_is_settled_by_its_market_never_by_the_next_hours_open() -> None:
    """The hourly rule is the candle's close against its open: the next hour's open is not
    this hour's close, so the record takes the market's own resolution only (its slug names
    no start: ``next_slug`` is None)."""
    hourly = SPANS["1h"]
    start = 1774756800  # 2026-03-29 00:00 EDT
    rows = [
        live_row(
            hourly.slugs("BTC", t0)[0],
            t0,
            window="1h",
            price_to_beat=beat,
            rem_secs=3540.0,
            up_token_id=f"{t0}1",
            down_token_id=f"{t0}2",
            ts=(t0 + 60) * 1000,
        )
        for t0, beat in ((start, 66_000.0), (start + 3600, 66_500.0))
    ]
    windows: dict[str, Window] = {}
    for row in rows:
        track(windows, row, row.ts / 1000, 2_000)
    first = windows[hourly.slugs("BTC", start)[0]]
    assert first.end == start + 3600 and first.rems == hourly.rems
    assert first.next_slug is None
    assert settled(first, windows, {}) == (None, None)
    assert settled(first, windows, {f"{start}2": True}) == ("down", "market")


def test_the_record_names_an_hourly_windows_coin_by_its_symbol() -> None:
    assert symbol_of("bitcoin-up-or-down-march-29-2026-12am-et") == "BTC"
    assert symbol_of("xrp-up-or-down-january-23-1pm-et") == "XRP"
    assert symbol_of("eth-updown-4h-1793505600") == "ETH"


def test_a_seeds_path_is_the_same_whichever_kinds_are_served() -> None:
    """The walk stops on the 5-minute grid whether or not that kind is served, so a seed's
    15-minute board is the same alone and beside the 5-minute one (the review found the
    15-minute-only path changed)."""
    times = [1_800_000_000.37 + 317 * k for k in range(7)]

    def fifteen(spans: tuple[Span, ...]) -> list[float | None]:
        source = SimulatedSource((MARKETS["BTC"],), seed=5, spans=spans)
        return [r.price for t in times for r in source.rows(t) if r.window == "15m"]

    assert fifteen((SPANS["15m"],)) == fifteen((SPANS["5m"], SPANS["15m"]))


def test_a_simulated_hourly_window_is_settled_by_the_walks_next_open() -> None:
    """The simulated source settles every kind on its own walk: an hour's final price is
    the next hour's price to beat, whatever the slugs look like."""
    hourly, start = SPANS["1h"], 1_800_000_000
    source = SimulatedSource((MARKETS["BTC"],), seed=3, spans=(hourly,))
    windows: dict[str, Window] = {}
    for t in (start + 3000.0, start + 3599.0, start + 3600.0 + 60):  # across the hour's end
        [row] = source.rows(t)
        track(windows, row, t, 2_000)
    first = windows[hourly.slugs("BTC", start)[0]]
    after = windows[hourly.slugs("BTC", start + 3600)[0]]
    assert first.next_slug == after.slug
    assert first.price_to_beat is not None and after.price_to_beat is not None
    expected = "up" if after.price_to_beat >= first.price_to_beat else "down"
    assert settled(first, windows, {}) == (expected, "feed")
