"""A window's row from fresh inputs and its doubts (``row_assembly.py``, ``doubts.py``).

The inputs are all young (books confirmed 0.2 s ago, a spot point 0.1 s old); what changes is
the window's doubts as ``Doubts.judge_identity`` leaves them: none, one the CLOB has not
confirmed yet (pending, not counted), one it contradicts. The row must be stale under any
doubt, with the reason in its ``suspect``: a doubt not yet confirmed makes it stale too, or a
row sampled while its identity check is pending would be fresh and unchecked (issue 48,
point 7; before, only an 8 s real-clock fault test saw it).
"""

from __future__ import annotations

import httpx
import pytest

from app.markets import MARKETS
from app.refresher.sources.polymarket.book import Books, Quote
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.doubts import Doubts
from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.identity import Identities
from app.refresher.sources.polymarket.model_inputs import ModelAnswer
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S, PriceSeries
from app.refresher.sources.polymarket.row_assembly import Instant, assemble_row
from app.refresher.sources.polymarket.suspects import Suspects
from app.refresher.sources.polymarket.witness import ExchangeWitness
from harness.spans import FIVE_MINUTES

T0 = 1_800_000_000 - 1_800_000_000 % 300
NOW = T0 + 100.0
MONO = 5_000.0
STALE_AFTER_MS = 2_000  # the board's default stale threshold
CONDITION = "0x" + "c" * 64
MARKET = WindowMarket(
    T0, f"btc-updown-5m-{T0}", "111", "222", "spot", None, CONDITION, None, FIVE_MINUTES
)  # fmt: skip
ANSWER = ModelAnswer(55.0, 45.0, 1.2e-4, 1.0, 0.55)


def _row(window: LiveWindow) -> dict[str, object]:
    """The row of ``window`` at NOW from fresh books and a fresh spot point."""
    spot = PriceSeries(SPOT_HISTORY_S, clock=lambda: NOW)
    for t in range(-5, 1):  # two points that agree make a series believed; six here
        spot.add(int((NOW + t - 0.1) * 1000), 100_000.0 + t)
    up = Quote(0.55, 0.56, MONO - 0.2, "clob-ws")
    down = Quote(0.44, 0.45, MONO - 0.2, "clob-ws")
    at = Instant(NOW, int(NOW * 1000), MONO, STALE_AFTER_MS, {}, NOW - 60)
    row = assemble_row(window, up, down, spot, (), 99_990.0, ANSWER, at, "polymarket")
    return row.as_json()


def _is_stale(row: dict[str, object]) -> bool:
    ts = row["ts"]
    assert isinstance(ts, int)
    return int(NOW * 1000) - ts > STALE_AFTER_MS


@pytest.fixture
def judged() -> tuple[LiveWindow, Doubts, Identities]:
    """A window of MARKET, its doubts' judge, and identities never asked (no HTTP is made:
    ``verdict`` only reads what ``upkeep`` found)."""
    books = Books(suspects=Suspects("clob"))
    identities = Identities(httpx.Client(timeout=1), "http://127.0.0.1:9")
    suspects = {feed: Suspects(feed) for feed in ("market", "rtds", "clob")}
    return (
        LiveWindow(MARKETS["BTC"], T0, FIVE_MINUTES, market=MARKET),
        Doubts(suspects, books, identities),
        identities,
    )


def test_fresh_inputs_and_no_doubt_make_a_fresh_row() -> None:
    row = _row(LiveWindow(MARKETS["BTC"], T0, FIVE_MINUTES, market=MARKET))
    assert not _is_stale(row), row
    assert row["suspect"] == [] or row["suspect"] is None, row["suspect"]


def test_a_pending_identity_doubt_makes_the_fresh_row_stale_with_its_reason(
    judged: tuple[LiveWindow, Doubts, Identities],
) -> None:
    window, doubts, _ = judged
    doubts.judge_identity(window, MARKET)  # the CLOB's market not looked up yet: pending

    row = _row(window)
    assert _is_stale(row), row
    assert row["suspect"] == ["the CLOB's market not checked yet"], row["suspect"]


def test_a_book_in_another_market_replaces_the_pending_doubt_with_its_contradiction(
    judged: tuple[LiveWindow, Doubts, Identities],
) -> None:
    window, doubts, identities = judged
    doubts.judge_identity(window, MARKET)
    identities.note_book(MARKET.up_token_id, CONDITION)
    identities.note_book(MARKET.down_token_id, "0x" + "d" * 64)  # another market: contradicts

    doubts.judge_identity(window, MARKET)
    row = _row(window)
    assert _is_stale(row)
    suspect = row["suspect"]
    assert isinstance(suspect, list) and "DOWN book is in market 0xdddddddd" in suspect[0]


def _aged_row(spot: PriceSeries) -> dict[str, object]:
    """The row at NOW from fresh books and ``spot`` as it is."""
    up = Quote(0.55, 0.56, MONO - 0.2, "clob-ws")
    down = Quote(0.44, 0.45, MONO - 0.2, "clob-ws")
    at = Instant(NOW, int(NOW * 1000), MONO, STALE_AFTER_MS, {}, NOW - 60)
    window = LiveWindow(MARKETS["BTC"], T0, FIVE_MINUTES, market=MARKET)
    return assemble_row(window, up, down, spot, (), 99_990.0, ANSWER, at, "polymarket").as_json()


def test_a_price_stale_by_its_age_alone_says_so() -> None:
    """No witness contradicted anything, but no spot point has come for 5 s: the row is
    stale and says why (issue 48: a reason for every stale row a source caused), with the
    age the board counts (the newest point's 5 s, less the 2 s of the feed's normal lag
    forgiven: these points arrived late, all at NOW)."""
    spot = PriceSeries(SPOT_HISTORY_S, clock=lambda: NOW)
    for t in range(-10, -4):
        spot.add(int((NOW + t) * 1000), 100_000.0 + t)
    row = _aged_row(spot)
    assert _is_stale(row), row
    assert row["suspect"] == ["price: no newer spot point believed for 3.0 s"], row["suspect"]


def test_a_price_stale_while_newer_points_wait_for_a_witness_says_so() -> None:
    """The exchange price stopped 5 s ago (not yet silent for its witness) and the spot's
    last four points wait for it to speak for their seconds (as they wait for the TWAP
    report of their second, 3 s behind, while the exchange is silent): the row is stale
    and says that newer points are waiting, not only that none was believed."""
    clock = [NOW - 40]
    witness = ExchangeWitness("btcusdt", lambda: clock[0])
    spot = PriceSeries(SPOT_HISTORY_S, clock=lambda: clock[0], witness=witness)
    for t in range(-40, 0):
        clock[0] = NOW + t
        if t < -4:
            witness.add(int((NOW + t) * 1000), round((100_000.0 + t) * 0.9997, 2))
        spot.offer(int((NOW + t) * 1000), 100_000.0 + t)
    clock[0] = NOW
    assert spot.latest() == (int((NOW - 5) * 1000), 100_000.0 - 5)
    row = _aged_row(spot)
    assert _is_stale(row), row
    assert row["suspect"] == [
        "price: no newer spot point believed for 5.0 s; 4 newer wait for a witness's verdict"
        " (the exchange price or the TWAP report of their second)"
    ], row["suspect"]


def test_a_frozen_price_stale_by_its_age_says_it_did_not_move() -> None:
    """The spot repeats one value for 5 s while the exchange moves 30 bp: frozen, as old as
    its first point, and the row says so; a second younger, the same row is fresh and
    says nothing."""
    clock = [NOW - 8]
    witness = ExchangeWitness("btcusdt", lambda: clock[0])
    spot = PriceSeries(SPOT_HISTORY_S, clock=lambda: clock[0], witness=witness)
    for t in range(-40, -5):  # a walk the witness learns its basis on
        clock[0] = NOW + t
        witness.add(int((NOW + t) * 1000), (100_000.0 + 5 * (t % 3)) * 0.9997)
        spot.offer(int((NOW + t) * 1000), 100_000.0 + 5 * (t % 3))
    held = 100_000.0 + 5 * (-6 % 3)
    for t in range(-5, 1):  # the exchange moves 30 bp; the spot repeats its value
        clock[0] = NOW + t
        witness.add(int((NOW + t) * 1000), held * 1.003 * 0.9997)
        spot.offer(int((NOW + t) * 1000), held)
    assert spot.frozen_since_ms() is not None
    row = _aged_row(spot)
    assert _is_stale(row), row
    suspect = row["suspect"]
    assert isinstance(suspect, list) and len(suspect) == 1, suspect
    assert "has not moved for" in suspect[0] and "exchange price moved" in suspect[0], suspect
