"""Identities (issue 35, point 4): Gamma's market checked against the CLOB's own, and the
socket's top against the book (``identity.py``, ``Books.dispute``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.backtest.replay import TapeHttp
from app.refresher import clocks
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.gamma import UpstreamError, WindowMarket, parse_event
from app.refresher.sources.polymarket.identity import (
    RETRY_S,
    ClobMarket,
    Identities,
    contradiction,
    parse_clob_market,
    top_verdicts,
)
from app.refresher.sources.polymarket.source import PolymarketSource
from harness.fake_polymarket import FakeMarket, FakePolymarket, running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import BTC_ONLY, upstreams

T0 = 1_800_000_000 - 1_800_000_000 % 300


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    """The fakes, with this window and the next listed."""
    # Own fakes: tests switch Gamma's lies on and count CLOB lookups from zero.
    with running() as fakes:
        fakes.list_market(FakeMarket(T0))
        fakes.list_market(FakeMarket(T0 + 300))
        yield fakes


def _gamma(world: FakePolymarket, t0: int = T0) -> WindowMarket:
    """What Gamma's answer about window ``t0`` parses to (faults as switched on)."""
    answer = httpx.get(f"{world.gamma.url}/events/slug/btc-updown-5m-{t0}", timeout=5)
    return parse_event(answer.json(), t0, BTC_ONLY[0], FIVE_MINUTES)


def _clob(market: FakeMarket) -> ClobMarket:
    return parse_clob_market(market.clob_market())


# -- the CLOB's market ----------------------------------------------------------------------


def test_the_fakes_clob_market_parses_to_its_tokens_and_labels(world: FakePolymarket) -> None:
    market = world.market(T0)
    assert market is not None
    answer = httpx.get(f"{world.clob.url}/markets/{market.condition}", timeout=5)
    assert answer.status_code == 200
    parsed = parse_clob_market(answer.json())
    assert parsed.condition_id == market.condition
    assert parsed.slug == market.slug
    assert parsed.labels == {market.up_token: "up", market.down_token: "down"}
    assert httpx.get(f"{world.clob.url}/markets/0xdead", timeout=5).status_code == 404


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param([], id="not-an-object"),
        pytest.param({"tokens": []}, id="no-condition"),
        pytest.param({"condition_id": "0xab", "tokens": "[]"}, id="tokens-not-a-list"),
        pytest.param({"condition_id": "0xab", "tokens": [7]}, id="token-not-an-object"),
        pytest.param({"condition_id": "0xab", "tokens": [{"token_id": "1"}]}, id="no-outcome"),
        pytest.param(
            {"condition_id": "0xab", "tokens": [{"token_id": 1, "outcome": "Up"}]},
            id="token-id-a-number",
        ),
    ],
)
def test_a_clob_market_that_is_not_one_is_an_upstream_error(payload: Any) -> None:
    with pytest.raises(UpstreamError):
        parse_clob_market(payload)


def test_gamma_agreeing_with_the_clob_is_no_contradiction(world: FakePolymarket) -> None:
    market = world.market(T0)
    assert market is not None
    assert contradiction(_gamma(world), _clob(market)) is None


def test_the_next_windows_tokens_under_this_condition_are_a_contradiction(
    world: FakePolymarket,
) -> None:
    world.gamma.tokens_offset = 1
    market = world.market(T0)
    assert market is not None
    found = contradiction(_gamma(world), _clob(market))
    assert found is not None and "does not list it" in found


def test_the_next_windows_condition_is_another_slug_on_the_clob(world: FakePolymarket) -> None:
    world.gamma.tokens_offset = world.gamma.condition_offset = 1
    gamma, upcoming = _gamma(world), world.market(T0 + 300)
    assert upcoming is not None and gamma.condition_id == upcoming.condition
    found = contradiction(gamma, _clob(upcoming))
    assert found is not None and f"btc-updown-5m-{T0 + 300}" in found


def test_reversed_outcomes_are_labels_the_clob_contradicts(world: FakePolymarket) -> None:
    world.gamma.swapped_outcomes = True
    market = world.market(T0)
    assert market is not None
    gamma = _gamma(world)
    assert gamma.up_token_id == market.down_token  # Gamma's answer, believed alone, swaps them
    found = contradiction(gamma, _clob(market))
    assert found is not None and "labels it 'down'" in found


def test_another_condition_answered_is_a_contradiction(world: FakePolymarket) -> None:
    market, other = world.market(T0), world.market(T0 + 300)
    assert market is not None and other is not None
    found = contradiction(_gamma(world), _clob(other))
    assert found is not None and "answered market" in found


# -- the verdicts -------------------------------------------------------------------------


def test_confirmed_by_the_clob_the_market_is_believed(world: FakePolymarket) -> None:
    identities = Identities(httpx.Client(timeout=5), world.clob.url)
    gamma = _gamma(world)
    verdict = identities.verdict(gamma)
    assert verdict is not None and not verdict.disagrees  # not asked yet: stale, not counted
    identities.upkeep(gamma)
    assert identities.verdict(gamma) is None
    identities.upkeep(gamma)
    assert len(world.clob.requests_to("/markets/")) == 1  # cached for the window


def test_a_failed_lookup_fails_closed_and_is_asked_again(world: FakePolymarket) -> None:
    """The lookup answers 500: the row is stale, not counted, even with both books naming
    Gamma's condition (they do for Gamma's lie too: the next window's tokens and condition);
    it is asked again ``RETRY_S`` later, and confirms then (issue 48, point 5)."""
    world.clob.market_lookups_fail = True
    now = [1000.0]
    with clocks.use(lambda: now[0]):
        identities = Identities(httpx.Client(timeout=5), world.clob.url)
        gamma = _gamma(world)
        assert gamma.condition_id is not None
        identities.upkeep(gamma)
        identities.note_book(gamma.up_token_id, gamma.condition_id)
        identities.note_book(gamma.down_token_id, gamma.condition_id.upper())
        verdict = identities.verdict(gamma)
        assert verdict is not None and not verdict.disagrees, verdict
        assert "failed" in verdict.reason and "not confirmed" in verdict.reason, verdict
        world.clob.market_lookups_fail = False
        now[0] += RETRY_S - 0.01
        identities.upkeep(gamma)  # not due yet
        assert len(world.clob.requests_to("/markets/")) == 1
        assert identities.verdict(gamma) is not None
        now[0] += 0.01
        identities.upkeep(gamma)
        assert len(world.clob.requests_to("/markets/")) == 2
        assert identities.verdict(gamma) is None


def test_a_timed_out_lookup_fails_closed_and_a_confirmed_identity_is_kept(
    world: FakePolymarket,
) -> None:
    """The CLOB's market endpoint stops answering (the client times out): this window's
    market, confirmed before, stays confirmed and is not asked again; the next window's,
    never confirmed, is stale with the timeout as its reason (issue 48, point 5)."""
    now = [1000.0]
    with clocks.use(lambda: now[0]):
        identities = Identities(httpx.Client(timeout=0.2), world.clob.url)
        this, upcoming = _gamma(world), _gamma(world, T0 + 300)
        identities.upkeep(this)
        assert identities.verdict(this) is None
        world.clob.hang_prefix = "/markets/"
        identities.upkeep(upcoming)
        verdict = identities.verdict(upcoming)
        assert verdict is not None and not verdict.disagrees, verdict
        assert "timed out" in verdict.reason and "not confirmed" in verdict.reason, verdict
        now[0] += 10 * RETRY_S
        identities.upkeep(this)
        assert identities.verdict(this) is None
        asked = [hit.path for hit in world.clob.requests_to("/markets/")]
        assert asked == [f"/markets/{this.condition_id}", f"/markets/{upcoming.condition_id}"]


def test_no_such_market_on_the_clob_is_a_disagreement_whatever_the_books_say(
    world: FakePolymarket,
) -> None:
    """A 404 from the CLOB's market lookup is its answer ("no such market"), not a failed
    lookup: the row is stale and counted, Gamma is asked again, and books naming Gamma's
    condition do not make up for it (issue 48, point 5)."""
    unknown = "0x" + "2" * 64  # Gamma names a condition the CLOB has never heard of
    gamma = dataclasses.replace(_gamma(world), condition_id=unknown)
    identities = Identities(httpx.Client(timeout=5), world.clob.url)
    identities.upkeep(gamma)
    identities.note_book(gamma.up_token_id, unknown)
    identities.note_book(gamma.down_token_id, unknown)

    verdict = identities.verdict(gamma)
    assert verdict is not None and verdict.disagrees, verdict
    assert "no market" in verdict.reason and unknown[:10] in verdict.reason, verdict.reason
    assert identities.contradicted(gamma)
    assert [hit.path for hit in world.clob.requests_to("/markets/")] == [f"/markets/{unknown}"]


def test_a_book_in_another_market_contradicts_gamma(world: FakePolymarket) -> None:
    identities = Identities(httpx.Client(timeout=5), world.clob.url)
    gamma = _gamma(world)
    identities.upkeep(gamma)
    identities.note_book(gamma.down_token_id, "0x" + "1" * 64)
    verdict = identities.verdict(gamma)
    assert verdict is not None and verdict.disagrees and "DOWN book" in verdict.reason
    assert identities.contradicted(gamma)


def test_a_contradiction_is_asked_again_and_forgotten_with_its_window(
    world: FakePolymarket,
) -> None:
    world.gamma.swapped_outcomes = True
    identities = Identities(httpx.Client(timeout=5), world.clob.url)
    gamma = _gamma(world)
    now = [100.0]
    with clocks.use(lambda: now[0]):
        identities.upkeep(gamma)
        assert identities.contradicted(gamma)
        now[0] += 2.5
        identities.upkeep(gamma)
    assert len(world.clob.requests_to("/markets/")) == 2
    identities.forget_before(T0 + 1)
    verdict = identities.verdict(gamma)
    assert verdict is not None and "not checked yet" in verdict.reason


# -- the socket's top against the book -------------------------------------------------------


def _levels(*prices: str) -> list[dict[str, str]]:
    return [{"price": p, "size": "10"} for p in prices]


def test_a_top_the_rest_book_contradicts_is_a_disagreement() -> None:
    now = [10.0]
    with clocks.use(lambda: now[0]):
        books = Books()
        books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-rest", 9.0)
        assert books.dispute("7") is None
        books.top("7", "0.30", "0.32", "clob-ws")  # another window's top
        dispute = books.dispute("7")
        assert dispute is not None and not dispute.contradicted
        assert (dispute.top, dispute.book) == ((0.30, 0.32), (0.53, 0.55))
        now[0] = 11.1  # REST asked at 11.0, after the disagreement began; the socket repeats
        books.top("7", "0.30", "0.32", "clob-ws")
        now[0] = 11.2
        books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-rest", 11.0)
        dispute = books.dispute("7")
        assert dispute is not None and dispute.contradicted
        now[0] = 11.3
        books.top("7", "0.53", "0.55", "clob-ws")  # the socket true again
        assert books.dispute("7") is None


def test_a_lost_price_change_is_unconfirmed_until_rest_repairs_the_book() -> None:
    books = Books()
    books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-ws")
    books.top("7", "0.52", "0.55", "clob-ws")  # the bid at 0.53 went; its message was lost
    dispute = books.dispute("7")
    assert dispute is not None and not dispute.contradicted
    asked = clocks.monotonic()
    books.snapshot("7", _levels("0.52"), _levels("0.55"), "clob-rest", asked)
    assert books.dispute("7") is None


def test_top_verdicts_name_the_outcome_and_count_only_contradictions(
    world: FakePolymarket,
) -> None:
    gamma = _gamma(world)
    books = Books()
    for token in (gamma.up_token_id, gamma.down_token_id):
        books.snapshot(token, _levels("0.53"), _levels("0.55"), "clob-ws")
    assert top_verdicts(books, gamma) == {}
    books.top(gamma.up_token_id, "0.30", "0.32", "clob-ws")
    found = top_verdicts(books, gamma)
    assert list(found) == ["UP top"]
    assert not found["UP top"].disagrees and found["UP top"].feed == "clob"
    assert "0.3/0.32" in found["UP top"].reason and "0.53/0.55" in found["UP top"].reason


def test_with_rest_failing_the_sockets_top_is_believed_alone() -> None:
    """No REST book can confirm or contradict the top: it is the only word there is (a
    replay's tape, or REST down), as before."""
    books = Books()
    books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-ws")
    books.top("7", "0.52", "0.55", "clob-ws")
    assert books.dispute("7") is not None
    books.rest_reachable(False)
    assert books.dispute("7") is None
    books.rest_reachable(True)
    assert books.dispute("7") is not None


def test_a_rest_book_answered_before_the_next_lying_top_still_contradicts_it() -> None:
    """REST answers between two tops: its newer book is shown, and the next top that says
    the same as before is a disagreement at once."""
    now = [10.0]
    with clocks.use(lambda: now[0]):
        books = Books()
        books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-rest", 9.0)
        books.top("7", "0.30", "0.32", "clob-ws")
        now[0] = 10.5
        books.snapshot("7", _levels("0.53"), _levels("0.55"), "clob-rest", 10.5)
        assert books.dispute("7") is None  # the REST book is what the board shows now
        quote = books.quote("7")
        assert quote is not None and (quote.bid, quote.ask) == (0.53, 0.55)
        now[0] = 10.6
        books.top("7", "0.30", "0.32", "clob-ws")
        dispute = books.dispute("7")
        assert dispute is not None and dispute.contradicted


# -- in the source --------------------------------------------------------------------------


def _threadless(world: FakePolymarket, now: float) -> PolymarketSource:
    """A live source on the fakes without its threads: ``upkeep`` is called by the test."""
    return PolymarketSource(upstreams(world), BTC_ONLY, clock=lambda: now, background=False)


def test_the_clobs_market_is_asked_in_upkeep_never_while_rows_are_built(
    world: FakePolymarket,
) -> None:
    """50 s before the roll: one upkeep asks the CLOB about this window's market and the
    next one's (the prefetch); rows ask nothing, and a confirmed market is not asked again."""
    now = T0 + 250.0
    source = _threadless(world, now)
    try:
        source.rows(now)
        assert world.clob.requests_to("/markets/") == []
        source.upkeep(now)
        this, upcoming = world.market(T0), world.market(T0 + 300)
        assert this is not None and upcoming is not None
        asked = [hit.path for hit in world.clob.requests_to("/markets/")]
        assert asked == [f"/markets/{this.condition}", f"/markets/{upcoming.condition}"]
        for _ in range(5):
            row = source.rows(now)[0]
            assert row.live is not None and not any("market" in r for r in row.live.suspect)
        source.upkeep(now + 0.5)
        assert len(world.clob.requests_to("/markets/")) == 2
    finally:
        source.close()


def test_a_contradicted_market_is_replaced_by_gammas_next_answer(world: FakePolymarket) -> None:
    """Gamma's first answer has its outcomes reversed: the row says why; once Gamma answers
    right, the next lookup (2 s later) takes the new answer and the CLOB confirms it."""
    world.gamma.swapped_outcomes = True
    now, mono = T0 + 30.0, [1000.0]
    this = world.market(T0)
    assert this is not None
    with clocks.use(lambda: mono[0]):
        source = _threadless(world, now)
        try:
            source.upkeep(now)
            row = source.rows(now)[0]
            assert row.up_token_id == this.down_token  # Gamma's word, shown stale
            assert row.live is not None and any("labels it" in r for r in row.live.suspect)
            world.gamma.swapped_outcomes = False
            mono[0] += 2.5
            source.upkeep(now)
            row = source.rows(now)[0]
            assert (row.up_token_id, row.down_token_id) == this.tokens
            assert row.live is not None and not any("labels" in r for r in row.live.suspect)
        finally:
            source.close()


def test_gamma_asked_again_with_another_condition_keeps_the_checked_market(
    world: FakePolymarket,
) -> None:
    """Gamma, asked again for the window (a price to beat it lacked), names the same tokens
    under another condition: the market the CLOB confirmed is kept, not the new answer,
    which no one checked (issue 48, point 5)."""
    now = T0 + 30.0
    this = world.market(T0)
    assert this is not None
    source = _threadless(world, now)
    try:
        source.upkeep(now)
        window = source.windows.get(BTC_ONLY[0], T0, FIVE_MINUTES)
        assert window.market is not None and window.market.condition_id == this.condition
        world.gamma.condition_offset = 1
        window.looked_up_at = -math.inf
        source.windows.lookup(BTC_ONLY[0], T0, FIVE_MINUTES, again=True)
        assert window.market.condition_id == this.condition
        row = source.rows(now)[0]
        assert row.live is not None and not any("market" in r for r in row.live.suspect)
    finally:
        source.close()


def test_a_replayed_tape_without_the_lookup_lets_the_books_decide() -> None:
    """A replay asks the tape (``TapeHttp``): a lookup it never recorded (a tape from before
    the lookup existed, or written by hand) cannot be asked again, so both books naming
    Gamma's condition confirm it, as they did live then; a lookup the tape recorded as
    failed fails closed, as it did live (issue 48, point 5)."""
    gamma = WindowMarket(
        T0, f"btc-updown-5m-{T0}", "111", "222", "spot", None, "0x" + "a" * 64, None, FIVE_MINUTES
    )
    tape = TapeHttp()
    identities = Identities(httpx.Client(transport=tape), "http://clob.tape")
    identities.upkeep(gamma)
    assert gamma.condition_id is not None
    identities.note_book("111", gamma.condition_id)
    identities.note_book("222", gamma.condition_id)
    assert identities.verdict(gamma) is None

    recorded = dataclasses.replace(gamma, condition_id="0x" + "b" * 64)
    assert recorded.condition_id is not None
    url = f"http://clob.tape/markets/{recorded.condition_id}"
    tape.record({"method": "GET", "url": url, "status": 0})  # recorded: it failed
    identities.upkeep(recorded)
    identities.note_book("111", recorded.condition_id)
    identities.note_book("222", recorded.condition_id)
    verdict = identities.verdict(recorded)
    assert verdict is not None and "not confirmed" in verdict.reason, verdict
