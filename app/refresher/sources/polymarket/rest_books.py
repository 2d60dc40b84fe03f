"""The books over REST: the socket's level books confirmed, repaired and cross-checked.

The socket keeps each token's book (``book.py``); REST replaces it with a snapshot when a
quote is missing or unconfirmed for ``BOOK_FRESH_S``, when the socket's top disagrees with the
level book (or it is crossed), and every ``CROSS_CHECK_S`` anyway; never more than once every
``REST_MIN_INTERVAL_S``. Each snapshot's ``market`` is a witness of which market the token
belongs to (``identity.py``). Called from the source's upkeep thread, never in ``rows``.
"""

from __future__ import annotations

import logging

import httpx

from app.metrics.refresher import UPSTREAM_ERRORS
from app.refresher import clocks
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.clob import REST, fetch_books
from app.refresher.sources.polymarket.gamma import UpstreamError
from app.refresher.sources.polymarket.identity import Identities

log = logging.getLogger(__name__)

BOOK_FRESH_S = 2.0  # a quote not confirmed for this long is re-read over REST
REST_MIN_INTERVAL_S = 1.0  # /books: 500 requests per 10 s allowed; we stay far below
CROSS_CHECK_S = 30.0  # the level books are replaced from REST this often anyway


class RestBooks:
    """Reads the books of the watched tokens over REST when due."""

    def __init__(
        self, http: httpx.Client, clob_url: str, books: Books, identity: Identities
    ) -> None:
        self._http = http
        self._clob_url = clob_url
        self._books = books
        self._identity = identity
        self._rest_at = 0.0
        self._checked_at = 0.0

    def refresh(self, assets: list[str]) -> None:
        """Re-read books over REST when a quote is missing or unconfirmed for a while, when
        the level book disagrees with the upstream's top (or is crossed), and every
        ``CROSS_CHECK_S``; the snapshot replaces the level book (at most once a second)."""
        now = clocks.monotonic()
        quotes = [self._books.quote(asset) for asset in assets]
        unconfirmed = any(q is None or now - q.at > BOOK_FRESH_S for q in quotes)
        disputed = bool(self._books.wanted_snapshots() & set(assets))
        cross_check = now - self._checked_at >= CROSS_CHECK_S
        if (
            not (unconfirmed or disputed or cross_check)
            or now - self._rest_at < REST_MIN_INTERVAL_S
        ):
            return
        self._rest_at = now
        try:
            books = fetch_books(self._http, self._clob_url, assets)
        except (httpx.HTTPError, UpstreamError) as exc:
            UPSTREAM_ERRORS.labels("clob_rest").inc()
            log.warning("clob /books failed: %s", exc)
            self._books.rest_reachable(False)  # the socket's top is the only word (book.py)
            return
        self._books.rest_reachable(True)
        if cross_check:
            self._checked_at = now
        for asset in assets:
            book = books.get(asset)
            if book is not None:
                self._identity.note_book(asset, book.get("market"))
                self._books.snapshot(asset, book.get("bids"), book.get("asks"), REST, now)
