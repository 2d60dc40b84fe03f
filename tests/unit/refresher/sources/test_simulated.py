"""``SimulatedSource`` and the ``Refresher`` that publishes its rows."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from app.board.row import BoardRow
from app.bus import BoardBus
from app.bus.memory import MemoryBoardBus
from app.markets import MARKETS, parse_symbols
from app.refresher.loop import Refresher
from app.refresher.model import percentages, probability_up
from app.refresher.sources.simulated import SECONDS_PER_YEAR, SimulatedSource, token_id
from app.schemas import ContractError, check
from app.schemas.board import PublishedBoardSchema
from app.services import services_of
from harness.spans import FIVE_MINUTES, WINDOW_S, window_start
from tests.support.contract import validated

# A window boundary: 1_800_000_000 is a multiple of 300.
BOUNDARY = 1_800_000_000
PRICE_FIELDS = ("up_bid", "up_ask", "down_bid", "down_ask")


def one_row(source: SimulatedSource, now: float) -> dict[str, Any]:
    rows = source.rows(now)
    assert len(rows) == 1
    return rows[0].as_json()


def on_tick(value: object) -> bool:
    assert isinstance(value, float)
    return abs(value * 100 - round(value * 100)) < 1e-9


def check_row_invariants(row: dict[str, Any], now: float) -> None:
    """Everything that must hold for any row at any instant."""
    assert row["symbol"] in MARKETS
    # ``slot`` is the window start in unix seconds, as the public clients read it.
    assert row["slot"] == math.floor(now / WINDOW_S) * WINDOW_S
    assert row["windowStart"] == row["slot"]
    assert row["windowStart"] % WINDOW_S == 0
    assert row["windowEnd"] == row["windowStart"] + WINDOW_S
    assert row["windowStart"] <= now < row["windowEnd"]
    assert row["rem_secs"] == pytest.approx(row["windowEnd"] - now, abs=0.0005)
    assert 0 <= row["rem_secs"] <= WINDOW_S
    assert row["ts"] == int(now * 1000)
    assert row["p_up_pct"] + row["p_down_pct"] == 100
    assert 0 <= row["p_up_pct"] <= 100
    for name in PRICE_FIELDS:
        assert 0.01 <= row[name] <= 0.99, (name, row[name])
        assert on_tick(row[name]), (name, row[name])
    assert row["up_bid"] < row["up_ask"]
    assert row["down_bid"] < row["down_ask"]
    assert row["up_ask"] + row["down_bid"] == pytest.approx(1.0, abs=1e-9)
    assert row["up_bid"] + row["down_ask"] == pytest.approx(1.0, abs=1e-9)
    for name in ("up_token_id", "down_token_id"):
        token = row[name]
        assert isinstance(token, str) and len(token) == 77 and token.isdigit()
        assert token[0] != "0"
    assert row["up_token_id"] != row["down_token_id"]
    assert row["price"] > 0 and row["priceToBeat"] > 0


# -- determinism ------------------------------------------------------------------------------


def test_same_seed_and_call_times_give_the_same_rows() -> None:
    times = [BOUNDARY - 123.4 + 0.7 * i for i in range(400)]
    first, second = (
        SimulatedSource(parse_symbols("BTC"), seed=42),
        SimulatedSource(parse_symbols("BTC"), seed=42),
    )

    assert [first.rows(t) for t in times] == [second.rows(t) for t in times]


def test_different_seeds_give_different_markets() -> None:
    a = one_row(SimulatedSource(parse_symbols("BTC"), seed=1), BOUNDARY + 10)
    b = one_row(SimulatedSource(parse_symbols("BTC"), seed=2), BOUNDARY + 10)

    assert a["slot"] == b["slot"]
    assert a["up_token_id"] != b["up_token_id"]
    assert a["price"] != b["price"]


# Token ids of seed 7, slot 100, pinned: every process and release must derive these exact
# ids (a per-process hash or a random id would agree with itself and not with these).
PINNED_UP_7_100 = "90153459389821470903195511680949264394838192783776033593685670456112984179760"
PINNED_DOWN_7_100 = "55787836235558527593440617291792142812837109977465230239254504813968261364676"


def test_token_ids_are_stable_per_seed_slot_and_outcome() -> None:
    """Token ids are the pinned ids for (seed, slot, outcome), distinct when any part changes."""
    assert token_id(7, 100, "up", "BTC", FIVE_MINUTES) == PINNED_UP_7_100
    assert token_id(7, 100, "down", "BTC", FIVE_MINUTES) == PINNED_DOWN_7_100
    ids = {
        token_id(7, 100, "up", "BTC", FIVE_MINUTES),
        token_id(7, 100, "down", "BTC", FIVE_MINUTES),
        token_id(7, 101, "up", "BTC", FIVE_MINUTES),
    }
    ids.add(token_id(8, 100, "up", "BTC", FIVE_MINUTES))
    assert len(ids) == 4
    assert all(len(i) == 77 and i.isdigit() for i in ids)
    row = one_row(SimulatedSource(parse_symbols("BTC"), seed=7), BOUNDARY + 1)
    assert row["up_token_id"] == token_id(7, BOUNDARY // WINDOW_S, "up", "BTC", FIVE_MINUTES)
    assert row["down_token_id"] == token_id(7, BOUNDARY // WINDOW_S, "down", "BTC", FIVE_MINUTES)


# -- windows ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "now",
    [
        BOUNDARY,
        BOUNDARY + 0.001,
        BOUNDARY + 299.999,
        BOUNDARY - 0.001,
        1_767_225_600.5,
        1_767_225_899.9995,
        1_700_000_123.456,
    ],
)
def test_slot_and_remaining_seconds(now: float) -> None:
    row = one_row(SimulatedSource(parse_symbols("BTC"), seed=3), now)

    check_row_invariants(row, now)
    assert row["windowStart"] == window_start(now)


def test_window_start_is_a_floor() -> None:
    assert window_start(BOUNDARY) == BOUNDARY
    assert window_start(BOUNDARY + 299.999) == BOUNDARY
    assert window_start(BOUNDARY - 0.001) == BOUNDARY - WINDOW_S


def test_the_window_rolls_at_the_boundary_and_latches_the_price() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=5)
    before = one_row(source, BOUNDARY - 0.5)
    at = one_row(source, BOUNDARY)
    after = one_row(source, BOUNDARY + 0.5)

    assert before["slot"] + WINDOW_S == at["slot"] == after["slot"] == BOUNDARY
    assert before["rem_secs"] == 0.5
    assert at["rem_secs"] == 300
    assert after["rem_secs"] == 299.5
    assert before["up_token_id"] != at["up_token_id"] == after["up_token_id"]
    assert before["down_token_id"] != at["down_token_id"] == after["down_token_id"]
    # The price to beat is the price exactly at the window start.
    assert at["priceToBeat"] == at["price"]
    assert after["priceToBeat"] == at["price"]
    assert before["priceToBeat"] != at["price"]


def test_the_price_is_latched_at_the_boundary_even_between_calls() -> None:
    """A source not called at the boundary latches the same price as one that was."""
    watched, skipped = (
        SimulatedSource(parse_symbols("BTC"), seed=9),
        SimulatedSource(parse_symbols("BTC"), seed=9),
    )
    one_row(watched, BOUNDARY - 0.5)
    at = one_row(watched, BOUNDARY)
    one_row(skipped, BOUNDARY - 0.5)

    after = one_row(skipped, BOUNDARY + 0.5)

    assert after["slot"] == BOUNDARY
    assert after["priceToBeat"] == at["price"]
    assert after == one_row(watched, BOUNDARY + 0.5)


def test_the_price_to_beat_holds_for_the_whole_window() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=13)
    rows = [one_row(source, BOUNDARY + 0.25 + 2.5 * i) for i in range(120)]

    assert {r["slot"] for r in rows} == {BOUNDARY}
    assert len({r["priceToBeat"] for r in rows}) == 1
    assert len({r["price"] for r in rows}) > 50


def test_invariants_hold_over_many_windows() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=17)
    slots = set()
    latched: dict[int, float] = {}
    for i in range(1_500):
        now = BOUNDARY - 1_000 + i * 2.7
        row = one_row(source, now)
        check_row_invariants(row, now)
        slots.add(row["slot"])
        assert latched.setdefault(row["slot"], row["priceToBeat"]) == row["priceToBeat"]

    assert len(slots) >= 13


def test_rows_follow_the_model() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=19)
    for i in range(600):
        now = BOUNDARY + 0.5 + i
        row = one_row(source, now)
        p_up = probability_up(
            row["price"], row["priceToBeat"], row["rem_secs"], row["sigma"], row["settlement"]
        )
        assert row["p_up_pct"] == pytest.approx(percentages(p_up)[0], abs=0.02)
        if row["price"] > row["priceToBeat"]:
            assert row["p_up_pct"] >= 50
        elif row["price"] < row["priceToBeat"]:
            assert row["p_up_pct"] <= 50
        # The quoted market stays near the model (disagreement at most 8 points).
        mid = (row["up_bid"] + row["up_ask"]) / 2
        assert abs(mid - row["p_up_pct"] / 100) <= 0.1 + 1e-9


def test_the_price_moves_with_realistic_volatility() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=23)
    prices, sigmas = [], []
    for i in range(3_600):
        row = one_row(source, BOUNDARY + 0.5 + i)
        prices.append(row["price"])
        sigmas.append(row["sigma"])

    returns = [math.log(b / a) for a, b in itertools.pairwise(prices)]
    realized = math.sqrt(sum(r * r for r in returns) / len(returns))
    annualised = realized * math.sqrt(365 * 24 * 3600)
    sigma = MARKETS["BTC"].sigma_per_year / math.sqrt(SECONDS_PER_YEAR)
    assert realized == pytest.approx(sigma, rel=0.15)
    assert 0.3 < annualised < 0.8
    assert max(prices) - min(prices) > 50  # it does move
    start = MARKETS["BTC"].start_price
    assert 0.9 * start < min(prices) <= max(prices) < 1.1 * start
    assert sum(1 for r in returns if r == 0) < len(returns) * 0.01
    # The estimate the model uses is live and close to the truth.
    assert all(s == pytest.approx(sigma, rel=0.25) for s in sigmas)


def test_a_clock_jump_starts_afresh_and_stays_consistent() -> None:
    source = SimulatedSource(parse_symbols("BTC"), seed=29)
    for now in (BOUNDARY + 1, BOUNDARY + 7_201.5, BOUNDARY + 100.25, BOUNDARY + 100.75):
        check_row_invariants(one_row(source, now), now)


def test_an_unseeded_source_still_works() -> None:
    row = one_row(SimulatedSource(parse_symbols("BTC")), BOUNDARY + 3)

    check_row_invariants(row, BOUNDARY + 3)


# -- the refresher ----------------------------------------------------------------------------


def test_built_board_passes_the_published_schema() -> None:
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=31),
        MemoryBoardBus(),
        500,
        clock=lambda: BOUNDARY + 12.345,
    )

    board = refresher.build()

    check(PublishedBoardSchema(), board, "board")
    assert set(board) == {"seq", "ts", "source", "items", "newestInputMs"}
    assert board["ts"] == 1_800_000_012_345
    # The simulated source has no feeds: its newest input is the build itself.
    assert board["newestInputMs"] == board["ts"]
    assert board["seq"] >= board["ts"]
    assert board["source"] == "simulated"
    [row] = board["items"]
    check_row_invariants(row, BOUNDARY + 12.345)
    assert row["ts"] == board["ts"]
    assert not {"dataAgeMs", "isStale", "latencyLevel"} & set(row)
    json.dumps(board, allow_nan=False)  # strictly JSON


def test_seq_increases_even_when_the_clock_does_not() -> None:
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=37),
        MemoryBoardBus(),
        500,
        clock=lambda: BOUNDARY + 5.0,
    )

    seqs = [refresher.build()["seq"] for _ in range(5)]

    assert seqs == list(range(seqs[0], seqs[0] + 5))
    assert seqs[0] == (BOUNDARY + 5) * 1000


def test_tick_publishes_a_board_that_latest_serves(app: Flask, client: FlaskClient) -> None:
    bus: BoardBus = services_of(app).bus
    times = iter([BOUNDARY + 1.0, BOUNDARY + 2.0])
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=7), bus, 500, clock=lambda: next(times)
    )

    assert refresher.tick() is True
    assert refresher.tick() is True

    snapshot = bus.latest()
    assert snapshot is not None and snapshot.ts_ms == (BOUNDARY + 2) * 1000
    assert refresher.published == 2
    body = validated("board", client.get("/api/probboard/latest").data)
    [item] = body["items"]
    assert item["slot"] == BOUNDARY
    assert item["rem_secs"] == 298
    assert body["updatedAt"] == "2027-01-15 08:00:02.000"


class _BrokenSource:
    """A simulated row with ``changes`` (none: the source raises)."""

    name = "broken"

    def __init__(self, **replaced: Any) -> None:
        self.replaced = replaced  # (not ``changes``: a source's change signal has that name)

    def winners(self) -> dict[str, bool]:
        return {}

    def rows(self, now: float) -> list[BoardRow]:
        if not self.replaced:
            raise RuntimeError("feed down")
        [row] = SimulatedSource(parse_symbols("BTC"), seed=1).rows(now)
        return [dataclasses.replace(row, **self.replaced)]


@pytest.mark.parametrize(
    "source",
    [
        _BrokenSource(),
        _BrokenSource(p_up_pct=70.0, p_down_pct=70.0),
        _BrokenSource(up_bid=float("nan")),
    ],
    ids=["raises", "bad probabilities", "nan price"],
)
def test_a_bad_tick_publishes_nothing_and_does_not_raise(app: Flask, source: _BrokenSource) -> None:
    bus: BoardBus = services_of(app).bus
    refresher = Refresher(source, bus, 500, clock=lambda: BOUNDARY + 1.0)

    assert refresher.tick() is False
    assert refresher.published == 0
    assert bus.latest() is None


def test_build_refuses_an_invalid_board() -> None:
    source = _BrokenSource(symbol="DOGE")  # no market of ours
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: BOUNDARY + 1.0)

    with pytest.raises(ContractError):
        refresher.build()


def check_once_output(stdout: str) -> None:
    board = json.loads(stdout)
    check(PublishedBoardSchema(), board, "board")
    [row] = board["items"]
    assert row["ts"] == board["ts"]
    assert row["p_up_pct"] + row["p_down_pct"] == 100
    assert row["slot"] == row["windowStart"]
    assert len(row["up_token_id"]) == len(row["down_token_id"]) == 77


def test_refresher_once_prints_a_valid_board(runner: FlaskCliRunner) -> None:
    # The conftest's CLI runner invokes ``app.cli`` directly (no FlaskGroup), so the
    # command has to push its own app context (``with_appcontext``) to work here.
    result = runner.invoke(args=["refresher", "--once"])

    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0, result.output
    check_once_output(result.stdout)


def test_symbols_give_one_row_each_in_order_with_their_own_walks() -> None:
    source = SimulatedSource(seed=3, markets=parse_symbols("BTC,ETH,SOL,XRP"))
    rows = [row.as_json() for row in source.rows(BOUNDARY + 30)]

    assert [row["symbol"] for row in rows] == ["BTC", "ETH", "SOL", "XRP"]
    for row in rows:
        check_row_invariants(row, BOUNDARY + 30)
    assert len({row["up_token_id"] for row in rows}) == 4  # each market its own tokens
    prices = [row["price"] for row in rows]
    assert prices[0] > 10_000 > prices[1] > 1_000 > prices[2] > 10 > prices[3] > 0
    # The default market's walk is what it was with no SYMBOLS at all.
    assert rows[0] == one_row(SimulatedSource(parse_symbols("BTC"), seed=3), BOUNDARY + 30)
