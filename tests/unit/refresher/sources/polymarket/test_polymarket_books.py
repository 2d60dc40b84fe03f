"""``Books``: the upstream's own top of book wins over a level book rebuilt locally."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.refresher.sources.polymarket.book import Books, top_side


def _levels(*prices: str) -> list[dict[str, str]]:
    return [{"price": p, "size": "10"} for p in prices]


def _books() -> Books:
    books = Books()
    books.snapshot("7", _levels("0.50", "0.52"), _levels("0.57", "0.55"), "clob-ws")
    return books


def _top(books: Books, asset: str = "7") -> tuple[float | None, float | None]:
    quote = books.quote(asset)
    assert quote is not None
    return quote.bid, quote.ask


def test_a_lost_price_change_is_repaired_by_the_next_entrys_best_levels() -> None:
    books = _books()
    # Lost: the bid at 0.53 that the upstream applied never reached us.
    # The next entry changes another level and carries the upstream's top.
    books.change("7", "SELL", "0.57", "0", "clob-ws", ("0.53", "0.55"))
    assert _top(books) == (0.53, 0.55)
    assert books.wanted_snapshots() == {"7"}  # the level book disagrees: re-read it


def test_a_lost_price_change_is_repaired_by_best_bid_ask() -> None:
    books = _books()
    books.top("7", "0.54", "0.56", "clob-ws")
    assert _top(books) == (0.54, 0.56)
    assert books.wanted_snapshots() == {"7"}
    # The REST snapshot that follows agrees: nothing more is wanted.
    books.snapshot("7", _levels("0.54"), _levels("0.56"), "clob-rest", time.monotonic())
    assert books.wanted_snapshots() == set()
    quote = books.quote("7")
    assert quote is not None and quote.via == "clob-ws"  # it confirmed the socket's numbers


def test_an_agreeing_top_wants_nothing() -> None:
    books = _books()
    books.change("7", "BUY", "0.51", "3", "clob-ws", ("0.52", "0.55"))
    assert _top(books) == (0.52, 0.55)
    assert books.wanted_snapshots() == set()


@pytest.mark.parametrize(
    ("bid", "ask", "expected"),
    [
        ("0", "0.55", (None, 0.55)),
        ("0.52", "1", (0.52, None)),
        ("0", "1", (None, None)),
        (None, "0.55", (None, 0.55)),
        ("0.52", None, (0.52, None)),
    ],
)
def test_zero_one_or_absent_means_an_empty_side(bid: Any, ask: Any, expected: Any) -> None:
    books = _books()
    books.top("7", bid, ask, "clob-ws")
    assert _top(books) == expected


@pytest.mark.parametrize(("bid", "ask"), [("abc", "0.55"), ("0.52", "NaN"), ("1.5", "0.55")])
def test_a_garbage_top_changes_nothing(bid: Any, ask: Any) -> None:
    books = _books()
    books.top("7", bid, ask, "clob-ws")
    assert _top(books) == (0.52, 0.55)


def test_top_side_parsing() -> None:
    assert top_side("0", 0.0) == (True, None)
    assert top_side("1", 1.0) == (True, None)
    assert top_side("0.013", 0.0) == (True, 0.013)
    assert top_side("x", 0.0) == (False, None)


def test_a_crossed_book_is_flagged_and_a_snapshot_wanted() -> None:
    books = _books()
    # One lost update, then a level change the local book applies: bid 0.56 over ask 0.55.
    books.change("7", "BUY", "0.56", "5", "clob-ws")
    quote = books.quote("7")
    assert quote is not None and quote.crossed
    assert books.wanted_snapshots() == {"7"}
    # The upstream's top (carried by the next entry) is not crossed: it wins.
    books.change("7", "BUY", "0.56", "0", "clob-ws", ("0.52", "0.55"))
    quote = books.quote("7")
    assert quote is not None and not quote.crossed and (quote.bid, quote.ask) == (0.52, 0.55)


def test_a_crossed_upstream_top_is_flagged_too() -> None:
    books = _books()
    books.top("7", "0.31", "0.25", "clob-ws")
    quote = books.quote("7")
    assert quote is not None and quote.crossed
    assert books.wanted_snapshots() == {"7"}


def test_a_rest_snapshot_older_than_the_sockets_top_does_not_replace_the_quote() -> None:
    books = _books()
    asked = time.monotonic()
    time.sleep(0.01)
    books.top("7", "0.53", "0.55", "clob-ws")  # told after the REST request went out
    books.snapshot("7", _levels("0.50"), _levels("0.60"), "clob-rest", asked)
    assert _top(books) == (0.53, 0.55)
    assert books.wanted_snapshots() == {"7"}  # and the level book is still in doubt


def test_a_rest_snapshot_replaces_a_wrong_level_book() -> None:
    books = _books()
    books.change("7", "BUY", "0.54", "5", "clob-ws")  # a level the upstream never had
    assert _top(books) == (0.54, 0.55)
    books.snapshot("7", _levels("0.50", "0.52"), _levels("0.55"), "clob-rest", time.monotonic())
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask, quote.via) == (0.52, 0.55, "clob-rest")


def test_a_top_before_any_snapshot_is_published_and_a_snapshot_wanted() -> None:
    books = Books()
    books.top("9", "0.40", "0.42", "clob-ws")
    assert _top(books, "9") == (0.40, 0.42)
    assert books.wanted_snapshots() == {"9"}


def test_forget_keeps_the_watched_tokens() -> None:
    books = _books()
    books.snapshot("8", _levels("0.1"), _levels("0.2"), "clob-ws")
    books.top("9", "0.40", "0.42", "clob-ws")
    books.forget({"7", "9"})
    assert books.quote("8") is None
    assert books.quote("7") is not None and books.quote("9") is not None
    assert books.wanted_snapshots() == {"9"}
