"""Identities: no single upstream is believed alone about WHICH market a number belongs to
(issue 35, point 4).

Each test plays one row of the issue's table on the fakes (``harness/fake_polymarket/``)
against a live ``PolymarketSource``, on the real clock, sampled four times a second: every
sample is STALE or RIGHT, never fresh and wrong, and within 5 s after the upstream turns
honest the row is fresh and right again (``tests/support/upstream_faults.py`` says what stale
and right mean). Gamma's faults are on from the source's first lookup; the socket's start
from a fresh and right row.

The witnesses (docs/reliability.md): Gamma's condition id and token labels are checked
against the CLOB's own market (``GET /markets/{condition_id}``) and the books' ``market``;
a socket top that contradicts the book is not believed until one of them is confirmed.
"""

from __future__ import annotations

import time

import pytest
from prometheus_client import REGISTRY

from tests.support.upstream_faults import RECOVERY_S, Stage, budget, staged

FAULT_S = 3.0  # how long a socket fault lasts once the row was right
FIRST_LOOKUP_FAULT_S = 4.0  # from the source's start: its lookups, the history, the books
# A lookup hung as the fault ends: the client's 3 s timeout, RETRY_S, then the next answers.
RECOVERY_WITH_A_HUNG_LOOKUP_S = 8.0


def _deep_level_changes(stage: Stage) -> None:
    """A ``price_change`` of a level below UP's best bid (the true top does not move): its
    entry carries the top the socket tells."""
    up = stage.world.market(stage.t0)
    assert up is not None
    size = str(10 + int(time.monotonic() * 4) % 50)
    stage.world.set_level(up.up_token, "BUY", "0.40", size)


def test_the_next_windows_top_told_under_this_windows_tokens() -> None:
    """Every ``best_bid_ask`` and every ``price_change`` entry tells the NEXT window's top
    (UP 0.30/0.32, DOWN 0.68/0.70) under this window's token ids and market, for 3 s; the
    REST books say this window's (UP 0.53/0.55, DOWN 0.45/0.47).

    The issue saw the socket's top win over a REST book that disagreed: books 50/51 beside a
    P of 0.3 %, fresh."""
    with staged(budget(FAULT_S)) as stage:
        stage.warm_up()
        stage.world.clob_ws.top_offset = 1
        stage.hold(
            FAULT_S,
            "while the socket tells the next window's top",
            during=lambda: _deep_level_changes(stage),
        )
        stage.world.clob_ws.top_offset = 0
        stage.recovers("the socket's top true again")


def _disagreements(feed: str) -> float:
    """``probboard_upstream_suspect_total{feed, kind="disagrees"}`` in this process."""
    found = REGISTRY.get_sample_value(
        "probboard_upstream_suspect_total", {"feed": feed, "kind": "disagrees"}
    )
    return 0.0 if found is None else found


def test_a_socket_top_contradicted_by_rest_is_named_in_the_row_and_counted() -> None:
    """The same fault held long enough for REST to answer (it is asked again every second
    while the top and the book disagree): the row is stale and says why (its ``suspect``
    names the REST book), the disagreement is counted, and the row says nothing once the
    top is true again."""
    with staged(budget(FAULT_S)) as stage:
        stage.warm_up()
        before = _disagreements("clob")
        stage.world.clob_ws.top_offset = 1
        samples = stage.hold(FAULT_S, "while the socket tells the next window's top")
        reasons = [r for s in samples for r in s.row.get("suspect") or []]
        assert any("UP" in r and "contradicts the REST book" in r for r in reasons), reasons[:3]
        assert _disagreements("clob") >= before + 1
        stage.world.clob_ws.top_offset = 0
        row = stage.recovers("the socket's top true again").row
        assert not row.get("suspect"), row.get("suspect")


@pytest.mark.parametrize(
    ("condition", "lookups"),
    [("this", "answered"), ("next", "answered"), ("next", "404"), ("next", "timeout")],
    ids=[
        "next-tokens",
        "next-tokens-and-condition",
        "next-tokens-and-condition-clob-404",
        "next-tokens-and-condition-clob-timeout",
    ],
)
def test_gamma_names_the_next_windows_tokens(condition: str, lookups: str) -> None:
    """Gamma answers this window's event (slug and times right) with the NEXT window's
    ``clobTokenIds``, and this window's or the next window's ``conditionId``, from the first
    lookup; the next window's books are on the CLOB (UP 0.30/0.32). In the last two cases
    the CLOB's market lookup answers 404, or never answers (the client times out), for every
    condition throughout.

    The issue saw it believed for the whole window: the conditionId was never compared with
    the CLOB's ``market``; and (issue 48) with the lookup answering 404, or timing out, both
    books naming Gamma's condition let the next window's numbers through: a failed lookup
    left the books to decide."""
    with staged(budget(FIRST_LOOKUP_FAULT_S, RECOVERY_WITH_A_HUNG_LOOKUP_S - RECOVERY_S)) as stage:
        stage.world.clob.market_lookups_missing = lookups == "404"
        stage.world.clob.hang_prefix = "/markets/" if lookups == "timeout" else None
        gamma = stage.world.gamma
        gamma.tokens_offset = 1
        gamma.condition_offset = 1 if condition == "next" else 0
        stage.hold(
            FIRST_LOOKUP_FAULT_S, f"while Gamma names the next window's tokens ({condition})"
        )
        gamma.tokens_offset = gamma.condition_offset = 0
        stage.world.clob.market_lookups_missing = False
        stage.world.clob.hang_prefix = None
        # A lookup hung when the fault ended holds the next one for the client's 3 s timeout.
        within = RECOVERY_WITH_A_HUNG_LOOKUP_S if lookups == "timeout" else RECOVERY_S
        stage.recovers("Gamma naming this window's tokens", within)


def test_gamma_outcomes_reversed_beside_the_token_ids() -> None:
    """Gamma's ``clobTokenIds`` are ``[UP, DOWN]`` with ``outcomes`` ``["Down", "Up"]``, from
    the first lookup.

    The issue saw UP and DOWN swapped on the board, fresh, for the window."""
    with staged(budget(FIRST_LOOKUP_FAULT_S)) as stage:
        stage.world.gamma.swapped_outcomes = True
        before = _disagreements("market")
        samples = stage.hold(FIRST_LOOKUP_FAULT_S, "while Gamma's outcomes are reversed")
        reasons = [r for s in samples for r in s.row.get("suspect") or []]
        assert any("labels it 'down'" in r for r in reasons), reasons[:3]
        assert _disagreements("market") >= before + 1
        stage.world.gamma.swapped_outcomes = False
        stage.recovers("Gamma's outcomes true again")


def test_the_clobs_market_lookup_failing_fails_closed() -> None:
    """``GET /markets/{condition_id}`` answers 500 from the start; Gamma and the books'
    ``market`` agree: the row is stale, saying the lookup failed, and not counted as a
    disagreement (the books alone would believe Gamma's lie too: the test above); the lookup
    is retried, and once it answers the row is fresh and right (issue 48, point 5)."""
    with staged(budget(FIRST_LOOKUP_FAULT_S)) as stage:
        clob = stage.world.clob
        clob.market_lookups_fail = True
        before = _disagreements("market")
        samples = stage.hold(FIRST_LOOKUP_FAULT_S, "while the CLOB's market lookups fail")
        assert not any(s.fresh for s in samples), "fresh on an unconfirmed market"
        reasons = [r for s in samples for r in s.row.get("suspect") or []]
        assert any("lookup failed" in r and "not confirmed" in r for r in reasons), reasons[:3]
        assert _disagreements("market") == before
        lookups = len(clob.requests_to("/markets/"))
        assert lookups >= 2, f"the CLOB's market was asked {lookups} times"
        clob.market_lookups_fail = False
        stage.recovers("once the CLOB's market answers")
