"""Which market a number belongs to: Gamma's word, checked against the CLOB's own.

Gamma names a window's market: its condition id, and which token is UP and which DOWN. No
single upstream is believed alone about that (issue 35), so Gamma's answer has two witnesses
on the CLOB:

- the CLOB's own market, ``GET {clob}/markets/{condition_id}``: the same condition, the same
  two tokens, each with Gamma's outcome label, and Gamma's slug (``market_slug``, when given);
- the books' ``market`` (REST books, and the socket's messages about a token: ``book``,
  ``price_change``, ``best_bid_ask``): the condition id each token's book belongs to.

What the row does with them (docs/reliability.md):

- a witness contradicts Gamma: the row is stale, the reason in its ``suspect``, counted as
  ``disagrees``; the source asks Gamma again (``contradicted``) and takes a new answer;
- the CLOB's market not answered yet (asked from the upkeep thread, during the prefetch a
  minute before the window, so normally long before the row needs it): stale, not counted;
- the CLOB answers 404 for Gamma's condition: an answer ("no such market", upstream.md), so a
  contradiction like any other, whatever the books say;
- the lookup failed (an error, a timeout, an unreadable answer): the row fails closed,
  stale with the reason and not counted, and the lookup is asked again every ``RETRY_S``.
  The books' ``market`` alone never confirms Gamma: Gamma's right slug with the next
  window's tokens and condition has books that name that condition too (issue 48). A
  confirmed identity is kept for its window and never asked again, so a lookup failing
  later (or Gamma re-asked for a price to beat) cannot unconfirm it; the lookup is made a
  minute before the window, so a short outage of the endpoint costs no fresh row.
- a replayed tape that holds no lookup (recorded before the lookup existed, or written by
  hand): the books' ``market`` decides, as it did live then (a tape cannot be asked again).

The same module judges the socket's top of book against the book it came with
(``Books.dispute``): a top that contradicts the book is not believed (the row is stale)
until the two agree again; once a REST book read after the disagreement began still
contradicts it, that is a disagreement, counted.

The HTTP call is made only from ``upkeep`` (the source's discovery thread), never while a
row is built.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx

from app.metrics.refresher import UPSTREAM_ERRORS
from app.refresher import clocks
from app.refresher.sources.polymarket.book import Books, Dispute
from app.refresher.sources.polymarket.gamma import UpstreamError, WindowMarket, json_of

log = logging.getLogger(__name__)

RETRY_S = 2.0  # a lookup that failed or contradicted Gamma: asked again this often
BOOK_MARKETS_KEPT = 256  # the books' market of this many tokens (a few windows' worth)
PENDING, CONFIRMED, CONTRADICTED, FAILED = "pending", "confirmed", "contradicted", "failed"
UNRECORDED = "unrecorded"  # a replay whose tape holds no lookup (``UnrecordedError``)
IDENTITY = "identity"
TOP_KINDS = {"UP": "UP top", "DOWN": "DOWN top"}  # the doubts' kinds, by outcome


@dataclass(frozen=True)
class ClobMarket:
    """The CLOB's own market: its condition, slug (if given) and token id -> outcome label
    (lower case)."""

    condition_id: str
    slug: str | None
    labels: dict[str, str]


@dataclass(frozen=True)
class Verdict:
    """Why a row is not believed: ``disagrees`` when a witness contradicts an input (counted),
    else the input is only not confirmed yet."""

    reason: str
    disagrees: bool
    feed: str = "market"


@dataclass
class _Check:
    state: str = PENDING
    reason: str = ""
    asked_at: float | None = None  # monotonic s of the last lookup


def _short(condition: str | None) -> str:
    """A condition id as a reason shows it: ``0x1234abcd…``."""
    return f"{condition[:10]}…" if condition else "none"


def parse_clob_market(payload: Any) -> ClobMarket:
    """The market object of ``GET /markets/{condition_id}``; ``UpstreamError`` when it is not
    one (no condition, no tokens, a token without an id or a label)."""
    if not isinstance(payload, dict):
        raise UpstreamError("the CLOB's market is not an object")
    condition, tokens = payload.get("condition_id"), payload.get("tokens")
    if not isinstance(condition, str) or not isinstance(tokens, list):
        raise UpstreamError("the CLOB's market has no condition_id or tokens")
    labels = {}
    for token in tokens:
        if not isinstance(token, dict):
            raise UpstreamError("a token of the CLOB's market is not an object")
        token_id, outcome = token.get("token_id"), token.get("outcome")
        if not isinstance(token_id, str) or not isinstance(outcome, str):
            raise UpstreamError("a token of the CLOB's market has no token_id or outcome")
        labels[token_id] = outcome.strip().lower()
    slug = payload.get("market_slug")
    return ClobMarket(condition, slug if isinstance(slug, str) and slug else None, labels)


def contradiction(market: WindowMarket, clob: ClobMarket) -> str | None:
    """How the CLOB's own market contradicts Gamma's ``market``, or None when it agrees."""
    gamma = _short(market.condition_id)
    if clob.condition_id.lower() != (market.condition_id or "").lower():
        return f"the CLOB answered market {_short(clob.condition_id)} for Gamma's {gamma}"
    if clob.slug is not None and clob.slug != market.slug:
        return f"Gamma's market {gamma} is {clob.slug!r} on the CLOB, not {market.slug!r}"
    for label, token in (("up", market.up_token_id), ("down", market.down_token_id)):
        found = clob.labels.get(token)
        if found != label:
            said = f"labels it {found!r}" if found else "does not list it"
            return f"Gamma's {label.upper()} token {token[:10]}…: the CLOB {said}"
    return None


class UnrecordedError(httpx.ReadTimeout):
    """A replay's answer to a request its tape never recorded (``app.backtest.replay``):
    nothing to ask again, so no lookup failed."""


class NoClobMarketError(UpstreamError):
    """The CLOB answered 404 for a condition id: it knows no such market."""


def fetch_clob_market(http: httpx.Client, base_url: str, condition_id: str) -> ClobMarket:
    """``GET {clob}/markets/{condition_id}``; ``NoClobMarketError`` for a 404 (an answer: no
    such market), ``UpstreamError`` for any other answer but a market (a failed lookup)."""
    response = http.get(f"{base_url.rstrip('/')}/markets/{condition_id}")
    if response.status_code == 404:
        raise NoClobMarketError(f"the CLOB has no market {_short(condition_id)}")
    return parse_clob_market(json_of(response, "clob /markets"))


def identity_key(market: WindowMarket) -> tuple[str, ...]:
    """What the CLOB checks of a window's market: its window, slug, condition and tokens."""
    # Per window and per answer: token ids are new each window, and a new answer from Gamma
    # (other tokens, another condition) is checked afresh.
    return (
        str(market.window_start),
        market.slug,
        market.condition_id or "",
        market.up_token_id,
        market.down_token_id,
    )


class Identities:
    """The CLOB's word on each window's market (looked up in ``upkeep``) and the ``market``
    of each token's book (noted as books arrive); thread-safe."""

    def __init__(self, http: httpx.Client, clob_url: str) -> None:
        self._http = http
        self._clob_url = clob_url
        self._checks: dict[tuple[str, ...], _Check] = {}
        self._book_markets: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    # -- writers ----------------------------------------------------------------------
    def note_book(self, asset: str, market: Any) -> None:
        """The CLOB says ``asset``'s book is in ``market`` (a book's ``market`` field)."""
        if not isinstance(market, str) or not market:
            return
        market = market.lower()
        if self._book_markets.get(asset) == market:
            return  # the common case, ten times a second a token: no lock, no reordering
        with self._lock:
            self._book_markets[asset] = market
            self._book_markets.move_to_end(asset)
            while len(self._book_markets) > BOOK_MARKETS_KEPT:
                self._book_markets.popitem(last=False)

    def upkeep(self, market: WindowMarket) -> None:
        """Look up the CLOB's own market of ``market`` when due: once when first seen, again
        every ``RETRY_S`` while it failed or contradicted Gamma. Does HTTP: upkeep only."""
        key = identity_key(market)
        now = clocks.monotonic()
        with self._lock:
            check = self._checks.setdefault(key, _Check())
            due = check.state == PENDING or (
                check.state in (FAILED, CONTRADICTED, UNRECORDED)
                and (check.asked_at is None or now - check.asked_at >= RETRY_S)
            )
            if not due or market.condition_id is None:
                return
            check.asked_at = now
        state, reason = self._ask(market)
        with self._lock:
            check.state, check.reason = state, reason

    def _ask(self, market: WindowMarket) -> tuple[str, str]:
        """(state, reason) of one lookup of ``market``'s condition on the CLOB."""
        assert market.condition_id is not None
        try:
            clob = fetch_clob_market(self._http, self._clob_url, market.condition_id)
        except NoClobMarketError as exc:
            return CONTRADICTED, f"{exc}, the condition Gamma names"
        except UnrecordedError:
            return UNRECORDED, "the tape holds no CLOB market lookup"
        except (httpx.HTTPError, UpstreamError) as exc:
            UPSTREAM_ERRORS.labels("clob_rest").inc()
            log.debug("clob market lookup of %s failed: %s", market.slug, exc)
            return FAILED, f"the CLOB's market lookup failed: {exc}"
        found = contradiction(market, clob)
        return (CONTRADICTED, found) if found else (CONFIRMED, "")

    def forget_before(self, window_start: int) -> None:
        """Drop the checks of windows that started before ``window_start``."""
        with self._lock:
            for key in [k for k in self._checks if int(k[0]) < window_start]:
                del self._checks[key]

    # -- readers ----------------------------------------------------------------------
    def contradicted(self, market: WindowMarket) -> bool:
        """A witness contradicts Gamma's ``market``: Gamma should be asked again."""
        verdict = self.verdict(market)
        return verdict is not None and verdict.disagrees

    def verdict(self, market: WindowMarket) -> Verdict | None:
        """Why ``market`` is not believed, or None when a witness confirms it."""
        condition = (market.condition_id or "").lower() or None
        tokens = {"UP": market.up_token_id, "DOWN": market.down_token_id}
        with self._lock:
            seen = {label: self._book_markets.get(token) for label, token in tokens.items()}
            check = self._checks.get(identity_key(market), _Check())
        for label, found in seen.items():
            if found is not None and found != condition:
                return Verdict(
                    f"the CLOB's {label} book is in market {_short(found)}, "
                    f"Gamma's market is {_short(condition)}",
                    disagrees=True,
                )
        if check.state == CONFIRMED:
            return None
        if check.state == CONTRADICTED:
            return Verdict(check.reason, disagrees=True)
        if condition is None:
            return Verdict("Gamma names no conditionId to check its tokens by", disagrees=False)
        if check.state == UNRECORDED and all(found == condition for found in seen.values()):
            return None  # a replayed tape without the lookup: the books decide, as they did
        if check.state in (FAILED, UNRECORDED):  # fail closed (module docstring)
            return Verdict(f"{check.reason}; Gamma's market not confirmed", disagrees=False)
        return Verdict("the CLOB's market not checked yet", disagrees=False)


def top_verdicts(books: Books, market: WindowMarket) -> dict[str, Verdict]:
    """Kind -> why, for each token of ``market`` whose socket top contradicts its book."""
    found = {}
    for label, token in (("UP", market.up_token_id), ("DOWN", market.down_token_id)):
        dispute = books.dispute(token)
        if dispute is not None:
            found[TOP_KINDS[label]] = _top_verdict(label, dispute)
    return found


def _top_verdict(label: str, dispute: Dispute) -> Verdict:
    def pair(top: tuple[float | None, float | None]) -> str:
        return "/".join("-" if v is None else f"{v:g}" for v in top)

    top, book = pair(dispute.top), pair(dispute.book)
    if dispute.contradicted:
        why = f"{label}: the socket's top {top} contradicts the REST book's {book}"
        return Verdict(why, disagrees=True, feed="clob")
    why = f"{label}: the socket's top {top} is not its book's {book} (unconfirmed)"
    return Verdict(why, disagrees=False, feed="clob")
